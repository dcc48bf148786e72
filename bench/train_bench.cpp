#include "bench/train_bench.h"

#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "bench/source_dir.h"
#include "glassbox/base/error.h"
#include "glassbox/base/progress.h"
#include "glassbox/inspect/diagnostics.h"
#include "glassbox/nn/registry.h"
#include "glassbox/train/optimizer.h"
#include "glassbox/train/trainer.h"

namespace glassbox::bench {
namespace {

using Clock = std::chrono::steady_clock;

// A model the benchmark trains, with its synthetic data and step counts.
struct BenchModel {
  std::string key;  // "mlp" | "mobilenet_v3_small": the JSON section and python_loop.py --model
  std::string description;
  nn::ModelOptions options;
  std::vector<std::int64_t> input;  // one sample, e.g. {1, 28, 28}
  std::int64_t samples = 8192;
  std::int64_t steps = 1000, warmup = 100;
};

BenchModel mlp_model(const TrainBenchOptions& o) {
  BenchModel m;
  m.key = "mlp";
  m.description = "mlp 784-512-256-10 (batchnorm, dropout 0.2), adamw";
  m.options.name = "mlp";
  m.options.mlp.hidden = {512, 256};
  m.options.mlp.norm = nn::MlpNorm::kBatchNorm;
  m.options.mlp.dropout = 0.2;
  m.input = {1, 28, 28};
  m.samples = 8192;
  m.steps = o.steps;
  m.warmup = o.warmup;
  return m;
}

// torchvision's mobilenet_v3_small(num_classes=10): its own stride-2 stem (the only one
// torchvision builds), BatchNorm eps 1e-3 / momentum 0.01, dropout 0.2.
BenchModel mobilenet_model(const TrainBenchOptions& o) {
  BenchModel m;
  m.key = "mobilenet_v3_small";
  m.options.name = "mobilenet_v3_small";
  m.options.mobilenet_v3_small.stem = nn::Stem::kImagenet;
  m.input = o.mobilenet_input;
  m.description = fmt::format("mobilenet_v3_small (torchvision's), {}, adamw", fmt::join(m.input, "x"));
  m.samples = 1024;
  m.steps = o.compute_steps;
  m.warmup = o.compute_warmup;
  return m;
}

// Synthetic in-memory data (normal inputs, uniform labels of 10 classes), identical for every
// measurement of a model.
class SyntheticData final : public train::DataModule {
 public:
  SyntheticData(std::int64_t batch_size, std::vector<std::int64_t> input, std::int64_t samples)
      : input_(std::move(input)) {
    torch::manual_seed(0);
    std::vector<std::int64_t> shape{samples};
    shape.insert(shape.end(), input_.begin(), input_.end());
    set_ =
        std::make_shared<data::TensorDataset>(torch::randn(shape), torch::randint(0, 10, {samples}, torch::kLong), 10);
    opts_.batch_size = batch_size;
    opts_.shuffle = true;
    opts_.drop_last = true;
  }
  void setup() override {}
  train::DataInfo info() const override { return {input_, 10, {}, {}, {}}; }
  std::shared_ptr<const data::Dataset> train_dataset() const override { return set_; }
  std::shared_ptr<const data::Dataset> val_dataset() const override { return nullptr; }
  std::shared_ptr<const data::Dataset> test_dataset() const override { return nullptr; }
  data::LoaderOptions train_loader_options() const override { return opts_; }
  data::LoaderOptions eval_loader_options() const override { return opts_; }
  const data::TensorDataset& set() const { return *set_; }

 private:
  std::vector<std::int64_t> input_;
  std::shared_ptr<data::TensorDataset> set_;
  data::LoaderOptions opts_;
};

train::OptimizerOptions adamw() {
  train::OptimizerOptions o;
  o.name = train::OptimizerKind::kAdamW;
  o.lr = 1e-3;
  o.weight_decay = 0.01;
  return o;
}

// Growth of the process's peak resident set over a scope. Freed heap pages are handed back
// first (malloc_trim), then the kernel's high-water mark VmHWM is reset to the current RSS
// (writing "5" to /proc/self/clear_refs, Linux >= 4.0); growth = VmHWM at the end - VmRSS at the
// start. Null (nullopt) where the reset is refused.
class PeakRss {
 public:
  PeakRss() {
    ::malloc_trim(0);
    const int fd = ::open("/proc/self/clear_refs", O_WRONLY);
    ok_ = fd >= 0 && ::write(fd, "5", 1) == 1;
    if (fd >= 0) ::close(fd);
    base_kb_ = status_kb("VmRSS:");
    ok_ = ok_ && base_kb_ > 0 && status_kb("VmHWM:") <= base_kb_ + 1024;
  }
  std::optional<double> growth_mb() const {
    if (!ok_) return std::nullopt;
    return static_cast<double>(status_kb("VmHWM:") - base_kb_) / 1024.0;
  }

