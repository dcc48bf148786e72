// Over 600 lines: the engine's whole repository life cycle, on shared test repositories.
// The engine over a model repository: loading (mode none and explicit), unavailable models with
// their reasons, configs that do not parse and Triton fields that are skipped, the startup report,
// version policy and routing, unknown model/version errors, metadata, config JSON,
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

  const StartupReport startup = engine->startup_report();
  EXPECT_EQ(startup.models, (std::vector<std::string>{"contradicts", "corrupt", "good", "missing"}));
  EXPECT_EQ(startup.serving, (std::vector<std::string>{"good"}));
  ASSERT_EQ(startup.failures.size(), 3u);
  for (const LoadFailure& f : startup.failures) {
    EXPECT_EQ(f.version, "1") << f.model;
    EXPECT_TRUE(is_user_error(f.error.code())) << f.error.one_line();
    EXPECT_EQ(entry(index, f.model, "1")->reason, f.error.one_line());
  }
  EXPECT_EQ(startup.failures[0].model, "contradicts");
}

std::string reason_of(const std::vector<IndexEntry>& index, const std::string& name, const std::string& state) {
  const IndexEntry* e = entry(index, name);
  if (e == nullptr) e = entry(index, name, "1");
  if (e == nullptr) {
    ADD_FAILURE() << name << " is not in the index";
    return "";
  }
  EXPECT_EQ(e->state, state) << name << ": " << e->reason;
  return e->reason;
}

TEST(Engine, ConfigsThatDoNotParseMakeTheirModelUnavailableWithoutStrictMode) {
  ASSERT_FALSE(EngineOptions{}.strict_config);  // what engine_for serves with
  const fs::path repo = glassbox::testing::temp_dir("engine-config-errors");
  write_scale_model(repo, "good", {1});
  // Fields that are in no Triton schema: misspelt names, at the top and nested.
  write_scale_model(repo, "misspelt", {1}, "dynamic_batchin { max_queue_delay_microseconds: 100 }\n");
  write_scale_model(
      repo, "nested", {1},
      "# after a Triton field glassbox skips\n"
      "instance_group [ { count: 1 rate_limiter { resources [ { name: \"R\" count: 1 } ] } kindd: KIND_CPU } ]\n");
  // Two schedulers (Triton's oneof scheduling_choice), one of them a field glassbox skips.
  write_scale_model(repo, "two_schedulers", {1}, "dynamic_batching { }\nsequence_batching { }\n");
  // A Triton field glassbox would skip, given a value of the wrong type.
  write_scale_model(repo, "wrong_type", {1}, "optimization: 5\n");
  // A wrong type in a field glassbox reads; an unknown enum value.
  write_scale_model(repo, "wrong_scalar", {1}, "dynamic_batching { max_queue_delay_microseconds: \"soon\" }\n");
  write_scale_model(repo, "bad_enum", {1}, "instance_group [ { kind: KIND_TPU } ]\n");
  auto engine = engine_for(repo);
  const auto index = engine->repository_index(false);

  EXPECT_EQ(reason_of(index, "good", "READY"), "");
  const auto has = [](const std::string& reason, const std::string& part) {
    EXPECT_NE(reason.find(part), std::string::npos) << "'" << part << "' not in: " << reason;
  };
  const std::string misspelt = reason_of(index, "misspelt", "UNAVAILABLE");
  has(misspelt,
      "misspelt/config.pbtxt:6:17: Message type \"glassbox.triton.ModelConfig\" has no field named "
      "\"dynamic_batchin\".");
  has(misspelt, "(hint: did you mean \"dynamic_batching\"?)");
  const std::string nested = reason_of(index, "nested", "UNAVAILABLE");
  has(nested,
      "nested/config.pbtxt:7:88: Message type \"glassbox.triton.ModelInstanceGroup\" has no field named "
      "\"kindd\".");
  has(reason_of(index, "two_schedulers", "UNAVAILABLE"),
      "two_schedulers/config.pbtxt:7:1: Field \"sequence_batching\" is specified along with field "
      "\"dynamic_batching\"");
  has(nested, "did you mean \"kind\"?");
  has(reason_of(index, "wrong_type", "UNAVAILABLE"),
      "wrong_type/config.pbtxt:6:15: Triton's field \"optimization\" of ModelConfig is a message, found \"5\".");
  has(reason_of(index, "wrong_scalar", "UNAVAILABLE"), "Expected integer, got: \"soon\"");
  const std::string bad_enum = reason_of(index, "bad_enum", "UNAVAILABLE");
  has(bad_enum, "Unknown enumeration value of \"KIND_TPU\"");
  has(bad_enum, "did you mean KIND_GPU?");

  // The others serve; the broken ones answer with their reason.
  const InferOutcome ok = infer_sync(*engine, "good", 0, torch::tensor({{1.0f, 2.0f}}));
  ASSERT_FALSE(ok.error) << ok.error->one_line();
  const InferOutcome bad = infer_sync(*engine, "misspelt", 0, torch::tensor({{1.0f, 2.0f}}));
  ASSERT_TRUE(bad.error);
  EXPECT_EQ(bad.error->code(), ErrorCode::kFailedPrecondition);
  has(bad.error->hint(), "did you mean \"dynamic_batching\"?");
  EXPECT_FALSE(engine->ready());

  const StartupReport startup = engine->startup_report();
  EXPECT_EQ(startup.serving, (std::vector<std::string>{"good"}));
  ASSERT_EQ(startup.failures.size(), 6u);
  for (const LoadFailure& f : startup.failures) {
    EXPECT_EQ(f.version, "") << f.model;
    EXPECT_EQ(f.error.code(), ErrorCode::kDataLoss) << f.error.one_line();
  }
}

