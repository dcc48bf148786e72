// The engine over a model repository: loading (mode none and explicit), unavailable models with
// their reasons, version policy and routing, unknown model/version errors, metadata, config JSON,
// load/unload/reload with a config override, shutdown and drain, statistics.
#include <future>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "glassbox/base/files.h"
#include "glassbox/export/repository.h"
#include "glassbox/serve/engine/api.h"
#include "glassbox/serve/engine/test_repository.h"
#include "glassbox/testing/testing.h"

namespace glassbox::serve {
namespace {

namespace fs = std::filesystem;
using testing::from_wire;
using testing::save_script;
using testing::wire;
using testing::write_model;

// y = x * scale: `scale` tells which version answered.
std::string scale_config(const std::string& name, int max_batch_size = 8, const std::string& extra = "") {
  return "name: \"" + name + "\"\nplatform: \"pytorch_libtorch\"\nmax_batch_size: " + std::to_string(max_batch_size) +
         "\ninput [ { name: \"INPUT__0\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
         "output [ { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n" +
         extra;
}
constexpr const char* kScaleSource = "def forward(self, x):\n  return x * self.scale\n";

fs::path write_scale_model(const fs::path& repo, const std::string& name, const std::vector<std::int64_t>& versions,
                           const std::string& extra = "") {
  const fs::path dir =
      write_model(repo, name, scale_config(name, 8, extra), kScaleSource, {{"scale", torch::ones({1})}}, {});
  for (std::int64_t v : versions)
    save_script(dir / std::to_string(v) / "model.pt", kScaleSource, {{"scale", torch::full({1}, float(v))}});
  return dir;
}

InferOutcome infer_sync(Engine& e, const std::string& model, std::int64_t version, const at::Tensor& x) {
  InferRequest r;
  r.model = model;
  r.version = version;
  r.id = "req";
  r.inputs.push_back(wire("INPUT__0", x));
  std::promise<InferOutcome> p;
  auto f = p.get_future();
  e.infer(std::move(r), [&p](InferOutcome o) { p.set_value(std::move(o)); });
  return f.get();
}

std::unique_ptr<Engine> engine_for(const fs::path& repo, ModelControlMode mode = ModelControlMode::kNone,
                                   std::vector<std::string> startup = {}) {
  EngineOptions o;
  o.repository = repo;
  o.control_mode = mode;
  o.startup_models = std::move(startup);
  return make_engine(o);
}

const IndexEntry* entry(const std::vector<IndexEntry>& index, const std::string& name,
                        const std::string& version = "") {
  for (const IndexEntry& e : index)
    if (e.name == name && e.version == version) return &e;
  return nullptr;
}

template <typename F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return Error(ErrorCode::kInternal, "none");
}

TEST(Engine, BrokenModelsAreUnavailableWithTheirReasonWhileOthersServe) {
  const fs::path repo = glassbox::testing::temp_dir("engine-broken");
  write_scale_model(repo, "good", {1});
  // The config says 3 outputs wide; the model returns 2.
  write_model(repo, "contradicts",
              "name: \"contradicts\"\nplatform: \"pytorch_libtorch\"\nmax_batch_size: 8\n"
              "input [ { name: \"INPUT__0\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
              "output [ { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: [ 3 ] } ]\n",
              kScaleSource, {{"scale", torch::ones({1})}});
  const fs::path corrupt = write_scale_model(repo, "corrupt", {1});
  write_file_atomic(corrupt / "1" / "model.pt", "garbage");
  const fs::path missing = write_scale_model(repo, "missing", {1});
  fs::remove(missing / "1" / "model.pt");

  auto engine = engine_for(repo);
  const auto index = engine->repository_index(false);
  ASSERT_EQ(index.size(), 4u);
  ASSERT_NE(entry(index, "good", "1"), nullptr);
  EXPECT_EQ(entry(index, "good", "1")->state, "READY");
  const IndexEntry* c = entry(index, "contradicts", "1");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->state, "UNAVAILABLE");
  EXPECT_NE(c->reason.find("output 'OUTPUT__0' has dims [2]"), std::string::npos) << c->reason;
  EXPECT_NE(c->reason.find("config.pbtxt says [3]"), std::string::npos) << c->reason;
  EXPECT_NE(entry(index, "corrupt", "1")->reason.find("is not a TorchScript archive"), std::string::npos);
  EXPECT_NE(entry(index, "missing", "1")->reason.find((missing / "1" / "model.pt").string()), std::string::npos);
  EXPECT_EQ(engine->repository_index(true).size(), 1u);

