// RequestParser: Beast's tokenizer under glassbox's framing rules (see request_parser.h).
// Tested in framing_test.cpp (each rule, fed byte by byte and whole), by the fuzz_http_request
// target (tests/fuzz) and over raw sockets in tests/serve/http_framing_test.py.
#include "glassbox/serve/http/request_parser.h"

#include <algorithm>
#include <utility>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>

namespace glassbox::serve {
namespace {

namespace http = boost::beast::http;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

// At most `n` bytes of a header value, for a message (json_error escapes what is not UTF-8).
std::string quote(std::string_view v, std::size_t n = 80) {
  return v.size() <= n ? std::string(v) : std::string(v.substr(0, n)) + "...";
}

// The comma-separated members of a list field, trimmed, empty members dropped (RFC 9110 §5.6.1).
std::vector<std::string_view> list_members(std::string_view v) {
  std::vector<std::string_view> out;
  while (true) {
    const auto comma = v.find(',');
    const std::string_view m = trim(v.substr(0, comma));
    if (!m.empty()) out.push_back(m);
    if (comma == std::string_view::npos) return out;
    v.remove_prefix(comma + 1);
  }
}

// RFC 9110 §7.2: Host = uri-host [ ":" port ]; uri-host is a reg-name (unreserved, %-escapes,
// sub-delims), an IPv4 address or a bracketed IP literal. Empty is allowed (no authority).
bool valid_host(std::string_view h) {
  std::string_view host = h;
  std::string_view port;
  if (!h.empty() && h.front() == '[') {
    const auto close = h.find(']');
    if (close == std::string_view::npos) return false;
    for (char c : h.substr(1, close - 1)) {
      const bool ok = (c >= '0' && c <= '9') || (lower(c) >= 'a' && lower(c) <= 'f') || c == ':' || c == '.';
      if (!ok) return false;
    }
    const std::string_view rest = h.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return false;
    port = rest.empty() ? rest : rest.substr(1);
    host = {};
  } else if (const auto colon = h.rfind(':'); colon != std::string_view::npos) {
    host = h.substr(0, colon);
    port = h.substr(colon + 1);
  }
  for (char c : host) {
    const bool alnum = (c >= '0' && c <= '9') || (lower(c) >= 'a' && lower(c) <= 'z');
    if (!alnum && std::string_view("-._~%!$&'()*+,;=").find(c) == std::string_view::npos) return false;
  }
  return std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// An absolute-form target (RFC 9112 §3.2.2) reduced to the origin-form the routes read; nullopt
// when `t` is not "http://authority..." or "https://authority...".
std::optional<std::string> origin_of_absolute(std::string_view t) {
  std::size_t scheme = 0;
  for (const std::string_view s : {std::string_view("http://"), std::string_view("https://")}) {
    if (t.size() >= s.size() && iequals(t.substr(0, s.size()), s)) scheme = s.size();
  }
  if (scheme == 0) return std::nullopt;
  const std::string_view rest = t.substr(scheme);
  const auto path = rest.find_first_of("/?#");
  const std::string_view authority = rest.substr(0, path);
  if (authority.empty() || authority.find('@') != std::string_view::npos || !valid_host(authority)) return std::nullopt;
  if (path == std::string_view::npos || rest[path] == '#') return std::string("/");
  if (rest[path] == '?') return "/" + std::string(rest.substr(path));
  return std::string(rest.substr(path));
}

}  // namespace

RequestParser::RequestParser(ParserLimits limits) : limits_(limits) {
  eager(true);
  // Beast applies its header limit to what it has not consumed yet, which after a partial head is
  // only the rest; the whole head is counted here (head_bytes_), Beast's limit bounds one piece.
  header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(limits.max_head_bytes, UINT32_MAX)));
  body_limit(static_cast<std::uint64_t>(limits.max_body_bytes));
}

std::size_t RequestParser::put(std::string_view data) {
  if (failure_ || is_done() || data.empty()) return 0;
  if (version_pending_) {  // Beast refused the version: classify the request line once it is whole
    const auto eol = data.find("\r\n");
    if (eol != std::string_view::npos) {
      classify_version(data.substr(0, eol));
    } else if (data.size() >= limits_.max_head_bytes) {
      failure_ = ParseFailure{
          431, "the request line is longer than the limit of " + std::to_string(limits_.max_head_bytes) + " bytes"};
    }
    return 0;
  }
  // Beast wants more bytes after need_more, not the same ones again (its chunk parser asserts it).
  if (data.size() <= seen_unconsumed_) return 0;
  error_code ec;
  const std::size_t used = basic_parser::put(boost::asio::const_buffer(data.data(), data.size()), ec);
  seen_unconsumed_ = ec == http::error::need_more ? data.size() - used : 0;
  if (ec == http::error::bad_version && !failure_) {
    // Beast reads only HTTP/1.x and may refuse before the line ends; whether the answer is 505
    // (a well-formed other version, RFC 9110 §15.6.6) or 400 depends on the whole line.
    version_pending_ = true;
    return put(data);
  }
  if (ec && ec != http::error::need_more && !failure_) fail_from_beast(ec);
  return used;
}