 private:
  static std::int64_t status_kb(const std::string& key) {
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind(key, 0) == 0) return std::stoll(line.substr(key.size()));
    return -1;
  }
  bool ok_ = false;
  std::int64_t base_kb_ = 0;
};

struct TrainerRun {
  bool probes = false;         // the default [diagnostics] of a run
  bool checkpointing = false;  // Model::set_gradient_checkpointing(true), as trainer.gradient_checkpointing
  bool channels_last = false;  // trainer.channels_last: NHWC weights and batches
  std::optional<double>* peak_rss_growth_mb = nullptr;  // of the measured fit
};

// probes: the default [diagnostics] of a run (probes every 50 steps with TensorBoard histograms,
// the total gradient norm of every step, the non-finite monitor) — else none at all.
double measure_trainer(const TrainBenchOptions& o, const BenchModel& m, SyntheticData& data,
                       const TrainerRun& how = {}) {
  torch::manual_seed(0);
  std::unique_ptr<nn::Model> model = nn::make_model(m.options, nn::ModelShape{m.input, 10});
  if (how.checkpointing)
    GB_CHECK(model->set_gradient_checkpointing(true), Internal, m.key << " has no blocks to checkpoint",
             "bench gradient checkpointing on a zoo model with blocks");
  train::ClassificationTask task(std::move(model), nn::Loss(nn::LossOptions{}, 10));
  auto run = [&](std::int64_t steps, bool measured) {
    train::TrainerOptions t;
    t.max_epochs = -1;
    t.max_steps = steps;
    t.num_sanity_val_steps = 0;
    t.enable_progress_bar = false;
    t.enable_model_summary = false;
    t.enable_checkpointing = false;
    t.device = "cpu";
    t.log_every_n_steps = 50;
    t.gradient_checkpointing = how.checkpointing;  // applied to the model above, as the app does
    t.channels_last = how.channels_last;
    train::Trainer trainer(t, adamw(), train::SchedulerOptions{});
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("glassbox-bench-probes-" + std::to_string(::getpid()));
    if (how.probes) {
      train::DiagnosticsOptions d;
      d.probe_every_n_steps = 50;
      std::filesystem::create_directories(dir);
      inspect::install_diagnostics(trainer, d, dir, std::cerr);
    }
    std::optional<PeakRss> peak;
    if (measured && how.peak_rss_growth_mb != nullptr) peak.emplace();
    const auto t0 = Clock::now();
    trainer.fit(task, data);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (peak) *how.peak_rss_growth_mb = peak->growth_mb();
    if (how.probes) std::filesystem::remove_all(dir);
    return s;
  };
  run(m.warmup, false);
  const double s = run(m.steps, true);
  return static_cast<double>(m.steps * o.batch_size) / s;
}

// The top level's raw anchor: a torch::nn::Sequential MLP and LibTorch's torch::optim::AdamW.
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
  const std::int64_t samples = x.size(0);
  const std::int64_t nb = samples / o.batch_size;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(0);
  at::Tensor perm = torch::randperm(samples, gen, torch::kLong);
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

// The framework's limit: the Trainer's own model (the zoo's) and optimiser (glassbox's AdamW on
// _fused_adamw_), and per step only a shuffled batch, forward, loss, backward and the fused step.
double measure_raw_fused(const TrainBenchOptions& o, const BenchModel& m, SyntheticData& data) {
  torch::manual_seed(0);
  std::unique_ptr<nn::Model> model = nn::make_model(m.options, nn::ModelShape{m.input, 10});
  torch::nn::Module& module = *model->module();
  module.train();
  train::OptimizerOptions oo = adamw();
  oo.implementation = train::OptimizerImpl::kFused;
  train::Optimizer opt(train::make_param_groups(module, oo), oo);
  GB_CHECK(opt.implementation() == "fused", Internal, "the raw fused loop runs " << opt.implementation(),
           "LibTorch without _fused_adamw_ on the CPU?");
  const auto& x = data.set().inputs();
  const auto& y = data.set().targets();
  const std::int64_t samples = x.size(0);
  const std::int64_t nb = samples / o.batch_size;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(0);
  at::Tensor perm = torch::randperm(samples, gen, torch::kLong);
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
  run(m.warmup);
  return static_cast<double>(m.steps * o.batch_size) / run(m.steps);
}

std::string read_last_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last;
}

