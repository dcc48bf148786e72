// zlib behind zlib.h. Tested through HTTP's content codings (serve/http codec_test.cpp) and
// gRPC's message compression (serve/grpc transport_test.cpp).
#include "glassbox/serve/net/zlib.h"

#include <zlib.h>

#include <algorithm>

#include "glassbox/base/error.h"

namespace glassbox::serve {

Inflated inflate_limited(std::string_view in, int window_bits, std::size_t max_bytes, std::string& out,
                         std::string& error) {
  z_stream zs{};
  if (inflateInit2(&zs, window_bits) != Z_OK) throw Error(ErrorCode::kInternal, "zlib could not start inflating");
  struct End {
    z_stream* zs;
    ~End() { inflateEnd(zs); }
  } end{&zs};
  out.clear();
  out.resize(std::min<std::size_t>(std::max<std::size_t>(in.size() * 4, 4096), max_bytes + 1));
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  std::size_t produced = 0;
  for (;;) {
    if (produced == out.size()) {
      if (out.size() > max_bytes) return Inflated::kTooLarge;
      out.resize(std::min<std::size_t>(out.size() * 2, max_bytes + 1));
    }
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    zs.avail_out = static_cast<uInt>(std::min<std::size_t>(out.size() - produced, 1u << 30));
    const uInt before = zs.avail_out;
    const int rc = inflate(&zs, Z_NO_FLUSH);
    produced += before - zs.avail_out;
    if (rc == Z_STREAM_END) {
      if (zs.avail_in > 0 && window_bits > 15) {  // another gzip member follows
        if (inflateReset(&zs) != Z_OK) break;
        continue;
      }
      if (zs.avail_in > 0) {
        error = std::to_string(zs.avail_in) + " bytes follow the end of the compressed data";
        return Inflated::kCorrupt;
      }
      break;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && zs.avail_out > 0) {
      error = "the compressed data is truncated";
      return Inflated::kCorrupt;
    }
    if (rc == Z_BUF_ERROR) continue;
    error = zs.msg ? zs.msg : "zlib error " + std::to_string(rc);
    return Inflated::kCorrupt;
  }
  if (produced > max_bytes) return Inflated::kTooLarge;
  out.resize(produced);
  return Inflated::kOk;
}

std::string gzip(std::string_view data) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, kGzipWindow, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw Error(ErrorCode::kInternal, "zlib could not start compressing");
  }
  std::string out(deflateBound(&zs, static_cast<uLong>(data.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw Error(ErrorCode::kInternal, "zlib could not compress");
  return out;
}

}  // namespace glassbox::serve
