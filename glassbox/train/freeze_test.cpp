// Freezing for fine-tuning on the zoo's models: by share of parameters, by blocks, the head kept;
// per-group learning rates for the backbone.
#include "glassbox/train/freeze.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/nn/blocks.h"
#include "glassbox/nn/registry.h"
#include "glassbox/train/optimizer.h"

namespace glassbox::train {
namespace {

std::unique_ptr<nn::Model> model(const std::string& name, std::vector<std::int64_t> shape = {3, 64, 64}) {
  nn::ModelOptions o;
  o.name = name;
  o.resnet18.stem = nn::Stem::kImagenet;
  return nn::make_model(o, nn::ModelShape{std::move(shape), 10});
}

std::vector<std::string> frozen(torch::nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& p : m.named_parameters())
    if (!p.value().requires_grad()) out.push_back(p.key());
  return out;
}

TEST(Freeze, FractionFreezesWholeLayersFromTheInputSideAndNeverTheHead) {
  auto m = model("resnet18");
  TrainerOptions o;
  o.freeze_fraction = 0.7;
  const FreezeReport r = apply_freeze(*m->module(), o, {});
  EXPECT_GE(r.fraction(), 0.7);
  // No more than one layer past the target: layer4.1.conv1 (2.36 M of 11.2 M) is the largest.
  EXPECT_LT(r.fraction(), 0.7 + 2359296.0 / static_cast<double>(r.total));
  // A prefix of the parameters in registration order, whole layers at a time.
  auto params = m->module()->named_parameters();
  bool seen_trainable = false;
  for (const auto& p : params) {
    if (p.value().requires_grad()) seen_trainable = true;
    EXPECT_FALSE(seen_trainable && !p.value().requires_grad()) << p.key() << " frozen after a trainable one";
  }
  EXPECT_FALSE(params["conv1.weight"].requires_grad());
  EXPECT_EQ(params["layer3.0.bn1.weight"].requires_grad(), params["layer3.0.bn1.bias"].requires_grad());
  EXPECT_TRUE(params["fc.weight"].requires_grad());

  auto all = model("mobilenet_v3_small");
  o.freeze_fraction = 0.999;
  apply_freeze(*all->module(), o, {});
  for (const auto& n : frozen(*all->module())) EXPECT_EQ(n.rfind("classifier.3.", 0), std::string::npos) << n;
  EXPECT_TRUE(all->module()->named_parameters()["classifier.3.weight"].requires_grad());
}

TEST(Freeze, FirstBlocksFollowTheModelsStages) {
  auto m = model("mobilenet_v3_small");
  const auto blocks = nn::parameter_blocks(*m);
  ASSERT_GE(blocks.size(), 4u);
  EXPECT_EQ(blocks[0], "features.0");
  EXPECT_EQ(blocks[1], "features.1");
  TrainerOptions o;
  o.freeze_blocks = 3;
  apply_freeze(*m->module(), o, blocks);
  auto params = m->module()->named_parameters();
  EXPECT_FALSE(params["features.2.block.0.0.weight"].requires_grad());
  EXPECT_TRUE(params["features.3.block.0.0.weight"].requires_grad());

  // A ViT's class token and position embedding sit outside every block, on the input side.
  auto vit = model("vit_small", {3, 32, 32});
  const auto vb = nn::parameter_blocks(*vit);
  EXPECT_EQ(vb.front(), "conv_proj");
  o.freeze_blocks = 2;
  apply_freeze(*vit->module(), o, vb);
  params = vit->module()->named_parameters();
  EXPECT_FALSE(params["class_token"].requires_grad());
  EXPECT_FALSE(params["encoder.pos_embedding"].requires_grad());
  EXPECT_FALSE(params["encoder.layers.encoder_layer_0.mlp.3.weight"].requires_grad());
  EXPECT_TRUE(params["encoder.layers.encoder_layer_1.ln_1.weight"].requires_grad());
  EXPECT_TRUE(params["heads.head.weight"].requires_grad());

  o.freeze_blocks = static_cast<std::int64_t>(vb.size());
  EXPECT_THROW(apply_freeze(*model("vit_small", {3, 32, 32})->module(), o, vb), Error);
  o.freeze_blocks = 1;
  EXPECT_THROW(apply_freeze(*model("mlp", {8})->module(), o, {}), Error);  // no blocks listed
}

TEST(Freeze, FrozenBatchNormStaysInEvalMode) {
  auto m = model("resnet18");
  TrainerOptions o;
  o.freeze = {"conv1.*", "bn1.*"};
  apply_freeze(*m->module(), o, {});
  m->module()->train();
  keep_frozen_batchnorm_eval(*m->module());
  for (const auto& sub : m->module()->named_modules()) {
    if (!sub.value()->as<torch::nn::BatchNorm2d>()) continue;
    EXPECT_EQ(sub.value()->is_training(), sub.key() != "bn1") << sub.key();
  }
}

TEST(Optimizer, BackboneLearningRateScaleGivesTheHeadItsOwnGroups) {
  auto m = model("resnet18");
  OptimizerOptions o;
  o.lr = 1e-3;
  o.weight_decay = 0.05;
  o.no_decay_for_bias_and_norm = true;
  o.backbone_lr_scale = 0.1;
  const auto groups = make_param_groups(*m->module(), o);
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_DOUBLE_EQ(groups[0].lr, 1e-4);
  EXPECT_DOUBLE_EQ(groups[1].lr, 1e-4);
  EXPECT_DOUBLE_EQ(groups[1].weight_decay, 0.0);
  EXPECT_DOUBLE_EQ(groups[2].lr, 1e-3);
  EXPECT_EQ(groups[2].names, std::vector<std::string>{"fc.weight"});
  EXPECT_EQ(groups[3].names, std::vector<std::string>{"fc.bias"});
  std::size_t n = 0;
  for (const auto& g : groups) n += g.params.size();
  EXPECT_EQ(n, m->module()->parameters().size());
  o.backbone_lr_scale = 1.0;
  EXPECT_EQ(make_param_groups(*m->module(), o).size(), 2u);  // as before: decay, no decay
}

}  // namespace
}  // namespace glassbox::train
