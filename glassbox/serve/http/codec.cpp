// Decoding KServe v2 inference requests (JSON and the binary tensor extension); see codec.h.
// JSON number/string writers and the response encoder are in codec_encode.cpp.
#include "glassbox/serve/http/codec.h"

#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "glassbox/base/error.h"

namespace glassbox::serve {
namespace {

using json = nlohmann::json;

struct DepthExceeded {};

// parse_json; `binary_may_follow`: text after the JSON gets a message about the missing
// Inference-Header-Content-Length header.
json parse_json_body(std::string_view text, int max_depth, std::string_view what, bool binary_may_follow);

[[noreturn]] void bad(std::string message, std::string hint = {}) {
  throw Error(ErrorCode::kInvalidArgument, std::move(message), std::move(hint));
}

// "input 'x' of model 'm'"
std::string of(std::string_view input, std::string_view model) {
  return "input '" + std::string(input) + "' of model '" + std::string(model) + "'";
}

// A JSON value for a message: its text, cut to 40 characters.
std::string brief(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

const char* kBinaryHint =
    "send it as binary: parameters.binary_data_size on the input, the JSON part's length in "
    "the Inference-Header-Content-Length header, and the tensor's bytes after the JSON";

// Parses "123" (digits only) into n; false for anything else or overflow.
bool parse_size(std::string_view s, std::size_t& n) {
  if (s.empty() || s.size() > 19) return false;
  n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<std::size_t>(c - '0');
  }
  return true;
}

// Writes JSON scalars of one datatype into little-endian bytes, appending: the buffer grows with
// the values actually sent, never from what the shape claims (a 90-byte request can claim 2^48).
class DataWriter {
 public:
  DataWriter(DataType type, const std::string& input, const std::string& model)
      : type_(type), input_(input), model_(model) {}

  // Room for `count` values: call only once the data is known to hold that many.
  void reserve(std::int64_t count) {
    if (type_ != DataType::kBytes) out_.reserve(static_cast<std::size_t>(count) * element_size(type_));
  }

  void put(const json& v) {
    switch (type_) {
      case DataType::kBool:
        if (!v.is_boolean()) wrong(v, "true or false (BOOL)");
        out_.push_back(v.get<bool>() ? 1 : 0);
        break;
      case DataType::kUint8: integer<std::uint8_t>(v); break;
      case DataType::kUint16: integer<std::uint16_t>(v); break;
      case DataType::kUint32: integer<std::uint32_t>(v); break;
      case DataType::kUint64: integer<std::uint64_t>(v); break;
      case DataType::kInt8: integer<std::int8_t>(v); break;
      case DataType::kInt16: integer<std::int16_t>(v); break;
      case DataType::kInt32: integer<std::int32_t>(v); break;
      case DataType::kInt64: integer<std::int64_t>(v); break;
      case DataType::kFp32: {
        const double d = number(v);
        if (d > std::numeric_limits<float>::max() || d < -std::numeric_limits<float>::max()) {
          bad("element " + std::to_string(index_) + " of " + of(input_, model_) + " is " + brief(v) +
                  ", out of range for FP32",
              std::string("send FP64, or values within +-3.4e38"));
        }
        store(static_cast<float>(d));
        break;
      }
      case DataType::kFp64: store(number(v)); break;
      case DataType::kBytes: {
        if (!v.is_string()) wrong(v, "a string (BYTES)");
        const auto& s = v.get_ref<const std::string&>();
        const auto n = static_cast<std::uint32_t>(s.size());
        char len[4];
        std::memcpy(len, &n, 4);
        out_.append(len, 4);
        out_.append(s);
        break;
      }
      case DataType::kFp16:
      case DataType::kBf16: break;  // refused before any data is read
    }
    ++index_;
  }

  std::string take() { return std::move(out_); }

 private:
  [[noreturn]] void wrong(const json& v, const char* expected) const {
    bad("element " + std::to_string(index_) + " of " + of(input_, model_) + " is " + brief(v) + ", expected " +
        expected);
  }

