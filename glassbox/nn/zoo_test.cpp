// The zoo against torchvision (and timm's names): the same weights give the same outputs in eval
// mode and the same step in train mode, BatchNorm statistics included (tests/reference/zoo_ref.py).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/core/safetensors.h"
#include "glassbox/nn/pretrained.h"
#include "glassbox/nn/registry.h"
#include "glassbox/testing/testing.h"

namespace glassbox::nn {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Largest |a - b| relative to the reference's scale (1 when it is smaller).
double rel_diff(const at::Tensor& a, const at::Tensor& ref) {
  const double scale = std::max(1.0, ref.abs().max().item<double>());
  return (a.to(torch::kFloat64) - ref.to(torch::kFloat64)).abs().max().item<double>() / scale;
}

struct ZooCase {
  std::string reference;  // the case of zoo_ref.py
  std::string model;      // glassbox's model name
  std::function<void(ModelOptions&)> options = [](ModelOptions&) {};
};

void check_case(const ZooCase& c, const fs::path& dir, const json& meta) {
  SCOPED_TRACE(c.reference);
  ModelOptions o;
  o.name = c.model;
  o.resnet18.stem = Stem::kImagenet;  // torchvision's stem (glassbox's resnet18 defaults to the small one)
  c.options(o);
  const auto image = meta["image"].get<std::vector<std::int64_t>>();
  auto model = make_model(o, ModelShape{image, meta["classes"].get<std::int64_t>()});
  torch::nn::Module& m = *model->module();
  EXPECT_EQ(count_parameters(m, false), meta["parameters"].get<std::int64_t>());
  EXPECT_EQ(static_cast<std::int64_t>(m.named_parameters().size() + m.named_buffers().size()),
            meta["tensors"].get<std::int64_t>());

  const InitReport r = load_pretrained(m, load_safetensors(dir / "weights.safetensors").tensors, {});
  EXPECT_EQ(r.matched, meta["tensors"].get<std::int64_t>()) << r.summary();
  EXPECT_TRUE(r.missing.empty() && r.unexpected.empty() && r.mismatched.empty() && r.reinitialised.empty())
      << r.summary();
  EXPECT_EQ(r.naming, c.reference.rfind("timm_", 0) == 0 ? "timm" : "torchvision");

  const SafetensorsFile io = load_safetensors(dir / "io.safetensors");
  const at::Tensor x = *io.find("x");
  const at::Tensor y = *io.find("y");
  m.eval();
  {
    torch::NoGradGuard ng;
    EXPECT_LT(rel_diff(model->forward(x), *io.find("eval_out")), 1e-5) << "eval mode";
  }
  m.train();
  torch::manual_seed(1234);  // zoo_ref.py's SEED: the same dropout and stochastic-depth draws
  const at::Tensor logits = model->forward(x);
  EXPECT_LT(rel_diff(logits.detach(), *io.find("train_out")), 1e-5) << "train mode";
  const at::Tensor loss = torch::nn::functional::cross_entropy(logits, y);
  EXPECT_NEAR(loss.item<double>(), io.find("loss")->item<double>(), 1e-5);
  torch::optim::SGD opt(m.parameters(), torch::optim::SGDOptions(0.1));
  opt.zero_grad();
  loss.backward();
  opt.step();
  // After the step, under the names the reference used (timm's are mapped the same way).
  TensorMap after;
  for (const auto& [n, t] : io.tensors)
    if (n.rfind("after.", 0) == 0) after.emplace_back(n.substr(6), t);
  after = map_timm_names(after);
  std::map<std::string, at::Tensor> ours;
  for (const auto& p : m.named_parameters()) ours[p.key()] = p.value().detach();
  for (const auto& b : m.named_buffers()) ours[b.key()] = b.value();
  std::string worst;
  double worst_diff = 0;
  for (const auto& [n, t] : after) {
    ASSERT_TRUE(ours.contains(n)) << n;
    const double d = t.is_floating_point() ? rel_diff(ours[n], t) : (ours[n].equal(t) ? 0.0 : 1.0);
    if (d > worst_diff) {
      worst_diff = d;
      worst = n;
    }
  }
  EXPECT_LT(worst_diff, 1e-5) << "after one SGD step, worst: " << worst;
}

TEST(ZooReference, EveryModelEqualsTorchvisionOnTheSameWeights) {
  const std::vector<ZooCase> cases = {
      {"resnet18", "resnet18"},
      {"resnet34", "resnet34"},
      {"resnet50", "resnet50"},
      {"mobilenet_v3_small", "mobilenet_v3_small"},
      {"mobilenet_v3_large", "mobilenet_v3_large"},
      {"efficientnet_b0", "efficientnet_b0"},
      {"efficientnet_b1", "efficientnet_b1"},
      {"efficientnet_b2", "efficientnet_b2"},
      {"efficientnet_b3", "efficientnet_b3"},
      {"vit_b_16", "vit_b_16"},
      {"vit_small", "vit_small"},
      {"vit_hybrid", "vit_hybrid"},
      {"timm_efficientnet_b0", "efficientnet_b0",
       [](ModelOptions& o) {
         o.efficientnet_b0.dropout = 0;
         o.efficientnet_b0.stochastic_depth_prob = 0;
       }},
      {"timm_vit_small", "vit_small"},
  };
  const fs::path dir = testing::temp_dir("zoo_ref");
  std::vector<std::string> args{dir.string()};
  for (const auto& c : cases) args.push_back(c.reference);
  const json meta = json::parse(testing::run_python("tests/reference/zoo_ref.py", args));
  for (const auto& c : cases) {
    check_case(c, dir / c.reference, meta[c.reference]);
    fs::remove_all(dir / c.reference);  // ViT-B/16's files are 700 MB
  }
}

// A head of another size is re-initialised and named; other misfits fail under strict and are
// reported otherwise.
TEST(Pretrained, HeadOfAnotherSizeIsReinitialisedAndMisfitsAreNamed) {
  ModelOptions o;
  o.name = "mobilenet_v3_small";
  auto src = make_model(o, ModelShape{{3, 32, 32}, 1000});
  TensorMap weights;
  for (const auto& p : src->module()->named_parameters()) weights.emplace_back(p.key(), p.value().detach());
  for (const auto& b : src->module()->named_buffers()) weights.emplace_back(b.key(), b.value());
  torch::manual_seed(5);
  auto dst = make_model(o, ModelShape{{3, 32, 32}, 7});
  const at::Tensor head_before = dst->module()->named_parameters()["classifier.3.weight"].clone();
  InitReport r = load_pretrained(*dst->module(), weights, {});
  EXPECT_EQ(r.head, "classifier.3");
  ASSERT_EQ(r.reinitialised.size(), 2u) << r.summary();
  EXPECT_NE(r.reinitialised[0].find("classifier.3."), std::string::npos);
  EXPECT_NE(r.reinitialised[0].find("[1000"), std::string::npos) << r.reinitialised[0];
  EXPECT_TRUE(torch::equal(dst->module()->named_parameters()["classifier.3.weight"], head_before));
  EXPECT_TRUE(torch::equal(dst->module()->named_parameters()["features.0.0.weight"],
                           src->module()->named_parameters()["features.0.0.weight"]));
  EXPECT_EQ(r.matched, r.model_tensors - 2);
  EXPECT_NE(r.summary().find("head classifier.3 re-initialised"), std::string::npos) << r.summary();

  // A head that fits (as many classes, but others: model.init_head = false) keeps its fresh
  // initialisation too; everything else loads, and loading it is the default.
  auto as_many = make_model(o, ModelShape{{3, 32, 32}, 1000});
  const at::Tensor fresh_head = as_many->module()->named_parameters()["classifier.3.weight"].clone();
  r = load_pretrained(*as_many->module(), weights, {.load_head = false});
  ASSERT_EQ(r.reinitialised.size(), 2u) << r.summary();
  EXPECT_EQ(r.reinitialised[0], "classifier.3.weight (model.init_head = false)");
  EXPECT_EQ(r.matched, r.model_tensors - 2);
  EXPECT_TRUE(r.unexpected.empty()) << r.summary();  // the file's head is known, not "not in the model"
  EXPECT_TRUE(torch::equal(as_many->module()->named_parameters()["classifier.3.weight"], fresh_head));
  EXPECT_TRUE(torch::equal(as_many->module()->named_parameters()["features.0.0.weight"],
                           src->module()->named_parameters()["features.0.0.weight"]));
  r = load_pretrained(*dst->module(), weights, {.load_head = false});  // of another size: its shapes
  ASSERT_EQ(r.reinitialised.size(), 2u) << r.summary();
  EXPECT_NE(r.reinitialised[0].find("(file [1000, 1024], model [7, 1024])"), std::string::npos) << r.summary();
  r = load_pretrained(*as_many->module(), weights, {});
  EXPECT_TRUE(r.reinitialised.empty()) << r.summary();
  EXPECT_TRUE(torch::equal(as_many->module()->named_parameters()["classifier.3.weight"],
                           src->module()->named_parameters()["classifier.3.weight"]));

  // One channel instead of three (ImageNet weights for gray images): the stem's kernels are summed
  // over the channels (timm's adapt_input_conv), so a gray image answers as the RGB model does to
  // that image in three equal channels.
  src->module()->eval();
  auto same_classes = make_model(o, ModelShape{{3, 32, 32}, 1000});
  auto gray = make_model(o, ModelShape{{1, 32, 32}, 1000});
  r = load_pretrained(*gray->module(), weights, {});
  ASSERT_EQ(r.adapted.size(), 1u) << r.summary();
  EXPECT_EQ(r.adapted[0], "features.0.0.weight (file [16, 3, 3, 3], model [16, 1, 3, 3])");
  EXPECT_EQ(r.matched, r.model_tensors);
  EXPECT_NE(r.summary().find("input channels adapted: features.0.0.weight"), std::string::npos) << r.summary();
  gray->module()->eval();
  torch::NoGradGuard ng;
  const at::Tensor x = torch::rand({2, 1, 32, 32});
  const at::Tensor rgb_out = src->forward(x.expand({2, 3, 32, 32}).contiguous());
  EXPECT_TRUE(torch::allclose(gray->forward(x), rgb_out, 1e-4, 1e-5))
      << (gray->forward(x) - rgb_out).abs().max().item<float>();
  // And the reverse: a gray model's weights in an RGB model (each channel a third of the kernel).
  TensorMap gray_weights;
  for (const auto& p : gray->module()->named_parameters()) gray_weights.emplace_back(p.key(), p.value().detach());
  for (const auto& b : gray->module()->named_buffers()) gray_weights.emplace_back(b.key(), b.value());
  r = load_pretrained(*same_classes->module(), gray_weights, {});
  ASSERT_EQ(r.adapted.size(), 1u) << r.summary();
  same_classes->module()->eval();
  EXPECT_TRUE(
      torch::allclose(same_classes->forward(x.expand({2, 3, 32, 32}).contiguous()), gray->forward(x), 1e-4, 1e-5));
  // Only the input convolution adapts: a block of another width is still a misfit.
  TensorMap wide = weights;
  for (auto& [n, t] : wide)
    if (n == "features.1.block.0.0.weight") t = torch::zeros({16, 2, 3, 3});
  try {
    load_pretrained(*dst->module(), wide, {});
    FAIL() << "strict loading accepted a block of another shape";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kFailedPrecondition);
    EXPECT_NE(e.one_line().find("features.1.block.0.0.weight (file [16, 2, 3, 3], model [16, 1, 3, 3])"),
              std::string::npos)
        << e.one_line();
    EXPECT_NE(e.one_line().find("init_strict = false"), std::string::npos) << e.one_line();
  }
  r = load_pretrained(*dst->module(), wide, {.strict = false});
  ASSERT_EQ(r.mismatched.size(), 1u);
  EXPECT_EQ(r.matched, r.model_tensors - 3);

