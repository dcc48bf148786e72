// The doctor on faults planted in setups that lab/ does not use: other models, tensor data built
// in code instead of IDX/NPY files, other magnitudes, other layer positions, user TaskModules.
#include "glassbox/inspect/doctor.h"

#include <algorithm>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "glassbox/inspect/loop_monitor.h"
#include "glassbox/train/trainer.h"

namespace glassbox::inspect {
namespace {

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

// Gaussian blobs: K classes in F dimensions, learnable.
std::pair<at::Tensor, at::Tensor> blobs(std::int64_t n, std::int64_t k, std::int64_t f, std::uint64_t seed = 3) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor centers = torch::randn({k, f}, gen) * 2.5;
  at::Tensor y = torch::randint(0, k, {n}, gen, torch::kLong);
  at::Tensor x = centers.index_select(0, y) + torch::randn({n, f}, gen);
  return {x, y};
}

// Small images whose class is a bright square at one of K positions.
std::pair<at::Tensor, at::Tensor> squares(std::int64_t n, std::int64_t k, std::uint64_t seed = 5) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor y = torch::randint(0, k, {n}, gen, torch::kLong);
  at::Tensor x = torch::randn({n, 1, 8, 8}, gen) * 0.3;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t c = y[i].item<std::int64_t>();
    x[i].slice(1, (c % 2) * 4, (c % 2) * 4 + 4).slice(2, (c / 2) * 4, (c / 2) * 4 + 4) += 2.0;
  }
  return {x, y};
}

train::TensorDataModule module_of(at::Tensor x, at::Tensor y, std::int64_t k, std::int64_t batch = 32,
                                  bool shuffle = true, at::Tensor tx = {}, at::Tensor ty = {}) {
  data::LoaderOptions lo;
  lo.batch_size = batch;
  lo.shuffle = shuffle;
  lo.seed = 11;
  const std::int64_t n = x.size(0);
  const std::int64_t nv = n / 5;
  auto train = std::make_shared<data::TensorDataset>(x.slice(0, 0, n - nv), y.slice(0, 0, n - nv), k);
  auto val = std::make_shared<data::TensorDataset>(x.slice(0, n - nv), y.slice(0, n - nv), k);
  std::shared_ptr<data::TensorDataset> test = tx.defined() ? std::make_shared<data::TensorDataset>(tx, ty, k) : val;
  return train::TensorDataModule(train, val, test, lo, k);
}

train::RunConfig config_of(const std::string& optim, double lr, double momentum = 0.0) {
  train::RunConfig c;
  c.trainer.device = "cpu";
  c.trainer.num_threads = 1;
  c.optim.name = enum_of<train::OptimizerKind>(optim);
  c.optim.lr = lr;
  c.optim.momentum = momentum;
  c.optim.weight_decay = 0;
  c.scheduler.name = train::SchedulerKind::kNone;
  return c;
}

DoctorOptions quick() {
  DoctorOptions o;
  o.max_steps = 200;
  o.max_seconds = 30;
  o.knn_queries = 300;
  return o;
}

std::string ids(const DoctorReport& r) {
  std::string s;
  for (const auto& f : r.findings) s += f.id + "(" + std::string(name_of(f.severity)) + ") ";
  return s;
}

const Finding& first(const DoctorReport& r) {
  static const Finding none{.id = "<none>"};
  return r.findings.empty() ? none : r.findings.front();
}

torch::nn::Sequential mlp(std::int64_t in, std::int64_t k, std::int64_t hidden = 32) {
  return torch::nn::Sequential(torch::nn::Linear(in, hidden), torch::nn::ReLU(), torch::nn::Linear(hidden, k));
}

TEST(Doctor, HealthyTabularSetupHasNoErrors) {
  auto [x, y] = blobs(1200, 4, 6);
  auto data = module_of(x, y, 4);
  SeqTask task(mlp(6, 4));
  const DoctorReport r = run_doctor(task, data, config_of("adam", 1e-2), quick());
  EXPECT_FALSE(r.has_errors()) << ids(r);
}

