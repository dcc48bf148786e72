// ModelStreamInfer over a real socket with a FakeEngine: answers carry their request's id, a bad
// request is answered in-band and the stream stays open, answers come in completion order, the
// API key, and a stream cancelled while requests are held.
#include <memory>
#include <set>

#include <gtest/gtest.h>

#include "glassbox/serve/grpc/grpc_fixture_test.h"

namespace glassbox::serve {
namespace {

using testing::FakeEngine;
using testing::floats_of;
using testing::fp32_request;
using testing::GrpcTestClient;
using Stream = grpc::ClientReaderWriter<inference::ModelInferRequest, inference::ModelStreamInferResponse>;

class GrpcStreamTest : public testing::GrpcServerFixture {};

TEST_F(GrpcStreamTest, AnInBandErrorLeavesTheStreamOpen) {
  auto ctx = GrpcTestClient::context();
  std::unique_ptr<Stream> s = client_->stub->ModelStreamInfer(ctx.get());
  ASSERT_TRUE(s->Write(fp32_request("mlp", {1, 2}, {1, 2}, "a")));
  inference::ModelInferRequest bad = fp32_request("mlp", {1, 2}, {1, 2}, "b");
  bad.mutable_inputs(0)->set_datatype("FP33");
  ASSERT_TRUE(s->Write(bad));
  ASSERT_TRUE(s->Write(fp32_request("error_ResourceExhausted", {1}, {1}, "c")));
  ASSERT_TRUE(s->Write(fp32_request("mlp", {1, 1}, {7}, "d")));
  std::map<std::string, inference::ModelStreamInferResponse> got;
  inference::ModelStreamInferResponse r;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(s->Read(&r));
    got[r.infer_response().id()] = r;
  }
  ASSERT_TRUE(s->WritesDone());
  EXPECT_FALSE(s->Read(&r));
  grpc::Status status = s->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();

  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got["a"].error_message(), "");
  EXPECT_EQ(floats_of(got["a"].infer_response().raw_output_contents(0)), (std::vector<float>{1, 2}));
  EXPECT_EQ(
      got["b"].error_message(),
      "input 'INPUT__0' of model 'mlp' has unknown datatype 'FP33' (hint: use one of BOOL, UINT8, UINT16, UINT32, "
      "UINT64, INT8, INT16, INT32, INT64, FP16, FP32, FP64, BF16, BYTES)");
  EXPECT_EQ(got["c"].error_message(), "fake failure error_ResourceExhausted (hint: fake hint)");
  EXPECT_EQ(got["c"].infer_response().model_name(), "error_ResourceExhausted");
  EXPECT_EQ(got["d"].error_message(), "");
  EXPECT_EQ(floats_of(got["d"].infer_response().raw_output_contents(0)), (std::vector<float>{7}));
}

TEST_F(GrpcStreamTest, AnswersComeAsTheyCompleteWhileReadsGoOn) {
  engine_.mode = FakeEngine::Mode::kHold;
  auto ctx = GrpcTestClient::context();
  std::unique_ptr<Stream> s = client_->stub->ModelStreamInfer(ctx.get());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s->Write(fp32_request("mlp", {1, 1}, {float(i)}, std::to_string(i))));
  ASSERT_TRUE(engine_.wait_held(3));  // all three read before any was answered
  engine_.complete_all();
  std::set<std::string> ids;
  inference::ModelStreamInferResponse r;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(s->Read(&r));
    EXPECT_EQ(r.error_message(), "");
    ids.insert(r.infer_response().id());
  }
  EXPECT_EQ(ids, (std::set<std::string>{"0", "1", "2"}));
  // Half-closing with a request still held: the stream ends after its answer.
  ASSERT_TRUE(s->Write(fp32_request("mlp", {1, 1}, {9}, "last")));
  ASSERT_TRUE(engine_.wait_held(1));
  ASSERT_TRUE(s->WritesDone());
  engine_.complete_all();
  ASSERT_TRUE(s->Read(&r));
  EXPECT_EQ(r.infer_response().id(), "last");
  EXPECT_FALSE(s->Read(&r));
  EXPECT_TRUE(s->Finish().ok());
}

TEST_F(GrpcStreamTest, ProtectedInferenceRefusesAStreamWithoutTheKey) {
  GrpcOptions o;
  o.address = "127.0.0.1";
  o.port = 0;
  o.api_key = "s3cret-key";
  o.protect_inference = true;
  server_->stop();
  start(o);
  auto ctx = GrpcTestClient::context();
  std::unique_ptr<Stream> s = client_->stub->ModelStreamInfer(ctx.get());
  s->Write(fp32_request("mlp", {1, 1}, {1}));
  inference::ModelStreamInferResponse r;
  EXPECT_FALSE(s->Read(&r));
  EXPECT_EQ(s->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);

  auto ctx2 = GrpcTestClient::context({{"authorization", "Bearer s3cret-key"}});
  s = client_->stub->ModelStreamInfer(ctx2.get());
  ASSERT_TRUE(s->Write(fp32_request("mlp", {1, 1}, {1}, "ok")));
  ASSERT_TRUE(s->Read(&r));
  EXPECT_EQ(r.infer_response().id(), "ok");
  s->WritesDone();
  EXPECT_TRUE(s->Finish().ok());
}

TEST_F(GrpcStreamTest, ACancelledStreamDropsItsLateAnswers) {
  engine_.mode = FakeEngine::Mode::kHold;
  auto ctx = GrpcTestClient::context();
  std::unique_ptr<Stream> s = client_->stub->ModelStreamInfer(ctx.get());
  ASSERT_TRUE(s->Write(fp32_request("mlp", {1, 1}, {1}, "x")));
  ASSERT_TRUE(engine_.wait_held(1));
  ctx->TryCancel();
  EXPECT_EQ(s->Finish().error_code(), grpc::StatusCode::CANCELLED);
  engine_.complete_all();  // after the client went away
  server_->stop(std::chrono::seconds(5));
}

}  // namespace
}  // namespace glassbox::serve
