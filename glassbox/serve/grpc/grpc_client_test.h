// A grpc++ client for the gRPC front end's tests (test-only header): a channel to 127.0.0.1:PORT
// with tritonclient's message limits (INT_MAX both ways), a stub, and helpers that build requests.
//
//   GrpcTestClient c(server.port());
//   inference::ModelInferResponse r;
//   grpc::Status s = c.infer(fp32_request("mlp", {1, 4}, {1, 2, 3, 4.5f}), r);
//
// Thread safety: the stub may be used from any number of threads at once.
#pragma once

#include <climits>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "glassbox/serve/grpc/proto/grpc_service.grpc.pb.h"

namespace glassbox::serve::testing {

class GrpcTestClient {
 public:
  explicit GrpcTestClient(int port) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(INT_MAX);
    args.SetMaxSendMessageSize(INT_MAX);
    channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args);
    stub = inference::GRPCInferenceService::NewStub(channel);
  }

  // A context with optional metadata and a 30 s deadline (a hung server fails the test, not CI).
  static std::unique_ptr<grpc::ClientContext> context(const std::map<std::string, std::string>& metadata = {}) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    for (const auto& [k, v] : metadata) ctx->AddMetadata(k, v);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return ctx;
  }

  grpc::Status infer(const inference::ModelInferRequest& req, inference::ModelInferResponse& resp,
                     const std::map<std::string, std::string>& metadata = {}) {
    return stub->ModelInfer(context(metadata).get(), req, &resp);
  }

  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub;
};

inline std::string raw_floats(const std::vector<float>& v) {
  std::string s(v.size() * sizeof(float), '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

inline std::vector<float> floats_of(const std::string& raw) {
  std::vector<float> v(raw.size() / sizeof(float));
  std::memcpy(v.data(), raw.data(), v.size() * sizeof(float));
  return v;
}

// One FP32 input INPUT__0 of `shape` sent in raw_input_contents.
inline inference::ModelInferRequest fp32_request(const std::string& model, std::initializer_list<std::int64_t> shape,
                                                 const std::vector<float>& values, const std::string& id = "") {
  inference::ModelInferRequest r;
  r.set_model_name(model);
  r.set_id(id);
  auto* in = r.add_inputs();
  in->set_name("INPUT__0");
  in->set_datatype("FP32");
  for (std::int64_t d : shape) in->add_shape(d);
  r.add_raw_input_contents(raw_floats(values));
  return r;
}

}  // namespace glassbox::serve::testing
