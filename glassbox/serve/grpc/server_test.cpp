// GrpcServer over a real socket with a FakeEngine and a grpc++ stub: every unary RPC, error codes
// and messages, the API key on repository RPCs, the message size limit, concurrency with
// asynchronous answers, and stop() with a call in flight.
#include "glassbox/serve/grpc/server.h"

#include <atomic>
#include <future>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include "glassbox/serve/grpc/grpc_fixture_test.h"

namespace glassbox::serve {
namespace {

using testing::FakeEngine;
using testing::floats_of;
using testing::fp32_request;
using testing::GrpcServerFixture;
using testing::GrpcTestClient;
using testing::test_options;

class GrpcServerTest : public GrpcServerFixture {
 protected:
  template <typename Req, typename Resp, typename Method>
  grpc::Status call(Method method, const Req& req, Resp& resp, const std::map<std::string, std::string>& md = {}) {
    auto ctx = GrpcTestClient::context(md);
    return ((*client_->stub).*method)(ctx.get(), req, &resp);
  }
};

using Stub = inference::GRPCInferenceService::Stub;

TEST_F(GrpcServerTest, Health) {
  inference::ServerLiveResponse live;
  ASSERT_TRUE(call(&Stub::ServerLive, inference::ServerLiveRequest(), live).ok());
  EXPECT_TRUE(live.live());
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(call(&Stub::ServerReady, inference::ServerReadyRequest(), ready).ok());
  EXPECT_TRUE(ready.ready());
  engine_.is_ready = false;
  ASSERT_TRUE(call(&Stub::ServerReady, inference::ServerReadyRequest(), ready).ok());
  EXPECT_FALSE(ready.ready());

  inference::ModelReadyRequest mr;
  inference::ModelReadyResponse mready;
  mr.set_name("mlp");
  ASSERT_TRUE(call(&Stub::ModelReady, mr, mready).ok());
  EXPECT_TRUE(mready.ready());
  mr.set_name("down");
  ASSERT_TRUE(call(&Stub::ModelReady, mr, mready).ok());
  EXPECT_FALSE(mready.ready());
  mr.set_name("nope");
  EXPECT_EQ(call(&Stub::ModelReady, mr, mready).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(GrpcServerTest, ServerAndModelMetadata) {
  inference::ServerMetadataResponse sm;
  ASSERT_TRUE(call(&Stub::ServerMetadata, inference::ServerMetadataRequest(), sm).ok());
  EXPECT_EQ(sm.name(), "glassbox");
  EXPECT_EQ(sm.version(), "0.6.0");
  EXPECT_EQ(sm.extensions_size(), 3);

  inference::ModelMetadataRequest req;
  inference::ModelMetadataResponse m;
  req.set_name("mlp");
  ASSERT_TRUE(call(&Stub::ModelMetadata, req, m).ok());
  EXPECT_EQ(m.name(), "mlp");
  ASSERT_EQ(m.versions_size(), 2);
  EXPECT_EQ(m.platform(), "pytorch_libtorch");
  ASSERT_EQ(m.inputs_size(), 1);
  EXPECT_EQ(m.inputs(0).name(), "INPUT__0");
  EXPECT_EQ(m.inputs(0).datatype(), "FP32");
  EXPECT_EQ(m.inputs(0).shape(0), -1);
  EXPECT_EQ(m.outputs(0).name(), "OUTPUT__0");

  req.set_name("nope");
  grpc::Status s = call(&Stub::ModelMetadata, req, m);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "unknown model 'nope' (hint: GET /v2/repository/index lists the models)");
  req.set_name("mlp");
  req.set_version("3");
  EXPECT_EQ(call(&Stub::ModelMetadata, req, m).error_code(), grpc::StatusCode::NOT_FOUND);
  req.set_version("v1");
  s = call(&Stub::ModelMetadata, req, m);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("model version 'v1' of model 'mlp' is not a decimal number"), std::string::npos);
}

TEST_F(GrpcServerTest, ConfigStatisticsIndex) {
  inference::ModelConfigRequest cr;
  inference::ModelConfigResponse c;
  cr.set_name("mlp");
  ASSERT_TRUE(call(&Stub::ModelConfig, cr, c).ok());
  EXPECT_EQ(c.config().name(), "mlp");
  EXPECT_EQ(c.config().max_batch_size(), 8);

  inference::ModelStatisticsRequest sr;
  inference::ModelStatisticsResponse st;
  sr.set_name("mlp");
  sr.set_version("2");
  ASSERT_TRUE(call(&Stub::ModelStatistics, sr, st).ok());
  ASSERT_EQ(st.model_stats_size(), 1);
  EXPECT_EQ(st.model_stats(0).version(), "2");
  EXPECT_EQ(st.model_stats(0).inference_count(), 7u);
  EXPECT_EQ(st.model_stats(0).execution_count(), 3u);
  EXPECT_EQ(st.model_stats(0).inference_stats().success().count(), 7u);
  EXPECT_EQ(st.model_stats(0).inference_stats().queue().ns(), 700u);

  inference::RepositoryIndexRequest ir;
  inference::RepositoryIndexResponse idx;
  ASSERT_TRUE(call(&Stub::RepositoryIndex, ir, idx).ok());
  ASSERT_EQ(idx.models_size(), 2);
  EXPECT_EQ(idx.models(1).name(), "broken");
  EXPECT_EQ(idx.models(1).state(), "UNAVAILABLE");
  EXPECT_EQ(idx.models(1).reason(), "no config.pbtxt");
  ir.set_ready(true);
  ASSERT_TRUE(call(&Stub::RepositoryIndex, ir, idx).ok());
  EXPECT_EQ(idx.models_size(), 1);
  EXPECT_TRUE(engine_.last_index_ready_only);
}

TEST_F(GrpcServerTest, RepositoryControlNeedsTheApiKey) {
  GrpcOptions o = test_options();
  o.api_key = "s3cret-key";
  start(o);
  inference::RepositoryModelLoadRequest lr;
  inference::RepositoryModelLoadResponse lresp;
  lr.set_model_name("mlp");
  grpc::Status s = call(&Stub::RepositoryModelLoad, lr, lresp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(s.error_message().find("requires an API key"), std::string::npos);
  s = call(&Stub::RepositoryModelLoad, lr, lresp, {{"authorization", "Bearer wrong-key"}});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(s.error_message().find("invalid API key"), std::string::npos);
  inference::RepositoryIndexResponse idx;
  EXPECT_EQ(
      call(&Stub::RepositoryIndex, inference::RepositoryIndexRequest(), idx, {{"x-api-key", "nope"}}).error_code(),
      grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(engine_.loads.empty());

  (*lr.mutable_parameters())["config"].set_string_param(R"({"max_batch_size": 4})");
  ASSERT_TRUE(call(&Stub::RepositoryModelLoad, lr, lresp, {{"authorization", "Bearer s3cret-key"}}).ok());
  ASSERT_EQ(engine_.loads.size(), 1u);
  EXPECT_EQ(engine_.loads[0].first, "mlp");
  EXPECT_EQ(engine_.loads[0].second, R"({"max_batch_size": 4})");

  inference::RepositoryModelUnloadRequest ur;
  inference::RepositoryModelUnloadResponse uresp;
  ur.set_model_name("mlp");
  (*ur.mutable_parameters())["unload_dependents"].set_bool_param(false);
  ASSERT_TRUE(call(&Stub::RepositoryModelUnload, ur, uresp, {{"x-api-key", "s3cret-key"}}).ok());
  ASSERT_EQ(engine_.unloads.size(), 1u);

  (*lr.mutable_parameters())["file:1/model.pt"].set_bytes_param("x");
  s = call(&Stub::RepositoryModelLoad, lr, lresp, {{"x-api-key", "s3cret-key"}});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("unsupported parameter 'file:1/model.pt' in the load request for model 'mlp'"),
            std::string::npos);
  // Inference and metadata stay open without protect_inference.
  inference::ModelInferResponse r;
  EXPECT_TRUE(client_->infer(fp32_request("mlp", {1, 1}, {1}), r).ok());
}

TEST_F(GrpcServerTest, ProtectInferenceLeavesHealthOpen) {
  GrpcOptions o = test_options();
  o.api_key = "s3cret-key";
  o.protect_inference = true;
  start(o);
  inference::ServerLiveResponse live;
  EXPECT_TRUE(call(&Stub::ServerLive, inference::ServerLiveRequest(), live).ok());
  inference::ModelInferResponse r;
  EXPECT_EQ(client_->infer(fp32_request("mlp", {1, 1}, {1}), r).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(client_->infer(fp32_request("mlp", {1, 1}, {1}), r, {{"authorization", "Bearer s3cret-key"}}).ok());
  inference::ServerMetadataResponse sm;
  EXPECT_EQ(call(&Stub::ServerMetadata, inference::ServerMetadataRequest(), sm).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(GrpcServerTest, InferEchoesRawTensors) {
  inference::ModelInferRequest req = fp32_request("mlp", {1, 4}, {1, 2, 3, 4.5f}, "r1");
  (*req.mutable_parameters())["priority"].set_uint64_param(2);
  (*req.mutable_parameters())["timeout"].set_int64_param(5000);
  (*req.mutable_parameters())["binary_data_output"].set_bool_param(true);
  inference::ModelInferResponse r;
  ASSERT_TRUE(client_->infer(req, r).ok());
  EXPECT_EQ(r.model_name(), "mlp");
  EXPECT_EQ(r.model_version(), "1");
  EXPECT_EQ(r.id(), "r1");
  ASSERT_EQ(r.outputs_size(), 1);
  EXPECT_EQ(r.outputs(0).name(), "OUTPUT__0");
  EXPECT_EQ(r.outputs(0).datatype(), "FP32");
  EXPECT_EQ(std::vector<std::int64_t>(r.outputs(0).shape().begin(), r.outputs(0).shape().end()),
            (std::vector<std::int64_t>{1, 4}));
  ASSERT_EQ(r.raw_output_contents_size(), 1);
  EXPECT_EQ(floats_of(r.raw_output_contents(0)), (std::vector<float>{1, 2, 3, 4.5f}));
  ASSERT_EQ(engine_.seen.size(), 1u);
  EXPECT_EQ(engine_.seen[0].priority, 2u);
  EXPECT_EQ(engine_.seen[0].timeout_us, 5000u);

  // A requested output that is not there: the engine decides (the fake leaves it out).
  req.add_outputs()->set_name("OUTPUT__7");
  ASSERT_TRUE(client_->infer(req, r).ok());
  EXPECT_EQ(r.outputs_size(), 0);
  EXPECT_EQ(engine_.seen[1].outputs.size(), 1u);
}

TEST_F(GrpcServerTest, InferErrorsAreStatusCodesWithTheHttpMessages) {
  inference::ModelInferRequest req = fp32_request("mlp", {1, 4}, {1, 2, 3});
  inference::ModelInferResponse r;
  grpc::Status s = client_->infer(req, r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "input 'INPUT__0' of model 'mlp' has 12 bytes of raw_input_contents but shape [1,4] of FP32 needs 16 "
            "(hint: raw_input_contents must hold the element count times the element size)");
  EXPECT_EQ(engine_.infer_calls(), 0u);

  const std::pair<const char*, grpc::StatusCode> cases[] = {
      {"error_ResourceExhausted", grpc::StatusCode::UNAVAILABLE},
      {"error_Unavailable", grpc::StatusCode::UNAVAILABLE},
      {"error_FailedPrecondition", grpc::StatusCode::FAILED_PRECONDITION},
      {"error_NotFound", grpc::StatusCode::NOT_FOUND},
      {"error_Internal", grpc::StatusCode::INTERNAL},
  };
  for (const auto& [model, code] : cases) {
    s = client_->infer(fp32_request(model, {1}, {1}), r);
    EXPECT_EQ(s.error_code(), code) << model;
    EXPECT_EQ(s.error_message(), std::string("fake failure ") + model + " (hint: fake hint)");
  }
}

TEST_F(GrpcServerTest, ConcurrentCallsAnsweredFromTheEngineThread) {
  engine_.mode = FakeEngine::Mode::kThread;
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const float v = static_cast<float>(t * 1000 + i);
        inference::ModelInferResponse r;
        if (client_->infer(fp32_request("mlp", {1, 2}, {v, -v}), r).ok() &&
            floats_of(r.raw_output_contents(0)) == std::vector<float>{v, -v}) {
          ++ok;
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(ok.load(), 200);
}

TEST_F(GrpcServerTest, TenMebibyteRequestsPassTheRaisedLimit) {
  engine_.record = false;
  std::vector<float> big(10 << 18);  // 10 MiB of floats
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 1000);
  inference::ModelInferResponse r;
  const auto req = fp32_request("mlp", {1, static_cast<std::int64_t>(big.size())}, big);
  ASSERT_TRUE(client_->infer(req, r).ok());
  EXPECT_EQ(r.raw_output_contents(0).size(), big.size() * 4);
  EXPECT_EQ(floats_of(r.raw_output_contents(0)), big);

  // gRPC's default (4 MiB) refuses it.
  GrpcOptions o = test_options();
  o.max_receive_bytes = 4 << 20;
  start(o);
  EXPECT_EQ(client_->infer(req, r).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(GrpcServerTest, StopLetsACallInFlightFinish) {
  engine_.mode = FakeEngine::Mode::kHold;
  auto answer = std::async(std::launch::async, [&] {
    inference::ModelInferResponse r;
    grpc::Status s = client_->infer(fp32_request("mlp", {1, 1}, {42}, "late"), r);
    return std::make_pair(s, r);
  });
  ASSERT_TRUE(engine_.wait_held(1));
  auto stopped = std::async(std::launch::async, [&] { server_->stop(std::chrono::seconds(10)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(stopped.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);  // waits for the call
  engine_.complete_all();
  stopped.get();
  auto [status, r] = answer.get();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(r.id(), "late");
  EXPECT_EQ(floats_of(r.raw_output_contents(0)), std::vector<float>{42});
}

TEST_F(GrpcServerTest, StopCancelsACallStillInFlightAtTheDeadline) {
  engine_.mode = FakeEngine::Mode::kHold;
  auto answer = std::async(std::launch::async, [&] {
    inference::ModelInferResponse r;
    return client_->infer(fp32_request("mlp", {1, 1}, {1}), r);
  });
  ASSERT_TRUE(engine_.wait_held(1));
  const auto t0 = std::chrono::steady_clock::now();
  server_->stop(std::chrono::milliseconds(300));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_FALSE(answer.get().ok());
  server_.reset();
  engine_.complete_all();  // the late answer is dropped: the request block outlives the call
}

TEST_F(GrpcServerTest, PortInUseIsUnavailable) {
  GrpcOptions o = test_options();
  o.port = server_->port();
  GrpcServer second(engine_, o);
  try {
    second.start();
    FAIL() << "a second server bound port " << o.port;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    EXPECT_NE(e.message().find("port " + std::to_string(o.port) + " is in use on 127.0.0.1"), std::string::npos);
    EXPECT_NE(e.hint().find("--grpc-port"), std::string::npos);
  }
}

TEST(GrpcOptions, Validate) {
  GrpcOptions o;
  EXPECT_NO_THROW(o.validate());
  o.port = 70000;
  EXPECT_THROW(o.validate(), Error);
  o = GrpcOptions();
  o.protect_inference = true;
  EXPECT_THROW(o.validate(), Error);
  o = GrpcOptions();
  o.keepalive_time = std::chrono::milliseconds(0);
  EXPECT_THROW(o.validate(), Error);
}

}  // namespace
}  // namespace glassbox::serve
