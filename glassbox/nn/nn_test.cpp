#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/nn/losses.h"
#include "glassbox/nn/registry.h"
#include "glassbox/testing/testing.h"

namespace glassbox::nn {
namespace {

TEST(Zoo, BuildsEveryModelWithTheRightOutputShape) {
  for (const std::string name : {"mlp", "cnn", "resnet18"}) {
    ModelOptions o;
    o.name = name;
    auto m = make_model(o, ModelShape{{1, 28, 28}, 10});
    m->module()->eval();
    torch::NoGradGuard ng;
    at::Tensor y = m->forward(torch::randn({3, 1, 28, 28}));
    EXPECT_EQ(y.sizes(), (std::vector<std::int64_t>{3, 10})) << name;
  }
}

TEST(Zoo, ResNet18MatchesTorchvisionParameterCount) {
  // torchvision.models.resnet18(num_classes=10): 11,181,642 parameters.
  ModelOptions o;
  o.name = "resnet18";
  o.resnet18.stem = ResNetStem::kImagenet;
  auto m = make_model(o, ModelShape{{3, 64, 64}, 10});
  EXPECT_EQ(count_parameters(*m->module(), false), 11181642);
  auto params = m->module()->named_parameters();
  EXPECT_TRUE(params.contains("layer2.0.downsample.0.weight"));
  EXPECT_TRUE(params.contains("fc.bias"));
}

TEST(Zoo, MlpLayersFollowOptions) {
  ModelOptions o;
  o.mlp.hidden = {64, 32};
  o.mlp.norm = MlpNorm::kBatchNorm;
  o.mlp.dropout = 0.5;
  auto m = make_model(o, ModelShape{{20}, 4});
  // 20*64+64 + BN(64: 2*64) + 64*32+32 + BN(32) + 32*4+4
  EXPECT_EQ(count_parameters(*m->module(), false), 20 * 64 + 64 + 128 + 64 * 32 + 32 + 64 + 32 * 4 + 4);
}

TEST(Zoo, CnnGroupNormAndMomentum) {
  ModelOptions o;
  o.name = "cnn";
  o.cnn.norm = CnnNorm::kGroupNorm;
  o.cnn.groups = 4;
  auto m = make_model(o, ModelShape{{3, 32, 32}, 7});
  EXPECT_TRUE(m->module()->named_parameters().contains("features.gn0_0.weight"));
  o.cnn.groups = 5;
  EXPECT_THROW(make_model(o, ModelShape{{3, 32, 32}, 7}), Error);
  o.cnn.norm = CnnNorm::kBatchNorm;
  o.cnn.bn_momentum = 0.01;
  m = make_model(o, ModelShape{{3, 32, 32}, 7});
  int bns = 0;
  for (auto& sub : m->module()->modules(false)) {
    if (auto* bn = sub->as<torch::nn::BatchNorm2d>()) {
      EXPECT_DOUBLE_EQ(bn->options.momentum().value(), 0.01);
      ++bns;
    }
  }
  EXPECT_EQ(bns, 4);
}

TEST(Zoo, UnknownModelSuggestsName) {
  ModelOptions o;
  o.name = "resnet19";
  try {
    make_model(o, ModelShape{{1, 28, 28}, 10});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(e.one_line().find("did you mean \"resnet18\"?"), std::string::npos) << e.one_line();
  }
}

TEST(Zoo, UserModelsRegister) {
  register_model("linear_probe", [](const ModelOptions&, const ModelShape& s) -> std::unique_ptr<Model> {
    return std::make_unique<ModuleModel<torch::nn::Linear>>("linear_probe",
                                                            torch::nn::Linear(s.input_shape[0], s.num_classes));
  });
  ModelOptions o;
  o.name = "linear_probe";
  auto m = make_model(o, ModelShape{{6}, 3});
  EXPECT_EQ(m->forward(torch::randn({2, 6})).size(1), 3);
}

TEST(LossReference, MatchesPyTorch) {
  const auto j = nlohmann::json::parse(testing::run_python("tests/reference/losses.py"));
  std::vector<float> flat;
  for (const auto& row : j["logits"])
    for (const auto& v : row) flat.push_back(v.get<float>());
  const auto n = static_cast<std::int64_t>(j["logits"].size());
  at::Tensor logits = torch::tensor(flat).reshape({n, -1});
  at::Tensor targets = torch::tensor(j["targets"].get<std::vector<std::int64_t>>());
  int checked = 0;
  for (const auto& c : j["cases"]) {
    LossOptions o;
    ASSERT_TRUE(parse_name(c["name"].get<std::string>(), o.name)) << c.dump();
    ASSERT_TRUE(parse_name(c["reduction"].get<std::string>(), o.reduction)) << c.dump();
    if (o.name == LossKind::kCrossEntropy) {
      o.label_smoothing = c["label_smoothing"];
      o.class_weights = c["class_weights"].get<std::vector<double>>();
    } else {
      o.alpha = c["alpha"];
      o.gamma = c["gamma"];
    }
    Loss loss(o, logits.size(1));
    at::Tensor got = loss(logits, targets).reshape({-1});
    const auto want = c["value"].get<std::vector<double>>();
    ASSERT_EQ(got.numel(), static_cast<std::int64_t>(want.size()));
    for (std::size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(got[static_cast<std::int64_t>(i)].item<double>(), want[i], 1e-5 * std::max(1.0, std::abs(want[i])))
          << c.dump();
    }
    ++checked;
  }
  EXPECT_EQ(checked, 24);

  // A MixUp/CutMix batch: timm's soft targets, SoftTargetCrossEntropy, focal on the soft CE.
  const auto& mx = j["mixed"];
  const at::Tensor lam = torch::tensor(mx["lam"].get<std::vector<float>>());
  const at::Tensor soft = mixup_targets(targets, lam, logits.size(1), mx["smoothing"].get<double>());
  std::vector<float> want_soft;
  for (const auto& row : mx["soft_targets"])
    for (const auto& v : row) want_soft.push_back(v.get<float>());
  EXPECT_TRUE(torch::allclose(soft, torch::tensor(want_soft).reshape({n, -1}), 1e-6, 1e-7));
  LossOptions ce;
  ce.label_smoothing = 0.1;  // already inside the soft targets: not applied twice
  EXPECT_NEAR(Loss(ce, 5)(logits, soft).item<double>(), mx["cross_entropy"].get<double>(), 1e-5);
  LossOptions focal;
  focal.name = LossKind::kFocal;
  focal.alpha = 0.75;
  EXPECT_NEAR(Loss(focal, 5)(logits, soft).item<double>(), mx["focal_alpha_0.75_gamma_2"].get<double>(), 1e-5);
}

TEST(LossReference, RegressionAndMultiLabelMatchPyTorch) {
  const auto j = nlohmann::json::parse(testing::run_python("tests/reference/losses.py"))["real"];
  const auto matrix = [](const nlohmann::json& rows) {
    std::vector<float> flat;
    for (const auto& row : rows)
      for (const auto& v : row) flat.push_back(v.get<float>());
    return torch::tensor(flat).reshape({static_cast<std::int64_t>(rows.size()), -1});
  };
  const at::Tensor outputs = matrix(j["outputs"]);
  int checked = 0;
  for (const auto& c : j["cases"]) {
    LossOptions o;
    ASSERT_TRUE(parse_name(c["name"].get<std::string>(), o.name)) << c.dump();
    ASSERT_TRUE(parse_name(c["reduction"].get<std::string>(), o.reduction)) << c.dump();
    if (c.contains("delta")) o.delta = c["delta"];
    if (c.contains("pos_weight")) o.pos_weight = c["pos_weight"].get<std::vector<double>>();
    const bool bits = c["targets"] == "bits";
    Loss loss(o, 3, bits ? TaskKind::kMultilabel : TaskKind::kRegression);
    const at::Tensor got = loss(outputs, matrix(j[bits ? "bits" : "values"])).reshape({-1});
    const auto want = c["value"].get<std::vector<double>>();
    ASSERT_EQ(got.numel(), static_cast<std::int64_t>(want.size()));
    for (std::size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got[static_cast<std::int64_t>(i)].item<double>(), want[i], 1e-5 * std::max(1.0, std::abs(want[i])))
          << c.dump();
    ++checked;
  }
  EXPECT_EQ(checked, 18);
}

TEST(Loss, FitsItsTask) {
  LossOptions o;  // auto: the task's usual loss
  EXPECT_EQ(resolve_loss(o.name, TaskKind::kClassification), LossKind::kCrossEntropy);
  EXPECT_EQ(resolve_loss(o.name, TaskKind::kRegression), LossKind::kMse);
  EXPECT_EQ(resolve_loss(o.name, TaskKind::kMultilabel), LossKind::kBce);
  o.name = LossKind::kMse;
  EXPECT_THROW(Loss(o, 3, TaskKind::kClassification), Error);
  EXPECT_THROW(Loss(o, 3, TaskKind::kMultilabel), Error);
  EXPECT_NO_THROW(Loss(o, 3, TaskKind::kRegression));
  o.name = LossKind::kCrossEntropy;
  EXPECT_THROW(Loss(o, 3, TaskKind::kRegression), Error);
  LossOptions smooth;
  smooth.label_smoothing = 0.1;
  EXPECT_THROW(Loss(smooth, 3, TaskKind::kRegression), Error);
  LossOptions pw;
  pw.pos_weight = {1.0, 2.0};
  EXPECT_THROW(Loss(pw, 3, TaskKind::kMultilabel), Error);  // one per label
  EXPECT_THROW(Loss(pw, 2, TaskKind::kClassification), Error);
  // Class labels given to a regression loss: an error naming the fix, not a silent cast.
  LossOptions mse;
  mse.name = LossKind::kMse;
  EXPECT_THROW(Loss(mse, 1, TaskKind::kRegression)(torch::zeros({4, 1}), torch::zeros({4}, torch::kLong)), Error);
}

TEST(Loss, RejectsBadOptions) {
  LossOptions o;
  o.class_weights = {1, 2};
  EXPECT_THROW(Loss(o, 3), Error);
  LossOptions f;
  f.name = LossKind::kFocal;
  f.label_smoothing = 0.1;
  EXPECT_THROW(Loss(f, 3), Error);
}

}  // namespace
}  // namespace glassbox::nn

