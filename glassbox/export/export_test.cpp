// Export: lowering, TorchScript and ONNX writers, the package. The reference test checks the
// files with the runtimes users deploy with: Python torch.jit.load, onnx.checker (full_check) and
// onnxruntime (tests/reference/export_ref.py).
#include <zlib.h>

#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/script.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/core/safetensors.h"
#include "glassbox/export/graph.h"
#include "glassbox/export/onnx.h"
#include "glassbox/export/package.h"
#include "glassbox/export/torchscript.h"
#include "glassbox/nn/registry.h"
#include "glassbox/testing/testing.h"

namespace glassbox::exporter {
namespace {

namespace fs = std::filesystem;

// BatchNorm statistics and affine parameters away from the identity, so a wrong eps, a swapped
// mean/var or a training-mode batch norm shows.
void randomise(nn::Model& m, std::uint64_t seed) {
  torch::manual_seed(seed);
  torch::NoGradGuard ng;
  for (auto& b : m.module()->named_buffers()) {
    if (b.key().ends_with("running_mean")) b.value().copy_(torch::randn(b.value().sizes()) * 0.2);
    if (b.key().ends_with("running_var")) b.value().copy_(torch::rand(b.value().sizes()) + 0.5);
  }
  for (auto& p : m.module()->named_parameters()) {
    const bool norm = p.key().find("bn") != std::string::npos || p.key().find("gn") != std::string::npos ||
                      p.key().find("ln") != std::string::npos || p.key().find("downsample.1") != std::string::npos;
    if (norm && p.key().ends_with("weight")) p.value().copy_(torch::rand(p.value().sizes()) + 0.5);
    if (norm && p.key().ends_with("bias")) p.value().copy_(torch::randn(p.value().sizes()) * 0.1);
  }
}

std::unique_ptr<nn::Model> zoo(const std::string& name, const std::vector<std::int64_t>& shape = {1, 28, 28},
                               const std::function<void(nn::ModelOptions&)>& tweak = {}) {
  nn::ModelOptions o;
  o.name = name;
  if (tweak) tweak(o);
  auto m = nn::make_model(o, nn::ModelShape{shape, 10});
  randomise(*m, 7);
  m->module()->eval();
  return m;
}

nn::ModelContract contract_for(const nn::Model& m, const std::vector<std::int64_t>& shape) {
  nn::ModelContract c;
  c.name = "test_" + m.name();
  c.architecture = m.name();
  c.input_shape = shape;
  c.layout = shape.size() == 3 ? nn::InputLayout::kNCHW : nn::InputLayout::kNC;
  c.channel_order = shape.size() != 3 ? nn::ChannelOrder::kNone
                    : shape[0] == 1   ? nn::ChannelOrder::kGray
                    : shape[0] == 3   ? nn::ChannelOrder::kRGB
                                      : nn::ChannelOrder::kNone;
  c.num_classes = 10;
  c.scale = 1.0 / 255;
  c.mean = {0.286};
  c.std = {0.353};
  return c;
}

// The first n images of a (gzipped) IDX file as uint8 [n, H, W]: the export module may not use
// glassbox's data module, and the format is a 16-byte header and the pixels.
at::Tensor read_idx_images(const std::string& path, std::int64_t n) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error("cannot open " + path);
  unsigned char header[16];
  EXPECT_EQ(gzread(f, header, 16), 16);
  auto be32 = [&](int at) {
    return (std::int64_t{header[at]} << 24) | (header[at + 1] << 16) | (header[at + 2] << 8) | header[at + 3];
  };
  const std::int64_t h = be32(8), w = be32(12);
  at::Tensor out = torch::empty({n, h, w}, torch::kUInt8);
  EXPECT_EQ(gzread(f, out.data_ptr(), static_cast<unsigned>(n * h * w)), n * h * w);
  gzclose(f);
  return out;
}

at::Tensor run(nn::Model& m, const at::Tensor& x) {
  torch::NoGradGuard ng;
  return m.forward(x);
}

TEST(Lowering, ZooModelsBecomeGraphsOfTheirLayers) {
  auto cnn = zoo("cnn");
  const ExportGraph g = lower_model(*cnn->module(), "cnn");
  EXPECT_EQ(g.root().type_name, "Cnn");
  ASSERT_TRUE(g.modules.contains("features.conv0_0"));
  EXPECT_EQ(g.modules.at("features.conv0_0").nodes.at(0).kind, OpKind::kConv2d);
  EXPECT_EQ(g.modules.at("features.conv0_0").nodes.at(0).padding, (std::vector<std::int64_t>{1, 1}));
  EXPECT_EQ(g.modules.at("features.bn0_0").buffers, (std::vector<std::string>{"running_mean", "running_var"}));
  // Dropout is the identity: its graph has no node and returns its input.
  EXPECT_TRUE(g.modules.at("classifier.drop").nodes.empty());
  auto resnet = zoo("resnet18");
  const ExportGraph r = lower_model(*resnet->module(), "resnet18");
  EXPECT_TRUE(r.modules.contains("layer2.0.downsample.0"));
  EXPECT_FALSE(r.modules.contains("layer1.0.downsample"));
  EXPECT_EQ(r.modules.at("layer1.0").type_name, "BasicBlock");
}

struct Opaque : torch::nn::Module {
  at::Tensor forward(const at::Tensor& x) { return x * 2; }
};

TEST(Lowering, AnUnknownLayerIsAnErrorNamingItsPathAndType) {
  torch::nn::Sequential seq(torch::nn::Linear(4, 4), torch::nn::AnyModule(std::make_shared<Opaque>()));
  try {
    lower_model(*seq.ptr(), "user");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.message().find("cannot export layer 1"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("Opaque"), std::string::npos) << e.message();
    EXPECT_NE(e.hint().find("register_lowering"), std::string::npos) << e.hint();
  }
  torch::nn::Sequential lstm(torch::nn::Linear(4, 4), torch::nn::LSTM(4, 4));
  EXPECT_THROW(lower_model(*lstm.ptr(), "user"), Error);
  // A layer option no format can express is named too.
  torch::nn::Sequential reflect(
      torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 2, 3).padding(1).padding_mode(torch::kReflect)));
  try {
    lower_model(*reflect.ptr(), "user");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("layer 0 (Conv2d)"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("padding_mode"), std::string::npos) << e.message();
  }
}

