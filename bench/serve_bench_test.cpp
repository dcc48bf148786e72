// The serving benchmark's plumbing: child processes (ready line, early exit, termination), the
// benchmark repository (batched and unbatched configs over one TorchScript file), the binary
// request and its reply check, the statistics arithmetic, and the FastAPI anchor answering the
// benchmark's request with the same output as torch::jit::load of the same file.
#include "bench/serve_bench.h"

#include <signal.h>
#include <sys/wait.h>

#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/script.h>
#include <torch/torch.h>

#include "bench/serve_bench_models.h"
#include "bench/serve_process.h"
#include "glassbox/base/error.h"
#include "glassbox/export/model_config.h"
#include "glassbox/export/repository.h"
#include "glassbox/testing/testing.h"

namespace glassbox::bench {
namespace {

namespace fs = std::filesystem;

TEST(ChildProcess, WaitsForTheReadyLineAndTerminates) {
  const fs::path dir = testing::temp_dir("bench-child");
  ChildProcess p({"/bin/sh", "-c", "echo loading; echo 'serving: http://127.0.0.1:4321 (metrics off)'; exec sleep 60"},
                 dir / "log");
  const std::string line = p.wait_for_line("serving: ", std::chrono::seconds(20));
  EXPECT_EQ(parse_serving_port(line), 4321);
  EXPECT_TRUE(p.running());
  const pid_t pid = p.pid();
  const int status = p.terminate(std::chrono::seconds(5));
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_FALSE(p.running());
  EXPECT_NE(::kill(pid, 0), 0);  // reaped: the pid is gone
}

TEST(ChildProcess, AnEarlyExitIsUnavailableWithTheLogTail) {
  const fs::path dir = testing::temp_dir("bench-child-exit");
  ChildProcess p({"/bin/sh", "-c", "echo 'error: no such repository' >&2; exit 3"}, dir / "log");
  try {
    p.wait_for_line("serving: ", std::chrono::seconds(20));
    FAIL() << "expected Unavailable";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    EXPECT_NE(e.message().find("error: no such repository"), std::string::npos) << e.message();
  }
  ChildProcess missing({"/nonexistent/glassbox", "serve"}, dir / "log2");
  EXPECT_THROW(missing.wait_for_line("serving: ", std::chrono::seconds(20)), Error);
}

TEST(ChildProcess, TheDestructorKillsWhatIgnoresSigterm) {
  const fs::path dir = testing::temp_dir("bench-child-kill");
  pid_t pid = 0;
  {
    ChildProcess p({"/bin/sh", "-c", "trap '' TERM; echo 'serving: http://[::1]:80'; while true; do sleep 1; done"},
                   dir / "log");
    EXPECT_EQ(parse_serving_port(p.wait_for_line("serving: ", std::chrono::seconds(20))), 80);
    pid = p.pid();
    EXPECT_EQ(p.terminate(std::chrono::milliseconds(300)) & 0x7f, SIGKILL);
  }
  EXPECT_NE(::kill(pid, 0), 0);
  EXPECT_THROW(parse_serving_port("listening somewhere"), Error);
  EXPECT_EQ(parse_serving_port("serving: http://localhost:8000 (metrics http://localhost:8002/metrics)"), 8000);
  EXPECT_EQ(parse_serving_port("serving: http://0.0.0.0:31337/"), 31337);
  EXPECT_THROW(parse_serving_port("serving: http://localhost (no port)"), Error);
  EXPECT_THROW(parse_serving_port("serving: http://[::1 :80"), Error);
}

TEST(ServeBenchRequest, BinaryRequestAndReplyCheck) {
  InferSpec spec;
  spec.model = "m";
  spec.dims = {1, 2, 2};
  spec.output_elements = 3;
  const HttpRequestSpec r = binary_infer_request(spec, 2, 5);
  EXPECT_EQ(r.target, "/v2/models/m/infer");
  std::size_t header_bytes = 0;
  for (const auto& [k, v] : r.headers)
    if (k == "Inference-Header-Content-Length") header_bytes = std::stoul(v);
  ASSERT_GT(header_bytes, 0u);
  const auto header = nlohmann::json::parse(r.body.substr(0, header_bytes));
  EXPECT_EQ(header["inputs"][0]["shape"], nlohmann::json({2, 1, 2, 2}));
  EXPECT_EQ(header["inputs"][0]["parameters"]["binary_data_size"], 32);
  EXPECT_EQ(header["outputs"][0]["parameters"]["binary_data"], true);
  EXPECT_EQ(r.body.size(), header_bytes + 32);
  EXPECT_EQ(binary_infer_request(spec, 2, 5).body, r.body);  // same seed, same bytes
  EXPECT_NE(binary_infer_request(spec, 2, 6).body, r.body);

  const std::string out_header = R"({"outputs":[{"name":"OUTPUT__0","parameters":{"binary_data_size":24}}]})";
  HttpReply reply;
  reply.status = 200;
  reply.headers = {{"inference-header-content-length", std::to_string(out_header.size())}};
  reply.body = out_header + std::string(24, '\0');
  EXPECT_NO_THROW(check_infer_reply(reply, spec, 2, "test"));
  reply.body += "x";  // a byte too many
  EXPECT_THROW(check_infer_reply(reply, spec, 2, "test"), Error);
  reply.status = 400;
  EXPECT_THROW(check_infer_reply(reply, spec, 2, "test"), Error);
}

TEST(ServeBenchStats, DeltaPerRequest) {
  ServerStats a, b;
  a.success_count = 10;
  a.success_ns = 1'000'000;
  b.success_count = 110;
  b.success_ns = 1'000'000 + 100 * 80'000;  // 80 us per request
  b.queue_count = 100;
  b.queue_ns = 100 * 5'000;  // 5 us
  b.compute_input_ns = 100 * 2'000;
  b.compute_infer_ns = 100 * 50'000;
  b.compute_output_ns = 100 * 3'000;  // 55 us of compute
  b.execution_count = 50;
  b.inference_count = 100;
  const StatsDelta d = stats_delta(a, b);
  EXPECT_EQ(d.requests, 100u);
  EXPECT_DOUBLE_EQ(d.request_us, 80.0);
  EXPECT_DOUBLE_EQ(d.queue_us, 5.0);
  EXPECT_DOUBLE_EQ(d.compute_us, 55.0);
  EXPECT_DOUBLE_EQ(d.compute_input_us, 2.0);
  EXPECT_DOUBLE_EQ(d.compute_infer_us, 50.0);
  EXPECT_DOUBLE_EQ(d.compute_output_us, 3.0);
  EXPECT_DOUBLE_EQ(d.overhead_us, 25.0);
  EXPECT_DOUBLE_EQ(d.mean_batch, 2.0);
  EXPECT_EQ(stats_delta(b, b).requests, 0u);
}

ServeBenchOptions small_options() {
  ServeBenchOptions o;
  o.models = {"mlp"};
  o.source_dir = testing::source_dir().string();
  return resolve_defaults(o);
}

TEST(ServeBenchModels, QuickstartMlpRepositoryBatchedAndUnbatched) {
  ServeBenchOptions o = small_options();
  o.preferred_batch_sizes = {32, 64};
  const TempDir work("glassbox-bench-test");
  const BenchModel m = zoo_model("mlp", o, work.path());
  EXPECT_EQ(m.spec.dims, (std::vector<std::int64_t>{1, 28, 28}));
  EXPECT_EQ(m.spec.output_elements, 10);
  EXPECT_NE(m.description.find("784-512-256-10"), std::string::npos) << m.description;
  write_bench_repository(m, work.path() / "repo", o, /*unbatched=*/true);
  const auto batched = exporter::read_model_repository_entry(work.path() / "repo" / "mlp");
  const auto unbatched = exporter::read_model_repository_entry(work.path() / "repo" / "mlp_unbatched");
  EXPECT_EQ(batched.config.max_batch_size(), 64);
  ASSERT_TRUE(batched.config.has_dynamic_batching());
  EXPECT_EQ(batched.config.dynamic_batching().preferred_batch_size_size(), 2);
  EXPECT_EQ(batched.config.dynamic_batching().max_queue_delay_microseconds(), 0u);
  EXPECT_FALSE(unbatched.config.has_dynamic_batching());
  EXPECT_EQ(unbatched.config.max_batch_size(), 64);
  EXPECT_EQ(batched.versions, std::vector<std::int64_t>{1});
  // Both serve byte-identical copies of the file the limit loads.
  auto bytes = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  EXPECT_EQ(bytes(batched.model_path(1)), bytes(m.model_file));
  EXPECT_EQ(bytes(unbatched.model_path(1)), bytes(m.model_file));
  // No preferred sizes given (the soak): the config has none, so the batcher forms the largest batch it can.
  o.preferred_batch_sizes.clear();
  write_bench_repository(m, work.path() / "repo2", o, /*unbatched=*/false);
  const auto none = exporter::read_model_repository_entry(work.path() / "repo2" / "mlp");
  ASSERT_TRUE(none.config.has_dynamic_batching());
  EXPECT_EQ(none.config.dynamic_batching().preferred_batch_size_size(), 0);
  EXPECT_FALSE(fs::exists(work.path() / "repo2" / "mlp_unbatched"));
  // An existing repository's model is found by name, with its own files.
  ServeBenchOptions e = o;
  e.repository = (work.path() / "repo").string();
  e.model = "mlp_unbatched";
  const BenchModel existing = existing_model(e, work.path());
  EXPECT_EQ(existing.spec.model, "mlp_unbatched");
  EXPECT_EQ(existing.architecture, "mlp");
  e.model = "nope";
  EXPECT_THROW(existing_model(e, work.path()), Error);
}

TEST(ServeBenchOptions, RejectsBadValues) {
  ServeBenchOptions o;
  o.models = {"vgg"};
  EXPECT_THROW(o.validate(), Error);
  o.models = {"mlp"};
  o.repository = "x";
  EXPECT_THROW(o.validate(), Error);  // --model missing
  o.repository.clear();
  o.request_batch = 65;
  EXPECT_THROW(o.validate(), Error);
  o.request_batch = 1;
  o.concurrency = {0};
  EXPECT_THROW(o.validate(), Error);
  o.concurrency = {1};
  o.resnet_input = {3, 16, 16};
  EXPECT_THROW(o.validate(), Error);
  o.resnet_input = {3, 64, 64};
  EXPECT_NO_THROW(o.validate());
}

// Each Python anchor (FastAPI, LitServe, TorchServe) answers the benchmark's request with the
// numbers LibTorch computes from the same file, and holds a short closed loop without a failure.
class ServeBenchPython : public ::testing::TestWithParam<std::string> {};

TEST_P(ServeBenchPython, AnchorAnswersLikeTorchJitLoad) {
  const std::string anchor = GetParam();
  const ServeBenchOptions o = small_options();
  const TempDir work("glassbox-bench-test-py");
  const BenchModel m = zoo_model("mlp", o, work.path());
  const Server server = start_python(anchor, m, o, work.path() / (anchor + ".log"));
  EXPECT_NE(server.banner.find(anchor), std::string::npos) << server.banner;
  EXPECT_NE(server.banner.find("threads " + std::to_string(o.threads)), std::string::npos) << server.banner;
  const HttpRequestSpec request = binary_infer_request(m.spec, 3, 9);
  const HttpReply reply = http_call("127.0.0.1", server.port, request);
  check_infer_reply(reply, m.spec, 3, anchor);
  // The same numbers as LibTorch on the same file and input.
  const std::size_t in_header = request.body.size() - 3 * 784 * sizeof(float);
  const at::Tensor x = torch::from_blob(const_cast<char*>(request.body.data() + in_header), {3, 1, 28, 28}).clone();
  torch::jit::Module module = torch::jit::load(m.model_file.string());
  module.eval();
  const at::Tensor expected = module.forward({x}).toTensor();
  const std::size_t out_header = std::stoul(reply.header("Inference-Header-Content-Length"));
  const at::Tensor got = torch::from_blob(const_cast<char*>(reply.body.data() + out_header), {3, 10}).clone();
  EXPECT_LT((got - expected).abs().max().item<double>(), 1e-5);
  // A short closed loop against it.
  LoadOptions lo;
  lo.port = server.port;
  lo.connections = 2;
  lo.warmup_seconds = 0.2;
  lo.seconds = 0.5;
  const LoadResult r = run_load(request, lo);
  EXPECT_GT(r.ok, 0u);
  EXPECT_EQ(r.failed_total, 0u);
}

INSTANTIATE_TEST_SUITE_P(Anchors, ServeBenchPython, ::testing::Values("fastapi", "litserve", "torchserve"));

}  // namespace
}  // namespace glassbox::bench