  template <typename T>
  void store(T value) {
    out_.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }

  double number(const json& v) const {
    if (!v.is_number()) wrong(v, type_ == DataType::kFp32 ? "a number (FP32)" : "a number (FP64)");
    return v.get<double>();
  }

  template <typename T>
  void integer(const json& v) {
    if (!v.is_number_integer()) {
      wrong(v, (std::string("an integer (") + datatype_name(type_) + ")").c_str());
    }
    bool in_range;
    T value;
    if (v.is_number_unsigned()) {
      const auto u = v.get<std::uint64_t>();
      in_range = u <= static_cast<std::uint64_t>(std::numeric_limits<T>::max());
      value = static_cast<T>(u);
    } else {
      const auto i = v.get<std::int64_t>();
      in_range =
          std::numeric_limits<T>::is_signed
              ? i >= static_cast<std::int64_t>(std::numeric_limits<T>::min()) &&
                    i <= static_cast<std::int64_t>(std::numeric_limits<T>::max())
              : i >= 0 && static_cast<std::uint64_t>(i) <= static_cast<std::uint64_t>(std::numeric_limits<T>::max());
      value = static_cast<T>(i);
    }
    if (!in_range) {
      bad("element " + std::to_string(index_) + " of " + of(input_, model_) + " is " + brief(v) +
              ", out of range for " + datatype_name(type_) + " [" + std::to_string(+std::numeric_limits<T>::min()) +
              ", " + std::to_string(+std::numeric_limits<T>::max()) + "]",
          std::string("send values the datatype holds, or declare a wider datatype"));
    }
    store(value);
  }