TEST(Onnx, AnOperatorOnnxLacksIsAnErrorNamingTheLayer) {
  torch::nn::Sequential seq(torch::nn::Conv2d(1, 4, 3),
                            torch::nn::AdaptiveAvgPool2d(torch::nn::AdaptiveAvgPool2dOptions({2, 2})),
                            torch::nn::Flatten(), torch::nn::Linear(16, 3));
  const ExportGraph g = lower_model(*seq.ptr(), "seq");
  OnnxOptions o;
  o.input_shape = {1, 8, 8};
  try {
    to_onnx(g, *seq.ptr(), o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("layer 1"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("2x2"), std::string::npos) << e.message();
  }
  // TorchScript has the operator: the same model exports there and matches.
  torch::jit::Module jm = to_torchscript(g, *seq.ptr());
  const at::Tensor x = torch::randn({2, 1, 8, 8});
  torch::NoGradGuard ng;
  EXPECT_TRUE(torch::equal(jm.forward({x}).toTensor(), seq->forward(x)));
}

TEST(TorchScript, ReloadedModuleEqualsTheModelAndKeepsItsParameterNames) {
  for (const std::string name : {"mlp", "cnn", "resnet18"}) {
    SCOPED_TRACE(name);
    auto m = zoo(name);
    const fs::path dir = testing::temp_dir("ts_" + name);
    save_torchscript(to_torchscript(lower_model(*m->module(), name), *m->module()), dir / "model.pt",
                     {{"contract.json", "{}"}});
    torch::jit::ExtraFilesMap extra{{"contract.json", ""}};
    torch::jit::Module loaded = torch::jit::load((dir / "model.pt").string(), std::nullopt, extra);
    EXPECT_EQ(extra["contract.json"], "{}");
    std::set<std::string> want, got;
    for (const auto& p : m->module()->named_parameters()) want.insert(p.key());
    for (const auto& b : m->module()->named_buffers()) want.insert(b.key());
    for (const auto& p : loaded.named_parameters()) got.insert(p.name);
    for (const auto& b : loaded.named_buffers()) got.insert(b.name);
    EXPECT_EQ(got, want);
    const at::Tensor x = torch::randn({5, 1, 28, 28});
    torch::NoGradGuard ng;
    const at::Tensor y = loaded.forward({x}).toTensor();
    EXPECT_LE((y - m->forward(x)).abs().max().item<double>(), 1e-5);
  }
}

// Every layer kind glassbox lowers, in one chain ([N, 3, 17, 17] -> [N, classes]).
torch::nn::Sequential every_layer_kind(std::int64_t classes) {
  namespace tnn = torch::nn;
  tnn::Sequential seq;
  seq->push_back("conv", tnn::Conv2d(tnn::Conv2dOptions(3, 8, 3).stride(2).padding(1).groups(1)));
  seq->push_back("gn", tnn::GroupNorm(tnn::GroupNormOptions(2, 8)));
  seq->push_back("elu", tnn::ELU(tnn::ELUOptions().alpha(0.7)));
  seq->push_back("dw", tnn::Conv2d(tnn::Conv2dOptions(8, 8, 3).padding(torch::kSame).groups(8).dilation(1)));
  seq->push_back("avg", tnn::AvgPool2d(tnn::AvgPool2dOptions(2).count_include_pad(false).padding(1)));
  seq->push_back("silu", tnn::SiLU());
  seq->push_back("max", tnn::MaxPool2d(tnn::MaxPool2dOptions(2).ceil_mode(true)));
  seq->push_back("pool", tnn::AdaptiveAvgPool2d(tnn::AdaptiveAvgPool2dOptions({1, 1})));
  seq->push_back("flat", tnn::Flatten());
  seq->push_back("ln", tnn::LayerNorm(tnn::LayerNormOptions({8})));
  seq->push_back("fc", tnn::Linear(8, 6));
  seq->push_back("gelu", tnn::GELU(tnn::GELUOptions().approximate("tanh")));
  seq->push_back("leaky", tnn::LeakyReLU(tnn::LeakyReLUOptions().negative_slope(0.2)));
  seq->push_back("bn", tnn::BatchNorm1d(6));
  seq->push_back("tanh", tnn::Tanh());
  seq->push_back("out", tnn::Linear(6, classes));
  seq->push_back("sm", tnn::LogSoftmax(1));
  return seq;
}

// Pooling whose last window overhangs the input (ceil_mode) with and without counting the
// padding, non-affine normalisation ([N, 2, 9, 9] -> [N, classes]).
torch::nn::Sequential pooling_edges(std::int64_t classes) {
  namespace tnn = torch::nn;
  tnn::Sequential seq;
  seq->push_back("bn", tnn::BatchNorm2d(tnn::BatchNorm2dOptions(2).affine(false)));
  seq->push_back("avg_incl", tnn::AvgPool2d(tnn::AvgPool2dOptions(3).stride(2).padding(1).ceil_mode(true)));
  seq->push_back(
      "avg_excl",
      tnn::AvgPool2d(tnn::AvgPool2dOptions(2).stride(2).padding(1).ceil_mode(true).count_include_pad(false)));
  seq->push_back("max", tnn::MaxPool2d(tnn::MaxPool2dOptions(2).stride(2).ceil_mode(true)));
  seq->push_back("flat", tnn::Flatten());
  seq->push_back("ln", tnn::LayerNorm(tnn::LayerNormOptions({8}).elementwise_affine(false)));
  seq->push_back("out", tnn::Linear(8, classes));
  return seq;
}

// Linear on a feature map (MatMul path), flatten of inner dims (Reshape path) ([N, 1, 8, 8]).
torch::nn::Sequential shape_paths(std::int64_t classes) {
  namespace tnn = torch::nn;
  tnn::Sequential seq;
  seq->push_back("rows", tnn::Linear(8, 5));
  seq->push_back("inner", tnn::Flatten(tnn::FlattenOptions().start_dim(2)));
  seq->push_back("flat", tnn::Flatten());
  seq->push_back("out", tnn::Linear(tnn::LinearOptions(40, classes).bias(false)));
  return seq;
}

TEST(TorchScript, EveryLayerKindMatchesLibTorchsForward) {
  torch::nn::Sequential seq = every_layer_kind(4);
  seq->eval();
  torch::jit::Module jm = to_torchscript(lower_model(*seq.ptr(), "seq"), *seq.ptr());
  const at::Tensor x = torch::randn({3, 3, 17, 17});
  torch::NoGradGuard ng;
  EXPECT_LE((jm.forward({x}).toTensor() - seq->forward(x)).abs().max().item<double>(), 1e-6);
}

// A user's residual block, exported through a registered lowering.
struct UserBlockImpl : torch::nn::Module {
  UserBlockImpl() { conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 4, 3).padding(1))); }
  at::Tensor forward(const at::Tensor& x) { return torch::relu(conv->forward(x) + x); }
  torch::nn::Conv2d conv{nullptr};
};
TORCH_MODULE(UserBlock);

