// The KServe v2 routes: path matching without regexes, API key, error mapping, and each endpoint's
// handler (JSON built with nlohmann for the small control answers; codec.h for inference).
#include "glassbox/serve/http/routes.h"

#include <array>
#include <exception>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "glassbox/serve/http/codec.h"
#include "glassbox/serve/http/compression.h"
#include "glassbox/serve/http/dashboard.h"
#include "glassbox/serve/http/metrics.h"

namespace glassbox::serve {
namespace {

using json = nlohmann::json;

enum class Kind {
  kNotFound,
  kLive,
  kReady,
  kServerMetadata,
  kAllStats,
  kModelMetadata,
  kModelReady,
  kModelConfig,
  kModelStats,
  kModelMonitor,
  kMonitorSampling,
  kDashboard,
  kDashboardMetrics,
  kInfer,
  kIndex,
  kLoad,
  kUnload,
};

struct Route {
  Route(Kind k = Kind::kNotFound, std::string_view m = {}, std::string_view v = {}) : kind(k), model(m), version(v) {}
  Kind kind;
  std::string_view model;
  std::string_view version;  // empty: none given
};

constexpr std::size_t kMaxSegments = 8;

Route match(std::string_view target) {
  std::string_view path = target.substr(0, target.find('?'));
  if (path.empty() || path.front() != '/') return {};
  path.remove_prefix(1);
  std::array<std::string_view, kMaxSegments> seg;
  std::size_t n = 0;
  while (true) {
    if (n == kMaxSegments) return {};
    const auto slash = path.find('/');
    seg[n++] = path.substr(0, slash);
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (seg[i].empty()) return {};
  }
  if (seg[0] == "dashboard" && n == 1) return {Kind::kDashboard};
  if (seg[0] == "dashboard" && n == 2 && seg[1] == "metrics") return {Kind::kDashboardMetrics};
  if (seg[0] != "v2") return {};
  if (n == 1) return {Kind::kServerMetadata};
  if (seg[1] == "health" && n == 3) {
    if (seg[2] == "live") return {Kind::kLive};
    if (seg[2] == "ready") return {Kind::kReady};
    return {};
  }
  if (seg[1] == "repository") {
    if (n == 3 && seg[2] == "index") return {Kind::kIndex};
    if (n == 5 && seg[2] == "models") {
      if (seg[4] == "load") return {Kind::kLoad, seg[3]};
      if (seg[4] == "unload") return {Kind::kUnload, seg[3]};
    }
    return {};
  }
  if (seg[1] != "models" || n < 3) return {};
  if (n == 3 && seg[2] == "stats") return {Kind::kAllStats};
  Route r{Kind::kNotFound, seg[2]};
  std::size_t i = 3;
  if (n >= 5 && seg[3] == "versions") {
    r.version = seg[4];
    i = 5;
  }
  if (n == i) {
    r.kind = Kind::kModelMetadata;
  } else if (n == i + 1) {
    const std::string_view last = seg[i];
    if (last == "ready")
      r.kind = Kind::kModelReady;
    else if (last == "config")
      r.kind = Kind::kModelConfig;
    else if (last == "stats")
      r.kind = Kind::kModelStats;
    else if (last == "monitor")
      r.kind = Kind::kModelMonitor;
    else if (last == "infer")
      r.kind = Kind::kInfer;
  } else if (n == i + 2 && seg[i] == "monitor" && seg[i + 1] == "sampling") {
    r.kind = Kind::kMonitorSampling;
  }
  return r.kind == Kind::kNotFound ? Route{} : r;
}

Method method_of(Kind kind) {
  switch (kind) {
    case Kind::kInfer:
    case Kind::kMonitorSampling:
    case Kind::kIndex:
    case Kind::kLoad:
    case Kind::kUnload: return Method::kPost;
    default: return Method::kGet;
  }
}

const char* method_name(Method m) {
  switch (m) {
    case Method::kGet: return "GET";
    case Method::kHead: return "HEAD";
    case Method::kPost: return "POST";
    case Method::kPut: return "PUT";
    case Method::kDelete: return "DELETE";
    case Method::kOther: return "this method";
  }
  return "this method";
}

// %XX escapes in a model name (tritonclient quotes names); anything malformed stays as it is.
std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::int64_t parse_version(std::string_view v, const std::string& model) {
  if (v.empty()) return 0;
  std::int64_t n = 0;
  bool ok = v.size() <= 18;
  for (char c : v) ok = ok && c >= '0' && c <= '9';
  if (!ok) {
    throw Error(ErrorCode::kInvalidArgument,
                "model version '" + std::string(v.substr(0, 40)) + "' of model '" + model + "' is not a decimal number",
                "versions are the numeric folder names, e.g. /v2/models/" + model + "/versions/1");
  }
  for (char c : v) n = n * 10 + (c - '0');
  return n;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json tensor_specs(const std::vector<TensorSpec>& specs) {
  json a = json::array();
  for (const TensorSpec& s : specs) {
    a.push_back({{"name", s.name}, {"datatype", datatype_name(s.datatype)}, {"shape", s.shape}});
  }
  return a;
}

json duration(const DurationStat& d) { return {{"count", d.count}, {"ns", d.ns}}; }

json stats_json(const std::vector<ModelStats>& stats) {
  json models = json::array();
  for (const ModelStats& s : stats) {
    json batches = json::array();
    for (const BatchStat& b : s.batch_stats) {
      batches.push_back({{"batch_size", b.batch_size},
                         {"compute_input", duration(b.compute_input)},
                         {"compute_infer", duration(b.compute_infer)},
                         {"compute_output", duration(b.compute_output)}});
    }
    models.push_back({{"name", s.name},
                      {"version", s.version},
                      {"last_inference", s.last_inference_ms},
                      {"inference_count", s.inference_count},
                      {"execution_count", s.execution_count},
                      {"inference_stats",
                       {{"success", duration(s.success)},
                        {"fail", duration(s.fail)},
                        {"queue", duration(s.queue)},
                        {"compute_input", duration(s.compute_input)},
                        {"compute_infer", duration(s.compute_infer)},
                        {"compute_output", duration(s.compute_output)},
                        {"cache_hit", duration(s.cache_hit)},
                        {"cache_miss", duration(s.cache_miss)}}},
                      {"batch_stats", std::move(batches)}});
  }
  return {{"model_stats", std::move(models)}};
}

// An optional JSON object body of a control endpoint (empty body: an empty object).
json control_body(const HttpRequest& req, const HttpOptions& options, std::string_view what) {
  auto body = decode_content(req.body, req.content_encoding, options.max_body_bytes);
  if (!body || body->find_first_not_of(" \t\r\n") == std::string::npos) return json::object();
  json j = parse_json(*body, options.max_json_depth, what);
  if (!j.is_object()) {
    throw Error(ErrorCode::kInvalidArgument,
                "the body of " + std::string(what) + " must be a JSON object, got " + j.type_name());
  }
  return j;
}

// The "parameters" object of a load/unload body; every key must be in `allowed`.
json control_parameters(const json& body, const std::string& what, std::initializer_list<std::string_view> allowed,
                        const std::string& hint) {
  auto it = body.find("parameters");
  if (it == body.end()) return json::object();
  if (!it->is_object()) {
    throw Error(ErrorCode::kInvalidArgument, "'parameters' of " + what + " must be an object, got " + it->type_name());
  }
  for (const auto& [key, v] : it->items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || key == a;
    if (!known) throw Error(ErrorCode::kInvalidArgument, "unsupported parameter '" + key + "' in " + what, hint);
  }
  return *it;
}

HttpResponse empty_response(int status = 200) {
  HttpResponse r;
  r.status = status;
  return r;
}

}  // namespace

int http_status(ErrorCode code) { return http_status_for(code); }

HttpResponse json_error(int status, std::string_view message) {
  HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body.reserve(message.size() + 16);
  r.body = "{\"error\":";
  append_json_text(r.body, message);
  r.body += '}';
  return r;
}

HttpResponse error_response(const Error& error) {
  const auto* http = dynamic_cast<const HttpError*>(&error);
  HttpResponse r = json_error(http ? http->status() : http_status(error.code()), error.one_line());
  if (r.status == 415) r.accept_encoding = "gzip, deflate";  // the content codings a request may use
  return r;
}

HttpResponse json_response(std::string body, int status) {
  HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = std::move(body);
  return r;
}

bool keys_equal(std::string_view given, std::string_view expected) {
  unsigned diff = given.size() == expected.size() ? 0u : 1u;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const char g = i < given.size() ? given[i] : '\0';
    diff |= static_cast<unsigned char>(g ^ expected[i]);
  }
  return diff == 0;
}

Router::Router(Engine& engine, const HttpOptions& options) : engine_(engine), options_(options) {}

bool Router::authorized(const HttpRequest& req) const {
  constexpr std::string_view kBearer = "Bearer ";
  bool ok = false;
  if (req.authorization.size() > kBearer.size() && req.authorization.substr(0, kBearer.size()) == kBearer) {
    ok = keys_equal(req.authorization.substr(kBearer.size()), options_.api_key);
  }
  if (!req.x_api_key.empty()) ok = keys_equal(req.x_api_key, options_.api_key) || ok;
  return ok;
}

void Router::handle(const HttpRequest& req, Reply reply) const {
  const Route route = match(req.target);
  if (route.kind == Kind::kNotFound) return reply(json_error(404, "Not Found"));
  const Method allowed = method_of(route.kind);
  // HEAD is GET without the body (the server leaves the body out).
  if (req.method != allowed && !(req.method == Method::kHead && allowed == Method::kGet)) {
    HttpResponse r = json_error(
        405, (req.method_name.empty() ? std::string(method_name(req.method)) : std::string(req.method_name)) +
                 " is not allowed on " + std::string(req.target.substr(0, req.target.find('?'))) + "; use " +
                 method_name(allowed));
    r.allow = allowed == Method::kGet ? "GET, HEAD" : method_name(allowed);
    return reply(std::move(r));
  }
  const bool control = route.kind == Kind::kIndex || route.kind == Kind::kLoad || route.kind == Kind::kUnload ||
                       route.kind == Kind::kMonitorSampling;
  const bool health = route.kind == Kind::kLive || route.kind == Kind::kReady;
  if (!options_.api_key.empty() && (control || (options_.protect_inference && !health)) && !authorized(req)) {
    const bool sent = !req.authorization.empty() || !req.x_api_key.empty();
    return reply(error_response(Error(ErrorCode::kPermissionDenied,
                                      sent ? "invalid API key" : "this endpoint requires an API key",
                                      "send 'Authorization: Bearer KEY' or 'X-API-Key: KEY' with the server's key")));
  }

  try {
    const std::string model = percent_decode(route.model);
    const std::int64_t version = parse_version(route.version, model);
    // Versions are numbered from 1; the engine's version 0 means "the latest", which only a route
    // without /versions/N asks for (Triton: version 0 does not exist).
    if (version == 0 && !route.version.empty()) {
      if (route.kind == Kind::kModelReady)
        return reply(json_error(400, "model '" + model + "' version 0 is not ready"));
      throw explicit_version_zero(engine_, model);
    }
    switch (route.kind) {
      case Kind::kLive: return reply(engine_.live() ? empty_response() : json_error(400, "server is not live"));
      case Kind::kReady: return reply(engine_.ready() ? empty_response() : json_error(400, "server is not ready"));
      case Kind::kServerMetadata: {
        const ServerMetadata m = engine_.server_metadata();
        return reply(json_response(dump({{"name", m.name}, {"version", m.version}, {"extensions", m.extensions}})));
      }
      case Kind::kModelMetadata: {
        const ModelMetadata m = engine_.model_metadata(model, version);
        return reply(json_response(dump({{"name", m.name},
                                         {"versions", m.versions},
                                         {"platform", m.platform},
                                         {"inputs", tensor_specs(m.inputs)},
                                         {"outputs", tensor_specs(m.outputs)}})));
      }
      case Kind::kModelReady:
        return reply(engine_.model_ready(model, version)
                         ? empty_response()
                         : json_error(400, "model '" + model + "'" +
                                               (version ? " version " + std::to_string(version) : std::string()) +
                                               " is not ready"));
      case Kind::kModelConfig: return reply(json_response(engine_.model_config_json(model, version)));
      case Kind::kAllStats: return reply(json_response(dump(stats_json(engine_.statistics("", 0)))));
      case Kind::kModelStats: return reply(json_response(dump(stats_json(engine_.statistics(model, version)))));
      case Kind::kModelMonitor: return reply(json_response(dump(engine_.monitor_snapshot(model, version).to_json())));
      case Kind::kMonitorSampling: {
        const std::string what = "the monitor sampling request {\"sample_rate\": R} for model '" + model + "'";
        const json body = control_body(req, options_, what);
        const auto it = body.find("sample_rate");
        if (it == body.end() || !it->is_number() || body.size() != 1) {
          throw Error(ErrorCode::kInvalidArgument, what + " got " + body.dump().substr(0, 200),
                      "send the share of requests to observe, 0 (paused) to 1 (every request)");
        }
        return reply(json_response(
            dump(engine_.set_monitor_sample_rate(model, version, it->get<double>()).to_json().at("options"))));
      }
      case Kind::kDashboard: {
        HttpResponse r;
        r.content_type = "text/html; charset=utf-8";
        r.body = dashboard_html();
        return reply(std::move(r));
      }
      case Kind::kDashboardMetrics: {
        HttpResponse r;
        r.content_type = "text/plain; version=0.0.4; charset=utf-8";
        r.body = render_metrics(engine_.statistics("", 0), process_figures(), options_.metric_names,
                                engine_.monitor_snapshots(), engine_.payload_log_stats());
        return reply(std::move(r));
      }
      case Kind::kIndex: {
        const json body = control_body(req, options_, "the repository index request");
        bool ready = false;
        if (auto it = body.find("ready"); it != body.end()) {
          if (!it->is_boolean()) {
            throw Error(
                ErrorCode::kInvalidArgument,
                "'ready' of the repository index request must be true or false, got " + std::string(it->type_name()));
          }
          ready = it->get<bool>();
        }
        json a = json::array();
        for (const IndexEntry& e : engine_.repository_index(ready)) {
          json o = {{"name", e.name}};
          if (!e.version.empty()) o["version"] = e.version;
          o["state"] = e.state;
          if (!e.reason.empty()) o["reason"] = e.reason;
          a.push_back(std::move(o));
        }
        return reply(json_response(dump(a)));
      }
      case Kind::kLoad: {
        const std::string what = "the load request for model '" + model + "'";
        const json params = control_parameters(control_body(req, options_, what), what, {"config"},
                                               "glassbox loads model files from the repository; only 'config' (the "
                                               "model configuration as a JSON string) is accepted");
        std::string config;
        if (auto it = params.find("config"); it != params.end()) {
          if (!it->is_string()) {
            throw Error(ErrorCode::kInvalidArgument,
                        "parameter 'config' of " + what + " must be a string holding JSON, got " + it->type_name());
          }
          config = it->get<std::string>();
        }
        engine_.load_model(model, config);
        return reply(empty_response());
      }
      case Kind::kUnload: {
        const std::string what = "the unload request for model '" + model + "'";
        const json params = control_parameters(control_body(req, options_, what), what, {"unload_dependents"},
                                               "only 'unload_dependents' is accepted");
        if (auto it = params.find("unload_dependents"); it != params.end() && !it->is_boolean()) {
          throw Error(ErrorCode::kInvalidArgument,
                      "parameter 'unload_dependents' of " + what + " must be true or false");
        }
        engine_.unload_model(model);
        return reply(empty_response());
      }
      case Kind::kInfer: return infer(req, model, version, reply);
      case Kind::kNotFound: break;
    }
    reply(json_error(404, "Not Found"));
  } catch (const Error& e) {
    if (reply) reply(error_response(e));  // empty once handed to the engine (which never throws)
  } catch (const std::exception& e) {
    if (reply) reply(json_error(500, std::string("internal error: ") + e.what()));
  } catch (...) {
    if (reply) reply(json_error(500, "internal error"));
  }
}

void Router::infer(const HttpRequest& req, const std::string& model, std::int64_t version, Reply& reply) const {
  auto body = decode_content(req.body, req.content_encoding, options_.max_body_bytes);
  DecodedInfer decoded =
      decode_infer_request(std::move(body), req.inference_header_length, model, version, options_.max_json_depth);
  const bool binary = decoded.binary_output;
  const bool compress = !req.accept_encoding.empty() && accepts_gzip(req.accept_encoding);
  // The callback runs on an engine thread (or inline for requests refused up front); it must not
  // throw, and it calls `reply` exactly once.
  engine_.infer(std::move(decoded.request), [reply = std::move(reply), binary, compress](InferOutcome out) {
    HttpResponse r;
    try {
      if (out.error) {
        r = error_response(*out.error);
      } else {
        EncodedInfer e = encode_infer_response(out.response, binary);
        r.content_type = e.header_length ? "application/octet-stream" : "application/json";
        r.inference_header_length = e.header_length;
        r.body = std::move(e.body);
        if (compress && r.body.size() >= 1024) {
          r.body = gzip(r.body);
          r.content_encoding = "gzip";
        }
      }
    } catch (const Error& e) {
      r = error_response(e);
    } catch (const std::exception& e) {
      r = json_error(500, std::string("internal error: ") + e.what());
    } catch (...) {
      r = json_error(500, "internal error");
    }
    reply(std::move(r));
  });
}

}  // namespace glassbox::serve