// GCC 12 at -O1 with the sanitizers takes Beast's boost::optional for maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
std::optional<std::uint64_t> RequestParser::declared_length() const {
  const boost::optional<std::uint64_t> n = content_length();
  return n ? std::optional<std::uint64_t>(*n) : std::nullopt;
}
#pragma GCC diagnostic pop

void RequestParser::classify_version(std::string_view line) {
  std::vector<std::string_view> parts;
  for (std::size_t at = 0; at <= line.size();) {
    const auto sp = line.find(' ', at);
    parts.push_back(line.substr(at, sp == std::string_view::npos ? std::string_view::npos : sp - at));
    if (sp == std::string_view::npos) break;
    at = sp + 1;
  }
  const std::string_view v = parts.size() == 3 ? parts[2] : std::string_view();
  const bool well_formed = v.size() == 8 && v.substr(0, 5) == "HTTP/" && v[5] >= '0' && v[5] <= '9' && v[6] == '.' &&
                           v[7] >= '0' && v[7] <= '9';
  if (well_formed && v[5] != '1') {
    failure_ =
        ParseFailure{505, "HTTP version " + std::string(v.substr(5)) + " is not supported (hint: send HTTP/1.1)"};
  } else {
    failure_ = ParseFailure{400, "malformed HTTP request: bad version"};
  }
}

void RequestParser::fail(error_code& ec, int status, std::string message) {
  if (!failure_) failure_ = ParseFailure{status, std::move(message)};
  ec = http::error::bad_field;  // any error stops Beast; failure_ says which
}

void RequestParser::fail_from_beast(const error_code& ec) {
  const std::string max_head = std::to_string(limits_.max_head_bytes);
  if (ec == http::error::header_limit) {
    failure_ = ParseFailure{
        431, "the request head (request line and header fields) is larger than the limit of " + max_head + " bytes"};
  } else if (ec == http::error::body_limit) {
    failure_ = ParseFailure{413, "request body is larger than the limit of " + std::to_string(limits_.max_body_bytes) +
                                     " bytes (hint: send a smaller request, or raise the server's --max-body-mib)"};
  } else if ((ec == http::error::bad_content_length && !transfer_encoding_.empty()) ||
             (ec == http::error::bad_transfer_encoding && has_content_length_)) {
    failure_ = ParseFailure{400, "a request must not carry both Transfer-Encoding and Content-Length"};
  } else if (ec == http::error::bad_content_length) {
    failure_ = ParseFailure{400, "invalid or conflicting Content-Length"};
  } else if (ec == http::error::bad_transfer_encoding) {
    failure_ = ParseFailure{400, "the chunked transfer coding is applied more than once"};
  } else {
    failure_ = ParseFailure{400, "malformed HTTP request: " + ec.message()};
  }
}

void RequestParser::on_request_impl(verb method, string_view method_str, string_view target, int version,
                                    error_code& ec) {
  head_bytes_ += method_str.size() + target.size() + 12;  // SP, SP, "HTTP/1.1", CRLF
  request_.method.assign(method_str.data(), method_str.size());
  request_.version = static_cast<unsigned>(version);
  if (version != 10 && version != 11) {
    return fail(ec, 505,
                "HTTP version " + std::to_string(version / 10) + "." + std::to_string(version % 10) +
                    " is not supported (hint: send HTTP/1.1)");
  }
  if (method == verb::unknown) {
    return fail(ec, 501,
                "method '" + quote(std::string_view(method_str.data(), method_str.size()), 20) +
                    "' is not implemented (hint: use GET, HEAD or POST)");
  }
  const std::string_view t(target.data(), target.size());
  if (!t.empty() && t.front() == '/') {
    request_.target.assign(t);
  } else if (auto origin = origin_of_absolute(t)) {
    request_.target = std::move(*origin);
  } else {
    return fail(ec, 400,
                "request target '" + quote(t) + "' is neither a path nor an absolute http URI (hint: /v2/...)");
  }
  if (head_bytes_ > limits_.max_head_bytes) {
    return fail(ec, 431,
                "the request head (request line and header fields) is larger than the limit of " +
                    std::to_string(limits_.max_head_bytes) + " bytes");
  }
}