TEST(Doctor, LabelOffsetByTwoOnTabularData) {
  auto [x, y] = blobs(1000, 5, 6);
  auto data = module_of(x, y + 2, 7);  // labels 2..6, a 7-way head
  SeqTask task(mlp(6, 7));
  const DoctorReport r = run_doctor(task, data, config_of("adam", 1e-2), quick());
  ASSERT_EQ(first(r).id, "label-offset") << ids(r);
  EXPECT_EQ(first(r).where["labels"], nlohmann::json({2, 6}));
  EXPECT_NE(first(r).evidence.find("2..6"), std::string::npos) << first(r).evidence;
}

TEST(Doctor, NonFiniteInputInAConvNet) {
  auto [x, y] = squares(640, 4);
  x[17][0][3][3] = INFINITY;
  auto data = module_of(x, y, 4);
  SeqTask task(torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 3).padding(1)), torch::nn::ReLU(),
                                     torch::nn::Flatten(), torch::nn::Linear(4 * 64, 4)));
  const DoctorReport r = run_doctor(task, data, config_of("sgd", 0.05), quick());
  ASSERT_EQ(first(r).id, "nonfinite-input") << ids(r);
  EXPECT_EQ(first(r).where["samples"], nlohmann::json({17}));
}

// A parameterless module that amplifies: exp(120 x) overflows float32 once x > 0.74.
struct AmplifyImpl : torch::nn::Cloneable<AmplifyImpl> {
  void reset() override {}
  at::Tensor forward(const at::Tensor& x) { return torch::exp(120.0 * x); }
};
TORCH_MODULE(Amplify);

TEST(Doctor, NamesTheOverflowingLayerInTheMiddleAndTheStep) {
  auto [x, y] = blobs(800, 3, 5);
  x = x * 0.02;
  x[150] = x[150] * 0 + 40.0;  // in batch 150 / 16 = 9 of the unshuffled first epoch
  auto data = module_of(x, y, 3, 16, /*shuffle=*/false);
  torch::nn::Sequential seq(torch::nn::Linear(5, 8), torch::nn::Tanh(), torch::nn::Linear(8, 8), Amplify(),
                            torch::nn::Linear(8, 3));
  {
    torch::NoGradGuard ng;
    // Weights 0.1, biases 0: ordinary samples reach the amplifier near 0.004, sample 150 at 0.8.
    for (auto& p : seq->named_parameters()) p.value().fill_(p.key().find("bias") != std::string::npos ? 0.0 : 0.1);
  }
  SeqTask task(seq);
  const DoctorReport r = run_doctor(task, data, config_of("sgd", 1e-4), quick());
  ASSERT_EQ(first(r).id, "nonfinite-activation") << ids(r) << r.to_text();
  EXPECT_EQ(first(r).where["layer"], "3");
  EXPECT_EQ(first(r).where["op"], "aten::exp");
  EXPECT_EQ(first(r).where["step"], 9);
  EXPECT_EQ(first(r).where["samples"], nlohmann::json({150}));
}

// A distance written as sqrt(d^2) added to the activations, where d (here x minus a detached
// copy of itself) is 0: the forward is finite, its backward is inf * 0 = NaN.
struct SqrtAbsImpl : torch::nn::Cloneable<SqrtAbsImpl> {
  void reset() override {}
  at::Tensor forward(const at::Tensor& x) { return x + torch::sqrt((x - x.detach()).pow(2)); }
};
TORCH_MODULE(SqrtAbs);

TEST(Doctor, NonFiniteGradientFromAnOpUndefinedAtZero) {
  auto [x, y] = blobs(600, 3, 5);
  auto data = module_of(x, y, 3);
  SeqTask task(torch::nn::Sequential(torch::nn::Linear(5, 16), SqrtAbs(), torch::nn::ReLU(), torch::nn::Linear(16, 3)));
  const DoctorReport r = run_doctor(task, data, config_of("adam", 1e-2), quick());
  ASSERT_EQ(first(r).id, "nonfinite-gradient") << ids(r);
  EXPECT_EQ(first(r).where["step"], 0);
  EXPECT_TRUE(first(r).where.contains("parameter")) << first(r).where.dump();
}

