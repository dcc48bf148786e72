// The gRPC front end's test fixture (test-only header): a GrpcServer on 127.0.0.1, any free port,
// over a FakeEngine, with a grpc++ client to it; start(options) restarts the server with others.
//
//   class MyTest : public testing::GrpcServerFixture {};
//   TEST_F(MyTest, X) { engine_.mode = FakeEngine::Mode::kHold; client_->infer(...); }
//
// Thread safety: the tests' thread only.
#pragma once

#include <memory>

#include <gtest/gtest.h>

#include "glassbox/serve/engine/fake_engine_test.h"
#include "glassbox/serve/grpc/grpc_client_test.h"
#include "glassbox/serve/grpc/server.h"

namespace glassbox::serve::testing {

inline GrpcOptions test_options() {
  GrpcOptions o;
  o.address = "127.0.0.1";
  o.port = 0;
  return o;
}

class GrpcServerFixture : public ::testing::Test {
 protected:
  void start(GrpcOptions o = test_options()) {
    if (server_) server_->stop();
    server_ = std::make_unique<GrpcServer>(engine_, o);
    server_->start();
    client_ = std::make_unique<GrpcTestClient>(server_->port());
  }
  void SetUp() override { start(); }
  void TearDown() override {
    if (server_) server_->stop();
  }

  FakeEngine engine_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<GrpcTestClient> client_;
};

}  // namespace glassbox::serve::testing
