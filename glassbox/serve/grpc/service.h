// The GRPCInferenceService implementation (grpc++ callback API) behind GrpcServer: one method per
// RPC, answering from the engine (api.h) with the HTTP front end's semantics (routes.h): the same
// metadata, configuration, statistics, repository index and control, error messages and API key
// rules; glassbox error codes become gRPC status codes once (codec.h).
//
//   InferenceService service(engine, options);
//   grpc::ServerBuilder b;
//   b.RegisterService(&service);            // ModelInfer's messages come from service's allocator
//
// ModelInfer: the request and response messages come from a MessageAllocator whose holder keeps
// them in one shared block, so the input tensors handed to the engine view the received bytes
// without copying and stay valid however long the engine keeps them (the payload log may). The
// call finishes from the engine's callback; a call cancelled first (client deadline, server
// shutdown) is finished as CANCELLED and the late answer dropped. ModelStreamInfer: stream.cpp.
// API key (options.api_key non-empty): metadata `authorization: Bearer KEY` or `x-api-key: KEY`,
// compared in constant time; RepositoryIndex/ModelLoad/ModelUnload need it, and with
// protect_inference every RPC but ServerLive and ServerReady does. Missing: UNAUTHENTICATED;
// wrong: PERMISSION_DENIED.
//
// Thread safety: methods run on gRPC's threads, any number at once; the service holds no mutable
// state. Ownership: the engine is borrowed and must outlive the server.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <grpcpp/grpcpp.h>

#include "glassbox/serve/engine/api.h"
#include "glassbox/serve/grpc/options.h"
#include "glassbox/serve/grpc/proto/grpc_service.grpc.pb.h"

namespace glassbox::serve {

// Compares two keys in time that depends only on the length of `expected`.
bool api_keys_equal(std::string_view given, std::string_view expected);

// Empty when the call may go on; otherwise UNAUTHENTICATED / PERMISSION_DENIED.
std::optional<grpc::Status> check_api_key(const grpc::CallbackServerContext& ctx, const std::string& key);

// A ModelStreamInfer call (stream.cpp): reads requests, answers each as it completes.
grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>* start_stream(
    Engine& engine, std::optional<grpc::Status> refused);

class InferenceService final : public inference::GRPCInferenceService::CallbackService {
 public:
  InferenceService(Engine& engine, const GrpcOptions& options);
  ~InferenceService() override;

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* ctx, const inference::ServerLiveRequest* req,
                                       inference::ServerLiveResponse* resp) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* ctx, const inference::ServerReadyRequest* req,
                                        inference::ServerReadyResponse* resp) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* ctx, const inference::ModelReadyRequest* req,
                                       inference::ModelReadyResponse* resp) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* ctx,
                                           const inference::ServerMetadataRequest* req,
                                           inference::ServerMetadataResponse* resp) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* ctx, const inference::ModelMetadataRequest* req,
                                          inference::ModelMetadataResponse* resp) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* ctx, const inference::ModelInferRequest* req,
                                       inference::ModelInferResponse* resp) override;
  grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>* ModelStreamInfer(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* ctx, const inference::ModelConfigRequest* req,
                                        inference::ModelConfigResponse* resp) override;
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* ctx,
                                            const inference::ModelStatisticsRequest* req,
                                            inference::ModelStatisticsResponse* resp) override;
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* ctx,
                                            const inference::RepositoryIndexRequest* req,
                                            inference::RepositoryIndexResponse* resp) override;
  grpc::ServerUnaryReactor* RepositoryModelLoad(grpc::CallbackServerContext* ctx,
                                                const inference::RepositoryModelLoadRequest* req,
                                                inference::RepositoryModelLoadResponse* resp) override;
  grpc::ServerUnaryReactor* RepositoryModelUnload(grpc::CallbackServerContext* ctx,
                                                  const inference::RepositoryModelUnloadRequest* req,
                                                  inference::RepositoryModelUnloadResponse* resp) override;

 private:
  // The engine's version for a request's version string (Error for one that names version 0).
  std::int64_t version_of(const std::string& version, const std::string& model) const;
  // Refusal for an RPC (control: a repository RPC; health: ServerLive/ServerReady).
  std::optional<grpc::Status> refuse(const grpc::CallbackServerContext& ctx, bool control, bool health) const;

  Engine& engine_;
  GrpcOptions options_;
  struct Allocator;
  std::unique_ptr<Allocator> allocator_;
};

}  // namespace glassbox::serve