  // Extra tensors in the file (another architecture's) are named; none fitting at all is an error.
  weights.emplace_back("aux.fc.weight", torch::zeros({2, 2}));
  EXPECT_THROW(load_pretrained(*dst->module(), weights, {}), Error);
  r = load_pretrained(*dst->module(), weights, {.strict = false});
  EXPECT_EQ(r.unexpected, std::vector<std::string>{"aux.fc.weight"});
  EXPECT_THROW(load_pretrained(*dst->module(), TensorMap{{"x.weight", torch::zeros({1})}}, {.strict = false}), Error);
}

// Gradient checkpointing recomputes each block in backward: the same loss, gradients and
// BatchNorm statistics as without it, dropout and stochastic depth included.
TEST(Checkpointing, GivesTheSameGradientsAndStatistics) {
  for (const std::string name : {"resnet18", "mobilenet_v3_small", "efficientnet_b0", "vit_small"}) {
    SCOPED_TRACE(name);
    ModelOptions o;
    o.name = name;
    auto run = [&](bool on) {
      torch::manual_seed(21);
      auto m = make_model(o, ModelShape{{3, 32, 32}, 5});
      EXPECT_TRUE(m->set_gradient_checkpointing(on));
      m->module()->train();
      torch::manual_seed(22);
      const at::Tensor x = torch::randn({4, 3, 32, 32});
      const at::Tensor loss = m->forward(x).pow(2).mean();
      loss.backward();
      std::map<std::string, at::Tensor> out;
      out["loss"] = loss.detach();
      for (const auto& p : m->module()->named_parameters()) out["grad." + p.key()] = p.value().grad().clone();
      for (const auto& b : m->module()->named_buffers()) out[b.key()] = b.value().clone();
      out["next_random"] = torch::rand({1});  // the generator continues where it would have
      return out;
    };
    const auto plain = run(false);
    const auto ckpt = run(true);
    ASSERT_EQ(plain.size(), ckpt.size());
    for (const auto& [k, v] : plain) EXPECT_TRUE(torch::allclose(v, ckpt.at(k), 1e-5, 1e-6)) << k;
  }
  // Frozen first blocks (no gradient flows into or through them) train as without checkpointing.
  ModelOptions o;
  o.name = "mobilenet_v3_small";
  auto m = make_model(o, ModelShape{{3, 32, 32}, 5});
  ASSERT_TRUE(m->set_gradient_checkpointing(true));
  for (auto& p : m->module()->named_parameters())
    if (p.key().rfind("features.0.", 0) == 0 || p.key().rfind("features.1.", 0) == 0)
      p.value().set_requires_grad(false);
  m->forward(torch::randn({2, 3, 32, 32})).sum().backward();
  EXPECT_TRUE(m->module()->named_parameters()["features.2.block.0.0.weight"].grad().defined());
  EXPECT_FALSE(m->module()->named_parameters()["features.1.block.0.0.weight"].grad().defined());
  ModelOptions mlp;
  EXPECT_FALSE(make_model(mlp, ModelShape{{8}, 3})->set_gradient_checkpointing(true));  // no blocks
}

TEST(Pretrained, HeadIsTheLastLinearLayer) {
  for (const auto& [name, head] : std::vector<std::pair<std::string, std::string>>{{"resnet18", "fc"},
                                                                                   {"efficientnet_b0", "classifier.1"},
                                                                                   {"vit_small", "heads.head"},
                                                                                   {"mlp", "body.head"}}) {
    ModelOptions o;
    o.name = name;
    auto m = make_model(
        o, ModelShape{name == "mlp" ? std::vector<std::int64_t>{20} : std::vector<std::int64_t>{3, 32, 32}, 4});
    EXPECT_EQ(head_module(*m->module()), head) << name;
  }
}

}  // namespace
}  // namespace glassbox::nn