// 98 % of one class: plain neighbour agreement by chance is 0.96, so a chance-level test on it
// cannot tell learnable labels from shuffled ones; the balanced agreement can.
std::pair<at::Tensor, at::Tensor> rare_class(std::int64_t n, std::uint64_t seed = 21) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor y = (torch::rand({n}, gen) < 0.02).to(torch::kLong);
  at::Tensor x = torch::randn({n, 6}, gen) + y.unsqueeze(1).to(torch::kFloat) * 3.0;
  return {x, y};
}

TEST(Doctor, ExtremeImbalanceWithLearnableLabelsIsNotShuffled) {
  auto [x, y] = rare_class(3000);
  auto data = module_of(x, y, 2);
  SeqTask task(mlp(6, 2));
  DoctorOptions o = quick();
  o.run = false;  // the label check is a data check; its finding needs the run, its facts do not
  const DoctorReport r = run_doctor(task, data, config_of("adam", 3e-3), o);
  EXPECT_EQ(r.find("labels-shuffled"), nullptr) << ids(r);
  const double agreement = r.context["knn_label_agreement"].get<double>();
  const double chance = r.context["knn_chance"].get<double>();
  EXPECT_NEAR(chance, 0.5, 0.05);  // balanced: 1/K under the null, whatever the frequencies
  EXPECT_GT(agreement, chance + 0.3);
}

TEST(Doctor, ExtremeImbalanceWithShuffledLabelsIsFound) {
  auto [x, y] = rare_class(3000);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  at::Tensor shuffled = y.index_select(0, torch::randperm(y.size(0), gen, torch::kLong));
  auto data = module_of(x, shuffled, 2);
  SeqTask task(mlp(6, 2));
  const DoctorReport r = run_doctor(task, data, config_of("adam", 3e-3), quick());
  ASSERT_NE(r.find("labels-shuffled"), nullptr) << ids(r);
}

TEST(Doctor, LabelsShuffledIndependentlyOfTabularInputs) {
  auto [x, y] = blobs(1500, 4, 8);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(99);
  at::Tensor shuffled = y.index_select(0, torch::randperm(y.size(0), gen, torch::kLong));
  auto data = module_of(x, shuffled, 4);
  SeqTask task(mlp(8, 4));
  const DoctorReport r = run_doctor(task, data, config_of("adam", 3e-3), quick());
  ASSERT_EQ(first(r).id, "labels-shuffled") << ids(r);
}

TEST(Doctor, UnnormalizedTabularFeaturesAtAnotherScale) {
  auto [x, y] = blobs(1000, 3, 6);
  auto data = module_of(x * 400.0 + 1000.0, y, 3);
  SeqTask task(mlp(6, 3));
  const DoctorReport r = run_doctor(task, data, config_of("sgd", 0.05), quick());
  ASSERT_EQ(first(r).id, "unnormalized-input") << ids(r);
}

TEST(Doctor, TrainTestLeakageOfTenPercent) {
  auto [x, y] = blobs(1000, 3, 6);
  auto [tx, ty] = blobs(300, 3, 6, 77);
  tx.slice(0, 0, 30).copy_(x.slice(0, 100, 130));
  ty.slice(0, 0, 30).copy_(y.slice(0, 100, 130));
  auto data = module_of(x, y, 3, 32, true, tx, ty);
  SeqTask task(mlp(6, 3));
  const DoctorReport r = run_doctor(task, data, config_of("adam", 1e-2), quick());
  ASSERT_EQ(first(r).id, "train-test-leakage") << ids(r);
  EXPECT_EQ(first(r).where["split"], "test");
}