TEST(Lowering, AUserModuleExportsThroughARegisteredLowering) {
  register_lowering<UserBlockImpl>("UserBlock", [](const torch::nn::Module&, GraphBuilder& b) {
    return b.op(OpKind::kRelu, {b.add(b.call("conv", b.input()), b.input())});
  });
  torch::nn::Sequential seq{UserBlock(), UserBlock()};
  torch::jit::Module jm = to_torchscript(lower_model(*seq.ptr(), "user"), *seq.ptr());
  const at::Tensor x = torch::randn({2, 4, 6, 6});
  torch::NoGradGuard ng;
  EXPECT_TRUE(torch::allclose(jm.forward({x}).toTensor(), seq->forward(x), 1e-6, 1e-6));
}

TEST(Package, WeightsTrainableOnlyDropFrozenTensorsAndReportBothSizes) {
  auto m = zoo("cnn");
  for (auto& p : m->module()->named_parameters())
    if (p.key().starts_with("features.")) p.value().set_requires_grad(false);
  const fs::path dir = testing::temp_dir("weights");
  ExportRequest r;
  r.format = "weights";
  r.trainable_only = true;
  r.out = dir / "trainable.safetensors";
  const ExportResult res = export_model(*m, contract_for(*m, {1, 28, 28}), r);
  const SafetensorsFile f = load_safetensors(r.out);
  std::set<std::string> names;
  for (const auto& t : f.tensors) names.insert(t.first);
  EXPECT_TRUE(names.contains("classifier.out.weight"));
  EXPECT_TRUE(names.contains("classifier.fc.bias"));
  EXPECT_FALSE(names.contains("features.conv0_0.weight"));
  EXPECT_FALSE(names.contains("features.bn0_0.running_mean"));  // its layer is frozen
  std::int64_t head = 0;
  for (const auto& p : m->module()->named_parameters())
    if (p.key().starts_with("classifier.")) head += p.value().numel();
  EXPECT_EQ(res.parameters, head);
  EXPECT_GT(res.full_bytes, res.artefacts.at(0).bytes);
  EXPECT_EQ(res.artefacts.at(0).bytes, fs::file_size(r.out));
  // The model's own mode is left as it was.
  m->module()->train();
  r.trainable_only = false;
  r.out = dir / "all.safetensors";
  export_model(*m, contract_for(*m, {1, 28, 28}), r);
  EXPECT_TRUE(m->module()->is_training());
}