  const InferOutcome ok = infer_sync(*engine, "good", 0, torch::tensor({{1.0f, 2.0f}}));
  ASSERT_FALSE(ok.error) << ok.error->one_line();
  EXPECT_EQ(ok.response.model, "good");
  EXPECT_EQ(ok.response.version, 1);
  EXPECT_EQ(ok.response.id, "req");
  EXPECT_TRUE(torch::equal(from_wire(ok.response.outputs.at(0)), torch::tensor({{1.0f, 2.0f}})));

  const InferOutcome bad = infer_sync(*engine, "contradicts", 0, torch::tensor({{1.0f, 2.0f}}));
  ASSERT_TRUE(bad.error);
  EXPECT_EQ(bad.error->code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(bad.error->message(), "Request for unknown model: 'contradicts' has no available versions");
  EXPECT_NE(bad.error->hint().find("UNAVAILABLE: "), std::string::npos);
  EXPECT_TRUE(engine->model_ready("good", 0));
  EXPECT_FALSE(engine->model_ready("contradicts", 0));
  EXPECT_FALSE(engine->ready());  // strict readiness: a model that should serve does not
}

TEST(Engine, VersionPolicyAndRouting) {
  const fs::path repo = glassbox::testing::temp_dir("engine-versions");
  write_scale_model(repo, "latest", {1, 2, 3});
  write_scale_model(repo, "specific", {1, 2, 3}, "version_policy: { specific { versions: [ 1, 3 ] } }\n");
  auto engine = engine_for(repo);
  EXPECT_TRUE(engine->ready());
  EXPECT_EQ(engine->model_metadata("latest", 0).versions, (std::vector<std::string>{"3"}));
  EXPECT_EQ(engine->model_metadata("specific", 0).versions, (std::vector<std::string>{"1", "3"}));

  const at::Tensor x = torch::tensor({{1.0f, -1.0f}});
  InferOutcome o = infer_sync(*engine, "latest", 0, x);
  ASSERT_FALSE(o.error);
  EXPECT_EQ(o.response.version, 3);
  EXPECT_TRUE(torch::equal(from_wire(o.response.outputs[0]), x * 3));
  o = infer_sync(*engine, "specific", 1, x);
  ASSERT_FALSE(o.error);
  EXPECT_EQ(o.response.version, 1);
  EXPECT_TRUE(torch::equal(from_wire(o.response.outputs[0]), x));
  o = infer_sync(*engine, "specific", 0, x);
  EXPECT_EQ(o.response.version, 3);

  o = infer_sync(*engine, "latest", 1, x);
  ASSERT_TRUE(o.error);
  EXPECT_EQ(o.error->code(), ErrorCode::kNotFound);
  EXPECT_EQ(o.error->message(), "Request for unknown model: 'latest' version 1 is not found");
  const Error e = error_of([&] { engine->model_metadata("specific", 2); });
  EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  EXPECT_EQ(e.message(), "Request for unknown model: 'specific' version 2 is not found");
  EXPECT_FALSE(engine->model_ready("specific", 2));
  EXPECT_TRUE(engine->model_ready("specific", 3));
  const auto index = engine->repository_index(false);
  EXPECT_EQ(index.size(), 3u);  // latest 3, specific 1 and 3
  EXPECT_NE(entry(index, "specific", "1"), nullptr);
  EXPECT_NE(entry(index, "specific", "3"), nullptr);
}

TEST(Engine, UnknownModelsAreCaseSensitiveAndNamedInTritonsWords) {
  const fs::path repo = glassbox::testing::temp_dir("engine-unknown");
  write_scale_model(repo, "good", {1});
  auto engine = engine_for(repo);
  for (const std::string name : {"nope", "Good", "../good"}) {
    const InferOutcome o = infer_sync(*engine, name, 0, torch::ones({1, 2}));
    ASSERT_TRUE(o.error) << name;
    EXPECT_EQ(o.error->code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(o.error->message(), "Request for unknown model: '" + name + "' is not found");
  }
  EXPECT_EQ(error_of([&] { engine->model_metadata("nope", 0); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of([&] { engine->model_config_json("nope", 0); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of([&] { engine->statistics("nope", 0); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_of([&] { engine->statistics("good", 4); }).code(), ErrorCode::kNotFound);
  EXPECT_FALSE(engine->model_ready("nope", 0));
}

TEST(Engine, MetadataAndConfigJson) {
  const fs::path repo = glassbox::testing::temp_dir("engine-metadata");
  write_scale_model(repo, "batched", {1}, "dynamic_batching { max_queue_delay_microseconds: 100 }\n");
  write_model(repo, "flat",
              "name: \"flat\"\nbackend: \"pytorch\"\nmax_batch_size: 0\n"
              "input [ { name: \"INPUT__0\" data_type: TYPE_INT64 dims: [ 3 ] } ]\n"
              "output [ { name: \"OUTPUT__0\" data_type: TYPE_INT64 dims: [ 3 ] } ]\n",
              "def forward(self, x):\n  return x + 1\n");
  auto engine = engine_for(repo);
  const ModelMetadata b = engine->model_metadata("batched", 0);
  EXPECT_EQ(b.name, "batched");
  EXPECT_EQ(b.platform, "pytorch_libtorch");
  ASSERT_EQ(b.inputs.size(), 1u);
  EXPECT_EQ(b.inputs[0].name, "INPUT__0");
  EXPECT_EQ(b.inputs[0].datatype, DataType::kFp32);
  EXPECT_EQ(b.inputs[0].shape, (std::vector<std::int64_t>{-1, 2}));
  EXPECT_EQ(b.outputs[0].shape, (std::vector<std::int64_t>{-1, 2}));
  const ModelMetadata f = engine->model_metadata("flat", 1);
  EXPECT_EQ(f.platform, "pytorch_libtorch");
  EXPECT_EQ(f.inputs[0].datatype, DataType::kInt64);
  EXPECT_EQ(f.inputs[0].shape, (std::vector<std::int64_t>{3}));

  const auto jb = nlohmann::json::parse(engine->model_config_json("batched", 0));
  EXPECT_EQ(jb["max_batch_size"], 8);
  EXPECT_EQ(jb["input"][0]["name"], "INPUT__0");
  EXPECT_EQ(jb["model_transaction_policy"]["decoupled"], false);
  EXPECT_EQ(jb["response_cache"]["enable"], false);
  EXPECT_TRUE(jb.contains("dynamic_batching"));
  const auto jf = nlohmann::json::parse(engine->model_config_json("flat", 0));
  EXPECT_EQ(jf["max_batch_size"], 0);
  EXPECT_FALSE(jf.contains("dynamic_batching"));

  const ServerMetadata s = engine->server_metadata();
  EXPECT_EQ(s.name, "glassbox");
  EXPECT_FALSE(s.version.empty());
  EXPECT_NE(std::find(s.extensions.begin(), s.extensions.end(), "binary_tensor_data"), s.extensions.end());
  EXPECT_NE(std::find(s.extensions.begin(), s.extensions.end(), "statistics"), s.extensions.end());
}

TEST(Engine, ExplicitModeLoadUnloadReloadWithConfigOverride) {
  const fs::path repo = glassbox::testing::temp_dir("engine-explicit");
  write_scale_model(repo, "a", {1});
  write_scale_model(repo, "b", {1, 2});
  EXPECT_EQ(error_of([&] { engine_for(repo, ModelControlMode::kExplicit, {"c"}); }).code(), ErrorCode::kNotFound);
  auto engine = engine_for(repo, ModelControlMode::kExplicit, {"a"});
  auto index = engine->repository_index(false);
  EXPECT_EQ(entry(index, "a", "1")->state, "READY");
  ASSERT_NE(entry(index, "b"), nullptr);
  EXPECT_EQ(entry(index, "b")->state, "UNAVAILABLE");
  EXPECT_EQ(entry(index, "b")->reason, "unloaded");
  EXPECT_TRUE(engine->ready());
  InferOutcome o = infer_sync(*engine, "b", 0, torch::ones({1, 2}));
  ASSERT_TRUE(o.error);
  EXPECT_EQ(o.error->code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(o.error->message(), "Request for unknown model: 'b' has no available versions");

  engine->load_model("b", "");
  EXPECT_EQ(engine->model_metadata("b", 0).versions, (std::vector<std::string>{"2"}));
  o = infer_sync(*engine, "b", 0, torch::ones({1, 2}));
  ASSERT_FALSE(o.error) << o.error->one_line();
  EXPECT_EQ(o.response.version, 2);

  engine->unload_model("a");
  index = engine->repository_index(false);
  EXPECT_EQ(entry(index, "a")->state, "UNAVAILABLE");
  EXPECT_EQ(entry(index, "a")->reason, "unloaded");
  EXPECT_EQ(infer_sync(*engine, "a", 0, torch::ones({1, 2})).error->code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(error_of([&] { engine->unload_model("zzz"); }).message(), "Request for unknown model: 'zzz' is not found");
  EXPECT_EQ(error_of([&] { engine->load_model("zzz", ""); }).code(), ErrorCode::kInvalidArgument);

  // Reload b with a config override (JSON, Triton's field names): every version, batch limit 2.
  engine->load_model("b", R"({"name": "b", "platform": "pytorch_libtorch", "max_batch_size": 2,
      "version_policy": {"all": {}},
      "input": [{"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": ["2"]}],
      "output": [{"name": "OUTPUT__0", "data_type": "TYPE_FP32", "dims": [2]}]})");
  EXPECT_EQ(engine->model_metadata("b", 0).versions, (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(nlohmann::json::parse(engine->model_config_json("b", 0))["max_batch_size"], 2);
  o = infer_sync(*engine, "b", 1, torch::ones({1, 2}));
  ASSERT_FALSE(o.error) << o.error->one_line();
  EXPECT_EQ(o.response.version, 1);

  // An override the model contradicts: refused with the reason, and the serving versions stay.
  const Error e = error_of([&] {
    engine->load_model("b", R"({"max_batch_size": 2, "platform": "pytorch_libtorch",
      "input": [{"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": [2]}],
      "output": [{"name": "OUTPUT__0", "data_type": "TYPE_FP32", "dims": [5]}]})");
  });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(e.message().find("config.pbtxt says [5]"), std::string::npos) << e.one_line();
  EXPECT_EQ(engine->model_metadata("b", 0).versions, (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(error_of([&] { engine->load_model("b", "{not json"); }).code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(engine->ready());

  auto none = engine_for(repo);
  EXPECT_EQ(error_of([&] { none->load_model("a", ""); }).code(), ErrorCode::kFailedPrecondition);
  EXPECT_EQ(error_of([&] { none->unload_model("a"); }).code(), ErrorCode::kFailedPrecondition);
}

TEST(Engine, ShutdownRefusesNewRequestsAndDrainWaitsForQueuedOnes) {
  const fs::path repo = glassbox::testing::temp_dir("engine-drain");
  // Slow enough that the requests are still queued or executing when begin_shutdown is called.
  torch::manual_seed(1);
  write_model(
      repo, "slow",
      "name: \"slow\"\nplatform: \"pytorch_libtorch\"\nmax_batch_size: 1\n"
      "input [ { name: \"INPUT__0\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
      "output [ { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n",
      "def forward(self, x):\n  y = self.w\n  for i in range(40):\n    y = torch.tanh(torch.matmul(y, self.w))\n"
      "  return x + y.sum() * 0.0\n",
      {{"w", torch::randn({192, 192}) / 14.0}});
  auto engine = engine_for(repo);
  constexpr int kRequests = 6;
  std::atomic<int> succeeded{0}, answered{0};
  for (int i = 0; i < kRequests; ++i) {
    InferRequest r;
    r.model = "slow";
    r.inputs.push_back(wire("INPUT__0", torch::full({1, 2}, float(i))));
    engine->infer(std::move(r), [&](InferOutcome o) {
      if (!o.error) ++succeeded;
      ++answered;
    });
  }
  engine->begin_shutdown();
  EXPECT_FALSE(engine->ready());
  EXPECT_TRUE(engine->live());
  const InferOutcome late = infer_sync(*engine, "slow", 0, torch::ones({1, 2}));
  ASSERT_TRUE(late.error);
  EXPECT_EQ(late.error->code(), ErrorCode::kUnavailable);
  EXPECT_EQ(late.error->message(), "server is shutting down");
  EXPECT_TRUE(engine->drain(std::chrono::minutes(2)));
  EXPECT_EQ(answered.load(), kRequests);
  EXPECT_EQ(succeeded.load(), kRequests);  // accepted before the shutdown: all answered with results
}

TEST(Engine, StatisticsCountRequestsPerVersion) {
  const fs::path repo = glassbox::testing::temp_dir("engine-stats");
  write_scale_model(repo, "m", {1, 2}, "version_policy: { all { } }\n");
  auto engine = engine_for(repo);
  for (int i = 0; i < 5; ++i) ASSERT_FALSE(infer_sync(*engine, "m", 2, torch::ones({2, 2})).error);
  ASSERT_FALSE(infer_sync(*engine, "m", 1, torch::ones({1, 2})).error);
  const std::vector<ModelStats> all = engine->statistics("m", 0);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].version, "1");
  EXPECT_EQ(all[1].name, "m");
  EXPECT_EQ(all[1].version, "2");
  EXPECT_EQ(all[1].success.count, 5u);
  EXPECT_EQ(all[1].inference_count, 10u);
  EXPECT_GE(all[1].execution_count, 1u);
  EXPECT_LE(all[1].execution_count, 5u);
  EXPECT_EQ(all[0].success.count, 1u);
  const std::vector<ModelStats> two = engine->statistics("m", 2);
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0].inference_count, 10u);
  EXPECT_EQ(engine->statistics("", 0).size(), 2u);
}

TEST(Engine, ServesWhatGlassboxExportWritesAndRawPixelsThroughPlatformGlassbox) {
  const fs::path repo = glassbox::testing::temp_dir("engine-export");
  nn::ModelContract c;
  c.input_shape = {1, 4, 4};
  c.num_classes = 3;
  c.scale = 1.0 / 255.0;
  c.mean = {0.5};
  c.std = {0.25};
  c.labels = {"a", "b", "c"};
  torch::manual_seed(5);
  const at::Tensor w = torch::randn({16, 3});
  const fs::path file = repo.parent_path() / (repo.filename().string() + "-model.pt");
  save_script(file, "def forward(self, x):\n  return torch.matmul(x.flatten(1), self.w)\n", {{"w", w}});
  exporter::write_model_repository(repo, "exported", 1, file, c);  // dynamic batching, warm-up, labels
  // The same model taking raw uint8 pixels: platform glassbox applies the contract.
  const fs::path raw = repo / "raw";
  fs::create_directories(raw / "1");
  fs::copy_file(repo / "exported" / "1" / "model.pt", raw / "1" / "model.pt");
  fs::copy_file(repo / "exported" / "contract.json", raw / "contract.json");
  fs::copy_file(repo / "exported" / "labels.txt", raw / "labels.txt");
  exporter::triton::ModelConfig config = exporter::read_model_config(repo / "exported" / "config.pbtxt");
  config.set_name("raw");
  config.set_platform("glassbox");
  config.mutable_input(0)->set_data_type(exporter::triton::TYPE_UINT8);
  for (auto& warm : *config.mutable_model_warmup())
    for (auto& [name, in] : *warm.mutable_inputs()) in.set_data_type(exporter::triton::TYPE_UINT8);
  exporter::write_model_config(raw / "config.pbtxt", config);

  auto engine = engine_for(repo);
  ASSERT_TRUE(engine->ready()) << engine->repository_index(false).at(0).reason;
  const at::Tensor pixels = torch::randint(0, 256, {2, 1, 4, 4}, torch::kByte);
  const at::Tensor x = (pixels.to(torch::kFloat) / 255.0 - 0.5) / 0.25;
  const at::Tensor want = torch::matmul(x.flatten(1), w);
  InferRequest r;
  r.model = "exported";
  r.inputs.push_back(wire("INPUT__0", x));
  std::promise<InferOutcome> p1;
  engine->infer(std::move(r), [&p1](InferOutcome o) { p1.set_value(std::move(o)); });
  const InferOutcome a = p1.get_future().get();
  ASSERT_FALSE(a.error) << a.error->one_line();
  EXPECT_TRUE(torch::allclose(from_wire(a.response.outputs.at(0)), want, 1e-5, 1e-5));
  InferRequest rr;
  rr.model = "raw";
  rr.inputs.push_back(wire("INPUT__0", pixels));
  std::promise<InferOutcome> p2;
  engine->infer(std::move(rr), [&p2](InferOutcome o) { p2.set_value(std::move(o)); });
  const InferOutcome b = p2.get_future().get();
  ASSERT_FALSE(b.error) << b.error->one_line();
  EXPECT_TRUE(torch::allclose(from_wire(b.response.outputs.at(0)), want, 1e-5, 1e-5));
  EXPECT_EQ(engine->model_metadata("raw", 0).inputs.at(0).datatype, DataType::kUint8);
  EXPECT_EQ(engine->model_metadata("raw", 0).platform, "glassbox");
}

}  // namespace
}  // namespace glassbox::serve
