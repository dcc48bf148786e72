// HttpServer over real sockets with a FakeEngine: every route and status code, keep-alive,
// concurrency, asynchronous answers, limits, content codings, the API key, stop() semantics.
#include "glassbox/serve/http/server.h"

#include <zlib.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "glassbox/serve/engine/fake_engine_test.h"
#include "glassbox/serve/http/compression.h"
#include "glassbox/serve/http/http_client_test.h"
#include "glassbox/serve/http/routes.h"

namespace glassbox::serve {
namespace {

using testing::FakeEngine;
using testing::Headers;
using testing::TestClient;
using testing::TestResponse;
using json = nlohmann::json;

HttpOptions test_options() {
  HttpOptions o;
  o.address = "127.0.0.1";
  o.http_port = 0;
  o.metrics_port = 0;
  o.threads = 2;
  return o;
}

class ServerTest : public ::testing::Test {
 protected:
  void start(HttpOptions o = test_options()) {
    server_ = std::make_unique<HttpServer>(engine_, o);
    server_->start();
    port_ = server_->http_port();
  }
  void SetUp() override { start(); }
  void TearDown() override {
    if (server_) server_->stop();
  }
  TestResponse call(const std::string& method, const std::string& target, std::string body = {},
                    const Headers& h = {}) {
    return testing::http_call(port_, method, target, std::move(body), h);
  }

  FakeEngine engine_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

const std::string kInfer =
    R"({"id":"r1","inputs":[{"name":"INPUT__0","datatype":"FP32","shape":[1,4],"data":[[1,2,3,4.5]]}]})";
const std::string kInferAnswer =
    R"({"model_name":"mlp","model_version":"1","id":"r1","outputs":[{"name":"OUTPUT__0","datatype":"FP32",)"
    R"("shape":[1,4],"data":[1,2,3,4.5]}]})";

TEST_F(ServerTest, Health) {
  TestResponse r = call("GET", "/v2/health/live");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(r.header("content-length"), "0");
  EXPECT_EQ(call("GET", "/v2/health/ready").status, 200);
  engine_.is_ready = false;
  r = call("GET", "/v2/health/ready");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body, R"({"error":"server is not ready"})");
  engine_.is_live = false;
  EXPECT_EQ(call("GET", "/v2/health/live").status, 400);
}

TEST_F(ServerTest, ServerAndModelMetadata) {
  TestResponse r = call("GET", "/v2");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_EQ(
      json::parse(r.body),
      json::parse(
          R"({"name":"glassbox","version":"0.6.0","extensions":["binary_tensor_data","statistics","model_repository"]})"));
  r = call("GET", "/v2/models/mlp");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body), json::parse(R"({"name":"mlp","versions":["1","2"],"platform":"pytorch_libtorch",
      "inputs":[{"name":"INPUT__0","datatype":"FP32","shape":[-1,4]}],
      "outputs":[{"name":"OUTPUT__0","datatype":"FP32","shape":[-1,4]}]})"));
  EXPECT_EQ(call("GET", "/v2/models/mlp/versions/2").status, 200);
  r = call("GET", "/v2/models/mlp/versions/3");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, R"({"error":"model 'mlp' has no version 3"})");
  r = call("GET", "/v2/models/nope");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body, R"j({"error":"unknown model 'nope' (hint: GET /v2/repository/index lists the models)"})j");
  r = call("GET", "/v2/models/mlp/versions/v1");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"],
            "model version 'v1' of model 'mlp' is not a decimal number (hint: versions are the numeric folder names, "
            "e.g. /v2/models/mlp/versions/1)");
  EXPECT_EQ(call("GET", "/v2/models/mlp/versions/-1/ready").status, 400);
  EXPECT_EQ(call("GET", "/v2/models/%6dlp").status, 200);  // percent-encoded name
}

