// Weight averaging against timm's ModelEmaV2 / ModelEmaV3 and torch.optim.swa_utils'
// AveragedModel + update_bn over the same weight sequence (tests/reference/averaging_ref.py).
#include "glassbox/train/averaging.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "glassbox/core/safetensors.h"
#include "glassbox/testing/testing.h"

namespace glassbox::train {
namespace {

namespace fs = std::filesystem;

torch::nn::Sequential small_model() {
  return torch::nn::Sequential(torch::nn::Linear(6, 8), torch::nn::BatchNorm1d(8), torch::nn::ReLU(),
                               torch::nn::Linear(8, 3));
}

void load(torch::nn::Module& m, const SafetensorsFile& f, int k) {
  torch::NoGradGuard ng;
  for (auto& p : m.named_parameters()) p.value().copy_(*f.find("s" + std::to_string(k) + "." + p.key()));
  for (auto& b : m.named_buffers()) b.value().copy_(*f.find("s" + std::to_string(k) + "." + b.key()));
}

TEST(Averaging, EmaAndSwaEqualTimmAndTorchOnTheSameWeights) {
  constexpr int kSteps = 40;
  auto model = small_model();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(17);
  TensorMap in;
  for (int k = 0; k < kSteps; ++k) {
    for (const auto& p : model->named_parameters())
      in.emplace_back("s" + std::to_string(k) + "." + p.key(), torch::randn(p.value().sizes(), gen));
    for (const auto& b : model->named_buffers()) {
      at::Tensor v = b.value().is_floating_point() ? torch::rand(b.value().sizes(), gen) + 0.5 : b.value().clone();
      in.emplace_back("s" + std::to_string(k) + "." + b.key(), v);
    }
  }
  std::vector<at::Tensor> batches;
  for (int i = 0; i < 5; ++i) {
    batches.push_back(torch::randn({16, 6}, gen));
    in.emplace_back("bn_batch." + std::to_string(i), batches.back());
  }
  const fs::path dir = testing::temp_dir("averaging_ref");
  save_safetensors(dir / "in.safetensors", in);
  testing::run_python("tests/reference/averaging_ref.py",
                      {(dir / "in.safetensors").string(), (dir / "out.safetensors").string()});
  const SafetensorsFile ref = load_safetensors(dir / "out.safetensors");
  const SafetensorsFile seq = load_safetensors(dir / "in.safetensors");

  load(*model, seq, 0);
  ModelEma ema2(*model, {.enabled = true, .decay = 0.9});
  ModelEma ema3(*model, {.enabled = true, .decay = 0.999, .warmup = true});
  SwaAverage swa(*model);
  swa.update(*model);
  for (int k = 1; k < kSteps; ++k) {
    load(*model, seq, k);
    ema2.update(*model, k);
    ema3.update(*model, k);
    swa.update(*model);
  }
  EXPECT_EQ(swa.count(), kSteps);
  auto compare = [&](const TensorMap& ours, const std::string& prefix, double tol) {
    for (const auto& [n, t] : ours) {
      const at::Tensor* r = ref.find(prefix + "." + n);
      ASSERT_NE(r, nullptr) << prefix << "." << n;
      const double d = (t.to(torch::kDouble) - r->to(torch::kDouble)).abs().max().item<double>();
      EXPECT_LE(d, tol) << prefix << "." << n;
    }
  };
  compare(ema2.tensors(), "ema2", 1e-7);
  compare(ema3.tensors(), "ema3", 1e-7);
  // The warm-up's decay: 1 - (1 + s)^(-2/3) with s = step - 1.
  EXPECT_DOUBLE_EQ(ema3.decay_at(1), 0.0);
  EXPECT_DOUBLE_EQ(ema3.decay_at(9), 1 - std::pow(9.0, -2.0 / 3.0));
  EXPECT_DOUBLE_EQ(ema2.decay_at(9), 0.9);

  // SWA: the averaged parameters into a model, then BatchNorm statistics recomputed.
  auto averaged = small_model();
  load(*averaged, seq, kSteps - 1);
  swa.copy_to(*averaged);
  averaged->eval();
  update_bn(
      *averaged,
      [&](const std::function<void(const at::Tensor&)>& f) {
        for (const auto& b : batches) f(b);
      },
      [&](const at::Tensor& x) { averaged->forward(x); });
  EXPECT_FALSE(averaged->is_training());  // the mode it had
  EXPECT_DOUBLE_EQ(averaged->named_modules()["1"]->as<torch::nn::BatchNorm1d>()->options.momentum().value(), 0.1);
  TensorMap after;
  for (const auto& p : averaged->named_parameters()) after.emplace_back(p.key(), p.value().detach());
  for (const auto& b : averaged->named_buffers()) after.emplace_back(b.key(), b.value());
  compare(after, "swa", 1e-7);
}

TEST(Averaging, EmaSwapValidatesWithTheAverageAndRestoresTheWeights) {
  auto model = small_model();
  ModelEma ema(*model, {.enabled = true, .decay = 0.5});
  const at::Tensor w0 = model->named_parameters()["0.weight"].clone();
  {
    torch::NoGradGuard ng;
    model->named_parameters()["0.weight"].add_(1.0);
  }
  ema.update(*model, 1);
  const at::Tensor w1 = model->named_parameters()["0.weight"].clone();
  ema.swap(*model);
  EXPECT_TRUE(torch::allclose(model->named_parameters()["0.weight"], (w0 + w1) / 2));
  ema.swap(*model);
  EXPECT_TRUE(torch::equal(model->named_parameters()["0.weight"], w1));
}

}  // namespace
}  // namespace glassbox::train
