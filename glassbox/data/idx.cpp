#include "glassbox/data/idx.h"

#include <zlib.h>

#include <bit>
#include <cstring>
#include <iomanip>
#include <limits>
#include <sstream>
#include <vector>

#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"

namespace glassbox::data {
namespace {

constexpr const char* kIdxHint =
    "expected an IDX file (MNIST format); re-download or re-extract it, or check data.root";

struct IdxType {
  unsigned char code;
  at::ScalarType type;
  const char* name;
};

constexpr IdxType kIdxTypes[] = {
    {0x08, at::kByte, "uint8"}, {0x09, at::kChar, "int8"},     {0x0B, at::kShort, "int16"},
    {0x0C, at::kInt, "int32"},  {0x0D, at::kFloat, "float32"}, {0x0E, at::kDouble, "float64"},
};

std::string hex_bytes(std::string_view b, std::size_t n) {
  std::ostringstream os;
  for (std::size_t i = 0; i < n && i < b.size(); ++i) {
    if (i > 0) os << ' ';
    os << std::hex << std::setw(2) << std::setfill('0') << static_cast<unsigned>(static_cast<unsigned char>(b[i]));
  }
  return os.str();
}

std::uint32_t read_be32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

void write_be32(std::string& out, std::uint32_t v) {
  out.push_back(static_cast<char>((v >> 24) & 0xff));
  out.push_back(static_cast<char>((v >> 16) & 0xff));
  out.push_back(static_cast<char>((v >> 8) & 0xff));
  out.push_back(static_cast<char>(v & 0xff));
}

// Converts `count` elements of `size` bytes between big-endian and the host order, in place.
template <class U, U (*Swap)(U)>
void swap_each(unsigned char* p, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i, p += sizeof(U)) {
    U v;
    std::memcpy(&v, p, sizeof(U));
    v = Swap(v);
    std::memcpy(p, &v, sizeof(U));
  }
}

std::uint16_t bswap16(std::uint16_t v) { return __builtin_bswap16(v); }
std::uint32_t bswap32(std::uint32_t v) { return __builtin_bswap32(v); }
std::uint64_t bswap64(std::uint64_t v) { return __builtin_bswap64(v); }

// Converts `count` elements of `size` bytes between big-endian and the host order, in place
// (no alignment needed).
void swap_to_host_from_big(void* data, std::size_t count, std::size_t size) {
  if constexpr (std::endian::native == std::endian::big) return;
  auto* p = static_cast<unsigned char*>(data);
  if (size == 2) swap_each<std::uint16_t, bswap16>(p, count);
  if (size == 4) swap_each<std::uint32_t, bswap32>(p, count);
  if (size == 8) swap_each<std::uint64_t, bswap64>(p, count);
}

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

std::string gunzip(std::string_view in, const std::string& source) {
  z_stream zs{};
  GB_CHECK(inflateInit2(&zs, 15 + 16) == Z_OK, Internal, "zlib inflateInit2 failed", "");
  std::string out;
  // ISIZE (the last four bytes) is the uncompressed size modulo 2^32: a good first guess.
  std::size_t guess = in.size() * 4;
  if (in.size() >= 18) {
    const auto* t = reinterpret_cast<const unsigned char*>(in.data() + in.size() - 4);
    const std::size_t isize =
        std::size_t{t[0]} | (std::size_t{t[1]} << 8) | (std::size_t{t[2]} << 16) | (std::size_t{t[3]} << 24);
    if (isize >= in.size() / 2 && isize <= in.size() * 1100) guess = isize + 1;
  }
  out.resize(std::max<std::size_t>(guess, 1024));
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  std::size_t in_left = in.size();
  std::size_t have = 0;
  auto fail = [&](ErrorCode code, const std::string& msg) {
    inflateEnd(&zs);
    throw Error(code, source + ": " + msg, kIdxHint);
  };
  for (;;) {
    if (zs.avail_in == 0) {
      const std::size_t chunk = std::min<std::size_t>(in_left, std::numeric_limits<uInt>::max());
      zs.avail_in = static_cast<uInt>(chunk);
      in_left -= chunk;
    }
    if (have == out.size()) out.resize(out.size() * 2);
    const std::size_t room = std::min<std::size_t>(out.size() - have, std::numeric_limits<uInt>::max());
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + have);
    zs.avail_out = static_cast<uInt>(room);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    have += room - zs.avail_out;
    if (rc == Z_STREAM_END) {
      const std::size_t rest = zs.avail_in + in_left;
      if (rest == 0) break;
      // Another gzip member follows (as `cat a.gz b.gz` makes); anything else is garbage.
      std::string_view tail = in.substr(in.size() - rest);
      if (!is_gzip(tail)) {
        fail(ErrorCode::kDataLoss, std::to_string(rest) + " trailing bytes after the gzip stream");
      }
      inflateReset(&zs);
      continue;
    }
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT) {
      fail(ErrorCode::kDataLoss, std::string("corrupt gzip data: ") + (zs.msg != nullptr ? zs.msg : "invalid stream"));
    }
    if (rc == Z_MEM_ERROR) fail(ErrorCode::kResourceExhausted, "out of memory while decompressing");
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && in_left == 0 && zs.avail_out != 0) {
      fail(ErrorCode::kDataLoss, "truncated gzip stream (the compressed data ends before the end-of-stream marker)");
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) fail(ErrorCode::kDataLoss, "gzip error " + std::to_string(rc));
  }
  inflateEnd(&zs);
  out.resize(have);
  return out;
}

}  // namespace

