// The TorchScript and glassbox backends: batching equals running alone, every wire data type,
// BYTES in and out, tuple/dict outputs, no batch axis, the glassbox preprocessing, load checks
// against the config, warm-up and per-instance thread counts.
#include "glassbox/serve/engine/backend.h"

#include <barrier>
#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "glassbox/base/files.h"
#include "glassbox/export/repository.h"
#include "glassbox/serve/engine/test_repository.h"
#include "glassbox/testing/testing.h"

namespace glassbox::serve {
namespace {

namespace fs = std::filesystem;
using testing::from_wire;
using testing::strings_of;
using testing::wire;
using testing::wire_strings;
using testing::write_model;

constexpr const char* kAffineConfig = R"(
name: "affine"
platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
)";
constexpr const char* kAffineSource = "def forward(self, x):\n  return torch.matmul(x, self.w) + self.b\n";

testing::Buffers affine_weights() {
  torch::manual_seed(3);
  return {{"w", torch::randn({4, 3})}, {"b", torch::randn({3})}};
}

std::shared_ptr<Backend> load(const fs::path& dir, std::int64_t version = 1, const BackendOptions& o = {}) {
  return load_backend(exporter::read_model_repository_entry(dir), version, o);
}

// Runs `requests` as one batch (each request's inputs; batch size = the first input's axis 0).
std::vector<std::vector<Tensor>> run(ModelInstance& inst, const std::vector<std::vector<Tensor>>& requests,
                                     ExecuteTimings* timings = nullptr) {
  std::vector<BatchItem> items;
  for (const auto& r : requests) items.push_back({&r, r.at(0).shape.empty() ? 1 : r.at(0).shape[0]});
  ExecuteTimings t;
  auto out = inst.execute(items, t);
  if (timings) *timings = t;
  return out;
}

// The error load_backend throws for `dir`.
Error load_error(const fs::path& dir) {
  try {
    load(dir);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error loading " << dir;
  return Error(ErrorCode::kInternal, "none");
}

TEST(Backend, BatchOfSeveralRequestsEqualsEachAlone) {
  const fs::path repo = glassbox::testing::temp_dir("backend-affine");
  const auto weights = affine_weights();
  const fs::path dir = write_model(repo, "affine", kAffineConfig, kAffineSource, weights);
  auto backend = load(dir);
  auto inst = backend->create_instance(0);
  torch::manual_seed(7);
  const at::Tensor a = torch::randn({2, 4}), b = torch::randn({3, 4}), c = torch::randn({1, 4});
  const std::vector<std::vector<Tensor>> reqs = {{wire("INPUT__0", a)}, {wire("INPUT__0", b)}, {wire("INPUT__0", c)}};
  ExecuteTimings t;
  const auto batched = run(*inst, reqs, &t);
  ASSERT_EQ(batched.size(), 3u);
  EXPECT_GT(t.infer_ns, 0u);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    const auto alone = run(*inst, {reqs[i]});
    ASSERT_EQ(batched[i].size(), 1u);
    EXPECT_EQ(batched[i][0].name, "OUTPUT__0");
    EXPECT_EQ(batched[i][0].datatype, DataType::kFp32);
    EXPECT_EQ(batched[i][0].shape, (std::vector<std::int64_t>{reqs[i][0].shape[0], 3}));
    EXPECT_TRUE(torch::allclose(from_wire(batched[i][0]), from_wire(alone[0][0]), 1e-6, 1e-6)) << i;
    const at::Tensor want = torch::matmul(from_wire(reqs[i][0]), weights[0].second) + weights[1].second;
    EXPECT_TRUE(torch::allclose(from_wire(batched[i][0]), want, 1e-5, 1e-6)) << i;
  }
  // The per-request outputs are views of one output tensor (no copy): consecutive rows.
  EXPECT_EQ(batched[0][0].data + batched[0][0].size, batched[1][0].data);
  EXPECT_EQ(batched[0][0].size, 2u * 3u * 4u);
}

TEST(Backend, IntegerUint8AndBoolInputsAndTupleOutputs) {
  const fs::path repo = glassbox::testing::temp_dir("backend-types");
  const fs::path dir = write_model(repo, "types", R"(
name: "types"
platform: "pytorch_libtorch"
max_batch_size: 4
input [ { name: "INPUT__0" data_type: TYPE_INT64 dims: [ 2 ] },
        { name: "INPUT__1" data_type: TYPE_UINT8 dims: [ 3 ] },
        { name: "INPUT__2" data_type: TYPE_BOOL dims: [ 3 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_INT64 dims: [ 2 ] },
         { name: "OUTPUT__1" data_type: TYPE_UINT8 dims: [ 3 ] },
         { name: "OUTPUT__2" data_type: TYPE_BOOL dims: [ 3 ] },
         { name: "OUTPUT__3" data_type: TYPE_INT32 dims: [ 1 ] } ]
)",
                                   "def forward(self, a, b, c):\n"
                                   "  n = (b.int() * c.int()).sum(1, keepdim=True).int()\n"
                                   "  return a * 2 + 1, b + 1, c.logical_not(), n\n");
  auto inst = load(dir)->create_instance(0);
  const at::Tensor a = torch::tensor({{int64_t{1}, int64_t{-2}}, {int64_t{30}, int64_t{4000000000}}}, torch::kLong);
  const at::Tensor b = torch::tensor({{0, 7, 254}, {9, 9, 9}}, torch::kByte);
  const at::Tensor c = torch::tensor({{true, false, true}, {false, false, true}}, torch::kBool);
  const auto out = run(*inst, {{wire("INPUT__0", a), wire("INPUT__1", b), wire("INPUT__2", c)}});
  ASSERT_EQ(out.at(0).size(), 4u);
  EXPECT_EQ(out[0][0].datatype, DataType::kInt64);
  EXPECT_TRUE(torch::equal(from_wire(out[0][0]), a * 2 + 1));
  EXPECT_EQ(out[0][1].datatype, DataType::kUint8);
  EXPECT_TRUE(torch::equal(from_wire(out[0][1]), torch::tensor({{1, 8, 255}, {10, 10, 10}}, torch::kByte)));
  EXPECT_EQ(out[0][2].datatype, DataType::kBool);
  EXPECT_TRUE(torch::equal(from_wire(out[0][2]), c.logical_not()));
  EXPECT_EQ(out[0][3].datatype, DataType::kInt32);
  EXPECT_TRUE(torch::equal(from_wire(out[0][3]), torch::tensor({{254}, {9}}, torch::kInt)));
}

TEST(Backend, BytesInAsListOfStringsAndOut) {
  const fs::path repo = glassbox::testing::temp_dir("backend-bytes");
  const fs::path dir = write_model(repo, "text", R"(
name: "text"
platform: "pytorch_libtorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_STRING dims: [ 2 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_INT64 dims: [ 2 ] },
         { name: "OUTPUT__1" data_type: TYPE_STRING dims: [ 2 ] } ]
)",
                                   "def forward(self, x: List[str]) -> Tuple[Tensor, List[str]]:\n"
                                   "  n = torch.tensor([len(s) for s in x])\n"
                                   "  return n.reshape(-1, 2), [s.upper() for s in x]\n");
  auto inst = load(dir)->create_instance(0);
  const std::string binary("a\0b", 3);
  const std::vector<std::vector<Tensor>> reqs = {{wire_strings("INPUT__0", {"ab", "", "xyz", binary}, {2, 2})},
                                                 {wire_strings("INPUT__0", {"hello", "w"}, {1, 2})}};
  const auto out = run(*inst, reqs);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(torch::equal(from_wire(out[0][0]), torch::tensor({{2, 0}, {3, 3}}, torch::kLong)));
  EXPECT_TRUE(torch::equal(from_wire(out[1][0]), torch::tensor({{5, 1}}, torch::kLong)));
  EXPECT_EQ(out[0][1].datatype, DataType::kBytes);
  EXPECT_EQ(out[0][1].shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(strings_of(out[0][1]), (std::vector<std::string>{"AB", "", "XYZ", std::string("A\0B", 3)}));
  EXPECT_EQ(out[1][1].shape, (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(strings_of(out[1][1]), (std::vector<std::string>{"HELLO", "W"}));
}

TEST(Backend, NoBatchAxisWhenMaxBatchSizeIsZero) {
  const fs::path repo = glassbox::testing::temp_dir("backend-nobatch");
  const fs::path dir = write_model(repo, "sum", R"(
name: "sum"
platform: "pytorch_libtorch"
max_batch_size: 0
input [ { name: "INPUT__0" data_type: TYPE_FP64 dims: [ 2, 3 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP64 dims: [ 3 ] } ]
)",
                                   "def forward(self, x):\n  return x.sum(0)\n");
  auto inst = load(dir)->create_instance(0);
  const at::Tensor x = torch::arange(6, torch::kDouble).reshape({2, 3});
  std::vector<Tensor> in = {wire("INPUT__0", x)};
  const BatchItem item{&in, 1};
  ExecuteTimings t;
  const auto out = inst->execute({&item, 1}, t);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0][0].shape, (std::vector<std::int64_t>{3}));
  EXPECT_TRUE(torch::equal(from_wire(out[0][0]), torch::tensor({3.0, 5.0, 7.0}, torch::kDouble)));
}

