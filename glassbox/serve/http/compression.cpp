// zlib behind the content codings of compression.h.
#include "glassbox/serve/http/compression.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <utility>

#include "glassbox/serve/http/routes.h"

namespace glassbox::serve {
namespace {

std::string lower_trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Inflates `in` with zlib's `window_bits`; false (and `error` set) when the data is not valid.
bool inflate_all(std::string_view in, int window_bits, std::size_t max_bytes, const std::string& name, std::string& out,
                 std::string& error) {
  z_stream zs{};
  if (inflateInit2(&zs, window_bits) != Z_OK) {
    throw Error(ErrorCode::kInternal, "zlib could not start inflating the " + name + " request body");
  }
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
      if (out.size() > max_bytes) {
        throw HttpError(413,
                        "request body is larger than the limit of " + std::to_string(max_bytes) + " bytes after " +
                            name + " decompression",
                        std::string("send a smaller request, or raise the server's --max-body-mib"));
      }
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
        return false;
      }
      break;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && zs.avail_out > 0) {
      error = "the compressed data is truncated";
      return false;
    }
    if (rc == Z_BUF_ERROR) continue;
    error = zs.msg ? zs.msg : "zlib error " + std::to_string(rc);
    return false;
  }
  if (produced > max_bytes) {
    throw HttpError(413,
                    "request body is larger than the limit of " + std::to_string(max_bytes) + " bytes after " + name +
                        " decompression",
                    std::string("send a smaller request, or raise the server's --max-body-mib"));
  }
  out.resize(produced);
  return true;
}

}  // namespace

std::shared_ptr<const std::string> decode_content(std::shared_ptr<const std::string> body, std::string_view encoding,
                                                  std::size_t max_bytes) {
  if (encoding.empty()) return body;
  const std::string coding = lower_trim(encoding);
  if (coding.empty() || coding == "identity") return body;
  const bool is_gzip = coding == "gzip" || coding == "x-gzip";
  if (!is_gzip && coding != "deflate") {
    // RFC 9110 §15.5.16: 415, with Accept-Encoding naming the codings that would do (error_response).
    throw HttpError(415, "unsupported Content-Encoding '" + std::string(encoding.substr(0, 80)) + "'",
                    "send the body uncompressed, or with gzip or deflate");
  }
  const std::string_view in = body ? std::string_view(*body) : std::string_view();
  auto out = std::make_shared<std::string>();
  std::string error;
  // gzip: gzip header (16); deflate: zlib header (15), then raw deflate (-15) as some clients send.
  bool ok = inflate_all(in, is_gzip ? 15 + 16 : 15, max_bytes, coding, *out, error);
  if (!ok && !is_gzip) {
    std::string raw_error;
    ok = inflate_all(in, -15, max_bytes, coding, *out, raw_error);
  }
  if (!ok) {
    throw Error(ErrorCode::kInvalidArgument, "cannot decompress the " + coding + " request body: " + error,
                "send a body compressed as its Content-Encoding says");
  }
  return out;
}

bool accepts_gzip(std::string_view header) {
  while (!header.empty()) {
    const auto comma = header.find(',');
    std::string_view token = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    const auto semi = token.find(';');
    const std::string name = lower_trim(token.substr(0, semi));
    if (name != "gzip" && name != "*") continue;
    if (semi == std::string_view::npos) return true;
    const std::string param = lower_trim(token.substr(semi + 1));
    if (param.rfind("q=", 0) != 0) return true;
    const std::string q = param.substr(2);
    if (q.find_first_not_of("0.") != std::string::npos) return true;  // any non-zero digit
  }
  return false;
}

std::string gzip(std::string_view data) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw Error(ErrorCode::kInternal, "zlib could not start compressing a response");
  }
  std::string out(deflateBound(&zs, static_cast<uLong>(data.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw Error(ErrorCode::kInternal, "zlib could not compress a response");
  return out;
}

}  // namespace glassbox::serve