// Test rows that are training rows with rounding noise: no hash matches, the distances do.
TEST(Doctor, NearDuplicateRowsAcrossSplits) {
  auto [x, y] = blobs(1200, 4, 10);
  auto [tx, ty] = blobs(300, 4, 10, /*seed=*/8);
  // 60 of the 300 test rows (20 %) are training rows 0..59, written with 3 decimals.
  tx.slice(0, 0, 60).copy_(torch::round(x.slice(0, 0, 60) * 1000) / 1000 + 1e-4);
  ty.slice(0, 0, 60).copy_(y.slice(0, 0, 60));
  auto data = module_of(x, y, 4, 32, true, tx, ty);
  SeqTask task(mlp(10, 4));
  DoctorOptions o = quick();
  o.run = false;
  const DoctorReport r = run_doctor(task, data, config_of("adam", 1e-2), o);
  const Finding* f = r.find("near-duplicate-leakage");
  ASSERT_NE(f, nullptr) << ids(r);
  EXPECT_EQ(f->severity, Severity::kError);
  EXPECT_EQ(f->where["split"], "test");
  EXPECT_NE(f->evidence.find("60 of 300"), std::string::npos) << f->evidence;
  EXPECT_EQ(r.find("train-test-leakage"), nullptr) << ids(r);  // none is byte-identical
  // The same data without the copies: nothing.
  auto [cx, cy] = blobs(300, 4, 10, /*seed=*/8);
  auto clean = module_of(x, y, 4, 32, true, cx, cy);
  SeqTask task2(mlp(10, 4));
  EXPECT_EQ(run_doctor(task2, clean, config_of("adam", 1e-2), o).find("near-duplicate-leakage"), nullptr);
}

TEST(Doctor, ProbabilitiesFromAUserModelsSoftmaxHead) {
  auto [x, y] = blobs(800, 4, 6);
  auto data = module_of(x, y, 4);
  SeqTask task(torch::nn::Sequential(torch::nn::Linear(6, 16), torch::nn::ReLU(), torch::nn::Linear(16, 4),
                                     torch::nn::Softmax(1)));
  const DoctorReport r = run_doctor(task, data, config_of("adam", 1e-2), quick());
  ASSERT_EQ(first(r).id, "probabilities-as-logits") << ids(r);
  EXPECT_EQ(first(r).where["layer"], "3");
}

// A graph cut: the first layer's output is detached, so its parameters never get a gradient.
struct CutNetImpl : torch::nn::Module {
  CutNetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(6, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 3));
  }
  at::Tensor forward(const at::Tensor& x) { return fc2->forward(torch::relu(fc1->forward(x)).detach()); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(CutNet);

class CutTask final : public train::TaskModule {
 public:
  torch::nn::Module& module() override { return *net_; }
  std::shared_ptr<torch::nn::Module> module_ptr() override { return net_.ptr(); }
  train::StepOutput training_step(const data::Batch& b) override {
    at::Tensor logits = net_->forward(b.inputs);
    return {torch::nn::functional::cross_entropy(logits, b.targets), logits};
  }

 private:
  CutNet net_;
};

TEST(Doctor, GraphCutInAUserModule) {
  auto [x, y] = blobs(800, 3, 6);
  auto data = module_of(x, y, 3);
  CutTask task;
  const DoctorReport r = run_doctor(task, data, config_of("adam", 1e-2), quick());
  const Finding* f = r.find("no-gradient");
  ASSERT_NE(f, nullptr) << ids(r);
  EXPECT_EQ(f->severity, Severity::kError);
  EXPECT_EQ(f->where["parameters"], nlohmann::json({"fc1.weight", "fc1.bias"}));
}

TEST(Doctor, BatchOfOneReachingBatchNorm2dInAConvNet) {
  auto [x, y] = squares(81, 4);  // 65 training samples (16 go to validation): 4 batches of 16 and one of 1
  auto data = module_of(x, y, 4, 16);
  SeqTask task(torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 3).padding(1)),
                                     torch::nn::BatchNorm2d(4), torch::nn::ReLU(), torch::nn::Flatten(),
                                     torch::nn::Linear(4 * 64, 4)));
  const DoctorReport r = run_doctor(task, data, config_of("adam", 1e-3), quick());
  ASSERT_EQ(first(r).id, "batchnorm-batch-of-one") << ids(r);
  EXPECT_EQ(first(r).where["layer"], "1");
}