TEST(Backend, DictOutputsByNameAndInputsByArgumentName) {
  const fs::path repo = glassbox::testing::temp_dir("backend-dict");
  const fs::path dir = write_model(repo, "named", R"(
name: "named"
platform: "pytorch_libtorch"
max_batch_size: 4
input [ { name: "scale" data_type: TYPE_FP32 dims: [ 1 ] }, { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "sum" data_type: TYPE_FP32 dims: [ 1 ] }, { name: "scaled" data_type: TYPE_FP32 dims: [ 2 ] } ]
)",
                                   "def forward(self, x, scale) -> Dict[str, Tensor]:\n"
                                   "  return {'scaled': x * scale, 'sum': x.sum(1, keepdim=True)}\n");
  auto inst = load(dir)->create_instance(0);
  const at::Tensor x = torch::tensor({{1.0f, 2.0f}}), s = torch::tensor({{10.0f}});
  const auto out = run(*inst, {{wire("scale", s), wire("x", x)}});
  EXPECT_EQ(out[0][0].name, "sum");
  EXPECT_TRUE(torch::equal(from_wire(out[0][0]), torch::tensor({{3.0f}})));
  EXPECT_EQ(out[0][1].name, "scaled");
  EXPECT_TRUE(torch::equal(from_wire(out[0][1]), torch::tensor({{10.0f, 20.0f}})));
}