// Runs bench/<script> and returns the JSON object of its last line ({"sps": ..., ...}). A failure
// throws, unless may_fail: then {"sps": null, "error": why}.
nlohmann::json run_python(const TrainBenchOptions& o, const std::string& script, const std::string& args,
                          std::int64_t steps, std::int64_t warmup, bool may_fail = false) {
  const std::filesystem::path err =
      std::filesystem::temp_directory_path() / ("glassbox-bench-train-" + std::to_string(::getpid()) + ".stderr");
  const std::string cmd = "'" + o.python + "' '" + o.source_dir + "/bench/" + script + "' --steps " +
                          std::to_string(steps) + " --warmup " + std::to_string(warmup) + " --batch-size " +
                          std::to_string(o.batch_size) + " --threads " + std::to_string(o.threads) + " " + args +
                          " 2>'" + err.string() + "'";
  FILE* p = ::popen(cmd.c_str(), "r");
  GB_CHECK(p != nullptr, Unavailable, "cannot run " << cmd, "run scripts/setup to create .venv");
  std::string out;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  const std::string last_err = read_last_line(err);
  std::error_code ec;
  std::filesystem::remove(err, ec);
  const auto last = out.find_last_of('{');
  if (may_fail && (rc != 0 || last == std::string::npos)) {
    return {{"sps", nullptr}, {"error", fmt::format("bench/{} {} failed (exit {}): {}", script, args, rc, last_err)}};
  }
  GB_CHECK(rc == 0, Unavailable, "bench/" << script << " " << args << " failed (exit " << rc << "): " << last_err,
           "run scripts/setup; check that .venv has torch, torchvision and pytorch-lightning");
  GB_CHECK(last != std::string::npos, Internal, "bench/" << script << " printed no JSON", "run it by hand to see why");
  return nlohmann::json::parse(out.substr(last));
}

double sps_of(const nlohmann::json& r) { return r.at("sps").is_number() ? r.at("sps").get<double>() : 0.0; }

// a / b, or null where either is missing.
nlohmann::json ratio(double a, double b) {
  if (a > 0 && b > 0) return a / b;
  return nullptr;
}
nlohmann::json positive_or_null(double v) {
  if (v > 0) return v;
  return nullptr;
}

// One per-model section's measurements (best of the repeats).
struct Section {
  BenchModel model;
  std::shared_ptr<SyntheticData> data;
  std::string python_args;  // python_loop.py's --model/--input/--samples
  double trainer = 0, raw_fused = 0, python_fused = 0, lightning = 0, checkpointing = 0, channels_last = 0;
  std::optional<double> peak_mb, checkpointing_peak_mb;  // the smallest growth of the repeats
  nlohmann::json compiled = {{"sps", nullptr}};          // python_loop.py --compile's JSON
  std::int64_t python_params = -1;
  bool compute_bound() const { return model.key != "mlp"; }
};

void keep_min(std::optional<double>& best, const std::optional<double>& v) {
  if (v && (!best || *v < *best)) best = v;
}