// In eval mode only, every eighth row loses its top class by a hair: a stand-in for running
// statistics that drifted just enough to cost about ten points, with the eval-mode loss barely
// higher (so the loss test does not fire, and the gap is below the fixed 15 points).
struct EvalSlipImpl : torch::nn::Module {
  std::int64_t rows = 0;  // rows seen in eval mode
  at::Tensor forward(at::Tensor logits) {
    if (is_training()) return logits;
    const std::int64_t n = logits.size(0);
    const at::Tensor idx = torch::arange(rows, rows + n, torch::kLong).remainder(8).eq(0).nonzero().squeeze(1);
    rows += n;
    at::Tensor out = logits.clone();
    const auto top = logits.topk(2, 1);
    const at::Tensor margin = std::get<0>(top).select(1, 0) - std::get<0>(top).select(1, 1);
    const at::Tensor cols = std::get<1>(top).select(1, 0).index_select(0, idx);
    out.index_put_({idx, cols}, out.index({idx, cols}) - margin.index_select(0, idx) - 0.05);
    return out;
  }
};
TORCH_MODULE(EvalSlip);

TEST(Doctor, BatchNormGapOfTenPointsOnAFewHundredSamples) {
  auto [x, y] = blobs(500, 3, 6, 31);  // 400 training samples: the check compares 256 of them
  auto data = module_of(x, y, 3);
  SeqTask task(torch::nn::Sequential(torch::nn::Linear(6, 32), torch::nn::BatchNorm1d(32), torch::nn::ReLU(),
                                     torch::nn::Linear(32, 3), EvalSlip()));
  const DoctorReport r = run_doctor(task, data, config_of("adam", 1e-2), quick());
  const double gap = r.context["bn_large_batch_acc"].get<double>() - r.context["bn_running_stats_acc"].get<double>();
  ASSERT_GT(gap, 0.08) << ids(r);
  ASSERT_LT(gap, 0.15) << ids(r);  // below the fixed threshold: only the sampling-error test finds it
  const Finding* f = r.find("batchnorm-stats-drift");
  ASSERT_NE(f, nullptr) << ids(r) << " gap " << gap;
  EXPECT_NE(f->evidence.find("McNemar z = "), std::string::npos) << f->evidence;
}

// A user data set with a bug: get_batch ignores the indices and always returns the first rows.
class StuckDataset final : public data::Dataset {
 public:
  StuckDataset(at::Tensor x, at::Tensor y) : x_(std::move(x)), y_(std::move(y)) {}
  std::int64_t size() const override { return x_.size(0); }
  std::vector<std::int64_t> sample_shape() const override { return {x_.size(1)}; }
  std::int64_t num_classes() const override { return 3; }
  data::Batch get_batch(const at::Tensor& idx) const override {
    data::Batch b;
    b.indices = idx;
    b.inputs = x_.slice(0, 0, idx.size(0));
    b.targets = y_.slice(0, 0, idx.size(0));
    return b;
  }

 private:
  at::Tensor x_, y_;
};

// Running statistics from two samples at a time with momentum 1.0: evaluation normalises with the
// last pair's mean and variance. The same net on batches of 64 with momentum 0.1 is healthy.
TEST(Doctor, BatchNormRunningStatisticsFromPairsOfSamples) {
  auto net = [](double momentum) {
    return torch::nn::Sequential(torch::nn::Linear(6, 32),
                                 torch::nn::BatchNorm1d(torch::nn::BatchNorm1dOptions(32).momentum(momentum)),
                                 torch::nn::ReLU(), torch::nn::Linear(32, 4));
  };
  auto [x, y] = blobs(1200, 4, 6);
  {
    torch::manual_seed(1);
    auto data = module_of(x, y, 4, 2);
    SeqTask task(net(1.0));
    const DoctorReport r = run_doctor(task, data, config_of("adam", 1e-2), quick());
    ASSERT_EQ(first(r).id, "batchnorm-stats-drift") << ids(r);
    EXPECT_EQ(first(r).where["layer"], "1") << first(r).where.dump();
    EXPECT_NE(first(r).evidence.find("batches of 2"), std::string::npos) << first(r).evidence;
    // Running statistics from whichever pair came last: here 96 % against 84 %, the loss 0.27
    // against 0.46, far beyond sampling error on 960 samples.
    EXPECT_GT(r.context["bn_large_batch_acc"].get<double>() - r.context["bn_running_stats_acc"].get<double>(), 0.08)
        << r.context.dump();
    EXPECT_GT(r.context["bn_running_stats_loss"].get<double>(), r.context["bn_large_batch_loss"].get<double>())
        << r.context.dump();
  }
  {
    torch::manual_seed(1);
    auto data = module_of(x, y, 4, 64);
    SeqTask task(net(0.1));
    const DoctorReport r = run_doctor(task, data, config_of("adam", 1e-2), quick());
    for (const auto& f : r.findings) EXPECT_NE(f.id, "batchnorm-stats-drift") << ids(r);
    EXPECT_GE(r.context["bn_large_batch_acc"].get<double>(), 0.0) << r.context.dump();
  }
}