  DataType type_;
  const std::string& input_;
  const std::string& model_;
  std::string out_;
  std::size_t index_ = 0;
};

// Nested `data`: every array at depth d has shape[d] elements; values sit at depth rank.
void walk_nested(const json& node, const std::vector<std::int64_t>& shape, std::size_t depth, DataWriter& writer,
                 const std::string& input, const std::string& model) {
  if (depth == shape.size()) {
    if (node.is_array() || node.is_object()) {
      bad("'data' of " + of(input, model) + " is nested deeper than its shape " + shape_string(shape),
          std::string("nest the values as the shape says, or send them flat (row-major)"));
    }
    writer.put(node);
    return;
  }
  if (!node.is_array()) {
    bad("'data' of " + of(input, model) + " is not nested as deep as its shape " + shape_string(shape) +
            " (a value at depth " + std::to_string(depth) + ")",
        std::string("nest the values as the shape says, or send them flat (row-major)"));
  }
  if (static_cast<std::int64_t>(node.size()) != shape[depth]) {
    bad("'data' of " + of(input, model) + " does not match its shape " + shape_string(shape) + ": an array at depth " +
            std::to_string(depth) + " has " + std::to_string(node.size()) + " elements, expected " +
            std::to_string(shape[depth]),
        std::string("nested data must be rectangular and agree with the shape"));
  }
  for (const json& child : node) walk_nested(child, shape, depth + 1, writer, input, model);
}

std::string json_data(const json& data, DataType type, const std::vector<std::int64_t>& shape, std::int64_t count,
                      const std::string& input, const std::string& model) {
  if (type == DataType::kFp16 || type == DataType::kBf16) {
    bad(of(input, model) + " is " + datatype_name(type) + ", which JSON cannot carry", std::string(kBinaryHint));
  }
  if (!data.is_array()) {
    bad("'data' of " + of(input, model) + " must be an array, got " + data.type_name(),
        std::string("send the values as a flat (row-major) or nested JSON array"));
  }
  DataWriter writer(type, input, model);
  const bool nested = !data.empty() && data.front().is_array();
  if (nested && !shape.empty()) {
    walk_nested(data, shape, 0, writer, input, model);
    return writer.take();
  }
  if (static_cast<std::int64_t>(data.size()) != count) {
    bad(of(input, model) + " has " + std::to_string(data.size()) + " elements in 'data' but shape " +
            shape_string(shape) + " needs " + std::to_string(count),
        std::string("send exactly as many values as the shape's dimensions multiply to"));
  }
  writer.reserve(count);
  for (const json& v : data) {
    if (v.is_array() || v.is_object()) {
      bad("'data' of " + of(input, model) + " mixes values and arrays",
          std::string("send the values flat (row-major) or nested as the shape says"));
    }
    writer.put(v);
  }
  return writer.take();
}

// Checks a BYTES tensor's serialized elements (4-byte little-endian length, then the bytes).
void check_bytes_elements(const std::uint8_t* data, std::size_t size, std::int64_t count, const std::string& input,
                          const std::string& model) {
  std::size_t offset = 0;
  std::int64_t n = 0;
  while (offset < size) {
    if (size - offset < 4) {
      bad("BYTES element " + std::to_string(n) + " of " + of(input, model) + " runs past its binary data (" +
              std::to_string(size - offset) + " bytes left, its 4-byte length does not fit)",
          std::string("each BYTES element is a 4-byte little-endian length followed by that many bytes"));
    }
    std::uint32_t len;
    std::memcpy(&len, data + offset, 4);
    offset += 4;
    if (len > size - offset) {
      bad("BYTES element " + std::to_string(n) + " of " + of(input, model) + " has length " + std::to_string(len) +
              " but only " + std::to_string(size - offset) + " bytes of its binary data are left",
          std::string("each BYTES element is a 4-byte little-endian length followed by that many bytes"));
    }
    offset += len;
    ++n;
  }
  if (n != count) {
    bad(of(input, model) + " has " + std::to_string(n) + " BYTES elements in its binary data but its shape needs " +
            std::to_string(count),
        std::string("send one length-prefixed element per shape element"));
  }
}

std::vector<std::int64_t> parse_shape(const json& in, const std::string& name, const std::string& model) {
  auto it = in.find("shape");
  if (it == in.end()) bad(of(name, model) + " has no 'shape'", std::string("add \"shape\": [dims...]"));
  if (!it->is_array()) bad("'shape' of " + of(name, model) + " must be an array of integers, got " + it->type_name());
  std::vector<std::int64_t> shape;
  shape.reserve(it->size());
  for (const json& d : *it) {
    if (!d.is_number_integer()) {
      bad("'shape' of " + of(name, model) + " must be an array of integers, got " + brief(*it));
    }
    if (d.is_number_unsigned() &&
        d.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      bad("'shape' of " + of(name, model) + " has a dimension too large: " + brief(d));
    }
    shape.push_back(d.get<std::int64_t>());
  }
  for (std::int64_t d : shape) {
    if (d == -1) {
      bad(of(name, model) + " has shape " + shape_string(shape) + ": -1 (any size) belongs in a model's configuration",
          std::string("give the actual size of every dimension in a request"));
    }
    if (d < 0) bad(of(name, model) + " has a negative dimension in shape " + shape_string(shape));
  }
  // The byte size must fit: refuse shapes whose element count overflows.
  std::uint64_t n = 1;
  for (std::int64_t d : shape) {
    if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(d), &n) || n > (std::uint64_t{1} << 48)) {
      bad(of(name, model) + " has shape " + shape_string(shape) + ", too many elements");
    }
  }
  return shape;
}

