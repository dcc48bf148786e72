// The probes and the non-finite monitor inside real Trainer runs.
#include "glassbox/inspect/probes.h"

#include <cmath>
#include <limits>
#include <sstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "glassbox/inspect/nonfinite.h"
#include "glassbox/inspect/stats.h"
#include "glassbox/train/trainer.h"

namespace glassbox::inspect {
namespace {

// A task around any Sequential: cross-entropy on its output.
class SeqTask final : public train::TaskModule {
 public:
  explicit SeqTask(torch::nn::Sequential seq) : seq_(std::move(seq)) {}
  torch::nn::Module& module() override { return *seq_; }
  std::shared_ptr<torch::nn::Module> module_ptr() override { return seq_.ptr(); }
  train::StepOutput training_step(const data::Batch& b) override {
    at::Tensor logits = seq_->forward(b.inputs);
    return {torch::nn::functional::cross_entropy(logits, b.targets), logits};
  }

 private:
  torch::nn::Sequential seq_;
};

struct ExpLayerImpl : torch::nn::Cloneable<ExpLayerImpl> {
  void reset() override {}
  at::Tensor forward(const at::Tensor& x) { return torch::exp(x); }
};
TORCH_MODULE(ExpLayer);

// Forward: x (sqrt of an exact 0 added); backward: d sqrt(u)/du at u = 0 is Inf.
struct SqrtLayerImpl : torch::nn::Cloneable<SqrtLayerImpl> {
  void reset() override {}
  at::Tensor forward(const at::Tensor& x) { return x + torch::sqrt(x - x.detach()); }
};
TORCH_MODULE(SqrtLayer);

// Multiplies by zero: every parameter before it receives a zero gradient (a dead layer).
struct ZeroGateImpl : torch::nn::Cloneable<ZeroGateImpl> {
  void reset() override {}
  at::Tensor forward(const at::Tensor& x) { return x * 0.0; }
};
TORCH_MODULE(ZeroGate);

train::TensorDataModule make_data(at::Tensor x, at::Tensor y, std::int64_t batch = 16, bool shuffle = false) {
  data::LoaderOptions lo;
  lo.batch_size = batch;
  lo.shuffle = shuffle;
  return train::TensorDataModule(std::make_shared<data::TensorDataset>(x, y, 3), nullptr, nullptr, lo, 3);
}

train::Trainer make_trainer(std::int64_t epochs, double lr = 0.05, std::int64_t max_steps = -1) {
  train::TrainerOptions to;
  to.max_epochs = epochs;
  to.max_steps = max_steps;
  to.enable_progress_bar = false;
  to.num_sanity_val_steps = 0;
  to.device = "cpu";
  train::OptimizerOptions oo;
  oo.name = train::OptimizerKind::kSgd;
  oo.lr = lr;
  oo.weight_decay = 0;
  train::SchedulerOptions so;
  so.name = train::SchedulerKind::kNone;
  return train::Trainer(to, oo, so);
}

std::pair<at::Tensor, at::Tensor> toy(std::int64_t n, std::int64_t features, std::uint64_t seed = 1) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor x = torch::randn({n, features}, gen);
  at::Tensor y = (x.select(1, 0) > 0).to(torch::kLong) + (x.select(1, 1) > 0.5).to(torch::kLong);
  return {x, y};
}

// parameter_stats against the same reductions done directly in double precision.
TEST(ParameterStats, AgreesWithDirectReductionsForEveryDtypeAndNonFiniteValues) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  at::Tensor w = (torch::randn({300, 70}, gen) * 0.02 + 0.5).requires_grad_();  // std << mean
  at::Tensor b = torch::randn({70}, gen).to(torch::kBFloat16).requires_grad_();
  at::Tensor d = (torch::randn({5, 4}, gen).to(torch::kDouble) * 1e3).requires_grad_();
  at::Tensor frozen = torch::randn({9}, gen).requires_grad_();
  w.mutable_grad() = torch::randn({300, 70}, gen) * 1e-4;
  b.mutable_grad() = (torch::randn({70}, gen) * 300).to(torch::kBFloat16);
  at::Tensor dg = torch::randn({5, 4}, gen).to(torch::kDouble);
  dg[1][2] = std::numeric_limits<double>::quiet_NaN();
  dg[3][0] = -std::numeric_limits<double>::infinity();
  d.mutable_grad() = dg;
  const auto stats = parameter_stats({{"w", w}, {"b", b}, {"d", d}, {"frozen", frozen}});
  ASSERT_EQ(stats.size(), 4u);
  auto check = [](const TensorSummary& s, const at::Tensor& t, const char* what) {
    SCOPED_TRACE(what);
    const at::Tensor x = t.detach().to(torch::kDouble);
    const double scale = x.abs().max().item<double>();
    EXPECT_NEAR(s.norm, x.norm().item<double>(), 1e-6 * x.norm().item<double>());
    EXPECT_DOUBLE_EQ(s.max_abs, scale);
    EXPECT_NEAR(s.mean, x.mean().item<double>(), 1e-6 * scale);
    EXPECT_NEAR(s.std, x.std(/*unbiased=*/false).item<double>(), 1e-4 * x.std(false).item<double>());
    EXPECT_EQ(s.nonfinite, 0.0);
  };
  check(stats[0].value, w, "w");
  check(stats[0].grad, w.grad(), "w.grad");
  check(stats[1].value, b, "b (bfloat16)");
  check(stats[1].grad, b.grad(), "b.grad (bfloat16, |g| up to ~1000)");
  check(stats[2].value, d, "d (float64)");
  EXPECT_EQ(stats[2].grad.nonfinite, 2.0);
  EXPECT_FALSE(std::isfinite(stats[2].grad.norm));
  EXPECT_FALSE(stats[3].has_grad);
  check(stats[3].value, frozen, "frozen");
  EXPECT_EQ(stats[0].numel, 300 * 70);
  EXPECT_EQ(stats[1].name, "b");
}

