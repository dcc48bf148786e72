// GRPCInferenceService's unary RPCs and ModelInfer (see service.h); the stream is stream.cpp.
// Tested over a real channel in server_test.cpp (every RPC, errors, the API key, shutdown) and
// against tritonclient.grpc in tests/serve/grpc_test.py.
#include "glassbox/serve/grpc/service.h"

#include <atomic>
#include <exception>
#include <string>
#include <thread>
#include <utility>

#include <google/protobuf/util/json_util.h>

#include "glassbox/base/error.h"
#include "glassbox/serve/grpc/codec.h"

namespace glassbox::serve {
namespace {

using grpc::CallbackServerContext;
using grpc::ServerUnaryReactor;
using grpc::Status;
using grpc::StatusCode;

// Runs `body` and finishes the call with OK, or with the status of what it threw.
template <typename F>
Status run(F&& body) {
  try {
    body();
    return Status::OK;
  } catch (const Error& e) {
    return to_status(e);
  } catch (const std::exception& e) {
    return Status(StatusCode::INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return Status(StatusCode::INTERNAL, "internal error");
  }
}

ServerUnaryReactor* finish(CallbackServerContext* ctx, Status status) {
  ServerUnaryReactor* r = ctx->DefaultReactor();
  r->Finish(std::move(status));
  return r;
}

template <typename F>
ServerUnaryReactor* answer(CallbackServerContext* ctx, std::optional<Status> refused, F&& body) {
  if (refused) return finish(ctx, std::move(*refused));
  return finish(ctx, run(std::forward<F>(body)));
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

// ModelInfer's request and response in one block that the input tensors share: the engine may
// hold them after the call finished.
struct InferPayload {
  inference::ModelInferRequest request;
  inference::ModelInferResponse response;
  std::atomic<bool> claimed{false};
  // True for the one caller (the engine's answer or OnCancel) that finishes the call.
  bool claim() { return !claimed.exchange(true); }
};

class InferHolder final : public grpc::MessageHolder<inference::ModelInferRequest, inference::ModelInferResponse> {
 public:
  InferHolder() : payload(std::make_shared<InferPayload>()) {
    set_request(&payload->request);
    set_response(&payload->response);
  }
  void Release() override { delete this; }
  std::shared_ptr<InferPayload> payload;
};

// Deleted by gRPC after it finished (OnDone); only the claimer of the payload touches it.
class InferCall final : public ServerUnaryReactor {
 public:
  explicit InferCall(std::shared_ptr<InferPayload> payload) : payload_(std::move(payload)) {}
  void OnCancel() override {
    if (payload_->claim()) Finish(Status(StatusCode::CANCELLED, "the call was cancelled before the model answered"));
  }
  void OnDone() override { delete this; }

 private:
  std::shared_ptr<InferPayload> payload_;
};

}  // namespace

struct InferenceService::Allocator final
    : grpc::MessageAllocator<inference::ModelInferRequest, inference::ModelInferResponse> {
  grpc::MessageHolder<inference::ModelInferRequest, inference::ModelInferResponse>* AllocateMessages() override {
    return new InferHolder;
  }
};

bool api_keys_equal(std::string_view given, std::string_view expected) {
  unsigned diff = given.size() == expected.size() ? 0u : 1u;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const char g = i < given.size() ? given[i] : '\0';
    diff |= static_cast<unsigned char>(g ^ expected[i]);
  }
  return diff == 0;
}

std::optional<Status> check_api_key(const CallbackServerContext& ctx, const std::string& key) {
  constexpr std::string_view kBearer = "Bearer ";
  bool sent = false;
  bool ok = false;
  for (const auto& [name, value] : ctx.client_metadata()) {
    const std::string_view n(name.data(), name.size());
    const std::string_view v(value.data(), value.size());
    if (n == "authorization") {
      sent = true;
      if (v.size() > kBearer.size() && v.substr(0, kBearer.size()) == kBearer)
        ok = api_keys_equal(v.substr(kBearer.size()), key) || ok;
    } else if (n == "x-api-key") {
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

InferenceService::InferenceService(Engine& engine, const GrpcOptions& options)
    : engine_(engine), options_(options), allocator_(std::make_unique<Allocator>()) {
  SetMessageAllocatorFor_ModelInfer(allocator_.get());
}

InferenceService::~InferenceService() = default;

std::optional<Status> InferenceService::refuse(const CallbackServerContext& ctx, bool control, bool health) const {
  if (options_.api_key.empty() || !(control || (options_.protect_inference && !health))) return std::nullopt;
  return check_api_key(ctx, options_.api_key);
}

ServerUnaryReactor* InferenceService::ServerLive(CallbackServerContext* ctx, const inference::ServerLiveRequest*,
                                                 inference::ServerLiveResponse* resp) {
  return answer(ctx, refuse(*ctx, false, true), [&] { resp->set_live(engine_.live()); });
}

std::int64_t InferenceService::version_of(const std::string& version, const std::string& model) const {
  if (names_version_zero(version)) throw explicit_version_zero(engine_, model);
  return parse_model_version(version, model);
}

ServerUnaryReactor* InferenceService::ServerReady(CallbackServerContext* ctx, const inference::ServerReadyRequest*,
                                                  inference::ServerReadyResponse* resp) {
  return answer(ctx, refuse(*ctx, false, true), [&] { resp->set_ready(engine_.ready()); });
}

ServerUnaryReactor* InferenceService::ModelReady(CallbackServerContext* ctx, const inference::ModelReadyRequest* req,
                                                 inference::ModelReadyResponse* resp) {
  return answer(ctx, refuse(*ctx, false, false), [&] {
    resp->set_ready(!names_version_zero(req->version()) &&
                    engine_.model_ready(req->name(), parse_model_version(req->version(), req->name())));
  });
}

ServerUnaryReactor* InferenceService::ServerMetadata(CallbackServerContext* ctx,
                                                     const inference::ServerMetadataRequest*,
                                                     inference::ServerMetadataResponse* resp) {
  return answer(ctx, refuse(*ctx, false, false), [&] {
    const serve::ServerMetadata m = engine_.server_metadata();
    resp->set_name(m.name);
    resp->set_version(m.version);
    for (const std::string& e : m.extensions) resp->add_extensions(e);
  });
}

ServerUnaryReactor* InferenceService::ModelMetadata(CallbackServerContext* ctx,
                                                    const inference::ModelMetadataRequest* req,
                                                    inference::ModelMetadataResponse* resp) {
  return answer(ctx, refuse(*ctx, false, false), [&] {
    const serve::ModelMetadata m = engine_.model_metadata(req->name(), version_of(req->version(), req->name()));
    resp->set_name(m.name);
    for (const std::string& v : m.versions) resp->add_versions(v);
    resp->set_platform(m.platform);
    for (const TensorSpec& s : m.inputs) fill(s, resp->add_inputs());
    for (const TensorSpec& s : m.outputs) fill(s, resp->add_outputs());
  });
}

ServerUnaryReactor* InferenceService::ModelInfer(CallbackServerContext* ctx, const inference::ModelInferRequest* req,
                                                 inference::ModelInferResponse*) {
  std::shared_ptr<InferPayload> payload = static_cast<InferHolder*>(ctx->GetRpcAllocatorState())->payload;
  auto* call = new InferCall(payload);
  std::optional<Status> refused = refuse(*ctx, false, false);
  InferRequest request;
  if (!refused) {
    Status s = run([&] {
      if (names_version_zero(req->model_version())) throw explicit_version_zero(engine_, req->model_name());
      request = decode_infer_request(*req, payload);
    });
    if (!s.ok()) refused = std::move(s);
  }
  if (refused) {
    payload->claim();
    call->Finish(std::move(*refused));
    return call;
  }
  engine_.infer(std::move(request), [payload, call](InferOutcome out) {
    if (!payload->claim()) return;  // cancelled and finished already
    Status s = Status::OK;
    if (out.error) {
      s = to_status(*out.error);
    } else {
      s = run([&] { encode_infer_response(out.response, payload->response); });
    }
    call->Finish(std::move(s));
  });
  return call;
}

grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
InferenceService::ModelStreamInfer(CallbackServerContext* ctx) {
  return start_stream(engine_, refuse(*ctx, false, false));
}

ServerUnaryReactor* InferenceService::ModelConfig(CallbackServerContext* ctx, const inference::ModelConfigRequest* req,
                                                  inference::ModelConfigResponse* resp) {
  return answer(ctx, refuse(*ctx, false, false), [&] {
    const std::string json = engine_.model_config_json(req->name(), version_of(req->version(), req->name()));
    google::protobuf::util::JsonParseOptions o;
    o.ignore_unknown_fields = true;
    const auto status = google::protobuf::util::JsonStringToMessage(json, resp->mutable_config(), o);
    GB_CHECK(
        status.ok(), Internal,
        "the configuration of model '" << req->name() << "' does not convert to its message: " << status.ToString(),
        std::string("report this as a bug"));
  });
}

ServerUnaryReactor* InferenceService::ModelStatistics(CallbackServerContext* ctx,
                                                      const inference::ModelStatisticsRequest* req,
                                                      inference::ModelStatisticsResponse* resp) {
  return answer(ctx, refuse(*ctx, false, false), [&] {
    for (const ModelStats& s : engine_.statistics(req->name(), version_of(req->version(), req->name())))
      fill(s, resp->add_model_stats());
  });
}

ServerUnaryReactor* InferenceService::RepositoryIndex(CallbackServerContext* ctx,
                                                      const inference::RepositoryIndexRequest* req,
                                                      inference::RepositoryIndexResponse* resp) {
  return answer(ctx, refuse(*ctx, true, false), [&] {
    for (const IndexEntry& e : engine_.repository_index(req->ready())) {
      auto* m = resp->add_models();
      m->set_name(e.name);
      m->set_version(e.version);
      m->set_state(e.state);
      m->set_reason(e.reason);
    }
  });
}

// Loading and unloading wait for the model; they run on a thread of their own so that no gRPC
// thread waits with them. The call finishes from that thread (gRPC's shutdown waits for it).
ServerUnaryReactor* InferenceService::RepositoryModelLoad(CallbackServerContext* ctx,
                                                          const inference::RepositoryModelLoadRequest* req,
                                                          inference::RepositoryModelLoadResponse*) {
  if (auto refused = refuse(*ctx, true, false)) return finish(ctx, std::move(*refused));
  ServerUnaryReactor* r = ctx->DefaultReactor();
  std::thread([this, req, r] {
    r->Finish(run([&] {
      const std::string& model = model_name(req->model_name(), "the load request");
      const std::string what = "the load request for model '" + model + "'";
      std::string config;
      for (const auto& [key, v] : req->parameters()) {
        if (key != "config") {
          throw Error(ErrorCode::kInvalidArgument, "unsupported parameter '" + key + "' in " + what,
                      "glassbox loads model files from the repository; only 'config' (the model configuration as a "
                      "JSON string) is accepted");
        }
        GB_CHECK(v.parameter_choice_case() == inference::ModelRepositoryParameter::kStringParam, InvalidArgument,
                 "parameter 'config' of " << what << " must be a string holding JSON", std::string());
        config = v.string_param();
      }
      engine_.load_model(model, config);
    }));
  }).detach();
  return r;
}

ServerUnaryReactor* InferenceService::RepositoryModelUnload(CallbackServerContext* ctx,
                                                            const inference::RepositoryModelUnloadRequest* req,
                                                            inference::RepositoryModelUnloadResponse*) {
  if (auto refused = refuse(*ctx, true, false)) return finish(ctx, std::move(*refused));
  ServerUnaryReactor* r = ctx->DefaultReactor();
  std::thread([this, req, r] {
    r->Finish(run([&] {
      const std::string& model = model_name(req->model_name(), "the unload request");
      const std::string what = "the unload request for model '" + model + "'";
      for (const auto& [key, v] : req->parameters()) {
        if (key != "unload_dependents") {
          throw Error(ErrorCode::kInvalidArgument, "unsupported parameter '" + key + "' in " + what,
                      "only 'unload_dependents' is accepted");
        }
        GB_CHECK(v.parameter_choice_case() == inference::ModelRepositoryParameter::kBoolParam, InvalidArgument,
                 "parameter 'unload_dependents' of " << what << " must be true or false", std::string());
      }
      engine_.unload_model(model);
    }));
  }).detach();
  return r;
}

}  // namespace glassbox::serve