void parse_request_parameters(const json& params, const std::string& model, DecodedInfer& out) {
  if (!params.is_object()) {
    bad("'parameters' of the inference request for model '" + model + "' must be an object, got " + params.type_name());
  }
  for (const auto& [key, v] : params.items()) {
    if (key.rfind("triton_", 0) == 0) {
      bad("parameter '" + key + "' is reserved (inference request for model '" + model + "')",
          std::string("names starting with triton_ belong to Triton; rename or drop it"));
    }
    if (key.rfind("sequence_", 0) == 0) {
      bad("parameter '" + key + "' asks for sequence batching, which glassbox serve does not support (model '" + model +
              "')",
          std::string("send each request on its own, without sequence_id/sequence_start/sequence_end"));
    }
    if (key == "priority") {
      if (!v.is_number_unsigned() || v.get<std::uint64_t>() > std::numeric_limits<std::uint32_t>::max()) {
        bad("parameter 'priority' must be a non-negative integer, got " + brief(v) + " (model '" + model + "')",
            std::string("1 is the highest level; 0 means the model's default"));
      }
      out.request.priority = v.get<std::uint32_t>();
    } else if (key == "timeout") {
      if (!v.is_number_unsigned()) {
        bad("parameter 'timeout' must be a non-negative integer of microseconds, got " + brief(v) + " (model '" +
            model + "')");
      }
      out.request.timeout_us = v.get<std::uint64_t>();
    } else if (key == "binary_data_output") {
      if (!v.is_boolean()) {
        bad("parameter 'binary_data_output' must be true or false, got " + brief(v) + " (model '" + model + "')");
      }
      out.binary_output = v.get<bool>();
    }
    // Other parameters are the client's business (KServe allows any); they are ignored.
  }
}

void parse_outputs(const json& outputs, const std::string& model, DecodedInfer& out) {
  if (!outputs.is_array()) {
    bad("'outputs' of the inference request for model '" + model + "' must be an array, got " + outputs.type_name());
  }
  std::set<std::string> seen;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const json& o = outputs[i];
    const std::string where = "outputs[" + std::to_string(i) + "] of the inference request for model '" + model + "'";
    if (!o.is_object()) bad(where + " must be an object, got " + o.type_name());
    auto name_it = o.find("name");
    if (name_it == o.end()) bad(where + " has no 'name'");
    if (!name_it->is_string()) bad("'name' of " + where + " must be a string, got " + name_it->type_name());
    RequestedOutput r;
    r.name = name_it->get<std::string>();
    if (!seen.insert(r.name).second) bad("output '" + r.name + "' is requested twice (model '" + model + "')");
    r.binary = out.binary_output;
    auto p = o.find("parameters");
    if (p != o.end()) {
      if (!p->is_object()) {
        bad("'parameters' of output '" + r.name + "' of model '" + model + "' must be an object, got " +
            p->type_name());
      }
      for (const auto& [key, v] : p->items()) {
        if (key == "binary_data") {
          if (!v.is_boolean()) {
            bad("parameter 'binary_data' of output '" + r.name + "' of model '" + model +
                "' must be true or false, got " + brief(v));
          }
          r.binary = v.get<bool>();
        } else if (key == "classification") {
          // The classification extension: the top N entries as "score:index:label" strings.
          if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > UINT32_MAX) {
            bad("parameter 'classification' of output '" + r.name + "' of model '" + model +
                    "' must be a non-negative integer (the number of top classes), got " + brief(v),
                std::string("e.g. \"parameters\": {\"classification\": 3}"));
          }
          r.class_count = static_cast<std::uint32_t>(v.get<std::int64_t>());
        } else {
          bad("unknown parameter '" + key + "' for output '" + r.name + "' of model '" + model + "'",
              std::string("an output accepts only parameters.binary_data and parameters.classification"));
        }
      }
    }
    out.request.outputs.push_back(std::move(r));
  }
}

}  // namespace

json parse_json(std::string_view text, int max_depth, std::string_view what) {
  return parse_json_body(text, max_depth, what, false);
}

