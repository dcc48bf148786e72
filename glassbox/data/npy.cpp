#include "glassbox/data/npy.h"

#include <bit>
#include <cctype>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>
#include <vector>

#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"

namespace glassbox::data {
namespace {

static_assert(std::endian::native == std::endian::little, "the .npy reader assumes a little-endian host");

constexpr const char* kMagic = "\x93NUMPY";
constexpr const char* kNpyHint = "expected a file written by numpy.save; re-create it with np.save(path, array)";

// The three keys of a .npy header dict.
struct Header {
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<std::vector<std::int64_t>> shape;
};

// A parser for the Python literal dict of a .npy header, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& source) : s_(text), source_(source) {}

  Header parse() {
    Header h;
    ws();
    expect('{');
    for (;;) {
      ws();
      if (peek() == '}') {
        ++pos_;
        break;
      }
      const std::string key = string_literal();
      ws();
      expect(':');
      ws();
      if (key == "descr") {
        if (peek() == '[') {
          fail("structured dtype (a list of fields) in 'descr'", "save each field as its own array");
        }
        h.descr = string_literal();
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
      } else if (key == "shape") {
        h.shape = tuple();
      } else {
        fail("unexpected key '" + key + "'", kNpyHint);
      }
      ws();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != '}') {
        fail("expected ',' or '}'", kNpyHint);
      }
    }
    ws();
    if (pos_ != s_.size()) fail("unexpected text after the header dict", kNpyHint);
    if (!h.descr) fail("the header has no 'descr'", kNpyHint);
    if (!h.fortran_order) fail("the header has no 'fortran_order'", kNpyHint);
    if (!h.shape) fail("the header has no 'shape'", kNpyHint);
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what, const std::string& hint) const {
    GB_THROW(DataLoss, source_ << ": bad .npy header: " << what << " at offset " << pos_ << " of \"" << s_ << "\"",
             hint);
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void ws() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'", kNpyHint);
    ++pos_;
  }
  std::string string_literal() {
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string", kNpyHint);
    ++pos_;
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != q) {
      if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) ++pos_;
      out.push_back(s_[pos_++]);
    }
    if (pos_ >= s_.size()) fail("unterminated string", kNpyHint);
    ++pos_;
    return out;
  }
  bool boolean() {
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    fail("expected True or False", kNpyHint);
  }
  std::vector<std::int64_t> tuple() {
    expect('(');
    std::vector<std::int64_t> out;
    for (;;) {
      ws();
      if (peek() == ')') {
        ++pos_;
        return out;
      }
      if (!std::isdigit(static_cast<unsigned char>(peek())))
        fail("expected a non-negative integer in 'shape'", kNpyHint);
      std::int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        const int d = s_[pos_++] - '0';
        if (v > (std::numeric_limits<std::int64_t>::max() - d) / 10) fail("dimension too large", kNpyHint);
        v = v * 10 + d;
      }
      if (peek() == 'L') ++pos_;  // Python 2 long
      out.push_back(v);
      ws();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != ')') {
        fail("expected ',' or ')' in 'shape'", kNpyHint);
      }
    }
  }

  std::string_view s_;
  const std::string& source_;
  std::size_t pos_ = 0;
};

enum class Widen { kNone, kU16, kU32, kU64 };

struct Dtype {
  at::ScalarType type;   // the tensor's dtype
  std::size_t itemsize;  // bytes per element in the file
  Widen widen = Widen::kNone;
};