void RequestParser::on_response_impl(int, string_view, int, error_code& ec) { ec = http::error::bad_method; }

void RequestParser::on_field_impl(field name, string_view name_string, string_view value, error_code& ec) {
  const std::size_t bytes = name_string.size() + value.size() + 4;  // ": " and CRLF
  if (is_header_done()) {  // a trailer field of a chunked body: counted, otherwise ignored
    trailer_bytes_ += bytes;
    if (trailer_bytes_ > limits_.max_head_bytes) {
      fail(ec, 431,
           "the trailer fields are larger than the limit of " + std::to_string(limits_.max_head_bytes) + " bytes");
    }
    return;
  }
  head_bytes_ += bytes;
  if (head_bytes_ > limits_.max_head_bytes) {
    return fail(ec, 431,
                "the request head (request line and header fields) is larger than the limit of " +
                    std::to_string(limits_.max_head_bytes) + " bytes");
  }
  const std::string_view v = trim(std::string_view(value.data(), value.size()));
  switch (name) {
    case field::host:
      ++host_fields_;
      request_.host.assign(v);
      break;
    case field::content_length: has_content_length_ = true; break;
    case field::transfer_encoding:
      if (!transfer_encoding_.empty()) transfer_encoding_ += ", ";
      transfer_encoding_.append(v);
      break;
    case field::authorization: request_.authorization.assign(v); break;
    case field::content_encoding: request_.content_encoding.assign(v); break;
    case field::accept_encoding: request_.accept_encoding.assign(v); break;
    case field::expect: expect_.assign(v); break;
    default:
      if (iequals(std::string_view(name_string.data(), name_string.size()), "X-API-Key")) {
        request_.x_api_key.assign(v);
      } else if (iequals(std::string_view(name_string.data(), name_string.size()), "Inference-Header-Content-Length")) {
        request_.inference_header_length = std::string(v);
      }
      break;
  }
}

void RequestParser::on_header_impl(error_code& ec) {
  if (head_bytes_ > limits_.max_head_bytes) {
    return fail(ec, 431,
                "the request head (request line and header fields) is larger than the limit of " +
                    std::to_string(limits_.max_head_bytes) + " bytes");
  }
  if (request_.version == 11 && host_fields_ == 0) {
    return fail(ec, 400, "an HTTP/1.1 request must carry a Host header field (hint: Host: server:port)");
  }
  if (host_fields_ > 1) return fail(ec, 400, "the request carries more than one Host header field");
  if (!valid_host(request_.host)) return fail(ec, 400, "invalid Host header field '" + quote(request_.host) + "'");
  if (!transfer_encoding_.empty()) {
    if (request_.version == 10) {
      return fail(ec, 400, "Transfer-Encoding in an HTTP/1.0 request (hint: send Content-Length, or use HTTP/1.1)");
    }
    if (has_content_length_) return fail(ec, 400, "a request must not carry both Transfer-Encoding and Content-Length");
    const std::vector<std::string_view> codings = list_members(transfer_encoding_);
    for (std::string_view c : codings) {
      if (!iequals(c, "chunked")) {
        return fail(ec, 501,
                    "Transfer-Encoding '" + quote(transfer_encoding_) +
                        "' is not supported: only 'chunked' is understood (hint: send the body with Content-Length "
                        "or chunked; compress it with Content-Encoding)");
      }
    }
    if (codings.size() != 1) return fail(ec, 400, "the chunked transfer coding is applied more than once");
  }
  if (!expect_.empty() && request_.version == 11) {
    if (!iequals(expect_, "100-continue")) {
      return fail(ec, 417, "unsupported Expect '" + quote(expect_) + "' (hint: only 100-continue is understood)");
    }
    request_.expect_continue = true;
  }
  request_.keep_alive = keep_alive();
}

void RequestParser::on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code&) {
  // At most 8 MiB up front: a declared length is a claim, the body limit is enforced as bytes come.
  if (length) request_.body.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(*length, 8 << 20)));
}

std::size_t RequestParser::on_body_impl(string_view body, error_code&) {
  request_.body.append(body.data(), body.size());
  return body.size();
}

void RequestParser::on_chunk_header_impl(std::uint64_t, string_view, error_code&) {}

std::size_t RequestParser::on_chunk_body_impl(std::uint64_t, string_view body, error_code&) {
  request_.body.append(body.data(), body.size());
  return body.size();
}

void RequestParser::on_finish_impl(error_code&) {}

}  // namespace glassbox::serve
