#include "bench/train_bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include "bench/source_dir.h"
#include "glassbox/base/error.h"
#include "glassbox/base/progress.h"
#include "glassbox/inspect/diagnostics.h"
#include "glassbox/nn/registry.h"
#include "glassbox/train/trainer.h"

namespace glassbox::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::int64_t kSamples = 8192;

// Synthetic in-memory data of Fashion-MNIST's shape, identical for every measurement.
class SyntheticData final : public train::DataModule {
 public:
  explicit SyntheticData(std::int64_t batch_size) {
    torch::manual_seed(0);
    set_ = std::make_shared<data::TensorDataset>(torch::randn({kSamples, 1, 28, 28}),
                                                 torch::randint(0, 10, {kSamples}, torch::kLong), 10);
    opts_.batch_size = batch_size;
    opts_.shuffle = true;
    opts_.drop_last = true;
  }
  void setup() override {}
  train::DataInfo info() const override { return {{1, 28, 28}, 10, {}, {}, {}}; }
  std::shared_ptr<const data::Dataset> train_dataset() const override { return set_; }
  std::shared_ptr<const data::Dataset> val_dataset() const override { return nullptr; }
  std::shared_ptr<const data::Dataset> test_dataset() const override { return nullptr; }
  data::LoaderOptions train_loader_options() const override { return opts_; }
  data::LoaderOptions eval_loader_options() const override { return opts_; }
  const data::TensorDataset& set() const { return *set_; }

 private:
  std::shared_ptr<data::TensorDataset> set_;
  data::LoaderOptions opts_;
};

nn::ModelOptions mlp_options() {
  nn::ModelOptions m;
  m.name = "mlp";
  m.mlp.hidden = {512, 256};
  m.mlp.norm = nn::MlpNorm::kBatchNorm;
  m.mlp.dropout = 0.2;
  return m;
}

train::OptimizerOptions adamw() {
  train::OptimizerOptions o;
  o.name = train::OptimizerKind::kAdamW;
  o.lr = 1e-3;
  o.weight_decay = 0.01;
  return o;
}

// probes: the default [diagnostics] of a run (probes every 50 steps with TensorBoard histograms,
// the total gradient norm of every step, the non-finite monitor) — else none at all.
double measure_trainer(const TrainBenchOptions& o, SyntheticData& data, bool probes = false) {
  torch::manual_seed(0);
  train::ClassificationTask task(nn::make_model(mlp_options(), nn::ModelShape{{1, 28, 28}, 10}),
                                 nn::Loss(nn::LossOptions{}, 10));
  auto run = [&](std::int64_t steps) {
    train::TrainerOptions t;
    t.max_epochs = -1;
    t.max_steps = steps;
    t.num_sanity_val_steps = 0;
    t.enable_progress_bar = false;
    t.enable_model_summary = false;
    t.enable_checkpointing = false;
    t.device = "cpu";
    t.log_every_n_steps = 50;
    train::Trainer trainer(t, adamw(), train::SchedulerOptions{});
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("glassbox-bench-probes-" + std::to_string(::getpid()));
    if (probes) {
      train::DiagnosticsOptions d;
      d.probe_every_n_steps = 50;
      std::filesystem::create_directories(dir);
      inspect::install_diagnostics(trainer, d, dir, std::cerr);
    }
    const auto t0 = Clock::now();
    trainer.fit(task, data);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (probes) std::filesystem::remove_all(dir);
    return s;
  };
  run(o.warmup);
  const double s = run(o.steps);
  return static_cast<double>(o.steps * o.batch_size) / s;
}

double measure_raw(const TrainBenchOptions& o, SyntheticData& data) {
  torch::manual_seed(0);
  namespace tnn = torch::nn;
  tnn::Sequential model(tnn::Flatten(), tnn::Linear(784, 512), tnn::BatchNorm1d(512), tnn::ReLU(), tnn::Dropout(0.2),
                        tnn::Linear(512, 256), tnn::BatchNorm1d(256), tnn::ReLU(), tnn::Dropout(0.2),
                        tnn::Linear(256, 10));
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(0.01));
  model->train();
  const auto& x = data.set().inputs();
  const auto& y = data.set().targets();
  const std::int64_t nb = kSamples / o.batch_size;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(0);
  at::Tensor perm = torch::randperm(kSamples, gen, torch::kLong);
  auto run = [&](std::int64_t steps) {
    const auto t0 = Clock::now();
    for (std::int64_t s = 0; s < steps; ++s) {
      const std::int64_t b = s % nb;
      at::Tensor idx = perm.slice(0, b * o.batch_size, (b + 1) * o.batch_size);
      at::Tensor xb = x.index_select(0, idx), yb = y.index_select(0, idx);
      opt.zero_grad();
      at::Tensor loss = torch::nn::functional::cross_entropy(model->forward(xb), yb);
      loss.backward();
      opt.step();
    }
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  run(o.warmup);
  return static_cast<double>(o.steps * o.batch_size) / run(o.steps);
}