TEST(Backend, InputReshapeAndUnsignedWideTypes) {
  const fs::path repo = glassbox::testing::temp_dir("backend-reshape");
  const fs::path dir = write_model(repo, "r", R"(
name: "r"
platform: "pytorch_libtorch"
max_batch_size: 4
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] reshape: { shape: [ 2, 2 ] } },
        { name: "INPUT__1" data_type: TYPE_UINT16 dims: [ 1 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2 ] }, { name: "OUTPUT__1" data_type: TYPE_INT32 dims: [ 1 ] } ]
)",
                                   "def forward(self, x, u):\n  return x.sum(2), u.int()\n");
  auto inst = load(dir)->create_instance(0);
  const at::Tensor x = torch::arange(8, torch::kFloat).reshape({2, 4});
  const auto out = run(*inst, {{wire("INPUT__0", x), wire("INPUT__1", torch::tensor({{65535}, {7}}).to(at::kUInt16))}});
  EXPECT_TRUE(torch::equal(from_wire(out[0][0]), torch::tensor({{1.0f, 5.0f}, {9.0f, 13.0f}})));
  EXPECT_TRUE(torch::equal(from_wire(out[0][1]), torch::tensor({{65535}, {7}}, torch::kInt)));
}

// A glassbox repository model: contract + platform glassbox; raw uint8 pixels in.
fs::path write_glassbox_model(const fs::path& repo, const std::string& name, const std::string& output_param,
                              TaskKind task = TaskKind::kClassification) {
  nn::ModelContract c;
  c.name = name;
  c.task = task;
  c.input_shape = {3, 2, 2};
  c.scale = 1.0 / 255.0;
  c.mean = {0.1, 0.2, 0.3};
  c.std = {0.5, 0.25, 2.0};
  c.channel_order = nn::ChannelOrder::kBGR;
  c.num_classes = 12;
  const std::string config = "name: \"" + name + R"("
platform: "glassbox"
max_batch_size: 4
input [ { name: "INPUT__0" data_type: TYPE_UINT8 dims: [ 3, 2, 2 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 12 ] } ]
)" + output_param;
  const fs::path dir = write_model(repo, name, config, "def forward(self, x):\n  return x.flatten(1)\n");
  nn::write_contract(dir / "contract.json", c);
  return dir;
}

