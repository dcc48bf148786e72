// RequestParser: one HTTP/1.1 request read from bytes, with the framing rules of RFC 9110 and
// RFC 9112 that a server facing a network must enforce. Beast's parser tokenises the request line,
// the fields and chunked bodies; this class decides what the request means and refuses what it
// cannot frame safely:
//
//   rule                                                   status  connection
//   Transfer-Encoding other than exactly "chunked"            501  closed (body length unknown)
//   Transfer-Encoding together with Content-Length            400  closed (request smuggling)
//   Transfer-Encoding in an HTTP/1.0 request                  400  closed
//   invalid or conflicting Content-Length                     400  closed
//   HTTP/1.1 without Host, several Host fields, a bad Host    400  closed
//   request line + fields over max_head_bytes (whole head)    431  closed
//   body over max_body_bytes                                  413  closed
//   method Beast does not know (e.g. "FOO")                   501  closed
//   Expect other than 100-continue                            417  closed
//   request target neither a path nor an absolute URI         400  closed
// Absolute-form targets ("http://host:8000/v2/models/m") are served as their path and query.
// "Closed": the answer is written, then the connection closes (the bytes that follow cannot be
// trusted to start a request). Failure messages quote no request bytes beyond what they name,
// and those are escaped when the answer is written (json_error).
//
//   RequestParser p({.max_head_bytes = 64 << 10, .max_body_bytes = 64 << 20});
//   std::size_t used = p.put(bytes);       // consume a prefix of what arrived; call again with more
//   if (p.failure()) answer(p.failure()->status, p.failure()->message);   // then close
//   else if (p.done()) route(p.request());
//
// Thread safety: one parser per request, used by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http/basic_parser.hpp>

namespace glassbox::serve {

struct ParserLimits {
  std::size_t max_head_bytes = 64 << 10;  // request line + every field line, CRLFs included
  std::size_t max_body_bytes = 64 << 20;  // the message body (decoded from chunks)
};

// Why a request cannot be served: the status to answer with; the connection closes after it.
struct ParseFailure {
  int status = 400;
  std::string message;  // one line; may quote header values (escaped when written as JSON)
};

// The head fields the server uses, as received (values trimmed of surrounding whitespace).
struct ParsedRequest {
  std::string method;  // as sent, e.g. "POST"
  std::string target;  // origin-form: "/v2/models/m/infer?x=1" (absolute-form reduced to this)
  unsigned version = 11;
  bool keep_alive = true;
  bool expect_continue = false;  // Expect: 100-continue
  std::string host;
  std::string authorization, x_api_key, content_encoding, accept_encoding;
  std::optional<std::string> inference_header_length;  // Inference-Header-Content-Length
  std::string body;                                    // decoded from chunks when chunked
};

class RequestParser : private boost::beast::http::basic_parser<true> {
 public:
  explicit RequestParser(ParserLimits limits);

  // Consumes a prefix of `data` (zero when more bytes are needed before anything can be parsed:
  // call again with those bytes appended). After a failure or once done it consumes nothing.
  std::size_t put(std::string_view data);

  bool head_done() const { return is_header_done(); }
  bool done() const { return !failure_ && is_done(); }
  // Whether any byte of this request was parsed (or the head is under way).
  bool started() const { return got_some(); }
  const std::optional<ParseFailure>& failure() const { return failure_; }
  // Complete after head_done() (the body after done()); movable out once done.
  ParsedRequest& request() { return request_; }
  // Bytes of the head seen so far (request line and fields, with their CRLFs).
  std::size_t head_bytes() const { return head_bytes_; }
  // Declared body length (nullopt: chunked or none), known after head_done().
  std::optional<std::uint64_t> declared_length() const;

 private:
  using string_view = boost::beast::string_view;
  using error_code = boost::beast::error_code;
  using field = boost::beast::http::field;
  using verb = boost::beast::http::verb;

  void on_request_impl(verb method, string_view method_str, string_view target, int version, error_code& ec) override;
  void on_response_impl(int, string_view, int, error_code& ec) override;
  void on_field_impl(field name, string_view name_string, string_view value, error_code& ec) override;
  void on_header_impl(error_code& ec) override;
  void on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code& ec) override;
  std::size_t on_body_impl(string_view body, error_code& ec) override;
  void on_chunk_header_impl(std::uint64_t size, string_view extensions, error_code& ec) override;
  std::size_t on_chunk_body_impl(std::uint64_t remain, string_view body, error_code& ec) override;
  void on_finish_impl(error_code& ec) override;

  // Records the failure and stops the parse (Beast sees an error and consumes nothing more).
  void fail(error_code& ec, int status, std::string message);
  void fail_from_beast(const error_code& ec);
  // 505 for a well-formed request line with another HTTP version, else 400.
  void classify_version(std::string_view line);

  ParserLimits limits_;
  ParsedRequest request_;
  std::optional<ParseFailure> failure_;
  std::size_t head_bytes_ = 0;
  std::size_t trailer_bytes_ = 0;
  int host_fields_ = 0;
  bool version_pending_ = false;     // Beast refused the version before the request line ended
  std::size_t seen_unconsumed_ = 0;  // bytes Beast saw and left for more (need_more)
  bool has_content_length_ = false;
  std::string transfer_encoding_;  // every Transfer-Encoding field, joined with ", "
  std::string expect_;
  std::string connection_;
};

}  // namespace glassbox::serve