namespace glassbox::nn {
namespace {

// Running every stage in order is exactly forward(), for every zoo model that has stages.
TEST(Stages, ComposeToTheForwardPassOfEveryConvolutionalModel) {
  torch::manual_seed(3);
  struct Case {
    ModelOptions opts;
    std::vector<std::int64_t> shape;
    std::vector<std::string> expect_some;
  };
  std::vector<Case> cases;
  {
    ModelOptions o;
    o.name = "cnn";
    cases.push_back({o, {1, 28, 28}, {"features.conv0_0", "features.relu1_0", "features.pool1", "classifier"}});
  }
  {
    ModelOptions o;
    o.name = "resnet18";
    o.resnet18.width = 8;
    cases.push_back({o, {3, 32, 32}, {"conv1", "relu", "layer1.0", "layer4.1", "avgpool", "fc"}});
    o.resnet18.stem = ResNetStem::kImagenet;
    cases.push_back({o, {3, 64, 64}, {"maxpool", "layer4.1"}});
  }
  auto add = [&](const std::string& name, std::vector<std::int64_t> shape, std::vector<std::string> expect) {
    ModelOptions o;
    o.name = name;
    cases.push_back({o, std::move(shape), std::move(expect)});
  };
  add("resnet50", {3, 64, 64}, {"maxpool", "layer3.5", "layer4.2", "fc"});
  add("mobilenet_v3_small", {3, 64, 64}, {"features.0", "features.11", "features.12", "avgpool", "classifier"});
  add("efficientnet_b0", {3, 64, 64}, {"features.0", "features.1.0", "features.6.3", "features.8", "classifier"});
  add("vit_small", {3, 32, 32}, {"conv_proj", "encoder.layers.encoder_layer_0", "encoder.ln", "heads"});
  add("vit_hybrid", {3, 32, 32}, {"conv_proj.conv_bn_relu_1", "conv_proj.conv_last", "encoder.layers.encoder_layer_5"});
  for (auto& c : cases) {
    SCOPED_TRACE(c.opts.name + " " + std::string(name_of(c.opts.resnet18.stem)));
    auto m = make_model(c.opts, ModelShape{c.shape, 7});
    m->module()->eval();
    std::vector<std::int64_t> xs{4};
    xs.insert(xs.end(), c.shape.begin(), c.shape.end());
    const at::Tensor x = torch::randn(xs);
    torch::NoGradGuard ng;
    const at::Tensor ref = m->forward(x);
    at::Tensor y = x;
    std::vector<std::string> names;
    for (auto& s : m->stages()) {
      y = s.run(y);
      names.push_back(s.name);
      EXPECT_EQ(s.spatial, y.dim() == 4) << s.name;
    }
    EXPECT_TRUE(torch::equal(y, ref));
    for (const auto& n : c.expect_some) EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
  ModelOptions mlp;
  EXPECT_TRUE(make_model(mlp, ModelShape{{1, 28, 28}, 10})->stages().empty());
}

}  // namespace
}  // namespace glassbox::nn