Dtype parse_descr(const std::string& descr, const std::string& source) {
  std::string d = descr;
  char order = '=';
  if (!d.empty() && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=')) {
    order = d[0];
    d = d.substr(1);
  }
  struct Known {
    const char* code;
    at::ScalarType type;
    std::size_t size;
    Widen widen;
  };
  static constexpr Known kKnown[] = {
      {"b1", at::kBool, 1, Widen::kNone},  {"i1", at::kChar, 1, Widen::kNone},  {"u1", at::kByte, 1, Widen::kNone},
      {"i2", at::kShort, 2, Widen::kNone}, {"i4", at::kInt, 4, Widen::kNone},   {"i8", at::kLong, 8, Widen::kNone},
      {"f2", at::kHalf, 2, Widen::kNone},  {"f4", at::kFloat, 4, Widen::kNone}, {"f8", at::kDouble, 8, Widen::kNone},
      {"u2", at::kInt, 2, Widen::kU16},    {"u4", at::kLong, 4, Widen::kU32},   {"u8", at::kLong, 8, Widen::kU64},
  };
  for (const auto& k : kKnown) {
    if (d != k.code) continue;
    if (order == '>' && k.size > 1) {
      GB_THROW(InvalidArgument, source << ": big-endian dtype '" << descr << "' is not supported",
               "convert it in NumPy: np.save(path, a.astype(a.dtype.newbyteorder('<')))");
    }
    return {k.type, k.size, k.widen};
  }
  GB_THROW(InvalidArgument, source << ": unsupported dtype '" << descr << "'",
           "supported: bool, int8/16/32/64, uint8/16/32/64, float16/32/64; convert with a.astype(np.float32) "
           "(features) or a.astype(np.int64) (labels)");
}

template <class U, class T>
void widen_copy(const char* src, T* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    U v;
    std::memcpy(&v, src + i * sizeof(U), sizeof(U));
    dst[i] = static_cast<T>(v);
  }
}

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::ostringstream os;
  os << '(';
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  if (shape.size() == 1) os << ',';
  os << ')';
  return os.str();
}

const char* descr_of(at::ScalarType t) {
  switch (t) {
    case at::kBool: return "|b1";
    case at::kByte: return "|u1";
    case at::kChar: return "|i1";
    case at::kShort: return "<i2";
    case at::kInt: return "<i4";
    case at::kLong: return "<i8";
    case at::kHalf: return "<f2";
    case at::kFloat: return "<f4";
    case at::kDouble: return "<f8";
    case at::kUInt16: return "<u2";
    case at::kUInt32: return "<u4";
    case at::kUInt64: return "<u8";
    default: return nullptr;
  }
}

}  // namespace

at::Tensor decode_npy(std::string_view bytes, const std::string& source) {
  GB_CHECK(bytes.size() >= 10 && bytes.substr(0, 6) == std::string_view(kMagic, 6), DataLoss,
           source << ": not a .npy file (missing the \\x93NUMPY magic)", kNpyHint);
  const int major = static_cast<unsigned char>(bytes[6]);
  const int minor = static_cast<unsigned char>(bytes[7]);
  GB_CHECK(major >= 1 && major <= 3, DataLoss,
           source << ": unsupported .npy format version " << major << "." << minor << " (glassbox reads 1.0 to 3.0)",
           "save it with a NumPy that writes format 1.0-3.0 (np.save)");
  std::size_t header_len = 0;
  std::size_t offset = 0;
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  if (major == 1) {
    header_len = std::size_t{u[8]} | (std::size_t{u[9]} << 8);
    offset = 10;
  } else {
    GB_CHECK(bytes.size() >= 12, DataLoss, source << ": truncated .npy preamble", kNpyHint);
    header_len = std::size_t{u[8]} | (std::size_t{u[9]} << 8) | (std::size_t{u[10]} << 16) | (std::size_t{u[11]} << 24);
    offset = 12;
  }
  GB_CHECK(bytes.size() >= offset + header_len, DataLoss,
           source << ": truncated header: it declares " << header_len << " bytes, the file has "
                  << bytes.size() - offset << " after the preamble",
           kNpyHint);
  const Header h = HeaderParser(bytes.substr(offset, header_len), source).parse();
  const Dtype dt = parse_descr(*h.descr, source);
  const std::vector<std::int64_t>& shape = *h.shape;
  unsigned __int128 count = 1;
  for (std::int64_t d : shape) count *= static_cast<std::uint64_t>(d);
  const unsigned __int128 expected = count * dt.itemsize;
  const std::size_t data_offset = offset + header_len;
  const std::size_t found = bytes.size() - data_offset;
  if (expected > found) {
    GB_THROW(DataLoss,
             source << ": truncated: shape " << shape_string(shape) << " of '" << *h.descr << "' needs "
                    << static_cast<unsigned long long>(expected) << " bytes of data, found " << found,
             "the file is incomplete; write it again with np.save");
  }
  if (expected < found) {
    GB_THROW(DataLoss,
             source << ": " << static_cast<unsigned long long>(found - static_cast<std::size_t>(expected))
                    << " trailing bytes: shape " << shape_string(shape) << " of '" << *h.descr << "' needs "
                    << static_cast<unsigned long long>(expected) << " bytes of data, found " << found,
             "the header does not match the data; write the file again with np.save");
  }
  const std::size_t n = static_cast<std::size_t>(count);
  // Fortran order stores the transpose's C layout: read the reversed shape, then permute back.
  std::vector<std::int64_t> stored = shape;
  if (*h.fortran_order) std::reverse(stored.begin(), stored.end());
  at::Tensor t = at::empty(stored, at::TensorOptions().dtype(dt.type));
  const char* src = bytes.data() + data_offset;
  switch (dt.widen) {
    case Widen::kNone:
      if (n > 0) std::memcpy(t.data_ptr(), src, n * dt.itemsize);
      if (dt.type == at::kBool) {
        const auto* b = reinterpret_cast<const unsigned char*>(src);
        for (std::size_t i = 0; i < n; ++i) {
          GB_CHECK(b[i] <= 1, DataLoss, source << ": bool element " << i << " has byte value " << int{b[i]},
                   "the file is corrupt; write it again with np.save");
        }
      }
      break;
    case Widen::kU16: widen_copy<std::uint16_t>(src, t.data_ptr<std::int32_t>(), n); break;
    case Widen::kU32: widen_copy<std::uint32_t>(src, t.data_ptr<std::int64_t>(), n); break;
    case Widen::kU64: {
      auto* dst = t.data_ptr<std::int64_t>();
      for (std::size_t i = 0; i < n; ++i) {
        std::uint64_t v;
        std::memcpy(&v, src + i * 8, 8);
        GB_CHECK(
            v <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()), InvalidArgument,
            source << ": dtype '" << *h.descr << "' value " << v << " at element " << i << " does not fit in int64",
            "convert the array in NumPy, e.g. a.astype(np.int64) after checking its range");
        dst[i] = static_cast<std::int64_t>(v);
      }
      break;
    }
  }
  if (*h.fortran_order && t.dim() > 1) {
    std::vector<std::int64_t> perm(static_cast<std::size_t>(t.dim()));
    for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<std::int64_t>(perm.size() - 1 - i);
    t = t.permute(perm).contiguous();
  }
  return t;
}