TEST(ProbeCallback, RecordsLayersParametersAndUpdatesEveryNSteps) {
  auto [x, y] = toy(320, 6);
  auto data = make_data(x, y);
  SeqTask task(torch::nn::Sequential(torch::nn::Linear(6, 16), torch::nn::ReLU(), torch::nn::Linear(16, 3)));
  auto trainer = make_trainer(2);
  ProbeOptions po;
  po.every_n_steps = 7;
  po.grad_norm_every_step = true;
  auto cb = std::make_unique<ProbeCallback>(po);
  ProbeCallback* probes = cb.get();
  trainer.add_callback(std::move(cb));
  trainer.fit(task, data);
  // 2 epochs x 20 batches = 40 steps; probes at 0, 7, ..., 35.
  ASSERT_EQ(probes->history().size(), 6u);
  EXPECT_EQ(probes->history()[1].step, 7);
  EXPECT_EQ(probes->grad_norms().size(), 40u);
  const ProbeRecord& r = probes->history()[2];
  ASSERT_EQ(r.activations.size(), 3u);
  EXPECT_EQ(r.activations[0].layer, "0");
  EXPECT_EQ(r.activations[1].layer, "1");
  EXPECT_EQ(r.activations[1].type, "ReLU");
  EXPECT_EQ(r.activations[1].shape, (std::vector<std::int64_t>{16, 16}));
  EXPECT_GE(r.activations[1].stats.min, 0.0);  // after a ReLU
  EXPECT_GT(r.activations[1].stats.zero_fraction, 0.0);
  ASSERT_EQ(r.parameters.size(), 4u);
  EXPECT_EQ(r.parameters[0].name, "0.weight");
  for (std::size_t i = 0; i < r.parameters.size(); ++i) {
    EXPECT_TRUE(r.parameters[i].has_grad);
    EXPECT_GT(r.parameters[i].grad.norm, 0.0);
    // SGD without momentum: ||dw|| = lr * ||g||.
    EXPECT_NEAR(r.update_ratio[i] * r.parameters[i].value.norm, 0.05 * r.parameters[i].grad.norm,
                1e-4 * r.parameters[i].value.norm);
  }
  // The total norm of the record is the root of the summed squares of the per-parameter norms.
  double sq = 0;
  for (const auto& p : r.parameters) sq += p.grad.norm * p.grad.norm;
  EXPECT_NEAR(r.grad_norm, std::sqrt(sq), 1e-4 * r.grad_norm);
  EXPECT_TRUE(probes->alerts().empty());
}