double measure_python(const TrainBenchOptions& o, const std::string& script) {
  const std::string cmd = "'" + o.python + "' '" + o.source_dir + "/bench/" + script + "' --steps " +
                          std::to_string(o.steps) + " --warmup " + std::to_string(o.warmup) + " --batch-size " +
                          std::to_string(o.batch_size) + " --threads " + std::to_string(o.threads) + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  GB_CHECK(p != nullptr, Unavailable, "cannot run " << cmd, "run scripts/setup to create .venv");
  std::string out;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  GB_CHECK(rc == 0, Unavailable, "bench/" << script << " failed (exit " << rc << ")",
           "run scripts/setup; check that .venv has torch and pytorch-lightning");
  const auto last = out.find_last_of('{');
  GB_CHECK(last != std::string::npos, Internal, "bench/" << script << " printed no JSON", "run it by hand to see why");
  return nlohmann::json::parse(out.substr(last)).at("sps").get<double>();
}

}  // namespace

nlohmann::json run_train_bench(const TrainBenchOptions& in) {
  TrainBenchOptions o = in;
  if (o.source_dir.empty()) o.source_dir = default_source_dir();
  if (o.python.empty()) o.python = o.source_dir + "/.venv/bin/python";
  torch::set_num_threads(static_cast<int>(o.threads));
  SyntheticData data(o.batch_size);
  double trainer = 0, raw = 0, python = 0, lightning = 0, probed = 0;
  // Progress on stderr: a full run takes minutes (stdout keeps the report or the JSON).
  ProgressBar bar(std::cerr, true, 0.0);
  bar.set_unit("measurements");
  const std::int64_t total = o.repeats * (o.skip_python ? 2 : 4) + 2 * o.probe_pairs;
  std::int64_t done = 0;
  bar.start("bench train", total);
  const auto step = [&](const char* what) { bar.update(done++, what, 0.0); };
  for (std::int64_t r = 0; r < o.repeats; ++r) {
    // Interleaved so that machine noise hits every measurement alike.
    step("raw LibTorch");
    raw = std::max(raw, measure_raw(o, data));
    step("trainer");
    trainer = std::max(trainer, measure_trainer(o, data));
    if (!o.skip_python) {
      step("python loop");
      python = std::max(python, measure_python(o, "python_loop.py"));
      step("lightning");
      lightning = std::max(lightning, measure_python(o, "lightning_loop.py"));
    }
  }
  // probes_vs_plain from back-to-back pairs in alternating order (plain, probed, probed, plain,
  // ...): the ratio of two runs seconds apart cancels the slow swings of a shared machine that a
  // ratio of two best-of-N figures, taken minutes apart, does not; the median drops the pairs a
  // burst of other work hit.
  std::vector<double> ratios;
  for (std::int64_t r = 0; r < o.probe_pairs; ++r) {
    double plain = 0, with = 0;
    step("trainer with and without probes");
    ++done;
    if (r % 2 == 0) {
      plain = measure_trainer(o, data);
      with = measure_trainer(o, data, /*probes=*/true);
    } else {
      with = measure_trainer(o, data, /*probes=*/true);
      plain = measure_trainer(o, data);
    }
    trainer = std::max(trainer, plain);
    probed = std::max(probed, with);
    ratios.push_back(with / plain);
  }
  bar.finish(fmt::format("{} measurements", total));
  std::vector<double> sorted = ratios;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  const double median = n == 0 ? 0.0 : (n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]));
  nlohmann::json j;
  j["model"] = "mlp 784-512-256-10 (batchnorm, dropout 0.2), adamw";
  j["batch_size"] = o.batch_size;
  j["threads"] = o.threads;
  j["steps"] = o.steps;
  j["repeats"] = o.repeats;
  j["trainer_sps"] = trainer;
  j["raw_sps"] = raw;
  j["trainer_vs_raw"] = trainer / raw;
  j["probes_sps"] = probed;
  j["probe_pairs"] = o.probe_pairs;
  j["probes_vs_plain"] = median;
  j["probes_vs_plain_pairs"] = ratios;
  if (!o.skip_python) {
    j["python_sps"] = python;
    j["lightning_sps"] = lightning;
    j["trainer_vs_python"] = trainer / python;
    j["trainer_vs_lightning"] = trainer / lightning;
  }
  return j;
}

}  // namespace glassbox::bench
