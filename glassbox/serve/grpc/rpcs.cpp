// GRPCInferenceService's RPCs (see rpcs.h). Tested over real channels in server_test.cpp and
// stream_test.cpp (every RPC, errors, the API key, streams) and against tritonclient.grpc and
// perf_analyzer in tests/serve/grpc_test.py.
#include "glassbox/serve/grpc/rpcs.h"

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/util/json_util.h>

#include "glassbox/base/error.h"
#include "glassbox/serve/grpc/codec.h"
#include "glassbox/serve/grpc/proto/grpc_service.pb.h"

namespace glassbox::serve {
namespace {

using grpc::Status;
using grpc::StatusCode;

constexpr std::string_view kServicePrefix = "/inference.GRPCInferenceService/";
constexpr std::array<std::pair<std::string_view, Rpc>, 12> kRpcs{{
    {"ServerLive", Rpc::kServerLive},
    {"ServerReady", Rpc::kServerReady},
    {"ModelReady", Rpc::kModelReady},
    {"ServerMetadata", Rpc::kServerMetadata},
    {"ModelMetadata", Rpc::kModelMetadata},
    {"ModelInfer", Rpc::kModelInfer},
    {"ModelStreamInfer", Rpc::kModelStreamInfer},
    {"ModelConfig", Rpc::kModelConfig},
    {"ModelStatistics", Rpc::kModelStatistics},
    {"RepositoryIndex", Rpc::kRepositoryIndex},
    {"RepositoryModelLoad", Rpc::kRepositoryModelLoad},
    {"RepositoryModelUnload", Rpc::kRepositoryModelUnload},
}};

// An answer whose message is `message`, serialized when the transport asks.
template <typename Message>
Answer answer_with(std::shared_ptr<Message> message) {
  return Answer{Status::OK, [message](std::string& out) {
                  return message->AppendToString(&out)
                             ? Status::OK
                             : Status(StatusCode::INTERNAL, "internal error: the response does not serialize");
                }};
}

Answer failed(Status status) { return Answer{std::move(status), {}}; }

template <typename Message>
std::optional<Status> parse(const std::string& bytes, Message& message) {
  if (message.ParseFromString(bytes)) return std::nullopt;
  return Status(StatusCode::INVALID_ARGUMENT, "the request is not a valid " + message.GetTypeName() + " message");
}

// Parses the request, runs `body` on it and the response, and replies.
template <typename Request, typename Response, typename F>
void sync(const std::string& bytes, const Reply& reply, F&& body) {
  Request request;
  if (auto bad = parse(bytes, request)) return reply(failed(std::move(*bad)));
  auto response = std::make_shared<Response>();
  Status s = status_of([&] { body(request, *response); });
  if (!s.ok()) return reply(failed(std::move(s)));
  reply(answer_with(std::move(response)));
}

void fill(const DurationStat& d, inference::StatisticDuration* o) {
  o->set_count(d.count);
  o->set_ns(d.ns);
}

void fill(const TensorSpec& s, inference::ModelMetadataResponse::TensorMetadata* o) {
  o->set_name(s.name);
  o->set_datatype(datatype_name(s.datatype));
  for (std::int64_t d : s.shape) o->add_shape(d);
}

void fill(const ModelStats& s, inference::ModelStatistics* o) {
  o->set_name(s.name);
  o->set_version(s.version);
  o->set_last_inference(s.last_inference_ms);
  o->set_inference_count(s.inference_count);
  o->set_execution_count(s.execution_count);
  auto* i = o->mutable_inference_stats();
  fill(s.success, i->mutable_success());
  fill(s.fail, i->mutable_fail());
  fill(s.queue, i->mutable_queue());
  fill(s.compute_input, i->mutable_compute_input());
  fill(s.compute_infer, i->mutable_compute_infer());
  fill(s.compute_output, i->mutable_compute_output());
  fill(s.cache_hit, i->mutable_cache_hit());
  fill(s.cache_miss, i->mutable_cache_miss());
  for (const BatchStat& b : s.batch_stats) {
    auto* bo = o->add_batch_stats();
    bo->set_batch_size(static_cast<std::uint64_t>(b.batch_size));
    fill(b.compute_input, bo->mutable_compute_input());
    fill(b.compute_infer, bo->mutable_compute_infer());
    fill(b.compute_output, bo->mutable_compute_output());
  }
}

// The name a repository RPC addresses (the HTTP path's model segment).
const std::string& model_name(const std::string& name, const char* rpc) {
  GB_CHECK(!name.empty(), InvalidArgument, rpc << " names no model", std::string("set model_name"));
  return name;
}

std::int64_t version_of(Engine& engine, const std::string& version, const std::string& model) {
  if (names_version_zero(version)) throw explicit_version_zero(engine, model);
  return parse_model_version(version, model);
}

// A ModelInferRequest parsed onto an arena sized for it: one allocation for the message and its
// tensors' bytes, which the engine's tensors view and which go in one piece.
struct ParsedInfer {
  explicit ParsedInfer(std::size_t bytes) : arena(options(bytes)) {
    request = google::protobuf::Arena::CreateMessage<inference::ModelInferRequest>(&arena);
  }
  static google::protobuf::ArenaOptions options(std::size_t bytes) {
    google::protobuf::ArenaOptions o;
    o.start_block_size = bytes + bytes / 4 + 1024;
    o.max_block_size = std::max<std::size_t>(o.start_block_size, 8192);
    return o;
  }
  google::protobuf::Arena arena;
  inference::ModelInferRequest* request;
};

std::optional<Status> parse_infer(const std::string& bytes, const std::shared_ptr<ParsedInfer>& parsed) {
  if (parsed->request->ParseFromString(bytes)) return std::nullopt;
  return Status(StatusCode::INVALID_ARGUMENT, "the request is not a valid inference.ModelInferRequest message");
}

// Decodes a ModelInferRequest into the engine's request; its tensors view the parsed message.
InferRequest decode(Engine& engine, const std::shared_ptr<ParsedInfer>& parsed) {
  const inference::ModelInferRequest& r = *parsed->request;
  if (names_version_zero(r.model_version())) throw explicit_version_zero(engine, r.model_name());
  return decode_infer_request(r, parsed);
}

void model_load(Engine& engine, const inference::RepositoryModelLoadRequest& req) {
  const std::string& model = model_name(req.model_name(), "the load request");
  const std::string what = "the load request for model '" + model + "'";
  std::string config;
  for (const auto& [key, v] : req.parameters()) {
    if (key != "config") {
      throw Error(ErrorCode::kInvalidArgument, "unsupported parameter '" + key + "' in " + what,
                  "glassbox loads model files from the repository; only 'config' (the model configuration as a "
                  "JSON string) is accepted");
    }
    GB_CHECK(v.parameter_choice_case() == inference::ModelRepositoryParameter::kStringParam, InvalidArgument,
             "parameter 'config' of " << what << " must be a string holding JSON", std::string());
    config = v.string_param();
  }
  engine.load_model(model, config);
}

void model_unload(Engine& engine, const inference::RepositoryModelUnloadRequest& req) {
  const std::string& model = model_name(req.model_name(), "the unload request");
  const std::string what = "the unload request for model '" + model + "'";
  for (const auto& [key, v] : req.parameters()) {
    if (key != "unload_dependents") {
      throw Error(ErrorCode::kInvalidArgument, "unsupported parameter '" + key + "' in " + what,
                  "only 'unload_dependents' is accepted");
    }
    GB_CHECK(v.parameter_choice_case() == inference::ModelRepositoryParameter::kBoolParam, InvalidArgument,
             "parameter 'unload_dependents' of " << what << " must be true or false", std::string());
  }
  engine.unload_model(model);
}

}  // namespace

// Loads and unloads running on threads of their own; ~Rpcs waits until none is left.
struct Rpcs::Background {
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;
};

namespace {

// Loading and unloading wait for the model: they run on a thread of their own, which replies.
template <typename Request>
void in_background(Engine& engine, const std::shared_ptr<Rpcs::Background>& jobs, const std::string& bytes, Reply reply,
                   void (*work)(Engine&, const Request&)) {
  auto request = std::make_shared<Request>();
  if (auto bad = parse(bytes, *request)) return reply(failed(std::move(*bad)));
  {
    std::lock_guard lock(jobs->mu);
    ++jobs->running;
  }
  std::thread([&engine, jobs, request, reply = std::move(reply), work] {
    Status s = status_of([&] { work(engine, *request); });
    using Response =
        std::conditional_t<std::is_same_v<Request, inference::RepositoryModelLoadRequest>,
                           inference::RepositoryModelLoadResponse, inference::RepositoryModelUnloadResponse>;
    reply(s.ok() ? answer_with(std::make_shared<Response>()) : failed(std::move(s)));
    std::lock_guard lock(jobs->mu);
    --jobs->running;
    jobs->cv.notify_all();
  }).detach();
}

// A stream's in-band error answer for `request`.
std::shared_ptr<inference::ModelStreamInferResponse> stream_error(const inference::ModelInferRequest& request,
                                                                  std::string message) {
  auto r = std::make_shared<inference::ModelStreamInferResponse>();
  r->set_error_message(std::move(message));
  r->mutable_infer_response()->set_model_name(request.model_name());
  r->mutable_infer_response()->set_model_version(request.model_version());
  r->mutable_infer_response()->set_id(request.id());
  return r;
}

}  // namespace

std::optional<Rpc> find_rpc(std::string_view path) {
  if (path.substr(0, kServicePrefix.size()) != kServicePrefix) return std::nullopt;
  path.remove_prefix(kServicePrefix.size());
  for (const auto& [name, rpc] : kRpcs)
    if (name == path) return rpc;
  return std::nullopt;
}

bool api_keys_equal(std::string_view given, std::string_view expected) {
  unsigned diff = given.size() == expected.size() ? 0u : 1u;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const char g = i < given.size() ? given[i] : '\0';
    diff |= static_cast<unsigned char>(g ^ expected[i]);
  }
  return diff == 0;
}