TEST(Engine, TritonFieldsGlassboxDoesNotImplementAreSkippedWithAWarningUnlessStrict) {
  const fs::path repo = glassbox::testing::temp_dir("engine-config-skipped");
  write_scale_model(repo, "tuned", {1},
                    "optimization { graph { level: 1 } input_pinned_memory { enable: true } }\n"
                    "instance_group [ { count: 1 kind: KIND_CPU rate_limiter { priority: 2 } } ]\n"
                    "metric_tags { key: \"team\" value: \"vision\" }\n");
  auto engine = engine_for(repo);
  const auto index = engine->repository_index(false);
  EXPECT_EQ(reason_of(index, "tuned", "READY"),
            "config.pbtxt skipped Triton fields glassbox does not implement: optimization (line 6), "
            "instance_group[0].rate_limiter (line 7), metric_tags (line 8)");
  EXPECT_EQ(engine->repository_index(true).at(0).reason, reason_of(index, "tuned", "READY"));
  EXPECT_TRUE(engine->ready());
  EXPECT_TRUE(engine->startup_report().failures.empty());
  const InferOutcome ok = infer_sync(*engine, "tuned", 0, torch::tensor({{1.0f, 2.0f}}));
  ASSERT_FALSE(ok.error) << ok.error->one_line();
  EXPECT_TRUE(torch::equal(from_wire(ok.response.outputs.at(0)), torch::tensor({{1.0f, 2.0f}})));

  EngineOptions strict;
  strict.repository = repo;
  strict.strict_config = true;
  auto refusing = make_engine(strict);
  const std::string why = reason_of(refusing->repository_index(false), "tuned", "UNAVAILABLE");
  EXPECT_NE(why.find("config.pbtxt:6:14: Message type \"glassbox.triton.ModelConfig\" has no field named "
                     "\"optimization\"."),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("is a Triton field glassbox does not support"), std::string::npos) << why;
  ASSERT_EQ(refusing->startup_report().failures.size(), 1u);
  EXPECT_TRUE(refusing->startup_report().serving.empty());
}

TEST(Engine, EveryTritonFieldGlassboxDoesNotImplementIsSkipped) {
  // Each of Triton's fields that glassbox's message leaves out, as Triton's own configs write them.
  const fs::path repo = glassbox::testing::temp_dir("engine-config-every-triton-field");
  write_model(repo, "everything",
              "name: \"everything\"\nplatform: \"pytorch_libtorch\"\nmax_batch_size: 8\n"
              "input [ { name: \"INPUT__0\" data_type: TYPE_FP32 dims: [ 2 ] is_non_linear_format_io: false } ]\n"
              "output [ { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: [ 2 ] is_non_linear_format_io: true } ]\n"
              "optimization { cuda { graphs: true } input_pinned_memory { enable: true } }\n"
              "sequence_batching { max_sequence_idle_microseconds: 5000000 oldest { max_candidate_sequences: 4 } }\n"
              "batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: \"N\" data_type: TYPE_INT32 "
              "source_input: \"INPUT__0\" } ]\n"
              "batch_output [ { target_name: \"OUTPUT__0\" kind: BATCH_SCATTER_WITH_INPUT_SHAPE "
              "source_input: \"INPUT__0\" } ]\n"
              "cc_model_filenames { key: \"7.5\" value: \"model_t4.pt\" }\n"
              "metric_tags { key: \"team\" value: \"vision\" }\n"
              "model_operations { op_library_filename: \"libops.so\" }\n"
              "model_repository_agents { agents [ { name: \"checksum\" } ] }\n"
              "model_metrics { metric_control [ { metric_identifier { family: \"nv_inference_request_duration_us\" } "
              "histogram_options { buckets: [ 1, 10 ] } } ] }\n"
              "instance_group [ { count: 1 kind: KIND_CPU profile: [ \"p\" ] rate_limiter { resources [ { name: "
              "\"R\" count: 1 } ] priority: 1 } secondary_devices [ { kind: KIND_NVDLA device_id: 0 } ] } ]\n",
              kScaleSource, {{"scale", torch::ones({1})}});
  write_model(repo, "ensemble",
              "name: \"ensemble\"\nplatform: \"pytorch_libtorch\"\nmax_batch_size: 8\n"
              "input [ { name: \"INPUT__0\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
              "output [ { name: \"OUTPUT__0\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
              "ensemble_scheduling { step [ { model_name: \"a\" model_version: -1 input_map { key: \"x\" value: "
              "\"INPUT__0\" } } ] }\n",
              kScaleSource, {{"scale", torch::ones({1})}});
  auto engine = engine_for(repo);
  const auto index = engine->repository_index(false);
  EXPECT_EQ(
      reason_of(index, "everything", "READY"),
      "config.pbtxt skipped Triton fields glassbox does not implement: input[0].is_non_linear_format_io (line 4), "
      "output[0].is_non_linear_format_io "
      "(line 5), optimization (line 6), sequence_batching (line 7), batch_input (line 8), batch_output (line 9), "
      "cc_model_filenames (line 10), metric_tags (line 11), model_operations (line 12), "
      "model_repository_agents (line 13), model_metrics (line 14), instance_group[0].profile (line 15), "
      "instance_group[0].rate_limiter (line 15), instance_group[0].secondary_devices (line 15)");
  EXPECT_EQ(reason_of(index, "ensemble", "READY"),
            "config.pbtxt skipped Triton fields glassbox does not implement: ensemble_scheduling (line 6)");
  EXPECT_TRUE(engine->ready());
}