std::string gzip_compress(std::string_view data, int level) {
  z_stream zs{};
  GB_CHECK(deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK, Internal,
           "zlib deflateInit2 failed", "");
  std::string out;
  out.resize(deflateBound(&zs, static_cast<uLong>(data.size())) + 64);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  const std::size_t n = zs.total_out;
  deflateEnd(&zs);
  GB_CHECK(rc == Z_STREAM_END, Internal, "zlib deflate failed (" << rc << ")", "");
  out.resize(n);
  return out;
}

std::string read_file_maybe_gzip(const std::filesystem::path& path) {
  std::string bytes = read_file(path);
  if (!is_gzip(bytes)) return bytes;
  return gunzip(bytes, path.string());
}

at::Tensor decode_idx(std::string_view bytes, const std::string& source) {
  GB_CHECK(bytes.size() >= 4, DataLoss,
           source << ": too short for an IDX file (" << bytes.size() << " bytes; the header needs at least 4)",
           kIdxHint);
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  GB_CHECK(u[0] == 0 && u[1] == 0, DataLoss,
           source << ": bad magic: expected 00 00 <type> <ndims>, found " << hex_bytes(bytes, 4), kIdxHint);
  const IdxType* type = nullptr;
  for (const auto& t : kIdxTypes)
    if (t.code == u[2]) type = &t;
  GB_CHECK(type != nullptr, DataLoss,
           source << ": unknown IDX type code 0x" << hex_bytes(bytes.substr(2), 1)
                  << " (known: 08 uint8, 09 int8, 0b int16, 0c int32, 0d float32, 0e float64)",
           kIdxHint);
  const int ndims = u[3];
  GB_CHECK(ndims >= 1 && ndims <= 4, DataLoss,
           source << ": the IDX header declares " << ndims << " dimensions; glassbox reads 1 to 4", kIdxHint);
  const std::size_t header = 4 + 4 * static_cast<std::size_t>(ndims);
  GB_CHECK(bytes.size() >= header, DataLoss,
           source << ": truncated header: " << ndims << " dimensions need " << header << " bytes, the file has "
                  << bytes.size(),
           kIdxHint);
  std::vector<std::int64_t> dims;
  unsigned __int128 count = 1;
  for (int i = 0; i < ndims; ++i) {
    const std::uint32_t d = read_be32(u + 4 + 4 * i);
    dims.push_back(static_cast<std::int64_t>(d));
    count *= d;
  }
  const std::size_t elem = c10::elementSize(type->type);
  const unsigned __int128 expected = count * elem;
  const std::size_t found = bytes.size() - header;
  std::ostringstream shape;
  for (int i = 0; i < ndims; ++i) shape << (i ? " x " : "") << dims[static_cast<std::size_t>(i)];
  if (expected > found) {
    GB_THROW(DataLoss,
             source << ": truncated: expected " << static_cast<unsigned long long>(expected) << " bytes of data, found "
                    << found << " (" << type->name << " [" << shape.str() << "])",
             "the file is incomplete; re-download or re-extract it");
  }
  if (expected < found) {
    GB_THROW(DataLoss,
             source << ": " << static_cast<unsigned long long>(found - static_cast<std::size_t>(expected))
                    << " trailing bytes: expected " << static_cast<unsigned long long>(expected)
                    << " bytes of data, found " << found << " (" << type->name << " [" << shape.str() << "])",
             "the header does not match the data; the file is corrupt or not an IDX file");
  }
  at::Tensor t = at::empty(dims, at::TensorOptions().dtype(type->type));
  if (found > 0) {
    std::memcpy(t.data_ptr(), bytes.data() + header, found);
    swap_to_host_from_big(t.data_ptr(), static_cast<std::size_t>(count), elem);
  }
  return t;
}

at::Tensor read_idx(const std::filesystem::path& path) {
  const std::string bytes = read_file_maybe_gzip(path);
  return decode_idx(bytes, path.string());
}

std::string encode_idx(const at::Tensor& tensor) {
  GB_CHECK(tensor.defined(), InvalidArgument, "encode_idx: undefined tensor", "pass a tensor");
  const IdxType* type = nullptr;
  for (const auto& t : kIdxTypes)
    if (t.type == tensor.scalar_type()) type = &t;
  GB_CHECK(type != nullptr, InvalidArgument, "encode_idx: IDX has no type for " << tensor.scalar_type(),
           "convert to uint8, int8, int16, int32, float32 or float64");
  GB_CHECK(tensor.dim() >= 1 && tensor.dim() <= 4, InvalidArgument,
           "encode_idx: IDX files hold 1 to 4 dimensions, got " << tensor.dim(), "reshape the tensor");
  at::Tensor c = tensor.detach().cpu().contiguous();
  std::string out;
  const std::size_t nbytes = static_cast<std::size_t>(c.numel()) * c.element_size();
  out.reserve(4 + 4 * static_cast<std::size_t>(c.dim()) + nbytes);
  out.push_back(0);
  out.push_back(0);
  out.push_back(static_cast<char>(type->code));
  out.push_back(static_cast<char>(c.dim()));
  for (std::int64_t d : c.sizes()) {
    GB_CHECK(d <= std::numeric_limits<std::uint32_t>::max(), InvalidArgument,
             "encode_idx: dimension " << d << " does not fit in 32 bits", "split the tensor");
    write_be32(out, static_cast<std::uint32_t>(d));
  }
  const std::size_t pos = out.size();
  out.resize(pos + nbytes);
  if (nbytes > 0) {
    std::memcpy(out.data() + pos, c.const_data_ptr(), nbytes);
    swap_to_host_from_big(out.data() + pos, static_cast<std::size_t>(c.numel()), c.element_size());
  }
  return out;
}

void write_idx(const std::filesystem::path& path, const at::Tensor& tensor, bool gzip) {
  const std::string bytes = encode_idx(tensor);
  write_file_atomic(path, gzip ? gzip_compress(bytes) : bytes);
}

}  // namespace glassbox::data