std::optional<Status> check_api_key(const Metadata& metadata, const std::string& key) {
  constexpr std::string_view kBearer = "Bearer ";
  bool sent = false;
  bool ok = false;
  for (const auto& [name, value] : metadata) {
    const std::string_view v(value);
    if (name == "authorization") {
      sent = true;
      if (v.size() > kBearer.size() && v.substr(0, kBearer.size()) == kBearer)
        ok = api_keys_equal(v.substr(kBearer.size()), key) || ok;
    } else if (name == "x-api-key") {
      sent = true;
      ok = api_keys_equal(v, key) || ok;
    }
  }
  if (ok) return std::nullopt;
  const std::string hint =
      " (hint: send the metadata 'authorization: Bearer KEY' or 'x-api-key: KEY' with the server's key)";
  if (sent) return Status(StatusCode::PERMISSION_DENIED, "invalid API key" + hint);
  return Status(StatusCode::UNAUTHENTICATED, "this RPC requires an API key" + hint);
}

namespace {

// protobuf logs an ERROR line for each string field that is not UTF-8 while parsing; over the
// network that is a client's mistake, which its call's INVALID_ARGUMENT reports, and a line per
// bad request would let any client flood the server's log. Those lines go; the rest as before.
void quiet_parse_errors(google::protobuf::LogLevel level, const char* file, int line, const std::string& message) {
  if (level < google::protobuf::LOGLEVEL_FATAL &&
      std::string_view(file).find("wire_format_lite") != std::string_view::npos)
    return;
  static const char* const kLevels[] = {"INFO", "WARNING", "ERROR", "FATAL"};
  std::fprintf(stderr, "[libprotobuf %s %s:%d] %s\n", kLevels[std::clamp(static_cast<int>(level), 0, 3)], file, line,
               message.c_str());
}

}  // namespace