TEST_F(ServerTest, ModelReadyConfigAndStatistics) {
  EXPECT_EQ(call("GET", "/v2/models/mlp/ready").status, 200);
  EXPECT_EQ(call("GET", "/v2/models/mlp/versions/1/ready").status, 200);
  TestResponse r = call("GET", "/v2/models/down/ready");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body, R"({"error":"model 'down' is not ready"})");
  r = call("GET", "/v2/models/mlp/config");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"name":"mlp","max_batch_size":8})");
  r = call("GET", "/v2/models/mlp/versions/2/stats");
  EXPECT_EQ(r.status, 200);
  const json s = json::parse(r.body);
  EXPECT_EQ(s["model_stats"][0]["name"], "mlp");
  EXPECT_EQ(s["model_stats"][0]["version"], "2");
  EXPECT_EQ(s["model_stats"][0]["inference_count"], 7);
  EXPECT_EQ(s["model_stats"][0]["inference_stats"]["success"], json::parse(R"({"count":7,"ns":7000})"));
  EXPECT_EQ(s["model_stats"][0]["inference_stats"]["cache_miss"], json::parse(R"({"count":0,"ns":0})"));
  r = call("GET", "/v2/models/stats");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["model_stats"].size(), 1u);
}

TEST_F(ServerTest, RepositoryControl) {
  TestResponse r = call("POST", "/v2/repository/index");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body), json::parse(R"([{"name":"mlp","version":"1","state":"READY"},
      {"name":"broken","state":"UNAVAILABLE","reason":"no config.pbtxt"}])"));
  EXPECT_FALSE(engine_.last_index_ready_only);
  r = call("POST", "/v2/repository/index", R"({"ready": true})");
  EXPECT_EQ(json::parse(r.body).size(), 1u);
  EXPECT_TRUE(engine_.last_index_ready_only);
  r = call("POST", "/v2/repository/index", R"({"ready": 1})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body, R"({"error":"'ready' of the repository index request must be true or false, got number"})");

  EXPECT_EQ(call("POST", "/v2/repository/models/mlp/load").status, 200);
  r = call("POST", "/v2/repository/models/mlp/load", R"({"parameters":{"config":"{\"max_batch_size\":4}"}})");
  EXPECT_EQ(r.status, 200);
  ASSERT_EQ(engine_.loads.size(), 2u);
  EXPECT_EQ(engine_.loads[0], std::make_pair(std::string("mlp"), std::string()));
  EXPECT_EQ(engine_.loads[1], std::make_pair(std::string("mlp"), std::string(R"({"max_batch_size":4})")));
  r = call("POST", "/v2/repository/models/mlp/load", R"({"parameters":{"file:1/model.pt":"AAAA"}})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"].get<std::string>().rfind(
                "unsupported parameter 'file:1/model.pt' in the load request for model 'mlp' (hint: ", 0),
            0u);
  r = call("POST", "/v2/repository/models/mlp/load", R"({"parameters":{"config":{}}})");
  EXPECT_EQ(
      r.body,
      R"({"error":"parameter 'config' of the load request for model 'mlp' must be a string holding JSON, got object"})");
  EXPECT_EQ(call("POST", "/v2/repository/models/mlp/unload", R"({"parameters":{"unload_dependents":true}})").status,
            200);
  EXPECT_EQ(engine_.unloads, std::vector<std::string>{"mlp"});
  EXPECT_EQ(call("POST", "/v2/repository/models/mlp/unload", "[1]").status, 400);
}

TEST_F(ServerTest, UnknownPathsAndWrongMethods) {
  for (const char* path :
       {"/", "/v1/models", "/v2/", "/v2/health", "/v2/models", "/v2/models/mlp/predict", "/v2/models/mlp/versions",
        "/v2/models/mlp/versions/1/infer/x", "/v2/repository/models/mlp", "/v2//ready", "/metrics"}) {
    TestResponse r = call("GET", path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(r.body, R"({"error":"Not Found"})") << path;
    EXPECT_EQ(r.header("content-type"), "application/json");
  }
  TestResponse r = call("POST", "/v2/health/live");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.header("allow"), "GET, HEAD");
  EXPECT_EQ(r.body, R"({"error":"POST is not allowed on /v2/health/live; use GET"})");
  r = call("GET", "/v2/models/mlp/infer");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.header("allow"), "POST");
  EXPECT_EQ(call("DELETE", "/v2/repository/index").status, 405);
  EXPECT_EQ(call("GET", "/v2/health/live?verbose=1").status, 200);
}