TEST(Engine, ConfigOverrideFollowsTheSameRules) {
  const fs::path repo = glassbox::testing::temp_dir("engine-override-rules");
  write_scale_model(repo, "m", {1});
  auto engine = engine_for(repo, ModelControlMode::kExplicit, {"m"});
  const std::string io = R"("input": [{"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": [2]DIMZ}],
      "output": [{"name": "OUTPUT__0", "data_type": "TYPE_FP32", "dims": [2]}])";
  const auto config = [&io](const std::string& extra, const std::string& dimz = "") {
    std::string text = io;
    text.replace(text.find("DIMZ"), 4, dimz);
    return R"({"platform": "pytorch_libtorch", "max_batch_size": 8, )" + text + extra + "}";
  };
  // A field in no Triton schema: refused with the closest name; the serving version stays.
  const Error misspelt = error_of([&] { engine->load_model("m", config("", R"(, "dimz": [2])")); });
  EXPECT_EQ(misspelt.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(misspelt.message(),
            "model 'm': config override: input[0]: Message type \"glassbox.triton.ModelInput\" has no field named "
            "\"dimz\".");
  EXPECT_EQ(misspelt.hint(), "did you mean \"dims\"?");
  EXPECT_TRUE(engine->model_ready("m", 1));
  // A Triton field glassbox would skip, with a value of the wrong type.
  const Error wrong = error_of([&] { engine->load_model("m", config(R"(, "optimization": 5)")); });
  EXPECT_EQ(wrong.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(wrong.message(),
            "model 'm': config override: Triton's field \"optimization\" of ModelConfig is a message, found number.");
  // A wrong type in a field glassbox reads.
  EXPECT_EQ(error_of([&] { engine->load_model("m", config(R"(, "max_batch_size": "eight")")); }).code(),
            ErrorCode::kInvalidArgument);

  // Triton's fields glassbox does not implement (proto or JSON names): skipped, named in the index.
  engine->load_model("m", config(R"(, "optimization": {"graph": {"level": 1}},
      "instance_group": [{"count": 1, "kind": "KIND_CPU", "rateLimiter": {"priority": 1}}])"));
  EXPECT_EQ(reason_of(engine->repository_index(false), "m", "READY"),
            "the config override skipped Triton fields glassbox does not implement: instance_group[0].rate_limiter, "
            "optimization");
}

TEST(Engine, RepositoryThatIsMissingOrNotADirectoryIsRefusedNamingTheFix) {
  const fs::path dir = glassbox::testing::temp_dir("engine-no-repo");
  const Error missing = error_of([&] { engine_for(dir / "absent"); });
  EXPECT_EQ(missing.code(), ErrorCode::kNotFound);
  EXPECT_EQ(missing.message(), "model repository '" + (dir / "absent").string() + "' does not exist");
  EXPECT_NE(missing.hint().find("NAME/config.pbtxt + NAME/1/model.pt"), std::string::npos) << missing.hint();
  write_file_atomic(dir / "file", "not a directory");
  const Error file = error_of([&] { engine_for(dir / "file"); });
  EXPECT_EQ(file.code(), ErrorCode::kNotFound);
  EXPECT_EQ(file.message(), "model repository '" + (dir / "file").string() + "' is not a directory");
  // An empty repository is the caller's to judge: nothing loads, nothing fails.
  fs::create_directories(dir / "empty");
  const StartupReport empty = engine_for(dir / "empty")->startup_report();
  EXPECT_TRUE(empty.models.empty());
  EXPECT_TRUE(empty.failures.empty());
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
  // Statistics of a model with no available version are an error (Triton's), not an empty list.
  EXPECT_EQ(error_of([&] { engine->statistics("b", 0); }).message(),
            "Request for unknown model: 'b' has no available versions");

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