Rpcs::Rpcs(Engine& engine, const GrpcOptions& options)
    : engine_(engine), options_(options), background_(std::make_shared<Background>()) {
  static std::once_flag once;
  std::call_once(once, [] { google::protobuf::SetLogHandler(&quiet_parse_errors); });
}

Rpcs::~Rpcs() {
  std::unique_lock lock(background_->mu);
  background_->cv.wait(lock, [this] { return background_->running == 0; });
}

std::optional<Status> Rpcs::refuse(Rpc rpc, const Metadata& metadata) const {
  const bool control =
      rpc == Rpc::kRepositoryIndex || rpc == Rpc::kRepositoryModelLoad || rpc == Rpc::kRepositoryModelUnload;
  const bool health = rpc == Rpc::kServerLive || rpc == Rpc::kServerReady;
  if (options_.api_key.empty() || !(control || (options_.protect_inference && !health))) return std::nullopt;
  return check_api_key(metadata, options_.api_key);
}

void Rpcs::unary(Rpc rpc, std::string bytes, Reply reply) {
  Engine& engine = engine_;
  switch (rpc) {
    case Rpc::kServerLive:
      return sync<inference::ServerLiveRequest, inference::ServerLiveResponse>(
          bytes, reply, [&](const auto&, auto& resp) { resp.set_live(engine.live()); });
    case Rpc::kServerReady:
      return sync<inference::ServerReadyRequest, inference::ServerReadyResponse>(
          bytes, reply, [&](const auto&, auto& resp) { resp.set_ready(engine.ready()); });
    case Rpc::kModelReady:
      return sync<inference::ModelReadyRequest, inference::ModelReadyResponse>(
          bytes, reply, [&](const auto& req, auto& resp) {
            resp.set_ready(!names_version_zero(req.version()) &&
                           engine.model_ready(req.name(), parse_model_version(req.version(), req.name())));
          });
    case Rpc::kServerMetadata:
      return sync<inference::ServerMetadataRequest, inference::ServerMetadataResponse>(
          bytes, reply, [&](const auto&, auto& resp) {
            const serve::ServerMetadata m = engine.server_metadata();
            resp.set_name(m.name);
            resp.set_version(m.version);
            for (const std::string& e : m.extensions) resp.add_extensions(e);
          });
    case Rpc::kModelMetadata:
      return sync<inference::ModelMetadataRequest, inference::ModelMetadataResponse>(
          bytes, reply, [&](const auto& req, auto& resp) {
            const serve::ModelMetadata m =
                engine.model_metadata(req.name(), version_of(engine, req.version(), req.name()));
            resp.set_name(m.name);
            for (const std::string& v : m.versions) resp.add_versions(v);
            resp.set_platform(m.platform);
            for (const TensorSpec& s : m.inputs) fill(s, resp.add_inputs());
            for (const TensorSpec& s : m.outputs) fill(s, resp.add_outputs());
          });
    case Rpc::kModelConfig:
      return sync<inference::ModelConfigRequest, inference::ModelConfigResponse>(
          bytes, reply, [&](const auto& req, auto& resp) {
            const std::string json =
                engine.model_config_json(req.name(), version_of(engine, req.version(), req.name()));
            google::protobuf::util::JsonParseOptions o;
            o.ignore_unknown_fields = true;
            const auto status = google::protobuf::util::JsonStringToMessage(json, resp.mutable_config(), o);
            GB_CHECK(status.ok(), Internal,
                     "the configuration of model '" << req.name()
                                                    << "' does not convert to its message: " << status.ToString(),
                     std::string("report this as a bug"));
          });
    case Rpc::kModelStatistics:
      return sync<inference::ModelStatisticsRequest, inference::ModelStatisticsResponse>(
          bytes, reply, [&](const auto& req, auto& resp) {
            for (const ModelStats& s : engine.statistics(req.name(), version_of(engine, req.version(), req.name())))
              fill(s, resp.add_model_stats());
          });
    case Rpc::kRepositoryIndex:
      return sync<inference::RepositoryIndexRequest, inference::RepositoryIndexResponse>(
          bytes, reply, [&](const auto& req, auto& resp) {
            for (const IndexEntry& e : engine.repository_index(req.ready())) {
              auto* m = resp.add_models();
              m->set_name(e.name);
              m->set_version(e.version);
              m->set_state(e.state);
              m->set_reason(e.reason);
            }
          });
    case Rpc::kRepositoryModelLoad:
      return in_background<inference::RepositoryModelLoadRequest>(engine, background_, bytes, std::move(reply),
                                                                  &model_load);
    case Rpc::kRepositoryModelUnload:
      return in_background<inference::RepositoryModelUnloadRequest>(engine, background_, bytes, std::move(reply),
                                                                    &model_unload);
    case Rpc::kModelInfer: break;
    case Rpc::kModelStreamInfer:
      return reply(failed(Status(StatusCode::INTERNAL, "ModelStreamInfer is a stream, not a unary call")));
  }
  auto parsed = std::make_shared<ParsedInfer>(bytes.size());
  if (auto bad = parse_infer(bytes, parsed)) return reply(failed(std::move(*bad)));
  bytes = std::string();
  InferRequest decoded;
  Status s = status_of([&] { decoded = decode(engine, parsed); });
  if (!s.ok()) return reply(failed(std::move(s)));
  engine.infer(std::move(decoded), [reply = std::move(reply)](InferOutcome out) {
    if (out.error) return reply(failed(to_status(*out.error)));
    auto outcome = std::make_shared<InferOutcome>(std::move(out));
    reply(Answer{Status::OK, [outcome](std::string& bytes) {
                   return status_of([&] {
                     inference::ModelInferResponse response;
                     encode_infer_response(outcome->response, response);
                     outcome->response = InferResponse();  // the output tensors go now
                     GB_CHECK(response.AppendToString(&bytes), Internal, "the response does not serialize",
                              std::string());
                   });
                 }});
  });
}