nlohmann::json section_json(const Section& s, double mlp_trainer, bool skip_python) {
  nlohmann::json j;
  const BenchModel& m = s.model;
  std::unique_ptr<nn::Model> probe = nn::make_model(m.options, nn::ModelShape{m.input, 10});
  const std::int64_t params = nn::count_parameters(*probe->module(), false);
  const double trainer = s.compute_bound() ? s.trainer : mlp_trainer;
  j["model"] = m.description;
  j["input"] = m.input;
  j["params"] = params;
  j["samples"] = m.samples;
  j["steps"] = m.steps;
  j["warmup"] = m.warmup;
  j["trainer_sps"] = trainer;
  j["raw_fused_sps"] = s.raw_fused;
  j["trainer_vs_raw_fused"] = ratio(trainer, s.raw_fused);
  if (!skip_python) {
    GB_CHECK(s.python_params == params, Internal,
             m.key << ": glassbox's model has " << params << " parameters, the Python anchor's " << s.python_params,
             "the Python side must build the same architecture (bench/python_loop.py build_model)");
    j["python_params"] = s.python_params;
  }
  j["python_fused_sps"] = positive_or_null(s.python_fused);
  j["compiled_sps"] = positive_or_null(sps_of(s.compiled));
  if (s.compiled.contains("compile_seconds")) j["compile_seconds"] = s.compiled["compile_seconds"];
  if (s.compiled.contains("error")) j["compiled_error"] = s.compiled["error"];
  j["lightning_sps"] = positive_or_null(s.lightning);
  j["trainer_vs_python_fused"] = ratio(trainer, s.python_fused);
  j["trainer_vs_compiled"] = ratio(trainer, sps_of(s.compiled));
  j["trainer_vs_lightning"] = ratio(trainer, s.lightning);
  if (s.compute_bound()) {
    // The Trainer's own answer to the layout the compiled graph picks (see docs/benchmarks.md).
    j["trainer_channels_last_sps"] = s.channels_last;
    j["trainer_channels_last_vs_compiled"] = ratio(s.channels_last, sps_of(s.compiled));
    j["checkpointing_sps"] = s.checkpointing;
    j["checkpointing_time_ratio"] = ratio(s.trainer, s.checkpointing);  // step time with / without
    j["peak_rss_growth_mb"] = s.peak_mb ? nlohmann::json(*s.peak_mb) : nlohmann::json(nullptr);
    j["checkpointing_peak_rss_growth_mb"] =
        s.checkpointing_peak_mb ? nlohmann::json(*s.checkpointing_peak_mb) : nlohmann::json(nullptr);
    j["checkpointing_memory_ratio"] =
        s.peak_mb && s.checkpointing_peak_mb ? ratio(*s.checkpointing_peak_mb, *s.peak_mb) : nlohmann::json(nullptr);
  }
  return j;
}

}  // namespace

