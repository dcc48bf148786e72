// Rpcs: GRPCInferenceService's twelve RPCs, independent of the transport that carries them
// (connection.h). Each takes a serialized request and answers through a callback, with the HTTP
// front end's semantics (routes.h): the same metadata, configuration, statistics, repository
// index and control, error messages and API key rules; glassbox error codes become gRPC status
// codes once (codec.h).
//
//   Rpcs rpcs(engine, options);
//   std::optional<Rpc> rpc = find_rpc("/inference.GRPCInferenceService/ModelInfer");
//   if (auto refused = rpcs.refuse(*rpc, metadata)) ...              // the API key
//   rpcs.unary(*rpc, std::move(bytes), [](Answer a) { ... });         // exactly once
//   rpcs.stream_request(std::move(bytes), [](Answer a) { ... });      // ModelStreamInfer, per request
//
// Answers: ModelInfer answers from the engine's thread, model load/unload from a thread of their
// own, every other RPC before unary() returns. An answer's message is produced by
// Answer::serialize on the caller's chosen thread (the transport's), so the engine's thread only
// hands the outcome over. ModelInfer's input tensors are views into the parsed request, which
// stays alive as long as the engine holds them (the payload log may hold them after the answer).
// A stream request that fails (decoding, validation, the model) is answered in-band with
// error_message, and the stream goes on.
// API key (options.api_key non-empty): metadata `authorization: Bearer KEY` or `x-api-key: KEY`,
// compared in constant time; RepositoryIndex/ModelLoad/ModelUnload need it, and with
// protect_inference every RPC but ServerLive and ServerReady does. Missing: UNAUTHENTICATED;
// wrong: PERMISSION_DENIED.
//
// Thread safety: every member may be called from any number of threads at once. Ownership: the
// engine is borrowed and must outlive this object; the destructor waits for model loads and
// unloads still running.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <grpcpp/support/status.h>

#include "glassbox/serve/engine/api.h"
#include "glassbox/serve/grpc/options.h"

namespace glassbox::serve {

enum class Rpc {
  kServerLive,
  kServerReady,
  kModelReady,
  kServerMetadata,
  kModelMetadata,
  kModelInfer,
  kModelStreamInfer,
  kModelConfig,
  kModelStatistics,
  kRepositoryIndex,
  kRepositoryModelLoad,
  kRepositoryModelUnload,
};

// The RPC a request path names ("/inference.GRPCInferenceService/ModelInfer"); nullopt otherwise.
std::optional<Rpc> find_rpc(std::string_view path);

// Call metadata as received (lower-case names).
using Metadata = std::vector<std::pair<std::string, std::string>>;

// Compares two keys in time that depends only on the length of `expected`.
bool api_keys_equal(std::string_view given, std::string_view expected);
// Empty when the metadata carries `key`; otherwise UNAUTHENTICATED / PERMISSION_DENIED.
std::optional<grpc::Status> check_api_key(const Metadata& metadata, const std::string& key);

struct Answer {
  grpc::Status status;  // not OK: the call ends with it (a stream's answers are always OK)
  // OK: appends the serialized response message to its argument; a failure there is the call's
  // status instead (INTERNAL).
  std::function<grpc::Status(std::string&)> serialize;
};
using Reply = std::function<void(Answer)>;

class Rpcs {
 public:
  Rpcs(Engine& engine, const GrpcOptions& options);
  // Waits for model loads and unloads still running (they use the engine).
  ~Rpcs();
  Rpcs(const Rpcs&) = delete;
  Rpcs& operator=(const Rpcs&) = delete;

  // The API key's verdict for `rpc`.
  std::optional<grpc::Status> refuse(Rpc rpc, const Metadata& metadata) const;
  // A unary RPC (not kModelStreamInfer) on its serialized request; `reply` runs exactly once.
  void unary(Rpc rpc, std::string request, Reply reply);
  // One request of a ModelStreamInfer stream; `reply` runs exactly once with a
  // ModelStreamInferResponse (errors in-band).
  void stream_request(std::string request, Reply reply);

  struct Background;  // model loads and unloads on threads of their own (rpcs.cpp)

 private:
  Engine& engine_;
  GrpcOptions options_;
  std::shared_ptr<Background> background_;
};

}  // namespace glassbox::serve
