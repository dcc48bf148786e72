// Encoding KServe v2 inference responses (JSON and binary outputs) and the JSON writers; see codec.h.
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "glassbox/base/error.h"
#include "glassbox/serve/http/codec.h"

namespace glassbox::serve {
namespace {

static_assert(std::endian::native == std::endian::little, "the wire format is little-endian; add byte swaps");

template <typename T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | (static_cast<std::uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

float bf16_to_float(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }

template <typename T>
void append_integer(std::string& out, T v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

[[noreturn]] void internal(const Tensor& t, const std::string& model, const std::string& what) {
  throw Error(ErrorCode::kInternal, "output '" + t.name + "' of model '" + model + "' " + what,
              std::string("this is a bug in the model's backend; report it"));
}

void append_data(std::string& out, const Tensor& t, const std::string& model) {
  const std::int64_t count = t.element_count();
  const std::uint8_t* p = t.data;
  if (t.datatype != DataType::kBytes && t.size != static_cast<std::size_t>(count) * element_size(t.datatype)) {
    internal(t, model, "has " + std::to_string(t.size) + " bytes for shape " + shape_string(t.shape));
  }
  out += '[';
  if (t.datatype == DataType::kBytes) {
    std::size_t offset = 0;
    for (std::int64_t i = 0; i < count; ++i) {
      if (t.size - offset < 4) internal(t, model, "has malformed BYTES data");
      const auto len = load<std::uint32_t>(p + offset);
      offset += 4;
      if (len > t.size - offset) internal(t, model, "has malformed BYTES data");
      if (i) out += ',';
      append_json_string(out, std::string_view(reinterpret_cast<const char*>(p + offset), len));
      offset += len;
    }
    out += ']';
    return;
  }
  const std::size_t es = element_size(t.datatype);
  for (std::int64_t i = 0; i < count; ++i, p += es) {
    if (i) out += ',';
    switch (t.datatype) {
      case DataType::kBool: out += *p ? "true" : "false"; break;
      case DataType::kUint8: append_integer(out, *p); break;
      case DataType::kUint16: append_integer(out, load<std::uint16_t>(p)); break;
      case DataType::kUint32: append_integer(out, load<std::uint32_t>(p)); break;
      case DataType::kUint64: append_integer(out, load<std::uint64_t>(p)); break;
      case DataType::kInt8: append_integer(out, static_cast<std::int8_t>(*p)); break;
      case DataType::kInt16: append_integer(out, load<std::int16_t>(p)); break;
      case DataType::kInt32: append_integer(out, load<std::int32_t>(p)); break;
      case DataType::kInt64: append_integer(out, load<std::int64_t>(p)); break;
      case DataType::kFp16: append_json_number(out, half_to_float(load<std::uint16_t>(p))); break;
      case DataType::kBf16: append_json_number(out, bf16_to_float(load<std::uint16_t>(p))); break;
      case DataType::kFp32: append_json_number(out, load<float>(p)); break;
      case DataType::kFp64: append_json_number(out, load<double>(p)); break;
      case DataType::kBytes: break;  // handled above
    }
  }
  out += ']';
}

// The length of the valid UTF-8 sequence at s[i] (1..4), or 0 when s[i] does not start one.
std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlong forms
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  // at most U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size() || b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  }
  return n;
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  std::size_t run = 0;  // start of the pending run of characters that need no escape
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        out += "\\u00";
        out += kHex[c >> 4];
        out += kHex[c & 0xf];
    }
  }
  out.append(s.data() + run, s.size() - run);
  out += '"';
}

void append_json_text(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string valid;
  valid.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence_length(s, i);
    if (n == 0) {
      const auto c = static_cast<unsigned char>(s[i++]);
      valid += "\\x";
      valid += kHex[c >> 4];
      valid += kHex[c & 0xf];
      continue;
    }
    valid.append(s.data() + i, n);
    i += n;
  }
  append_json_string(out, valid);
}

void append_json_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

void append_json_number(std::string& out, float v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

EncodedInfer encode_infer_response(const InferResponse& response, bool binary_default) {
  EncodedInfer result;
  std::string& out = result.body;
  out.reserve(128 + 64 * response.outputs.size());
  out += "{\"model_name\":";
  append_json_string(out, response.model);
  out += ",\"model_version\":\"";
  append_integer(out, response.version);
  out += '"';
  if (!response.id.empty()) {
    out += ",\"id\":";
    append_json_string(out, response.id);
  }
  out += ",\"outputs\":[";
  std::vector<const Tensor*> binary;
  for (std::size_t i = 0; i < response.outputs.size(); ++i) {
    const Tensor& t = response.outputs[i];
    bool as_binary = binary_default;
    for (const RequestedOutput& r : response.requested) {
      if (r.name == t.name) as_binary = r.binary;
    }
    if (i) out += ',';
    out += "{\"name\":";
    append_json_string(out, t.name);
    out += ",\"datatype\":\"";
    out += datatype_name(t.datatype);
    out += "\",\"shape\":[";
    for (std::size_t d = 0; d < t.shape.size(); ++d) {
      if (d) out += ',';
      append_integer(out, t.shape[d]);
    }
    out += ']';
    if (as_binary) {
      out += ",\"parameters\":{\"binary_data_size\":";
      append_integer(out, t.size);
      out += "}}";
      binary.push_back(&t);
    } else {
      out += ",\"data\":";
      append_data(out, t, response.model);
      out += '}';
    }
  }
  out += "]}";
  if (!binary.empty()) {
    result.header_length = out.size();
    std::size_t total = out.size();
    for (const Tensor* t : binary) total += t->size;
    out.reserve(total);
    for (const Tensor* t : binary) out.append(reinterpret_cast<const char*>(t->data), t->size);
  }
  return result;
}

}  // namespace glassbox::serve