nlohmann::json run_train_bench(const TrainBenchOptions& in) {
  TrainBenchOptions o = in;
  if (o.source_dir.empty()) o.source_dir = default_source_dir();
  if (o.python.empty()) o.python = o.source_dir + "/.venv/bin/python";
  if (o.compute_steps <= 0) o.compute_steps = std::max<std::int64_t>(2, o.steps / 6);
  if (o.compute_warmup <= 0) o.compute_warmup = std::max<std::int64_t>(1, o.warmup / 20);
  GB_CHECK(o.warmup >= 1, InvalidArgument, "bench train needs at least one warm-up step", "--warmup 1 or more");
  GB_CHECK(o.mobilenet_input.size() == 3, InvalidArgument,
           "--mobilenet-input needs CxHxW, got " << o.mobilenet_input.size() << " dimensions", "e.g. 3x64x64");
  torch::set_num_threads(static_cast<int>(o.threads));
  const BenchModel mlp = mlp_model(o);
  auto data = std::make_shared<SyntheticData>(o.batch_size, mlp.input, mlp.samples);

  std::vector<Section> sections;
  for (const std::string& key : o.models) {
    GB_CHECK(key == "mlp" || key == "mobilenet_v3_small", InvalidArgument, "bench train: unknown model '" << key << "'",
             "--models mlp,mobilenet_v3_small");
    GB_CHECK(std::none_of(sections.begin(), sections.end(), [&](const Section& s) { return s.model.key == key; }),
             InvalidArgument, "bench train: model '" << key << "' given twice", "--models mlp,mobilenet_v3_small");
    Section s;
    s.model = key == "mlp" ? mlp : mobilenet_model(o);
    s.data = key == "mlp" ? data : std::make_shared<SyntheticData>(o.batch_size, s.model.input, s.model.samples);
    s.python_args =
        fmt::format("--model {} --input {} --samples {}", key, fmt::join(s.model.input, "x"), s.model.samples);
    sections.push_back(std::move(s));
  }
  const bool compile = !o.skip_python && !o.skip_compile;
  double trainer = 0, raw = 0, python = 0, lightning = 0, probed = 0;
  // Progress on stderr: a full run takes minutes (stdout keeps the report or the JSON).
  ProgressBar bar(std::cerr, true, 0.0);
  bar.set_unit("measurements");
  std::int64_t total = o.repeats * (o.skip_python ? 2 : 4) + 2 * o.probe_pairs;
  for (const Section& s : sections) {
    total += o.repeats * ((s.compute_bound() ? 4 : 1) + (o.skip_python ? 0 : 2)) + (compile ? 1 : 0);
  }
  std::int64_t done = 0;
  bar.start("bench train", total);
  const auto step = [&](const std::string& what) { bar.update(done++, what, 0.0); };
  for (std::int64_t r = 0; r < o.repeats; ++r) {
    // Interleaved so that machine noise hits every measurement alike.
    step("raw LibTorch");
    raw = std::max(raw, measure_raw(o, *data));
    step("trainer");
    trainer = std::max(trainer, measure_trainer(o, mlp, *data));
    if (!o.skip_python) {
      step("python loop");
      python = std::max(python, sps_of(run_python(o, "python_loop.py", "", o.steps, o.warmup)));
      step("lightning");
      lightning = std::max(lightning, sps_of(run_python(o, "lightning_loop.py", "", o.steps, o.warmup)));
    }
    for (Section& s : sections) {
      const BenchModel& m = s.model;
      if (s.compute_bound()) {
        std::optional<double> plain_mb, ckpt_mb;
        step(m.key + ": trainer");
        s.trainer = std::max(s.trainer, measure_trainer(o, m, *s.data, {.peak_rss_growth_mb = &plain_mb}));
        step(m.key + ": trainer, gradient checkpointing");
        s.checkpointing = std::max(
            s.checkpointing, measure_trainer(o, m, *s.data, {.checkpointing = true, .peak_rss_growth_mb = &ckpt_mb}));
        step(m.key + ": trainer, channels_last");
        s.channels_last = std::max(s.channels_last, measure_trainer(o, m, *s.data, {.channels_last = true}));
        keep_min(s.peak_mb, plain_mb);
        keep_min(s.checkpointing_peak_mb, ckpt_mb);
      }
      step(m.key + ": raw LibTorch, fused AdamW");
      s.raw_fused = std::max(s.raw_fused, measure_raw_fused(o, m, *s.data));
      if (!o.skip_python) {
        step(m.key + ": python, fused AdamW");
        const nlohmann::json p = run_python(o, "python_loop.py", s.python_args + " --fused", m.steps, m.warmup);
        s.python_fused = std::max(s.python_fused, sps_of(p));
        s.python_params = p.value("params", std::int64_t{-1});
        step(m.key + ": lightning, fused AdamW");
        s.lightning = std::max(
            s.lightning, sps_of(run_python(o, "lightning_loop.py", s.python_args + " --fused", m.steps, m.warmup)));
      }
    }
  }
  // torch.compile: one process per model (compiling once), best of the repeats inside it.
  if (compile) {
    for (Section& s : sections) {
      step(s.model.key + ": torch.compile");
      s.compiled =
          run_python(o, "python_loop.py", s.python_args + " --fused --compile --repeats " + std::to_string(o.repeats),
                     s.model.steps, s.model.warmup, /*may_fail=*/true);
    }
  } else if (!o.skip_python) {
    for (Section& s : sections) s.compiled = {{"sps", nullptr}, {"error", "skipped (--skip-compile)"}};
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
      plain = measure_trainer(o, mlp, *data);
      with = measure_trainer(o, mlp, *data, {.probes = true});
    } else {
      with = measure_trainer(o, mlp, *data, {.probes = true});
      plain = measure_trainer(o, mlp, *data);
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
  j["model"] = mlp.description;
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
  j["models"] = o.models;
  for (const Section& s : sections) j[s.model.key] = section_json(s, trainer, o.skip_python);
  return j;
}

}  // namespace glassbox::bench