void Rpcs::stream_request(std::string bytes, Reply reply) {
  auto parsed = std::make_shared<ParsedInfer>(bytes.size());
  if (auto bad = parse_infer(bytes, parsed))
    return reply(answer_with(stream_error(*parsed->request, bad->error_message())));
  bytes = std::string();
  InferRequest decoded;
  Status s = status_of([&] { decoded = decode(engine_, parsed); });
  const inference::ModelInferRequest& request = *parsed->request;
  if (!s.ok()) return reply(answer_with(stream_error(request, s.error_message())));
  // A client that asked for empty final responses (Triton's decoupled protocol) reads the
  // triton_final_response flag: every answer here is the request's only and final one.
  const auto flag = request.parameters().find("triton_enable_empty_final_response");
  const bool mark_final = flag != request.parameters().end() && flag->second.bool_param();
  engine_.infer(std::move(decoded), [parsed, mark_final, reply = std::move(reply)](InferOutcome out) {
    auto outcome = std::make_shared<InferOutcome>(std::move(out));
    reply(Answer{Status::OK, [parsed, mark_final, outcome](std::string& bytes) {
                   const inference::ModelInferRequest& request = *parsed->request;
                   std::shared_ptr<inference::ModelStreamInferResponse> r;
                   if (outcome->error) {
                     r = stream_error(request, outcome->error->one_line());
                   } else {
                     r = std::make_shared<inference::ModelStreamInferResponse>();
                     Status s =
                         status_of([&] { encode_infer_response(outcome->response, *r->mutable_infer_response()); });
                     if (!s.ok()) r = stream_error(request, s.error_message());
                     outcome->response = InferResponse();
                   }
                   if (mark_final)
                     (*r->mutable_infer_response()->mutable_parameters())["triton_final_response"].set_bool_param(true);
                   return r->AppendToString(&bytes) ? Status::OK
                                                    : Status(StatusCode::INTERNAL, "the response does not serialize");
                 }});
  });
}

}  // namespace glassbox::serve