TEST(Backend, GlassboxPlatformAppliesTheContractsPreprocessing) {
  const fs::path repo = glassbox::testing::temp_dir("backend-glassbox");
  auto inst = load(write_glassbox_model(repo, "raw", ""))->create_instance(0);
  const at::Tensor pixels = torch::randint(0, 256, {2, 3, 2, 2}, torch::kByte);
  const auto out = run(*inst, {{wire("INPUT__0", pixels)}});
  // By hand: scale, RGB -> BGR, then (x - mean[c]) / std[c] in the model's channel order.
  const at::Tensor x = (pixels.to(torch::kFloat) / 255.0).flip({1});
  const at::Tensor mean = torch::tensor({0.1f, 0.2f, 0.3f}).reshape({3, 1, 1});
  const at::Tensor sd = torch::tensor({0.5f, 0.25f, 2.0f}).reshape({3, 1, 1});
  const at::Tensor want = ((x - mean) / sd).flatten(1);
  EXPECT_TRUE(torch::allclose(from_wire(out[0][0]), want, 1e-5, 1e-6))
      << (from_wire(out[0][0]) - want).abs().max().item<float>();

  auto probs =
      load(write_glassbox_model(repo, "probs",
                                "parameters { key: \"glassbox.output\" value: { string_value: \"probabilities\" } }"))
          ->create_instance(0);
  const auto p = run(*probs, {{wire("INPUT__0", pixels)}});
  EXPECT_TRUE(torch::allclose(from_wire(p[0][0]), want.softmax(1), 1e-5, 1e-7));
  // A multi-label model's probabilities are a sigmoid per label; a regression model has none.
  const std::string as_probs = "parameters { key: \"glassbox.output\" value: { string_value: \"probabilities\" } }";
  auto multi = load(write_glassbox_model(repo, "multi", as_probs, TaskKind::kMultilabel))->create_instance(0);
  EXPECT_TRUE(torch::allclose(from_wire(run(*multi, {{wire("INPUT__0", pixels)}})[0][0]), want.sigmoid(), 1e-5, 1e-7));
  const Error reg = load_error(write_glassbox_model(repo, "reg", as_probs, TaskKind::kRegression));
  EXPECT_NE(reg.message().find("but the model is a regression model"), std::string::npos) << reg.one_line();
  auto values = load(write_glassbox_model(repo, "values", "", TaskKind::kRegression))->create_instance(0);
  EXPECT_TRUE(torch::allclose(from_wire(run(*values, {{wire("INPUT__0", pixels)}})[0][0]), want, 1e-5, 1e-6));

  // No contract.json: NotFound naming the file.
  fs::remove(repo / "raw" / "contract.json");
  const Error e = load_error(repo / "raw");
  EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  EXPECT_NE(e.message().find("contract.json"), std::string::npos) << e.message();
}

TEST(Backend, ConfigContradictingTheModelIsRefusedNamingOutputAndDims) {
  const fs::path repo = glassbox::testing::temp_dir("backend-contradict");
  const auto weights = affine_weights();
  std::string config = kAffineConfig;
  config.replace(config.find("dims: [ 3 ]"), 11, "dims: [ 5 ]");
  Error e = load_error(write_model(repo, "affine", config, kAffineSource, weights));
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(e.message().find("model 'affine' version 1: output 'OUTPUT__0' has dims [3]"), std::string::npos)
      << e.one_line();
  EXPECT_NE(e.message().find("config.pbtxt says [5]"), std::string::npos) << e.one_line();

  config = kAffineConfig;
  config.replace(config.find("data_type: TYPE_FP32 dims: [ 3 ]"), 20, "data_type: TYPE_INT64");
  e = load_error(write_model(repo, "affine", config, kAffineSource, weights));
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(e.message().find("output 'OUTPUT__0' is TYPE_FP32 (Float), config.pbtxt says TYPE_INT64"),
            std::string::npos)
      << e.one_line();

  config = kAffineConfig;
  config.replace(config.find("output ["), 8, "output [ { name: \"OUTPUT__1\" data_type: TYPE_FP32 dims: [ 3 ] },");
  e = load_error(write_model(repo, "affine", config, kAffineSource, weights));
  EXPECT_NE(e.message().find("output 'OUTPUT__1' is element 1 of forward()'s result, which has 1 output"),
            std::string::npos)
      << e.one_line();

  // An input of the wrong width: forward fails on the zeros shaped as the config says.
  config = kAffineConfig;
  config.replace(config.find("dims: [ 4 ]"), 11, "dims: [ 6 ]");
  e = load_error(write_model(repo, "affine", config, kAffineSource, weights));
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(e.message().find("failed on a batch of 1"), std::string::npos) << e.one_line();
  EXPECT_NE(e.message().find("shaped as config.pbtxt says"), std::string::npos) << e.one_line();

  // BYTES in the config for a Tensor argument.
  config = kAffineConfig;
  config.replace(config.find("TYPE_FP32 dims: [ 4 ]"), 9, "TYPE_STRING");
  e = load_error(write_model(repo, "affine", config, kAffineSource, weights));
  EXPECT_NE(e.message().find("input 'INPUT__0' is TYPE_STRING in config.pbtxt but forward() argument 'x' is Tensor"),
            std::string::npos)
      << e.one_line();

  // Two inputs for a one-argument forward.
  config = kAffineConfig;
  config.replace(config.find("input ["), 7, "input [ { name: \"INPUT__1\" data_type: TYPE_FP32 dims: [ 1 ] },");
  e = load_error(write_model(repo, "affine", config, kAffineSource, weights));
  EXPECT_NE(e.message().find("input 'INPUT__1' is forward() argument 1 but forward takes 1 (x)"), std::string::npos)
      << e.one_line();
}