TEST(ProbeCallback, ReportsDeadLayersAndExplodingGradients) {
  auto [x, y] = toy(320, 6);
  auto data = make_data(x, y);
  SeqTask task(torch::nn::Sequential(torch::nn::Linear(6, 8), ZeroGate(), torch::nn::Linear(8, 3)));
  auto trainer = make_trainer(2);
  ProbeOptions po;
  po.every_n_steps = 2;
  po.dead_after_probes = 4;
  std::ostringstream alerts;
  auto cb = std::make_unique<ProbeCallback>(po, nullptr, std::filesystem::path(), &alerts);
  ProbeCallback* probes = cb.get();
  trainer.add_callback(std::move(cb));
  trainer.fit(task, data);
  bool dead = false;
  for (const auto& a : probes->alerts()) dead |= a.id == "dead-layer" && a.where == "0.weight";
  EXPECT_TRUE(dead) << alerts.str();
  EXPECT_NE(alerts.str().find("0.weight"), std::string::npos);

  // Large inputs and a large learning rate: the norm passes 100.
  auto [x2, y2] = toy(320, 6);
  auto data2 = make_data(x2 * 300.0, y2);
  SeqTask task2(torch::nn::Sequential(torch::nn::Linear(6, 32), torch::nn::ReLU(), torch::nn::Linear(32, 3)));
  auto trainer2 = make_trainer(1, 0.5);
  ProbeOptions every_step;
  every_step.grad_norm_every_step = true;
  auto cb2 = std::make_unique<ProbeCallback>(every_step);
  ProbeCallback* p2 = cb2.get();
  trainer2.add_callback(std::move(cb2));
  train::Trainer* unused = nullptr;
  (void)unused;
  try {
    trainer2.fit(task2, data2);
  } catch (const std::exception&) {
  }
  bool exploding = false;
  for (const auto& a : p2->alerts()) exploding |= a.id == "exploding-gradients";
  EXPECT_TRUE(exploding);
  EXPECT_GT(p2->suggested_clip(), 0.0);
}

TEST(NonFiniteMonitor, NamesTheOverflowingLayerTheStepAndTheSample) {
  auto [x, y] = toy(160, 6);
  x = x * 0.1;
  x[70] = x[70] * 0 + 2000.0;  // sample 70 drives the exp layer to Inf; it is in batch 4
  auto data = make_data(x, y);
  SeqTask task(
      torch::nn::Sequential(torch::nn::Linear(6, 12), torch::nn::ReLU(), ExpLayer(), torch::nn::Linear(12, 3)));
  {
    torch::NoGradGuard ng;
    auto* first = task.module().modules(false)[0]->as<torch::nn::Linear>();
    first->weight.fill_(0.05);
    first->bias.zero_();
  }
  auto trainer = make_trainer(1, 0.01);
  std::ostringstream out;
  auto cb = std::make_unique<NonFiniteMonitor>(NonFinitePolicy::Stop, &out);
  NonFiniteMonitor* mon = cb.get();
  trainer.add_callback(std::move(cb));
  trainer.fit(task, data);
  ASSERT_TRUE(mon->first_event().has_value()) << out.str();
  const NonFiniteEvent& e = *mon->first_event();
  EXPECT_EQ(e.kind, "activation");
  EXPECT_EQ(e.layer, "2");
  EXPECT_EQ(e.type, "ExpLayer");
  EXPECT_EQ(e.op, "aten::exp");
  EXPECT_EQ(e.step, 4);
  EXPECT_EQ(e.bad_samples, (std::vector<std::int64_t>{70}));
  EXPECT_TRUE(trainer.should_stop());
  EXPECT_EQ(trainer.global_step(), 5);  // stopped after the bad step, which was not applied
  for (const auto& p : task.module().parameters()) EXPECT_TRUE(torch::isfinite(p).all().item<bool>());
  EXPECT_NE(out.str().find("module \"2\" (ExpLayer)"), std::string::npos) << out.str();
}