TEST(Package, AFailedExportLeavesTheExistingFileIntact) {
  const fs::path dir = testing::temp_dir("intact");
  write_file_atomic(dir / "model.pt", "previous export");
  torch::nn::Sequential seq(torch::nn::Linear(4, 4), torch::nn::AnyModule(std::make_shared<Opaque>()));
  nn::ModuleModel<torch::nn::Sequential> m("user", seq);
  ExportRequest r;
  r.out = dir / "model.pt";
  nn::ModelContract c;
  c.input_shape = {4};
  c.layout = nn::InputLayout::kNC;
  c.channel_order = nn::ChannelOrder::kNone;
  c.num_classes = 4;
  EXPECT_THROW(export_model(m, c, r), Error);
  EXPECT_EQ(read_file(dir / "model.pt"), "previous export");
  EXPECT_FALSE(fs::exists(dir / "model.json"));
  r.trainable_only = true;
  EXPECT_THROW(export_model(m, c, r), Error);  // trainable-only needs the weights format
}

// Doubles its input; registered below with a wrong lowering (the identity).
struct Doubler : torch::nn::Module {
  at::Tensor forward(const at::Tensor& x) { return x * 2; }
};

TEST(Package, AnExportThatDiffersFromTheModelIsNeverWritten) {
  register_lowering<Doubler>("Doubler", [](const torch::nn::Module&, GraphBuilder& b) { return b.input(); });
  const fs::path dir = testing::temp_dir("verify");
  write_file_atomic(dir / "model.pt", "previous export");
  torch::nn::Sequential seq(torch::nn::Linear(4, 4), torch::nn::AnyModule(std::make_shared<Doubler>()));
  nn::ModuleModel<torch::nn::Sequential> m("user", seq);
  nn::ModelContract c;
  c.input_shape = {4};
  c.layout = nn::InputLayout::kNC;
  c.channel_order = nn::ChannelOrder::kNone;
  c.num_classes = 4;
  ExportRequest r;
  r.out = dir / "model.pt";
  try {
    export_model(m, c, r);
    FAIL() << "expected the verification to fail";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("differs from the model"), std::string::npos) << e.message();
  }
  EXPECT_EQ(read_file(dir / "model.pt"), "previous export");
  EXPECT_FALSE(fs::exists(dir / "model.json"));
  // The repository path verifies the same way and leaves no model behind.
  r.format = "repository";
  r.out = dir / "repo";
  c.name = "user";
  EXPECT_THROW(export_model(m, c, r), Error);
  EXPECT_FALSE(fs::exists(dir / "repo" / "user"));
}