TEST(Backend, MissingCorruptFileAndUnknownPlatform) {
  const fs::path repo = glassbox::testing::temp_dir("backend-files");
  const fs::path dir = write_model(repo, "affine", kAffineConfig, kAffineSource, affine_weights());
  fs::remove(dir / "1" / "model.pt");
  Error e = load_error(dir);
  EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  EXPECT_NE(e.message().find((dir / "1" / "model.pt").string()), std::string::npos) << e.one_line();

  write_file_atomic(dir / "1" / "model.pt", "not a zip archive");
  e = load_error(dir);
  EXPECT_EQ(e.code(), ErrorCode::kDataLoss);
  EXPECT_NE(e.message().find("is not a TorchScript archive"), std::string::npos) << e.one_line();
  EXPECT_NE(e.hint().find("torch.jit.save"), std::string::npos) << e.one_line();

  std::string config = kAffineConfig;
  config.replace(config.find("pytorch_libtorch"), 16, "onnxruntime_onnx");
  write_file_atomic(dir / "config.pbtxt", config);
  e = load_error(dir);
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(e.message().find("platform \"onnxruntime_onnx\" is not served"), std::string::npos) << e.one_line();
  EXPECT_NE(e.hint().find("pytorch_libtorch"), std::string::npos) << e.one_line();

  // Triton's other spelling: backend "pytorch" without a platform.
  const fs::path ok = write_model(repo, "affine2", R"(
name: "affine2"
backend: "pytorch"
max_batch_size: 8
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 3 ] } ]
)",
                                  kAffineSource, affine_weights());
  EXPECT_NO_THROW(load(ok));
}

TEST(Backend, WarmupRunsEachSampleCountTimesAndInstancesOwnTheirState) {
  const fs::path repo = glassbox::testing::temp_dir("backend-warmup");
  // forward returns how many times this module ran before.
  const std::string source =
      "def forward(self, x):\n  n = self.calls\n  self.calls = n + 1\n  return x * 0.0 + float(n)\n";
  const fs::path dir = write_model(repo, "counter", R"(
name: "counter"
platform: "pytorch_libtorch"
max_batch_size: 4
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2 ] } ]
model_warmup [ { name: "zeros" batch_size: 3 count: 2 inputs { key: "INPUT__0" value: { data_type: TYPE_FP32 dims: [ 2 ] zero_data: true } } },
               { name: "file" batch_size: 1 inputs { key: "INPUT__0" value: { data_type: TYPE_FP32 dims: [ 2 ] input_data_file: "x.bin" } } } ]
)",
                                   source, {}, {1}, {"calls"});
  const float two[2] = {1.5f, -2.0f};
  fs::create_directories(dir / "warmup");
  write_file_atomic(dir / "warmup" / "x.bin", std::string(reinterpret_cast<const char*>(two), sizeof(two)));
  auto backend = load(dir);  // the load check runs the prototype once: calls = 1 in every copy
  auto a = backend->create_instance(0);
  auto b = backend->create_instance(1);
  a->warmup();  // 2 runs of the zeros sample + 1 of the file's
  const auto ra = run(*a, {{wire("INPUT__0", torch::zeros({1, 2}))}});
  const auto rb = run(*b, {{wire("INPUT__0", torch::zeros({1, 2}))}});
  EXPECT_EQ(from_wire(ra[0][0])[0][0].item<float>(), 4.0f);
  EXPECT_EQ(from_wire(rb[0][0])[0][0].item<float>(), 1.0f);

  // A warm-up file of the wrong size fails the load (its check runs the first sample), naming the file.
  write_file_atomic(dir / "warmup" / "x.bin", "123");
  std::string cfg = read_file(dir / "config.pbtxt");
  cfg = cfg.substr(0, cfg.find("model_warmup")) +
        "model_warmup [ { name: \"file\" batch_size: 1 inputs { key: \"INPUT__0\" value: { data_type: TYPE_FP32 "
        "dims: [ 2 ] input_data_file: \"x.bin\" } } } ]\n";
  write_file_atomic(dir / "config.pbtxt", cfg);
  const Error e = load_error(dir);
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(e.message().find("x.bin holds 3 bytes"), std::string::npos) << e.one_line();
}