// Too short a run to judge BatchNorm: a note that says so, no verdict.
TEST(Doctor, BatchNormCheckNeedsFiftySteps) {
  auto [x, y] = blobs(1200, 4, 6);
  auto data = module_of(x, y, 4, 2);
  torch::manual_seed(1);
  SeqTask task(torch::nn::Sequential(torch::nn::Linear(6, 32),
                                     torch::nn::BatchNorm1d(torch::nn::BatchNorm1dOptions(32).momentum(1.0)),
                                     torch::nn::ReLU(), torch::nn::Linear(32, 4)));
  DoctorOptions o = quick();
  o.max_steps = 30;
  const DoctorReport r = run_doctor(task, data, config_of("adam", 1e-2), o);
  EXPECT_EQ(r.find("batchnorm-stats-drift"), nullptr) << ids(r);
  const Finding* note = r.find("check-not-run");
  ASSERT_NE(note, nullptr) << ids(r);
  EXPECT_EQ(note->where["check"], "batchnorm-statistics");
  EXPECT_NE(note->evidence.find("30 steps"), std::string::npos) << note->evidence;
}

TEST(Doctor, TheSameBatchEveryStepFromABuggyDataset) {
  auto [x, y] = blobs(1000, 3, 6);
  data::LoaderOptions lo;
  lo.batch_size = 32;
  lo.shuffle = true;
  train::TensorDataModule data(std::make_shared<StuckDataset>(x, y), nullptr, nullptr, lo, 3);
  SeqTask task(mlp(6, 3));
  const DoctorReport r = run_doctor(task, data, config_of("adam", 1e-2), quick());
  const Finding* f = r.find("repeated-batches");
  ASSERT_NE(f, nullptr) << ids(r);
  EXPECT_EQ(f->severity, Severity::kError);
  // The full batches are all the same; the short last one of each epoch is the other.
  EXPECT_NE(f->evidence.find("yielded 2 distinct batches"), std::string::npos) << f->evidence;
}

TEST(Doctor, DtypeMismatchNamesTheModule) {
  auto [x, y] = blobs(400, 3, 6);
  auto data = module_of(x, y, 3);
  torch::nn::Sequential seq(torch::nn::Linear(6, 8), torch::nn::ReLU(), torch::nn::Linear(8, 3));
  seq[2]->to(torch::kDouble);
  SeqTask task(seq);
  const DoctorReport r = run_doctor(task, data, config_of("adam", 1e-2), quick());
  ASSERT_EQ(first(r).id, "device-mismatch") << ids(r);
  EXPECT_EQ(first(r).where["layer"], "2");
  EXPECT_NE(first(r).evidence.find("Double"), std::string::npos) << first(r).evidence;
  // The data checks' look at the model's output could not run either: an info note says so.
  const Finding* skipped = r.find("check-not-run");
  ASSERT_NE(skipped, nullptr) << ids(r);
  EXPECT_EQ(skipped->severity, Severity::kInfo);
  EXPECT_EQ(skipped->where["check"], "model-output");
  EXPECT_NE(skipped->evidence.find("could not run: "), std::string::npos) << skipped->evidence;
  EXPECT_NE(skipped->evidence.find("ouble"), std::string::npos) << skipped->evidence;  // the error's own words
}