TEST_F(ServerTest, HeadIsGetWithoutTheBody) {
  TestClient c(port_);
  c.expect_head_response(true);
  TestResponse r = c.call("HEAD", "/v2");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "");
  const std::string get_body = call("GET", "/v2").body;
  EXPECT_EQ(r.header("content-length"), std::to_string(get_body.size()));
  EXPECT_EQ(c.call("HEAD", "/v2/health/ready").status, 200);
  EXPECT_EQ(c.call("HEAD", "/v2/models/mlp/infer").status, 405);
  c.expect_head_response(false);
  r = c.call("GET", "/v2");  // the connection is still in step
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, get_body);
}

TEST_F(ServerTest, InferJson) {
  TestResponse r = call("POST", "/v2/models/mlp/infer", kInfer, {{"Content-Type", "application/json"}});
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_EQ(r.header("inference-header-content-length"), "");
  EXPECT_EQ(r.body, kInferAnswer);
  EXPECT_EQ(r.header("content-length"), std::to_string(kInferAnswer.size()));
  r = call("POST", "/v2/models/mlp/versions/2/infer", kInfer);
  EXPECT_EQ(json::parse(r.body)["model_version"], "2");
  r = call("POST", "/v2/models/mlp/infer",
           R"({"inputs":[{"name":"INPUT__0","datatype":"UINT8","shape":[1],"data":[300]}]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body, R"({"error":"element 0 of input 'INPUT__0' of model 'mlp' is 300, out of range for UINT8 [0, 255] )"
                    R"j((hint: send values the datatype holds, or declare a wider datatype)"})j");
}

TEST_F(ServerTest, InferBinaryBothWays) {
  const float in[4] = {1, -2, 3.5f, 4};
  const std::string head =
      R"({"inputs":[{"name":"INPUT__0","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":16}}],)"
      R"("outputs":[{"name":"OUTPUT__0","parameters":{"binary_data":true}}]})";
  TestResponse r = call(
      "POST", "/v2/models/mlp/infer", head + std::string(reinterpret_cast<const char*>(in), 16),
      {{"Inference-Header-Content-Length", std::to_string(head.size())}, {"Content-Type", "application/octet-stream"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "application/octet-stream");
  const std::size_t n = std::stoul(r.header("inference-header-content-length"));
  EXPECT_EQ(json::parse(r.body.substr(0, n)),
            json::parse(R"({"model_name":"mlp","model_version":"1","outputs":[{"name":"OUTPUT__0","datatype":"FP32",)"
                        R"("shape":[1,4],"parameters":{"binary_data_size":16}}]})"));
  EXPECT_EQ(r.body.substr(n), std::string(reinterpret_cast<const char*>(in), 16));
  // The binary input reached the engine as a view into the request body, not a copy.
  ASSERT_EQ(engine_.seen.size(), 1u);
  const Tensor& t = engine_.seen[0].inputs[0];
  const auto* owner = static_cast<const std::string*>(t.owner.get());
  EXPECT_EQ(reinterpret_cast<const char*>(t.data), owner->data() + head.size());

  r = call("POST", "/v2/models/mlp/infer", head + "short",
           {{"Inference-Header-Content-Length", std::to_string(head.size())}});
  EXPECT_EQ(r.status, 400);
  r = call("POST", "/v2/models/mlp/infer", kInfer, {{"Inference-Header-Content-Length", "x"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"].get<std::string>().rfind(
                "Inference-Header-Content-Length must be a non-negative integer, got 'x' (model 'mlp')", 0),
            0u);
}

TEST_F(ServerTest, LargeBinaryTensorsOnAKeepAliveConnection) {
  TestClient c(port_);
  for (std::size_t elements : {std::size_t{1} << 20, std::size_t{3}, std::size_t{100000}}) {
    std::string data(elements * 4, '\0');
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + elements);
    const std::string head = R"({"inputs":[{"name":"INPUT__0","datatype":"FP32","shape":[)" + std::to_string(elements) +
                             R"(],"parameters":{"binary_data_size":)" + std::to_string(data.size()) +
                             R"(}}],"parameters":{"binary_data_output":true}})";
    TestResponse r = c.call("POST", "/v2/models/mlp/infer", head + data,
                            {{"Inference-Header-Content-Length", std::to_string(head.size())}});
    ASSERT_EQ(r.status, 200) << r.body.substr(0, 300);
    const std::size_t n = std::stoul(r.header("inference-header-content-length"));
    EXPECT_EQ(r.body.size(), n + data.size());
    EXPECT_TRUE(r.body.compare(n, std::string::npos, data) == 0) << elements;
  }
}

TEST_F(ServerTest, EngineErrorsMapToStatusCodes) {
  const std::pair<const char*, int> cases[] = {
      {"InvalidArgument", 400},   {"FailedPrecondition", 400}, {"NotFound", 404}, {"AlreadyExists", 409},
      {"ResourceExhausted", 503}, {"Unavailable", 503},        {"Internal", 500}, {"DataLoss", 500},
  };
  for (const auto& [code, status] : cases) {
    TestResponse r = call("POST", std::string("/v2/models/error_") + code + "/infer", kInfer);
    EXPECT_EQ(r.status, status) << code;
    EXPECT_EQ(r.body, std::string(R"({"error":"fake failure error_)") + code + R"j( (hint: fake hint)"})j");
  }
  EXPECT_EQ(http_status(ErrorCode::kUnavailable), 503);
  EXPECT_TRUE(keys_equal("abcdefgh", "abcdefgh"));
  EXPECT_FALSE(keys_equal("abcdefgh", "abcdefgi"));
  EXPECT_FALSE(keys_equal("abcdefg", "abcdefgh"));
  EXPECT_FALSE(keys_equal("abcdefghi", "abcdefgh"));
  EXPECT_FALSE(keys_equal("", "abcdefgh"));
}

TEST_F(ServerTest, KeepAliveServesManyRequestsOnOneConnection) {
  TestClient c(port_);
  ASSERT_TRUE(c.connected());
  for (int i = 0; i < 5; ++i) {
    TestResponse r = c.call("POST", "/v2/models/mlp/infer", kInfer);
    EXPECT_EQ(r.status, 200) << r.error;
    EXPECT_TRUE(r.keep_alive);
    EXPECT_EQ(c.call("GET", "/v2/health/ready").status, 200);
  }
  EXPECT_EQ(engine_.infer_calls(), 5u);
  // Connection: close is honoured: answered, then closed.
  TestResponse r = c.call("GET", "/v2/health/live", {}, {{"Connection", "close"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.keep_alive);
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(ServerTest, PipelinedRequestsAreAnsweredInOrder) {
  TestClient c(port_);
  const std::string get = "GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string bad = "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_FALSE(c.send_raw(get + bad + get));
  EXPECT_EQ(c.receive().status, 200);
  EXPECT_EQ(c.receive().status, 404);
  EXPECT_EQ(c.receive().status, 200);
}

TEST_F(ServerTest, HundredConcurrentConnectionsAreInFlightTogether) {
  engine_.mode = FakeEngine::Mode::kHold;
  std::vector<std::unique_ptr<TestClient>> clients;
  for (int i = 0; i < 100; ++i) {
    clients.push_back(std::make_unique<TestClient>(port_));
    ASSERT_TRUE(clients.back()->connected());
    const std::string body = R"({"id":")" + std::to_string(i) +
                             R"(","inputs":[{"name":"INPUT__0","datatype":"INT32","shape":[1],"data":[)" +
                             std::to_string(i) + "]}]}";
    ASSERT_FALSE(clients.back()->send(testing::make_request("POST", "/v2/models/mlp/infer", body)));
  }
  // The engine holds all 100 at once: no connection waits for another's answer.
  ASSERT_TRUE(engine_.wait_held(100));
  std::thread completer([&] { engine_.complete_all(); });  // answers arrive from another thread
  completer.join();
  for (int i = 0; i < 100; ++i) {
    TestResponse r = clients[i]->receive();
    ASSERT_EQ(r.status, 200) << i << " " << r.error;
    const json j = json::parse(r.body);
    EXPECT_EQ(j["id"], std::to_string(i));
    EXPECT_EQ(j["outputs"][0]["data"][0], i);
  }
}

TEST_F(ServerTest, AnswersFromTheEngineThread) {
  engine_.mode = FakeEngine::Mode::kThread;
  for (int i = 0; i < 3; ++i) {
    TestResponse r = call("POST", "/v2/models/mlp/infer", kInfer);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, kInferAnswer);
  }
  ASSERT_EQ(engine_.answer_threads.size(), 3u);
  for (auto id : engine_.answer_threads) EXPECT_EQ(id, engine_.worker_id());
}

// Replies posted from an engine thread reach I/O threads that sleep at once (busy_poll 0, plain
// io_context::run), that poll (the default), and that poll longer than a request takes; a stop
// during the polling ends the threads.
TEST_F(ServerTest, AnswersFromTheEngineThreadWhateverTheBusyPoll) {
  for (const long us : {0L, 200L, 50000L}) {
    server_->stop();
    HttpOptions o = test_options();
    o.busy_poll = std::chrono::microseconds(us);
    start(o);
    engine_.mode = FakeEngine::Mode::kThread;
    for (int i = 0; i < 3; ++i) {
      TestResponse r = call("POST", "/v2/models/mlp/infer", kInfer);
      EXPECT_EQ(r.status, 200) << us;
      EXPECT_EQ(r.body, kInferAnswer) << us;
    }
  }
  ASSERT_EQ(engine_.answer_threads.size(), 9u);
  for (auto id : engine_.answer_threads) EXPECT_EQ(id, engine_.worker_id());
}

TEST_F(ServerTest, BodyLimitIs413BeforeAndAfterDecompression) {
  server_->stop();
  HttpOptions o = test_options();
  o.max_body_bytes = 4096;
  start(o);
  TestResponse r = call("POST", "/v2/models/mlp/infer", std::string(5000, ' '));
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.body, R"({"error":"request body is larger than the limit of 4096 bytes (hint: send a smaller request, )"
                    R"j(or raise the server's --max-body-mib)"})j");
  EXPECT_EQ(call("GET", "/v2/health/live").status, 200);  // still serving

  // Chunked: the limit applies as the chunks arrive.
  TestClient c(port_);
  std::string chunked = "POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 5; ++i) chunked += "3e8\r\n" + std::string(1000, ' ') + "\r\n";
  chunked += "0\r\n\r\n";
  ASSERT_FALSE(c.send_raw(chunked));
  EXPECT_EQ(c.receive().status, 413);

  // A gzip body under the limit that inflates over it.
  r = call("POST", "/v2/models/mlp/infer", gzip(std::string(100000, ' ')), {{"Content-Encoding", "gzip"}});
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.body, R"({"error":"request body is larger than the limit of 4096 bytes after gzip decompression )"
                    R"j((hint: send a smaller request, or raise the server's --max-body-mib)"})j");
}

std::string zlib_format(const std::string& in) {
  uLongf n = compressBound(in.size());
  std::string out(n, '\0');
  compress(reinterpret_cast<Bytef*>(out.data()), &n, reinterpret_cast<const Bytef*>(in.data()), in.size());
  out.resize(n);
  return out;
}

TEST_F(ServerTest, CompressedBodies) {
  TestResponse r = call("POST", "/v2/models/mlp/infer", gzip(kInfer), {{"Content-Encoding", "gzip"}});
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, kInferAnswer);
  r = call("POST", "/v2/models/mlp/infer", zlib_format(kInfer), {{"Content-Encoding", "deflate"}});
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, kInferAnswer);
  r = call("POST", "/v2/models/mlp/infer", kInfer, {{"Content-Encoding", "br"}});
  EXPECT_EQ(r.status, 415);
  EXPECT_EQ(r.header("accept-encoding"), "gzip, deflate");
  EXPECT_EQ(
      r.body,
      R"j({"error":"unsupported Content-Encoding 'br' (hint: send the body uncompressed, or with gzip or deflate)"})j");
  r = call("POST", "/v2/models/mlp/infer", "garbage", {{"Content-Encoding", "gzip"}});
  EXPECT_EQ(r.status, 400);

  // Responses are compressed when the client accepts gzip and the body is worth it.
  std::string big = R"({"inputs":[{"name":"INPUT__0","datatype":"INT32","shape":[1000],"data":[0)";
  for (int i = 1; i < 1000; ++i) big += ",7";
  big += "]}]}";
  r = call("POST", "/v2/models/mlp/infer", big, {{"Accept-Encoding", "gzip"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-encoding"), "gzip");
  const std::string plain = *decode_content(std::make_shared<const std::string>(r.body), "gzip", 1 << 20);
  EXPECT_EQ(json::parse(plain)["outputs"][0]["data"].size(), 1000u);
  r = call("POST", "/v2/models/mlp/infer", big);
  EXPECT_EQ(r.header("content-encoding"), "");
}

TEST_F(ServerTest, ChunkedRequestBody) {
  TestClient c(port_);
  std::string chunked = "POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (std::size_t i = 0; i < kInfer.size(); i += 10) {
    const std::string piece = kInfer.substr(i, 10);
    char size[16];
    std::snprintf(size, sizeof(size), "%zx\r\n", piece.size());
    chunked += size + piece + "\r\n";
  }
  chunked += "0\r\n\r\n";
  ASSERT_FALSE(c.send_raw(chunked));
  TestResponse r = c.receive();
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, kInferAnswer);
}

TEST_F(ServerTest, ExpectContinue) {
  TestClient c(port_);
  ASSERT_FALSE(c.send_raw("POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
                          std::to_string(kInfer.size()) + "\r\n\r\n"));
  TestResponse interim = c.receive();
  EXPECT_EQ(interim.status, 100);
  ASSERT_FALSE(c.send_raw(kInfer));
  TestResponse r = c.receive();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, kInferAnswer);
}