TEST(Backend, EachInstanceThreadGetsItsOwnIntraOpThreadCount) {
  const fs::path repo = glassbox::testing::temp_dir("backend-threads");
  std::string config = kAffineConfig;
  config += "parameters { key: \"INTRA_OP_THREAD_COUNT\" value: { string_value: \"3\" } }\n";
  auto three = load(write_model(repo, "affine", config, kAffineSource, affine_weights()));
  auto one = load(write_model(repo, "affine", kAffineConfig, kAffineSource, affine_weights()), 1,
                  BackendOptions{.intra_op_threads = 1});
  std::barrier sync(2);
  int seen_three = 0, seen_one = 0;
  auto work = [&sync](Backend& b, int& seen) {
    auto inst = b.create_instance(0);
    sync.arrive_and_wait();  // both threads have set their counts
    run(*inst, {{wire("INPUT__0", torch::ones({2, 4}))}});
    sync.arrive_and_wait();
    seen = at::get_num_threads();
  };
  std::thread t3([&] { work(*three, seen_three); });
  std::thread t1([&] { work(*one, seen_one); });
  t3.join();
  t1.join();
  EXPECT_EQ(seen_three, 3);
  EXPECT_EQ(seen_one, 1);

  config = kAffineConfig;
  config += "parameters { key: \"INTRA_OP_THREAD_COUNT\" value: { string_value: \"many\" } }\n";
  const Error e = load_error(write_model(repo, "affine", config, kAffineSource, affine_weights()));
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(e.message().find("INTRA_OP_THREAD_COUNT is \"many\""), std::string::npos) << e.one_line();
}

TEST(Backend, GpuInstancesWithoutCudaAreUnavailable) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a CUDA device is present";
  const fs::path repo = glassbox::testing::temp_dir("backend-gpu");
  const Error e =
      load_error(write_model(repo, "affine", std::string(kAffineConfig) + "instance_group [ { kind: KIND_GPU } ]\n",
                             kAffineSource, affine_weights()));
  EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
  EXPECT_NE(e.message().find("model 'affine': instance_group[0] is KIND_GPU"), std::string::npos) << e.one_line();
}

TEST(Backend, ModelFailureAtExecuteIsInternalNamingTheModel) {
  const fs::path repo = glassbox::testing::temp_dir("backend-fail");
  const fs::path dir = write_model(repo, "picky", R"(
name: "picky"
platform: "pytorch_libtorch"
max_batch_size: 4
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2 ] } ]
)",
                                   "def forward(self, x):\n"
                                   "  assert bool(x.sum() < 100.0), 'too large'\n"
                                   "  return x\n");
  auto inst = load(dir)->create_instance(0);
  try {
    run(*inst, {{wire("INPUT__0", torch::full({1, 2}, 60.0f))}});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
    EXPECT_NE(e.message().find("model 'picky' version 1 failed on a batch of 1"), std::string::npos) << e.one_line();
    EXPECT_NE(e.message().find("too large"), std::string::npos) << e.one_line();
  }
}

}  // namespace
}  // namespace glassbox::serve