namespace {

json parse_json_body(std::string_view text, int max_depth, std::string_view what, bool binary_may_follow) {
  try {
    return json::parse(text.begin(), text.end(), [max_depth](int depth, json::parse_event_t event, json&) {
      if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
          depth >= max_depth) {
        throw DepthExceeded{};
      }
      return true;
    });
  } catch (const DepthExceeded&) {
    bad("JSON nesting deeper than " + std::to_string(max_depth) + " levels in " + std::string(what),
        std::string("flatten the data (row-major), or raise the server's JSON depth limit"));
  } catch (const json::parse_error& e) {
    std::string reason = e.what();
    // "...; expected end of input": a complete JSON value with bytes after it (a truncated body
    // says "unexpected end of input" instead).
    if (binary_may_follow && reason.find("; expected end of input") != std::string::npos) {
      bad("the body of " + std::string(what) + " goes on after its JSON (at byte " + std::to_string(e.byte) +
              ") and there is no Inference-Header-Content-Length header",
          std::string("binary tensor data after the JSON needs the header, set to the JSON part's length in bytes"));
    }
    const auto close = reason.find("] ");
    if (close != std::string::npos) reason = reason.substr(close + 2);
    bad("malformed JSON in " + std::string(what) + " at byte " + std::to_string(e.byte) + ": " + reason,
        std::string("send valid JSON"));
  } catch (const json::out_of_range& e) {
    // A number literal beyond a double's range ("1e999") is out_of_range 406, not a parse_error.
    std::string reason = e.what();
    const auto close = reason.find("] ");
    if (close != std::string::npos) reason = reason.substr(close + 2);
    bad("malformed JSON in " + std::string(what) + ": " + reason,
        std::string("send numbers within the range of a double (+-1.8e308)"));
  }
}

}  // namespace

