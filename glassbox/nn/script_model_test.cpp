// ScriptModel: TorchScript files saved by Python torch (tests/reference/make_script_model.py), run
// by glassbox and checked against the outputs Python torch computed for the same inputs.
#include "glassbox/nn/script_model.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/core/safetensors.h"
#include "glassbox/testing/testing.h"

namespace glassbox::nn {
namespace {

namespace fs = std::filesystem;

// One Python-made model per architecture, shared by the tests.
const fs::path& python_model(const std::string& arch) {
  static std::map<std::string, fs::path> made;
  auto it = made.find(arch);
  if (it == made.end()) {
    const fs::path dir = testing::temp_dir("script_model_" + arch);
    // "resnet18-trace": torch.jit.trace instead of torch.jit.script.
    const bool trace = arch.size() > 6 && arch.substr(arch.size() - 6) == "-trace";
    std::vector<std::string> args = {
        "--out",   dir.string(), "--arch",     trace ? arch.substr(0, arch.size() - 6) : arch,
        "--first", "6",          "--fit-head", "0"};
    if (trace) args.push_back("--trace");
    testing::run_python("tests/reference/make_script_model.py", args);
    it = made.emplace(arch, dir).first;
  }
  return it->second;
}

std::unique_ptr<ScriptModel> load(const std::string& arch) {
  ScriptModelOptions o;
  o.sample_shape = {1, 28, 28};
  o.num_classes = 10;
  return load_script_model(python_model(arch) / "model.pt", o);
}

// "inputs" (float32 [6, 1, 28, 28], normalised test images) or "logits" (Python torch's outputs).
at::Tensor first(const std::string& arch, const std::string& what) {
  static std::map<std::string, SafetensorsFile> files;
  auto it = files.find(arch);
  if (it == files.end()) it = files.emplace(arch, load_safetensors(python_model(arch) / "first.safetensors")).first;
  const at::Tensor* t = it->second.find(what);
  if (t == nullptr) throw std::runtime_error("no " + what + " in first.safetensors");
  return *t;
}

double max_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

TEST(ScriptModel, ForwardMatchesPythonTorch) {
  for (const std::string arch : {"resnet18", "cnn"}) {
    auto m = load(arch);
    m->module()->eval();
    torch::NoGradGuard no_grad;
    const at::Tensor x = first(arch, "inputs");
    const at::Tensor ref = first(arch, "logits");
    const at::Tensor y = m->forward(x);
    ASSERT_EQ(y.sizes(), ref.sizes()) << arch;
    const double d = max_diff(y, ref);
    std::cout << arch << ": max |glassbox - python| logits " << d << "\n";
    EXPECT_LE(d, 1e-5) << arch;
  }
}

TEST(ScriptModel, ModuleMirrorsTheScriptModulesTensors) {
  auto m = load("resnet18");
  auto params = m->module()->named_parameters();
  auto script_params = m->script().named_parameters();
  std::size_t n = 0;
  for (const auto& p : script_params) {
    ASSERT_TRUE(params.contains(p.name)) << p.name;
    EXPECT_TRUE(params[p.name].is_same(p.value)) << p.name;  // the same tensor, not a copy
    ++n;
  }
  EXPECT_EQ(params.size(), n);
  EXPECT_EQ(n, 62u);  // torchvision resnet18: 20 convs + 20 BNs x 2 + fc x 2
  EXPECT_TRUE(m->module()->named_buffers().contains("layer4.1.bn2.running_var"));
  // train()/eval() reach the TorchScript module: BatchNorm in training mode normalises with the
  // batch's statistics, so the outputs change.
  const at::Tensor x = first("resnet18", "inputs");
  torch::NoGradGuard no_grad;
  m->module()->eval();
  EXPECT_FALSE(m->script().is_training());
  const at::Tensor eval_out = m->forward(x);
  m->module()->train();
  EXPECT_TRUE(m->script().is_training());
  EXPECT_TRUE(m->script().attr("layer4").toModule().is_training());
  const at::Tensor before = m->module()->named_buffers()["bn1.running_mean"].clone();
  const at::Tensor train_out = m->forward(x);
  EXPECT_GT(max_diff(eval_out, train_out), 1e-3);
  // ... and updates the running statistics, which the mirror sees (the same tensors).
  EXPECT_GT(max_diff(before, m->module()->named_buffers()["bn1.running_mean"]), 1e-6);
  m->module()->eval();
  EXPECT_FALSE(m->script().attr("layer4").toModule().is_training());
}

TEST(ScriptModel, StagesComposeToForwardExactly) {
  const std::vector<std::string> resnet_names = {"conv1",    "bn1",      "relu",     "maxpool",  "layer1.0",
                                                 "layer1.1", "layer2.0", "layer2.1", "layer3.0", "layer3.1",
                                                 "layer4.0", "layer4.1", "avgpool",  "fc"};
  const std::vector<std::string> cnn_names = {
      "features.conv0_0", "features.bn0_0",   "features.relu0_0", "features.pool0",     "features.conv1_0",
      "features.bn1_0",   "features.relu1_0", "features.pool1",   "classifier.flatten", "classifier.fc",
      "classifier.relu",  "classifier.drop",  "classifier.out"};
  for (const std::string arch : {"resnet18", "cnn", "resnet18-trace"}) {
    auto m = load(arch);
    m->module()->eval();
    const std::vector<Stage> stages = m->stages();
    ASSERT_FALSE(stages.empty()) << arch << ": " << m->stages_note();
    std::vector<std::string> names;
    for (const auto& s : stages) names.push_back(s.name);
    std::vector<std::string> expected = arch == "cnn" ? cnn_names : resnet_names;
    // The tracer records no call for an nn.Identity (it returns its input): no maxpool stage.
    if (arch == "resnet18-trace") expected.erase(std::find(expected.begin(), expected.end(), "maxpool"));
    EXPECT_EQ(names, expected);
    torch::NoGradGuard no_grad;
    const at::Tensor x = first(arch, "inputs");
    at::Tensor y = x;
    for (const auto& s : stages) {
      y = s.run(y);
      EXPECT_EQ(s.spatial, y.dim() == 4) << s.name;
    }
    const at::Tensor ref = m->forward(x);
    std::cout << arch << ": stages vs forward max difference " << max_diff(y, ref) << ", vs Python "
              << max_diff(y, first(arch, "logits")) << "\n";
    EXPECT_TRUE(torch::equal(y, ref)) << arch << " " << max_diff(y, ref);
    EXPECT_LE(max_diff(y, first(arch, "logits")), 1e-5);
    // A stage's output is the child module's own output: layer4 run on layer3's output.
    if (arch != "cnn") {
      at::Tensor a = x;
      std::size_t i = 0;
      for (; stages[i].name != "layer4.0"; ++i) a = stages[i].run(a);
      const at::Tensor layer4 = m->script().attr("layer4").toModule().forward({a}).toTensor();
      a = stages[i + 1].run(stages[i].run(a));
      EXPECT_TRUE(torch::equal(a, layer4));
      EXPECT_EQ(a.sizes(), (c10::IntArrayRef{6, 512, 4, 4}));
    }
  }
}

TEST(ScriptModel, ForwardsThatAreNotChainsHaveNoStages) {
  const fs::path dir = testing::temp_dir("script_model_nochain");
  // A skip connection around top-level children, and a tuple output.
  const std::string code =
      "import torch, sys\n"
      "class Skip(torch.nn.Module):\n"
      "    def __init__(self):\n"
      "        super().__init__()\n"
      "        self.a = torch.nn.Conv2d(1, 4, 3, padding=1)\n"
      "        self.b = torch.nn.Conv2d(4, 1, 3, padding=1)\n"
      "        self.fc = torch.nn.Linear(16, 3)\n"
      "    def forward(self, x):\n"
      "        return self.fc((self.b(self.a(x)) + x).flatten(1))\n"
      "class Pair(torch.nn.Module):\n"
      "    def __init__(self):\n"
      "        super().__init__()\n"
      "        self.fc = torch.nn.Linear(16, 3)\n"
      "    def forward(self, x):\n"
      "        y = self.fc(x.flatten(1))\n"
      "        return y, y\n"
      "torch.manual_seed(0)\n"
      "torch.jit.save(torch.jit.script(Skip()), sys.argv[1] + '/skip.pt')\n"
      "torch.jit.save(torch.jit.script(Pair()), sys.argv[1] + '/pair.pt')\n"
      "torch.save(Skip().state_dict(), sys.argv[1] + '/state.pt')\n";
  write_file_atomic(dir / "make.py", code);
  auto [rc, out] =
      testing::run_command(testing::python().string() + " " + (dir / "make.py").string() + " " + dir.string());
  ASSERT_EQ(rc, 0) << out;
  ScriptModelOptions o;
  o.sample_shape = {1, 4, 4};
  auto skip = load_script_model(dir / "skip.pt", o);
  EXPECT_EQ(skip->forward(torch::zeros({2, 1, 4, 4})).sizes(), (c10::IntArrayRef{2, 3}));
  // Only fc's output is a cut (the sum reads x around a and b): one stage is no chain.
  EXPECT_TRUE(skip->stages().empty());
  EXPECT_NE(skip->stages_note().find("not a chain"), std::string::npos) << skip->stages_note();

  auto pair = load_script_model(dir / "pair.pt", o);
  try {
    pair->forward(torch::zeros({2, 1, 4, 4}));
    FAIL() << "a tuple output must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("returned a tuple of 2 values, not a [N, K] tensor"), std::string::npos)
        << e.what();
  }
  try {
    load_script_model(dir / "state.pt", o);
    FAIL() << "a state dict must be an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDataLoss);
    EXPECT_NE(e.message().find("is not a TorchScript file"), std::string::npos) << e.what();
  }
  write_file_atomic(dir / "junk.pt", "not a zip");
  EXPECT_THROW(load_script_model(dir / "junk.pt", o), Error);
  try {
    load_script_model(dir / "missing.pt", o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
  ScriptModelOptions wrong = o;
  wrong.num_classes = 5;
  try {
    load_script_model(dir / "skip.pt", wrong)->forward(torch::zeros({2, 1, 4, 4}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("returns 3 outputs per sample, the contract says 5 classes"), std::string::npos)
        << e.what();
  }
  try {
    load_script_model(dir / "skip.pt", o)->forward(torch::zeros({2, 3, 4, 4}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("failed on an input of shape [2, 3, 4, 4]"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace glassbox::nn