at::Tensor read_npy(const std::filesystem::path& path) {
  const std::string bytes = read_file(path);
  return decode_npy(bytes, path.string());
}

std::string encode_npy(const at::Tensor& tensor) {
  GB_CHECK(tensor.defined(), InvalidArgument, "encode_npy: undefined tensor", "pass a tensor");
  const char* descr = descr_of(tensor.scalar_type());
  GB_CHECK(descr != nullptr, InvalidArgument, "encode_npy: .npy has no dtype for " << tensor.scalar_type(),
           "convert the tensor first, e.g. t.to(torch::kFloat32)");
  at::Tensor c = tensor.detach().cpu().contiguous();
  std::string header = "{'descr': '";
  header.append(descr).append("', 'fortran_order': False, 'shape': ");
  header.append(shape_string(c.sizes().vec())).append(", }");
  // Pad with spaces and a newline so that the data starts at a multiple of 64 bytes.
  std::size_t preamble = 10;
  if (header.size() + 64 > 65535) preamble = 12;  // format 2.0: a 4-byte header length
  const std::size_t total = preamble + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  const std::size_t nbytes = static_cast<std::size_t>(c.numel()) * c.element_size();
  std::string out;
  out.reserve(preamble + header.size() + nbytes);
  out.append(kMagic, 6);
  const std::size_t hl = header.size();
  if (preamble == 10) {
    out.push_back(1);
    out.push_back(0);
    out.push_back(static_cast<char>(hl & 0xff));
    out.push_back(static_cast<char>((hl >> 8) & 0xff));
  } else {
    out.push_back(2);
    out.push_back(0);
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((hl >> (8 * i)) & 0xff));
  }
  out += header;
  const std::size_t pos = out.size();
  out.resize(pos + nbytes);
  if (nbytes > 0) std::memcpy(out.data() + pos, c.const_data_ptr(), nbytes);
  return out;
}

void write_npy(const std::filesystem::path& path, const at::Tensor& tensor) {
  write_file_atomic(path, encode_npy(tensor));
}

}  // namespace glassbox::data