DecodedInfer decode_infer_request(std::shared_ptr<const std::string> body,
                                  std::optional<std::string_view> header_length, const std::string& model,
                                  std::int64_t version, int max_json_depth) {
  static const std::string kEmpty;
  const std::string& b = body ? *body : kEmpty;
  std::size_t json_size = b.size();
  if (header_length) {
    std::size_t n = 0;
    if (!parse_size(*header_length, n)) {
      bad("Inference-Header-Content-Length must be a non-negative integer, got '" +
              std::string(header_length->substr(0, 40)) + "' (model '" + model + "')",
          std::string("set it to the length in bytes of the JSON part that starts the body"));
    }
    if (n == 0) {
      bad("Inference-Header-Content-Length 0 (a raw binary body for a single input) is not supported (model '" + model +
              "')",
          std::string("start the body with a JSON header naming the input's name, shape, datatype and "
                      "parameters.binary_data_size"));
    }
    if (n > b.size()) {
      bad("Inference-Header-Content-Length is " + std::to_string(n) + " but the body has only " +
              std::to_string(b.size()) + " bytes (model '" + model + "')",
          std::string("set it to the length in bytes of the JSON part that starts the body"));
    }
    json_size = n;
  }

  const std::string what = "the inference request for model '" + model + "'";
  if (b.empty()) {
    bad(what + " has an empty body",
        std::string("send {\"inputs\": [{\"name\": ..., \"shape\": [...], \"datatype\": ..., \"data\": [...]}]}"));
  }
  const json doc = parse_json_body(std::string_view(b.data(), json_size), max_json_depth, what, !header_length);
  if (!doc.is_object()) bad(what + " must be a JSON object, got " + doc.type_name());

  DecodedInfer out;
  out.request.model = model;
  out.request.version = version;
  if (auto it = doc.find("id"); it != doc.end()) {
    if (!it->is_string()) bad("'id' of " + what + " must be a string, got " + it->type_name());
    out.request.id = it->get<std::string>();
  }
  if (auto it = doc.find("parameters"); it != doc.end()) parse_request_parameters(*it, model, out);

  auto inputs = doc.find("inputs");
  if (inputs == doc.end()) {
    bad(what + " has no 'inputs'",
        std::string("send {\"inputs\": [{\"name\": ..., \"shape\": [...], \"datatype\": ..., \"data\": [...]}]}"));
  }
  if (!inputs->is_array()) bad("'inputs' of " + what + " must be an array, got " + inputs->type_name());

  std::size_t offset = json_size;  // the next binary tensor's first byte
  std::set<std::string> names;
  out.request.inputs.reserve(inputs->size());
  for (std::size_t i = 0; i < inputs->size(); ++i) {
    const json& in = (*inputs)[i];
    const std::string where = "inputs[" + std::to_string(i) + "] of " + what;
    if (!in.is_object()) bad(where + " must be an object, got " + in.type_name());
    auto name_it = in.find("name");
    if (name_it == in.end()) bad(where + " has no 'name'");
    if (!name_it->is_string()) bad("'name' of " + where + " must be a string, got " + name_it->type_name());
    const std::string& name = name_it->get_ref<const std::string&>();
    if (!names.insert(name).second) {
      bad("input '" + name + "' appears twice in " + what, std::string("send each input once"));
    }
    auto type_it = in.find("datatype");
    if (type_it == in.end())
      bad(of(name, model) + " has no 'datatype'", std::string("add e.g. \"datatype\": \"FP32\""));
    if (!type_it->is_string())
      bad("'datatype' of " + of(name, model) + " must be a string, got " + type_it->type_name());
    const auto type = parse_datatype(type_it->get_ref<const std::string&>());
    if (!type) {
      bad(of(name, model) + " has unknown datatype '" + type_it->get<std::string>() + "'",
          std::string("use one of BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, FP32, FP64, "
                      "BF16, BYTES"));
    }
    std::vector<std::int64_t> shape = parse_shape(in, name, model);
    const std::int64_t count = element_count(shape);

    std::optional<std::size_t> binary_size;
    if (auto p = in.find("parameters"); p != in.end()) {
      if (!p->is_object()) bad("'parameters' of " + of(name, model) + " must be an object, got " + p->type_name());
      for (const auto& [key, v] : p->items()) {
        if (key != "binary_data_size") {
          bad("unknown parameter '" + key + "' for " + of(name, model),
              std::string("an input accepts only parameters.binary_data_size"));
        }
        if (!v.is_number_unsigned()) {
          bad("parameter 'binary_data_size' of " + of(name, model) + " must be a non-negative integer, got " +
              brief(v));
        }
        binary_size = v.get<std::uint64_t>();
      }
    }
    auto data = in.find("data");
    if (data != in.end() && binary_size) {
      bad(of(name, model) + " has both 'data' and parameters.binary_data_size",
          std::string("send the values once: as JSON 'data' or as binary after the JSON header"));
    }
    if (data == in.end() && !binary_size) {
      bad(of(name, model) + " has no 'data' and no parameters.binary_data_size",
          std::string("add \"data\": [...] or send the tensor as binary"));
    }

    if (data != in.end()) {
      std::string bytes = json_data(*data, *type, shape, count, name, model);
      out.request.inputs.push_back(Tensor::owning(name, *type, std::move(shape), std::move(bytes)));
      continue;
    }
    if (!header_length) {
      bad(of(name, model) +
              " has parameters.binary_data_size but the request has no Inference-Header-Content-Length header",
          std::string("send the header with the length in bytes of the JSON part"));
    }
    const std::size_t size = *binary_size;
    if (size > b.size() - offset) {
      bad("the binary data of " + of(name, model) + " (" + std::to_string(size) +
              " bytes) runs past the end of the body (" + std::to_string(b.size() - offset) + " bytes left)",
          std::string("binary_data_size of each input must match the bytes sent after the JSON header"));
    }
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(b.data()) + offset;
    if (*type == DataType::kBytes) {
      check_bytes_elements(bytes, size, count, name, model);
    } else if (size != static_cast<std::size_t>(count) * element_size(*type)) {
      bad(of(name, model) + " has " + std::to_string(size) + " bytes of binary data but shape " + shape_string(shape) +
              " of " + datatype_name(*type) + " needs " +
              std::to_string(static_cast<std::size_t>(count) * element_size(*type)),
          std::string("binary_data_size must be the element count times the element size"));
    }
    out.request.inputs.push_back(Tensor::view(name, *type, std::move(shape), body, bytes, size));
    offset += size;
  }
  if (offset != b.size()) {
    bad(std::to_string(b.size() - offset) + " bytes are left over after the binary inputs of " + what,
        std::string("the inputs' binary_data_size must add up to the bytes after the JSON header"));
  }

  if (auto it = doc.find("outputs"); it != doc.end()) parse_outputs(*it, model, out);
  return out;
}

}  // namespace glassbox::serve