// A data set that does real work for each sample it hands out (an expensive decode).
class SlowDataset final : public data::Dataset {
 public:
  SlowDataset(at::Tensor x, at::Tensor y) : x_(std::move(x)), y_(std::move(y)) {}
  std::int64_t size() const override { return x_.size(0); }
  std::vector<std::int64_t> sample_shape() const override { return {x_.size(1)}; }
  std::int64_t num_classes() const override { return 3; }
  data::Batch get_batch(const at::Tensor& idx) const override {
    data::Batch b;
    b.indices = idx;
    b.targets = y_.index_select(0, idx);
    std::vector<at::Tensor> rows;
    for (std::int64_t i = 0; i < idx.size(0); ++i) {
      at::Tensor r = x_[idx[i].item<std::int64_t>()].clone();
      at::Tensor m = torch::eye(96) + 1e-3 * torch::ones({96, 96});
      for (int k = 0; k < 20; ++k) m = torch::matmul(m, m) / m.norm();  // the "decode"
      rows.push_back(r + 0 * m.sum());
    }
    b.inputs = torch::stack(rows);
    return b;
  }

 private:
  at::Tensor x_, y_;
};

TEST(Doctor, DataLoadingBottleneckFromAnExpensiveDataset) {
  auto [x, y] = blobs(600, 3, 6);
  data::LoaderOptions lo;
  lo.batch_size = 32;
  lo.shuffle = true;
  auto ds = std::make_shared<SlowDataset>(x, y);
  train::TensorDataModule data(ds, nullptr, nullptr, lo, 3);
  SeqTask task(mlp(6, 3));
  DoctorOptions o = quick();
  o.max_steps = 60;
  const DoctorReport r = run_doctor(task, data, config_of("adam", 1e-2), o);
  const Finding* f = r.find("data-loading-bottleneck");
  ASSERT_NE(f, nullptr) << ids(r);
  EXPECT_GT(f->where["data_wait_share"].get<double>(), 0.5);
}

TEST(LoopMonitor, ReportsGradientsNeverZeroedInAHandWrittenLoop) {
  auto [x, y] = blobs(256, 3, 6);
  torch::nn::Sequential net = mlp(6, 3);
  torch::optim::SGD opt(net->parameters(), 0.01);
  LoopMonitor mon(*net);
  for (std::int64_t i = 0; i < 4; ++i) {
    at::Tensor xb = x.slice(0, i * 32, (i + 1) * 32), yb = y.slice(0, i * 32, (i + 1) * 32);
    at::Tensor loss = torch::nn::functional::cross_entropy(net->forward(xb), yb);
    mon.before_backward();
    loss.backward();  // no zero_grad anywhere: the fault
    opt.step();
    mon.after_step();
  }
  ASSERT_EQ(mon.findings().size(), 1u);
  EXPECT_EQ(mon.findings()[0].id, "gradients-not-zeroed");
  EXPECT_EQ(mon.findings()[0].where["step"], 1);

  // The same loop with zero_grad, and accumulation over two backward passes per step: silent.
  LoopMonitor ok(*net);
  for (std::int64_t i = 0; i < 4; ++i) {
    opt.zero_grad();
    for (int micro = 0; micro < 2; ++micro) {
      at::Tensor xb = x.slice(0, i * 32 + micro * 16, i * 32 + micro * 16 + 16),
                 yb = y.slice(0, i * 32 + micro * 16, i * 32 + micro * 16 + 16);
      ok.before_backward();
      torch::nn::functional::cross_entropy(net->forward(xb), yb).backward();
    }
    opt.step();
    ok.after_step();
  }
  EXPECT_TRUE(ok.findings().empty());
}

TEST(LoopMonitor, ReportsEvaluationInTrainingMode) {
  torch::nn::Sequential net(torch::nn::Linear(6, 8), torch::nn::BatchNorm1d(8), torch::nn::Dropout(0.2),
                            torch::nn::Linear(8, 3));
  LoopMonitor mon(*net);
  net->eval();
  mon.check_eval_mode();
  EXPECT_TRUE(mon.findings().empty());
  net->train();
  mon.check_eval_mode("validation after epoch 1");
  ASSERT_EQ(mon.findings().size(), 1u);
  EXPECT_EQ(mon.findings()[0].id, "eval-in-train-mode");
  EXPECT_EQ(mon.findings()[0].where["modules"].size(), 2u);
}

}  // namespace
}  // namespace glassbox::inspect