// ---- reference: Python torch.jit.load, onnx.checker(full_check), onnxruntime -------------------

struct RefCase {
  std::string label;
  std::string arch;
  std::vector<std::int64_t> shape;
  std::function<void(nn::ModelOptions&)> tweak;
  bool real = false;                                   // also on real Fashion-MNIST images
  std::function<torch::nn::Sequential()> layers = {};  // a chain of layers instead of a zoo model
};

TEST(ExportReference, TorchScriptAndOnnxMatchPythonTorchAndOnnxRuntime) {
  const std::vector<RefCase> cases{
      {"mlp", "mlp", {1, 28, 28}, {}, true},
      {"cnn", "cnn", {1, 28, 28}, {}, true},
      {"resnet18", "resnet18", {1, 28, 28}, {}, true},
      {"mlp_layernorm_gelu_softmax",
       "mlp",
       {1, 28, 28},
       [](nn::ModelOptions& o) {
         o.mlp.norm = nn::MlpNorm::kLayerNorm;
         o.mlp.activation = nn::Activation::kGelu;
         o.mlp.output = nn::MlpOutput::kSoftmax;
       }},
      {"mlp_features_silu",
       "mlp",
       {20},
       [](nn::ModelOptions& o) {
         o.mlp.hidden = {16, 12, 8};
         o.mlp.activation = nn::Activation::kSilu;
       }},
      {"cnn_groupnorm",
       "cnn",
       {3, 32, 32},
       [](nn::ModelOptions& o) {
         o.cnn.norm = nn::CnnNorm::kGroupNorm;
         o.cnn.groups = 4;
         o.cnn.channels = {8, 16, 16};
       }},
      {"resnet18_imagenet_stem",
       "resnet18",
       {3, 64, 64},
       [](nn::ModelOptions& o) {
         o.resnet18.stem = nn::ResNetStem::kImagenet;
         o.resnet18.width = 16;
       }},
      {"layers", "", {3, 17, 17}, {}, false, [] { return every_layer_kind(10); }},
      {"pooling", "", {2, 9, 9}, {}, false, [] { return pooling_edges(10); }},
      {"shapes", "", {1, 8, 8}, {}, false, [] { return shape_paths(10); }},
  };
  const fs::path root = testing::temp_dir("export_ref");
  // Real inputs: the first 7 Fashion-MNIST test images, normalised as the quickstart does.
  const at::Tensor images = read_idx_images("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz", 7);
  const at::Tensor real = ((images.to(torch::kFloat) / 255 - 0.286) / 0.353).unsqueeze(1);
  nlohmann::json manifest = nlohmann::json::array();
  for (const auto& c : cases) {
    std::unique_ptr<nn::Model> m;
    if (c.layers) {
      m = std::make_unique<nn::ModuleModel<torch::nn::Sequential>>(c.label, c.layers());
      randomise(*m, 7);
      m->module()->eval();
    } else {
      m = zoo(c.arch, c.shape, c.tweak);
    }
    const fs::path dir = root / c.label;
    fs::create_directories(dir);
    const nn::ModelContract contract = contract_for(*m, c.shape);
    ExportRequest r;
    r.out = dir / "model.pt";
    const ExportResult ts = export_model(*m, contract, r);
    EXPECT_LE(ts.max_abs_difference, 1e-5) << c.label;
    r.format = "onnx";
    r.out = dir / "model.onnx";
    export_model(*m, contract, r);
    TensorMap io;
    torch::manual_seed(11);
    for (std::int64_t n : {1, 7}) {
      std::vector<std::int64_t> shape{n};
      shape.insert(shape.end(), c.shape.begin(), c.shape.end());
      const at::Tensor x = torch::randn(shape);
      io.emplace_back("random_" + std::to_string(n), x);
      io.emplace_back("random_" + std::to_string(n) + ".glassbox", run(*m, x));
      if (c.real) {
        const at::Tensor xr = real.slice(0, 0, n).contiguous();
        io.emplace_back("real_" + std::to_string(n), xr);
        io.emplace_back("real_" + std::to_string(n) + ".glassbox", run(*m, xr));
      }
    }
    save_safetensors(dir / "io.safetensors", io);
    manifest.push_back({{"label", c.label},
                        {"dir", dir.string()},
                        {"input_name", contract.input_name},
                        {"output_name", contract.output_name}});
  }
  write_file_atomic(root / "manifest.json", manifest.dump());
  const nlohmann::json ref =
      nlohmann::json::parse(testing::run_python("tests/reference/export_ref.py", {(root / "manifest.json").string()}));
  ASSERT_EQ(ref.size(), cases.size());
  for (const auto& r : ref) {
    SCOPED_TRACE(r["label"].get<std::string>());
    EXPECT_TRUE(r["onnx_check"].get<bool>()) << r["onnx_check_error"];
    EXPECT_EQ(r["onnx_opset"].get<int>(), 17);
    EXPECT_EQ(r["onnx_inputs"], nlohmann::json::array({"input"}));
    EXPECT_EQ(r["onnx_batch_dim"].get<std::string>(), "batch");
    EXPECT_GT(r["shared_tensors"].get<int>(), 1);
    EXPECT_TRUE(r["shared_tensors_equal"].get<bool>());
    EXPECT_EQ(r["embedded_contract_name"],
              "test_" + r["label"].get<std::string>().substr(0, r["label"].get<std::string>().find('_')));
    ASSERT_FALSE(r["results"].empty());
    for (const auto& [key, v] : r["results"].items()) {
      SCOPED_TRACE(key);
      EXPECT_LE(v["torchscript_max_abs"].get<double>(), 1e-5);
      EXPECT_LE(v["onnxruntime_max_abs"].get<double>(), 1e-4);
      EXPECT_GT(v["output_abs_mean"].get<double>(), 0.0);  // the comparison is not between zeros
    }
    std::printf("[ reference ] %-28s torch.jit.load max|d| %.2e  onnxruntime max|d| %.2e\n",
                r["label"].get<std::string>().c_str(), r["torchscript_worst"].get<double>(),
                r["onnxruntime_worst"].get<double>());
  }
}

}  // namespace
}  // namespace glassbox::exporter
