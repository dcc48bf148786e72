// Tabular attributions: saliency and integrated gradients against captum
// (tests/reference/captum_ref.py) on the zoo's MLP, and the properties that hold exactly for
// linear models.
#include "glassbox/explain/attribution.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/core/safetensors.h"
#include "glassbox/data/npy.h"
#include "glassbox/nn/registry.h"
#include "glassbox/testing/testing.h"

namespace glassbox::explain {
namespace {

namespace fs = std::filesystem;

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

std::vector<double> to_vector(const at::Tensor& t) {
  const at::Tensor c = t.to(torch::kDouble).contiguous();
  return {c.data_ptr<double>(), c.data_ptr<double>() + c.numel()};
}

// An MLP whose BatchNorm statistics and affine parameters are away from the identity, so that
// evaluation mode (running statistics, no dropout) is what the reference has to agree with.
std::unique_ptr<nn::Model> tabular_mlp(nlohmann::json* spec) {
  torch::manual_seed(21);
  nn::ModelOptions mo;
  mo.name = "mlp";
  mo.mlp.hidden = {16, 8};
  mo.mlp.activation = nn::Activation::kTanh;
  mo.mlp.norm = nn::MlpNorm::kBatchNorm;
  mo.mlp.dropout = 0.3;
  auto model = nn::make_model(mo, nn::ModelShape{{6}, 3});
  torch::NoGradGuard ng;
  for (auto& b : model->module()->named_buffers()) {
    if (b.key().find("running_mean") != std::string::npos) b.value().copy_(torch::randn(b.value().sizes()) * 0.2);
    if (b.key().find("running_var") != std::string::npos) b.value().copy_(torch::rand(b.value().sizes()) + 0.5);
  }
  for (auto& p : model->module()->named_parameters()) {
    if (p.key().find("bn") == std::string::npos) continue;
    if (p.key().find("weight") != std::string::npos) p.value().copy_(torch::rand(p.value().sizes()) + 0.5);
    if (p.key().find("bias") != std::string::npos) p.value().copy_(torch::randn(p.value().sizes()) * 0.1);
  }
  *spec = {{"input_shape", {6}},
           {"num_classes", 3},
           {"mlp",
            {{"hidden", mo.mlp.hidden},
             {"activation", name_of(mo.mlp.activation)},
             {"norm", name_of(mo.mlp.norm)},
             {"dropout", mo.mlp.dropout}}}};
  return model;
}

void save_weights(nn::Model& m, const fs::path& path) {
  TensorMap t;
  for (const auto& p : m.module()->named_parameters()) t.emplace_back(p.key(), p.value().detach().contiguous());
  for (const auto& b : m.module()->named_buffers()) t.emplace_back(b.key(), b.value().contiguous());
  save_safetensors(path, t, {{"format", "pt"}});
}

TEST(CaptumReference, MlpMatchesCaptumSaliencyAndIntegratedGradients) {
  nlohmann::json spec;
  auto model = tabular_mlp(&spec);
  ASSERT_TRUE(model->module()->is_training());
  const at::Tensor x = torch::randn({5, 6}) * 1.5;
  const at::Tensor baseline = torch::randn({1, 6}) * 0.5;  // one sample, broadcast to the five
  const std::vector<std::int64_t> asked = {0, 2, -1, 1, -1};

  const Attribution sal = saliency(*model, x, asked);
  const Attribution signed_sal = saliency(*model, x, asked, SaliencyOptions{false});
  const Attribution ig_gl = integrated_gradients(*model, x, asked);  // captum's defaults
  IntegratedGradientsOptions trap;
  trap.method = IgMethod::RiemannTrapezoid;
  const Attribution ig_trap = integrated_gradients(*model, x, asked, trap);
  IntegratedGradientsOptions mid;
  mid.method = IgMethod::RiemannMiddle;
  mid.n_steps = 20;
  mid.baseline = baseline;
  mid.internal_batch_size = 16;  // 3 steps of 5 samples per forward, the last one partial
  const Attribution ig_mid = integrated_gradients(*model, x, asked, mid);
  IntegratedGradientsOptions gl7;
  gl7.n_steps = 7;
  gl7.baseline = baseline;
  const Attribution ig_gl7 = integrated_gradients(*model, x, asked, gl7);
  EXPECT_TRUE(model->module()->is_training());  // the mode it had
  for (const auto& p : model->module()->parameters()) EXPECT_FALSE(p.grad().defined());

  // The targets: the asked classes, the prediction where -1.
  const at::Tensor pred = sal.outputs.argmax(1);
  ASSERT_EQ(sal.targets.size(), 5u);
  EXPECT_EQ(sal.targets[0], 0);
  EXPECT_EQ(sal.targets[1], 2);
  EXPECT_EQ(sal.targets[2], pred[2].item<std::int64_t>());
  EXPECT_EQ(sal.targets[4], pred[4].item<std::int64_t>());
  EXPECT_EQ(ig_gl.targets, sal.targets);

  const fs::path dir = testing::temp_dir("captum_mlp");
  std::ofstream(dir / "model.json") << spec.dump();
  save_weights(*model, dir / "w.safetensors");
  data::write_npy(dir / "x.npy", x);
  data::write_npy(dir / "t.npy", torch::tensor(sal.targets, torch::kLong));
  data::write_npy(dir / "b.npy", baseline.expand({5, 6}).contiguous());
  const nlohmann::json runs = nlohmann::json::array({
      {{"name", "q_gl"}, {"kind", "quadrature"}, {"method", "gausslegendre"}, {"n_steps", 50}},
      {{"name", "q_gl7"}, {"kind", "quadrature"}, {"method", "gausslegendre"}, {"n_steps", 7}},
      {{"name", "q_left"}, {"kind", "quadrature"}, {"method", "riemann_left"}, {"n_steps", 13}},
      {{"name", "q_right"}, {"kind", "quadrature"}, {"method", "riemann_right"}, {"n_steps", 13}},
      {{"name", "sal"}, {"kind", "saliency"}, {"abs", true}},
      {{"name", "signed_sal"}, {"kind", "saliency"}, {"abs", false}},
      {{"name", "ig_gl"}, {"kind", "ig"}},
      {{"name", "ig_trap"}, {"kind", "ig"}, {"method", "riemann_trapezoid"}, {"n_steps", 50}},
      {{"name", "ig_mid"},
       {"kind", "ig"},
       {"method", "riemann_middle"},
       {"n_steps", 20},
       {"baseline", (dir / "b.npy").string()},
       {"internal_batch_size", 16}},
      {{"name", "ig_gl7"}, {"kind", "ig"}, {"n_steps", 7}, {"baseline", (dir / "b.npy").string()}},
  });
  std::ofstream(dir / "runs.json") << runs.dump();
  const std::string summary =
      testing::run_python("tests/reference/captum_ref.py",
                          {"--model-json", (dir / "model.json").string(), "--weights", (dir / "w.safetensors").string(),
                           "--inputs", (dir / "x.npy").string(), "--targets", (dir / "t.npy").string(), "--runs",
                           (dir / "runs.json").string(), "--out-dir", dir.string()});
  EXPECT_EQ(nlohmann::json::parse(summary).at("captum"), "0.9.0") << summary;

  // The quadrature rules captum integrates with.
  struct QuadCase {
    std::string name;
    IgMethod method;
    std::int64_t n;
    double tol;
  };
  for (const auto& q :
       {QuadCase{"q_gl", IgMethod::GaussLegendre, 50, 1e-13}, QuadCase{"q_gl7", IgMethod::GaussLegendre, 7, 1e-13},
        QuadCase{"q_left", IgMethod::RiemannLeft, 13, 0.0}, QuadCase{"q_right", IgMethod::RiemannRight, 13, 0.0}}) {
    SCOPED_TRACE(q.name);
    const Quadrature mine = ig_quadrature(q.method, q.n);
    const at::Tensor alphas = torch::tensor(mine.alphas, torch::kDouble);
    const at::Tensor weights = torch::tensor(mine.weights, torch::kDouble);
    EXPECT_LE(max_abs_diff(alphas, data::read_npy(dir / (q.name + "_alphas.npy"))), q.tol);
    EXPECT_LE(max_abs_diff(weights, data::read_npy(dir / (q.name + "_weights.npy"))), q.tol);
  }

  struct Case {
    std::string name;
    const Attribution* mine;
  };
  double worst_attr = 0, worst_delta = 0;
  for (const auto& c : {Case{"sal", &sal}, Case{"signed_sal", &signed_sal}, Case{"ig_gl", &ig_gl},
                        Case{"ig_trap", &ig_trap}, Case{"ig_mid", &ig_mid}, Case{"ig_gl7", &ig_gl7}}) {
    SCOPED_TRACE(c.name);
    const at::Tensor ref = data::read_npy(dir / (c.name + "_attr.npy"));
    ASSERT_EQ(ref.sizes(), x.sizes());
    const double d = max_abs_diff(c.mine->attributions, ref);
    EXPECT_LE(d, 1e-5) << "max |glassbox - captum| = " << d;
    worst_attr = std::max(worst_attr, d);
    // Not trivially equal: the attributions are of the order of the outputs.
    EXPECT_GT(ref.abs().max().item<double>(), 0.05);
    std::printf("%-10s max |attr - captum| = %.3g", c.name.c_str(), d);
    if (c.name.rfind("ig_", 0) == 0) {
      const at::Tensor ref_delta = data::read_npy(dir / (c.name + "_delta.npy"));
      const double dd = max_abs_diff(c.mine->delta, ref_delta);
      EXPECT_LE(dd, 1e-5) << "max |delta - captum's delta| = " << dd;
      worst_delta = std::max(worst_delta, dd);
      std::printf("   max |delta - captum| = %.3g   (max |delta| = %.3g)", dd, ref_delta.abs().max().item<double>());
    }
    std::printf("\n");
  }
  std::printf("worst: attributions %.3g, delta %.3g\n", worst_attr, worst_delta);
  // The baseline and the rule matter: these are different numbers, each matched above.
  EXPECT_GT(max_abs_diff(ig_gl.attributions, ig_gl7.attributions), 1e-3);
  EXPECT_GT(max_abs_diff(sal.attributions, signed_sal.attributions), 1e-3);
}

// A linear model's integrand is constant along the path: a rule whose weights sum to 1 gives
// (x - b) * w_t exactly, and the attributions sum to F(x) - F(b) (completeness, delta 0). captum's
// riemann_trapezoid weights sum to 1 - 1/n (1/n each, the two ends halved), so it gives
// (1 - 1/n) (x - b) * w_t and a delta of -gap / n; that too is captum's definition.
TEST(Attribution, LinearModelIgIsInputMinusBaselineTimesWeight) {
  torch::manual_seed(3);
  torch::nn::Linear lin(4, 3);
  lin->to(torch::kDouble);
  const at::Tensor x = torch::randn({6, 4}, torch::kDouble);
  const at::Tensor b = torch::randn({6, 4}, torch::kDouble);
  const std::vector<std::int64_t> t = {0, 1, 2, 2, 1, 0};
  const at::Tensor w = lin->weight.detach().index_select(0, torch::tensor(t, torch::kLong));  // [6, 4]
  const at::Tensor expected = (x - b) * w;
  const at::Tensor gap =
      (lin->forward(x) - lin->forward(b)).detach().gather(1, torch::tensor(t).unsqueeze(1)).squeeze(1);
  ASSERT_GT(gap.abs().min().item<double>(), 1e-3);
  for (auto method : {IgMethod::GaussLegendre, IgMethod::RiemannTrapezoid, IgMethod::RiemannLeft,
                      IgMethod::RiemannRight, IgMethod::RiemannMiddle}) {
    for (std::int64_t steps : {2, 7, 50}) {
      SCOPED_TRACE(ig_method_name(method) + " " + std::to_string(steps));
      IntegratedGradientsOptions o;
      o.method = method;
      o.n_steps = steps;
      o.baseline = b;
      o.internal_batch_size = steps == 7 ? 12 : 0;
      const Attribution r = integrated_gradients(
          *lin, [&](const at::Tensor& in) { return lin->forward(in); }, x, t, o);
      ASSERT_EQ(r.attributions.sizes(), x.sizes());
      const double scale = method == IgMethod::RiemannTrapezoid ? 1.0 - 1.0 / static_cast<double>(steps) : 1.0;
      EXPECT_LE(max_abs_diff(r.attributions, expected * scale), 1e-12);
      EXPECT_LE(max_abs_diff(r.attributions.sum(1), gap * scale), 1e-12);
      EXPECT_LE(max_abs_diff(r.delta, gap * (scale - 1.0)), 1e-12);
    }
  }
  // The default baseline is zeros: x * w_t.
  const Attribution z = integrated_gradients(
      *lin, [&](const at::Tensor& in) { return lin->forward(in); }, x, t);
  EXPECT_LE(max_abs_diff(z.attributions, x * w), 1e-12);
  // Saliency of a linear model: |w_t| for every sample, whatever the input.
  const Attribution s = saliency(
      *lin, [&](const at::Tensor& in) { return lin->forward(in); }, x, t);
  EXPECT_LE(max_abs_diff(s.attributions, w.abs()), 1e-15);
  for (const auto& p : lin->parameters()) EXPECT_FALSE(p.grad().defined());
}

// Inputs of any shape [N, ...]: a sample of 2 x 3 values through flatten + linear.
TEST(Attribution, InputsNeedNotBeTwoDimensional) {
  torch::manual_seed(4);
  torch::nn::Sequential seq(torch::nn::Flatten(), torch::nn::Linear(6, 2));
  seq->to(torch::kDouble);
  auto forward = [&](const at::Tensor& in) { return seq->forward(in); };
  const at::Tensor x = torch::randn({3, 2, 3}, torch::kDouble);
  const at::Tensor b = torch::randn({2, 3}, torch::kDouble);  // one sample, broadcast
  IntegratedGradientsOptions o;
  o.baseline = b;
  const Attribution r = integrated_gradients(*seq, forward, x, {1, 0, 1}, o);
  ASSERT_EQ(r.attributions.sizes(), x.sizes());
  const at::Tensor w = seq->named_parameters()["1.weight"].detach();  // [2, 6]
  const at::Tensor expected = (x - b).reshape({3, 6}) * w.index_select(0, torch::tensor({1, 0, 1}));
  EXPECT_LE(max_abs_diff(r.attributions.reshape({3, 6}), expected), 1e-12);
  const auto imp = feature_importance(r.attributions);
  ASSERT_EQ(imp.size(), 6u);
  EXPECT_GE(imp.front().value, imp.back().value);
}

// On a curved model the delta is what it says (sum of attributions minus the output gap), and it
// shrinks as the rule refines.
TEST(Attribution, DeltaMeasuresCompletenessAndShrinksWithSteps) {
  nlohmann::json spec;
  auto model = tabular_mlp(&spec);
  model->module()->eval();
  const at::Tensor x = torch::randn({4, 6}) * 2;
  auto delta_for = [&](std::int64_t steps) {
    IntegratedGradientsOptions o;
    o.method = IgMethod::RiemannRight;
    o.n_steps = steps;
    const Attribution r = integrated_gradients(*model, x, {}, o);
    torch::NoGradGuard ng;
    const at::Tensor ids = torch::tensor(r.targets).unsqueeze(1);
    const at::Tensor gap =
        model->forward(x).gather(1, ids).squeeze(1) - model->forward(torch::zeros_like(x)).gather(1, ids).squeeze(1);
    EXPECT_LE(max_abs_diff(r.delta, r.attributions.sum(1) - gap), 1e-5);
    return r.delta.abs().max().item<double>();
  };
  const double coarse = delta_for(4), fine = delta_for(200);
  EXPECT_GT(coarse, 1e-3);
  EXPECT_LT(fine, coarse / 10);
}

void expect_invalid(const std::function<void()>& f, const std::string& message_part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one saying: " << message_part;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.one_line();
    EXPECT_NE(e.message().find(message_part), std::string::npos) << e.one_line();
    EXPECT_FALSE(e.hint().empty()) << e.one_line();
    EXPECT_EQ(e.one_line().find('\n'), std::string::npos) << e.one_line();
  }
}

TEST(Attribution, BadInputsAreInvalidArgumentsNamingTheProblem) {
  torch::nn::Linear lin(4, 3);
  auto f = [&](const at::Tensor& in) { return lin->forward(in); };
  const at::Tensor x = torch::randn({2, 4});
  auto ig = [&](std::vector<std::int64_t> t, IntegratedGradientsOptions o) {
    return [&lin, &f, &x, t, o] { integrated_gradients(*lin, f, x, t, o); };
  };
  IntegratedGradientsOptions o;
  o.baseline = torch::zeros({2, 5});
  expect_invalid(ig({}, o), "the baseline [2, 5] does not fit the inputs [2, 4]");
  o.baseline = torch::zeros({3, 4});
  expect_invalid(ig({}, o), "the baseline [3, 4] does not fit");
  o = {};
  expect_invalid(ig({0, 3}, o), "target class 3 of sample 1 is outside 0..2");
  expect_invalid(ig({-2, 0}, o), "target class -2 of sample 0 is outside 0..2");
  expect_invalid(ig({0}, o), "1 target classes for 2 samples");
  o.n_steps = 0;
  expect_invalid(ig({}, o), "n_steps must be >= 1, got 0");
  o.n_steps = 1;
  o.method = IgMethod::RiemannTrapezoid;
  expect_invalid(ig({}, o), "riemann_trapezoid needs n_steps >= 2, got 1");
  o = {};
  o.internal_batch_size = -1;
  expect_invalid(ig({}, o), "internal_batch_size must be >= 0");
  expect_invalid([&] { saliency(*lin, f, x, {4, 0}); }, "target class 4 of sample 0 is outside 0..2");
  expect_invalid([&] { saliency(*lin, f, torch::ones({2, 4}, torch::kLong), {}); }, "must be floating point");
  expect_invalid([&] { saliency(*lin, [](const at::Tensor& in) { return in.sum(); }, x, {}); },
                 "the model's output for 2 samples is []");
  expect_invalid([] { parse_ig_method("riemann"); }, "unknown integrated gradients method 'riemann'");
  expect_invalid([] { feature_importance(torch::ones({2, 3}), {"a", "b"}); }, "2 feature names for 3 features");
  // A single Gauss-Legendre node is valid: the midpoint with weight 1.
  const Quadrature one = ig_quadrature(IgMethod::GaussLegendre, 1);
  EXPECT_EQ(one.alphas, std::vector<double>{0.5});
  EXPECT_EQ(one.weights, std::vector<double>{1.0});
  EXPECT_EQ(parse_ig_method(ig_method_name(IgMethod::RiemannMiddle)), IgMethod::RiemannMiddle);
}

TEST(Attribution, FeatureImportanceRanksMeanAbsoluteAttribution) {
  const at::Tensor a = torch::tensor({{1.0, -3.0, 0.5, 0.0}, {-1.0, 1.0, 0.5, 0.0}});
  const auto imp = feature_importance(a, {"age", "income", "tenure", "zip"});
  ASSERT_EQ(imp.size(), 4u);
  EXPECT_EQ(imp[0].name, "income");
  EXPECT_EQ(imp[0].index, 1);
  EXPECT_DOUBLE_EQ(imp[0].value, 2.0);
  EXPECT_EQ(imp[1].name, "age");
  EXPECT_DOUBLE_EQ(imp[1].value, 1.0);
  EXPECT_EQ(imp[2].name, "tenure");
  EXPECT_DOUBLE_EQ(imp[2].value, 0.5);
  EXPECT_EQ(imp[3].name, "zip");
  const nlohmann::json j = to_json(imp);
  ASSERT_TRUE(j.is_array());
  EXPECT_EQ(j[0], (nlohmann::json{{"name", "income"}, {"index", 1}, {"value", 2.0}}));
  // Without names: f<index>; ties keep the column order.
  const auto unnamed = feature_importance(torch::ones({3, 2}));
  EXPECT_EQ(unnamed[0].name, "f0");
  EXPECT_EQ(unnamed[1].name, "f1");
  EXPECT_EQ(to_vector(torch::tensor({unnamed[0].value, unnamed[1].value})), (std::vector<double>{1.0, 1.0}));
}

}  // namespace
}  // namespace glassbox::explain
