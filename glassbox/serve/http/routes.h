// The KServe v2 endpoints (serving.md "Endpoints") as a transport-free router: the server turns a
// Beast request into an HttpRequest, calls Router::handle, and writes the HttpResponse it is given.
//
//   Router router(engine, options);
//   HttpRequest req;
//   req.method = Method::kGet;
//   req.target = "/v2/health/ready";
//   router.handle(req, [](HttpResponse r) { write(r); });   // inline here; infer: engine thread
//
// Routes: GET /dashboard (the live page, dashboard.h) and /dashboard/metrics (the metrics port's
// text, for the page), GET /v2/health/live|ready, /v2, /v2/models/stats, /v2/models/M[/versions/V][/ready|
// /config|/stats|/monitor]; POST /v2/models/M[/versions/V]/infer, /v2/repository/index,
// /v2/repository/models/M/load|unload. Unknown path 404 {"error":"Not Found"}; known path with
// another method 405 with `Allow` (HEAD is allowed wherever GET is: the server sends no body); a version that is not
// decimal digits 400. Errors are
// {"error":"message (hint: ...)"} with glassbox::Error codes mapped once (http_status).
// API key (HttpOptions::api_key non-empty): `Authorization: Bearer KEY` or `X-API-Key: KEY`,
// compared in constant time; repository endpoints need it (403 otherwise); with
// protect_inference every /v2 route except health does.
//
// Thread safety: handle() may be called from any number of threads at once; the router holds
// no mutable state. `reply` is called exactly once: inline, or on an engine thread for infer.
// Ownership: the engine is borrowed and must outlive the router.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "glassbox/base/error.h"
#include "glassbox/serve/engine/api.h"
#include "glassbox/serve/http/options.h"

namespace glassbox::serve {

enum class Method { kGet, kHead, kPost, kPut, kDelete, kOther };

// One request as the routes see it. The string_views stay valid only during handle(); the body is
// shared so that binary input tensors can view into it after handle() returns.
struct HttpRequest {
  Method method = Method::kGet;
  std::string_view method_name;    // as received ("OPTIONS"); empty: the name of `method`
  std::string_view target;         // path and optional query, as received
  std::string_view authorization;  // header values; empty when absent
  std::string_view x_api_key;
  std::string_view content_encoding;
  std::string_view accept_encoding;
  std::optional<std::string_view> inference_header_length;  // Inference-Header-Content-Length
  std::shared_ptr<const std::string> body;                  // null: no body
};

struct HttpResponse {
  int status = 200;
  std::string content_type;  // empty: no Content-Type (empty bodies)
  std::string body;
  std::optional<std::size_t> inference_header_length;
  std::string allow;             // 405: the allowed method
  std::string content_encoding;  // "gzip" when the body was compressed
  std::string accept_encoding;   // 415 for a request's content coding: the codings accepted
  bool close = false;            // answer with Connection: close and close the connection
};
using Reply = std::function<void(HttpResponse)>;

// An HTTP framing error with a status that belongs to the protocol, not to a kind of failure
// (413 body too large, 431 headers too large); every semantic error is a glassbox::Error whose code
// http_status_for maps.
class HttpError : public Error {
 public:
  HttpError(int status, std::string message, std::string hint = {})
      : Error(ErrorCode::kInvalidArgument, std::move(message), std::move(hint)), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// glassbox::http_status_for (base/error.h): the one mapping of codes to statuses.
int http_status(ErrorCode code);
// {"error": "<one line>"} with the status of the error (HttpError's own, or http_status).
HttpResponse error_response(const Error& error);
HttpResponse json_error(int status, std::string_view message);
HttpResponse json_response(std::string body, int status = 200);

// Compares two keys in time that depends only on the length of `expected`.
bool keys_equal(std::string_view given, std::string_view expected);

class Router {
 public:
  Router(Engine& engine, const HttpOptions& options);
  void handle(const HttpRequest& request, Reply reply) const;

 private:
  // Moves `reply` into the engine's callback once the request decoded.
  void infer(const HttpRequest& request, const std::string& model, std::int64_t version, Reply& reply) const;
  bool authorized(const HttpRequest& request) const;

  Engine& engine_;
  HttpOptions options_;
};

}  // namespace glassbox::serve