TEST(NonFiniteMonitor, ReportsNonFiniteInputsWithTheirIndices) {
  auto [x, y] = toy(96, 5);
  x[33][2] = std::nan("");
  x[40][0] = INFINITY;
  auto data = make_data(x, y);
  SeqTask task(torch::nn::Sequential(torch::nn::Linear(5, 8), torch::nn::Tanh(), torch::nn::Linear(8, 3)));
  auto trainer = make_trainer(1);
  auto cb = std::make_unique<NonFiniteMonitor>(NonFinitePolicy::Skip);
  NonFiniteMonitor* mon = cb.get();
  trainer.add_callback(std::move(cb));
  trainer.fit(task, data);
  ASSERT_TRUE(mon->first_event().has_value());
  EXPECT_EQ(mon->first_event()->kind, "input");
  EXPECT_EQ(mon->first_event()->step, 2);
  EXPECT_EQ(mon->first_event()->bad_samples, (std::vector<std::int64_t>{33, 40}));
  // Skip: the run goes on to the end, the bad batch is dropped, the weights stay finite.
  EXPECT_EQ(trainer.global_step(), 6);
  EXPECT_EQ(trainer.skipped_steps(), 1);
  for (const auto& p : task.module().parameters()) EXPECT_TRUE(torch::isfinite(p).all().item<bool>());
}

TEST(NonFiniteMonitor, FindsTheFirstParameterWithANonFiniteGradient) {
  auto [x, y] = toy(64, 4);
  auto data = make_data(x, y);
  // The forward is finite, the backward of the sqrt layer is Inf: the first parameters reached
  // in backward after it are those of module "1".
  SeqTask task(
      torch::nn::Sequential(torch::nn::Linear(4, 6), torch::nn::Linear(6, 6), SqrtLayer(), torch::nn::Linear(6, 3)));
  auto trainer = make_trainer(1);
  auto cb = std::make_unique<NonFiniteMonitor>(NonFinitePolicy::Stop, nullptr, std::filesystem::path(),
                                               GradientCheck::EveryStep);
  NonFiniteMonitor* mon = cb.get();
  trainer.add_callback(std::move(cb));
  trainer.fit(task, data);
  ASSERT_TRUE(mon->first_event().has_value());
  const NonFiniteEvent& e = *mon->first_event();
  EXPECT_EQ(e.kind, "gradient") << e.message;
  EXPECT_EQ(e.layer, "1");
  EXPECT_EQ(e.parameter.rfind("1.", 0), 0u) << e.parameter;
  EXPECT_EQ(e.step, 0);
}

TEST(Trainer, AutomaticClippingThresholdIsThe95thPercentileOfTheFirstKNorms) {
  auto [x, y] = toy(320, 6);
  auto data = make_data(x, y);
  SeqTask task(torch::nn::Sequential(torch::nn::Linear(6, 16), torch::nn::ReLU(), torch::nn::Linear(16, 3)));
  train::TrainerOptions to;
  to.max_epochs = 1;
  to.enable_progress_bar = false;
  to.num_sanity_val_steps = 0;
  to.gradient_clip_auto_steps = 10;
  train::OptimizerOptions oo;
  oo.name = train::OptimizerKind::kSgd;
  oo.lr = 0.05;
  train::SchedulerOptions so;
  so.name = train::SchedulerKind::kNone;
  train::Trainer trainer(to, oo, so);
  ProbeOptions po;
  po.every_n_steps = 0;
  po.grad_norm_every_step = true;
  auto cb = std::make_unique<ProbeCallback>(po);
  ProbeCallback* probes = cb.get();
  trainer.add_callback(std::move(cb));
  trainer.fit(task, data);
  std::vector<double> first;
  for (std::size_t i = 0; i < 10; ++i) first.push_back(probes->grad_norms()[i].second);
  EXPECT_NEAR(trainer.gradient_clip_threshold(), quantile(first, 0.95), 1e-12);
  // After step 10 every norm applied is at most the threshold; the recorded norms are before clipping.
  EXPECT_GT(trainer.gradient_clip_threshold(), 0.0);
}

}  // namespace
}  // namespace glassbox::inspect
