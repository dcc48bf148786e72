// The content codings of compression.h, on serve/net's zlib.
#include "glassbox/serve/http/compression.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "glassbox/serve/http/routes.h"
#include "glassbox/serve/net/zlib.h"

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

// Inflates `in` as `coding` says; false (and `error` set) when the data is not valid.
bool inflate_body(std::string_view in, int window_bits, std::size_t max_bytes, const std::string& coding,
                  std::string& out, std::string& error) {
  switch (inflate_limited(in, window_bits, max_bytes, out, error)) {
    case Inflated::kOk: return true;
    case Inflated::kCorrupt: return false;
    case Inflated::kTooLarge: break;
  }
  throw HttpError(413,
                  "request body is larger than the limit of " + std::to_string(max_bytes) + " bytes after " + coding +
                      " decompression",
                  std::string("send a smaller request, or raise the server's --max-body-mib"));
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
  bool ok = inflate_body(in, is_gzip ? kGzipWindow : kZlibWindow, max_bytes, coding, *out, error);
  if (!ok && !is_gzip) {
    std::string raw_error;
    ok = inflate_body(in, kRawWindow, max_bytes, coding, *out, raw_error);
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

}  // namespace glassbox::serve