TEST_F(ServerTest, MalformedHttpIs400AndCloses) {
  TestClient c(port_);
  ASSERT_FALSE(c.send_raw("NOT HTTP AT ALL\r\n\r\n"));
  TestResponse r = c.receive();
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"].get<std::string>().rfind("malformed HTTP request: ", 0), 0u);
  EXPECT_TRUE(c.closed_by_peer());
  TestClient big(port_);
  ASSERT_FALSE(big.send_raw("GET /v2 HTTP/1.1\r\nX-Big: " + std::string(70000, 'a') + "\r\n\r\n"));
  EXPECT_EQ(big.receive().status, 431);
}

TEST_F(ServerTest, JsonDepthLimitOverHttp) {
  const std::string deep = R"({"inputs":[{"name":"INPUT__0","datatype":"FP32","shape":[1],"data":)" +
                           std::string(150, '[') + std::string(150, ']') + "}]}";
  TestResponse r = call("POST", "/v2/models/mlp/infer", deep);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"].get<std::string>().rfind(
                "JSON nesting deeper than 100 levels in the inference request for model 'mlp'", 0),
            0u);
  EXPECT_EQ(engine_.infer_calls(), 0u);
}

TEST_F(ServerTest, ApiKeyProtectsControlEndpoints) {
  server_->stop();
  HttpOptions o = test_options();
  o.api_key = "0123456789abcdef";
  start(o);
  TestResponse r = call("POST", "/v2/repository/index");
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(
      r.body,
      R"j({"error":"this endpoint requires an API key (hint: send 'Authorization: Bearer KEY' or 'X-API-Key: KEY' with the server's key)"})j");
  r = call("POST", "/v2/repository/models/mlp/load", {}, {{"Authorization", "Bearer wrong-key-000000"}});
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(json::parse(r.body)["error"].get<std::string>().rfind("invalid API key", 0), 0u);
  EXPECT_TRUE(engine_.loads.empty());
  EXPECT_EQ(call("POST", "/v2/repository/index", {}, {{"Authorization", "Bearer 0123456789abcdef"}}).status, 200);
  EXPECT_EQ(call("POST", "/v2/repository/models/mlp/unload", {}, {{"X-API-Key", "0123456789abcdef"}}).status, 200);
  EXPECT_EQ(call("POST", "/v2/repository/models/mlp/unload", {}, {{"Authorization", "0123456789abcdef"}}).status, 403);
  // Inference and metadata stay open unless protect_inference.
  EXPECT_EQ(call("POST", "/v2/models/mlp/infer", kInfer).status, 200);
  EXPECT_EQ(call("GET", "/v2/models/mlp").status, 200);

  server_->stop();
  o.protect_inference = true;
  start(o);
  EXPECT_EQ(call("POST", "/v2/models/mlp/infer", kInfer).status, 403);
  EXPECT_EQ(call("GET", "/v2").status, 403);
  EXPECT_EQ(call("GET", "/v2/models/mlp/stats").status, 403);
  EXPECT_EQ(call("GET", "/v2/health/ready").status, 200);
  EXPECT_EQ(call("GET", "/v2/health/live").status, 200);
  EXPECT_EQ(call("POST", "/v2/models/mlp/infer", kInfer, {{"X-API-Key", "0123456789abcdef"}}).status, 200);
}

TEST_F(ServerTest, MetricsPort) {
  const int mport = server_->metrics_port();
  ASSERT_GT(mport, 0);
  EXPECT_NE(mport, port_);
  TestResponse r = testing::http_call(mport, "GET", "/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(r.body.find("nv_inference_request_success_total{model=\"mlp\",version=\"1\"} 7\n"), std::string::npos);
  EXPECT_EQ(testing::http_call(mport, "GET", "/v2/health/live").status, 404);
  EXPECT_EQ(call("GET", "/metrics").status, 404);  // not on the inference port
}

TEST_F(ServerTest, PortInUseNamesTheAddressAndTheFlag) {
  HttpOptions o = test_options();
  o.http_port = port_;
  o.metrics_port = -1;
  HttpServer second(engine_, o);
  try {
    second.start();
    ADD_FAILURE() << "bound a port in use";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    EXPECT_EQ(e.message(), "port " + std::to_string(port_) + " is in use on 127.0.0.1");
    EXPECT_EQ(e.hint(), "stop the other server on it, or pick another port with --http-port (0: any free port)");
  }
  EXPECT_EQ(call("GET", "/v2/health/live").status, 200);  // the first server is unharmed
}

TEST_F(ServerTest, IdleConnectionsAreClosed) {
  server_->stop();
  HttpOptions o = test_options();
  o.idle_timeout = std::chrono::seconds(1);
  start(o);
  TestClient c(port_);
  EXPECT_EQ(c.call("GET", "/v2/health/live").status, 200);
  EXPECT_TRUE(c.closed_by_peer());  // within the client's 10 s
}

TEST_F(ServerTest, StopAnswersARequestInFlight) {
  engine_.mode = FakeEngine::Mode::kHold;
  TestClient c(port_);
  ASSERT_FALSE(c.send(testing::make_request("POST", "/v2/models/mlp/infer", kInfer)));
  ASSERT_TRUE(engine_.wait_held(1));
  TestClient idle(port_);
  EXPECT_EQ(idle.call("GET", "/v2/health/live").status, 200);
  std::thread stopper([&] { server_->stop(std::chrono::seconds(10)); });
  // Once the listener is closed, stop() has begun: only then does the engine answer.
  bool refused = false;
  for (int i = 0; i < 1000 && !refused; ++i) {
    refused = !TestClient(port_).connected();
    if (!refused) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(refused);
  EXPECT_TRUE(idle.closed_by_peer());  // idle connections close at once
  engine_.complete_all();
  TestResponse r = c.receive();
  EXPECT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.body, kInferAnswer);
  EXPECT_FALSE(r.keep_alive);  // Connection: close
  stopper.join();
  server_.reset();
}

TEST_F(ServerTest, AnswersAfterStopAreDropped) {
  engine_.mode = FakeEngine::Mode::kHold;
  TestClient c(port_);
  ASSERT_FALSE(c.send(testing::make_request("POST", "/v2/models/mlp/infer", kInfer)));
  ASSERT_TRUE(engine_.wait_held(1));
  server_->stop(std::chrono::milliseconds(0));  // the engine still holds it: the connection is closed
  server_.reset();                              // and the server is gone
  EXPECT_TRUE(c.closed_by_peer());
  engine_.complete_all();  // the callback finds nothing to write to, safely
  EXPECT_EQ(engine_.seen.size(), 1u);
}

}  // namespace
}  // namespace glassbox::serve
