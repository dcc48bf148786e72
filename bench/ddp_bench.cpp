#include "bench/ddp_bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "bench/source_dir.h"
#include "glassbox/base/error.h"
#include "glassbox/base/progress.h"
#include "glassbox/dist/group.h"
#include "glassbox/nn/registry.h"
#include "glassbox/train/trainer.h"

namespace glassbox::bench {

namespace {

using Clock = std::chrono::steady_clock;

class Synthetic final : public train::DataModule {
 public:
  Synthetic(const DdpBenchOptions& o) : input_(o.input) {
    torch::manual_seed(0);
    std::vector<std::int64_t> shape{o.samples};
    shape.insert(shape.end(), input_.begin(), input_.end());
    set_ = std::make_shared<data::TensorDataset>(torch::randn(shape), torch::randint(0, 10, {o.samples}, torch::kLong),
                                                 10);
    opts_.batch_size = o.batch_size;
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

 private:
  std::vector<std::int64_t> input_;
  std::shared_ptr<data::TensorDataset> set_;
  data::LoaderOptions opts_;
};

// The wall time of each optimiser step after the warm-up.
class StepClock final : public train::Callback {
 public:
  explicit StepClock(std::int64_t warmup) : warmup_(warmup) {}
  std::string name() const override { return "StepClock"; }
  void on_train_batch_end(train::Trainer& t, const train::StepOutput&, const data::Batch&) override {
    const auto now = Clock::now();
    if (t.global_step() > warmup_) seconds.push_back(std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }
  std::vector<double> seconds;

 private:
  std::int64_t warmup_;
  Clock::time_point last_;
};

double median(std::vector<double> v) {
  GB_CHECK(!v.empty(), Internal, "bench ddp: no measurement", "raise --steps or --repeats");
  std::sort(v.begin(), v.end());
  const std::size_t mid = v.size() / 2;
  return v.size() % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

// Runs a shell command; returns the last JSON object rank 0 (or the process) printed.
nlohmann::json run_json(const std::string& cmd, const std::string& what) {
  FILE* p = ::popen((cmd + " 2>/tmp/glassbox-bench-ddp-" + std::to_string(::getpid()) + ".err").c_str(), "r");
  GB_CHECK(p != nullptr, Unavailable, "cannot run " << what, "check the installation");
  std::string out;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  const std::string err_path = "/tmp/glassbox-bench-ddp-" + std::to_string(::getpid()) + ".err";
  std::ifstream in(err_path);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  std::error_code ec;
  std::filesystem::remove(err_path, ec);
  const auto at = out.find_last_of('{');
  GB_CHECK(rc == 0 && at != std::string::npos, Unavailable, what << " failed (exit " << rc << "): " << last,
           "run scripts/setup; run the command by hand to see why");
  return nlohmann::json::parse(out.substr(at));
}

std::string self_exe() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

std::string worker_args(const DdpBenchOptions& o) {
  return fmt::format("bench ddp --worker --model {} --batch-size {} --steps {} --warmup {} --input {} --samples {}{}",
                     o.model, o.batch_size, o.steps, o.warmup, fmt::join(o.input, "x"), o.samples,
                     o.gloo ? " --gloo" : "");
}

double ddp_run(const DdpBenchOptions& o) {
  const int port = dist::free_local_port();
  std::string cmd;
  for (std::int64_t r = 0; r < o.nproc; ++r) {
    cmd += fmt::format(
        "OMP_NUM_THREADS=1 RANK={} LOCAL_RANK={} WORLD_SIZE={} LOCAL_WORLD_SIZE={} MASTER_ADDR=127.0.0.1 "
        "MASTER_PORT={} '{}' {} {} & ",
        r, r, o.nproc, o.nproc, port, self_exe(), worker_args(o), r == 0 ? "" : "> /dev/null");
  }
  cmd += "wait";
  return run_json("( " + cmd + " )", "the glassbox DDP run").at("sps").get<double>();
}

nlohmann::json single_run(const DdpBenchOptions& o) {
  return run_json(fmt::format("OMP_NUM_THREADS=1 '{}' {}", self_exe(), worker_args(o)), "the one-process run");
}

nn::ModelOptions model_options(const DdpBenchOptions& o) {
  nn::ModelOptions m;
  m.name = o.model;
  if (o.model == "cnn") {
    m.cnn.channels = {32, 64, 128};  // 2 convolutions per stage, BatchNorm, a 128-wide head
  } else {
    m.mobilenet_v3_small.stem = nn::Stem::kImagenet;
  }
  return m;
}

double python_run(const DdpBenchOptions& o, std::int64_t params) {
  const std::string cmd = fmt::format(
      "OMP_NUM_THREADS=1 '{}' -m torch.distributed.run --standalone --nproc-per-node {} '{}/bench/ddp_python.py' "
      "--model {} --batch-size {} --steps {} --warmup {} --input {} --samples {}",
      o.python, o.nproc, o.source_dir, o.model, o.batch_size, o.steps, o.warmup, fmt::join(o.input, "x"), o.samples);
  const nlohmann::json r = run_json(cmd, "bench/ddp_python.py under torchrun");
  GB_CHECK(
      r.at("params").get<std::int64_t>() == params, Internal,
      "bench ddp: the Python model has " << r.at("params").get<std::int64_t>() << " parameters, glassbox's " << params,
      "bench/ddp_python.py must build the same architecture");
  return r.at("sps").get<double>();
}

}  // namespace

nlohmann::json run_ddp_bench_worker(const DdpBenchOptions& o) {
  torch::set_num_threads(1);
  std::shared_ptr<dist::Group> group;
  if (auto world = dist::WorldInfo::from_env(); world && world->world_size > 1) {
    dist::GroupOptions go;
    go.timeout = std::chrono::seconds(300);
    group = dist::Group::connect(*world, go);
  }
  Synthetic data(o);
  torch::manual_seed(0);
  train::ClassificationTask task(nn::make_model(model_options(o), nn::ModelShape{o.input, 10}),
                                 nn::Loss(nn::LossOptions{}, 10));
  train::TrainerOptions t;
  t.max_epochs = -1;
  t.max_steps = o.warmup + o.steps;
  t.num_sanity_val_steps = 0;
  t.enable_progress_bar = false;
  t.enable_model_summary = false;
  t.enable_checkpointing = false;
  t.device = "cpu";
  t.num_threads = 1;
  t.ddp_shared_memory = !o.gloo;
  train::OptimizerOptions adamw;
  adamw.name = train::OptimizerKind::kAdamW;
  adamw.lr = 1e-3;
  adamw.weight_decay = 0.01;
  train::Trainer trainer(t, adamw, train::SchedulerOptions{}, {}, group);
  auto clock = std::make_unique<StepClock>(o.warmup);
  StepClock* c = clock.get();
  trainer.add_callback(std::move(clock));
  trainer.fit(task, data);
  const int world = trainer.world_size();
  const auto global_batch = static_cast<double>(o.batch_size * world);
  double total = 0;
  for (double x : c->seconds) total += x;
  return {{"sps", global_batch / median(c->seconds)},
          {"sps_mean", global_batch * static_cast<double>(c->seconds.size()) / total},
          {"world_size", world},
          {"params", nn::count_parameters(task.module(), false)}};
}

nlohmann::json run_ddp_bench(const DdpBenchOptions& in) {
  DdpBenchOptions o = in;
  if (o.source_dir.empty()) o.source_dir = default_source_dir();
  if (o.python.empty()) o.python = o.source_dir + "/.venv/bin/python";
  GB_CHECK(o.model == "cnn" || o.model == "mobilenet_v3_small", InvalidArgument,
           "bench ddp: unknown model '" << o.model << "'", "--model cnn or mobilenet_v3_small");
  GB_CHECK(o.nproc >= 2, InvalidArgument, "bench ddp needs --nproc 2 or more, got " << o.nproc, "use --nproc 2");
  GB_CHECK(o.samples >= o.batch_size * o.nproc, InvalidArgument,
           "--samples " << o.samples << " is less than one global batch (" << o.batch_size * o.nproc << ")",
           "raise --samples");
  std::vector<double> ddp, ddp_gloo, single, python, scaling, vs_python;
  std::int64_t params = 0;
  ProgressBar bar(std::cerr, true, 0.0);
  bar.set_unit("runs");
  std::int64_t done = 0;
  bar.start("bench ddp", o.repeats * (o.skip_python ? 3 : 4));
  for (std::int64_t r = 0; r < o.repeats; ++r) {
    // Interleaved, and each ratio taken within one round: a slow spell of the machine falls on
    // both sides of a ratio, and the median round leaves such spells out.
    bar.update(done++, "glassbox ddp", 0.0);
    ddp.push_back(ddp_run(o));
    bar.update(done++, "glassbox ddp over gloo", 0.0);
    DdpBenchOptions over_gloo = o;
    over_gloo.gloo = true;
    ddp_gloo.push_back(ddp_run(over_gloo));
    bar.update(done++, "glassbox one process", 0.0);
    const nlohmann::json one = single_run(o);
    single.push_back(one.at("sps").get<double>());
    params = one.at("params").get<std::int64_t>();
    scaling.push_back(ddp.back() / (static_cast<double>(o.nproc) * single.back()));
    if (!o.skip_python) {
      bar.update(done++, "python ddp", 0.0);
      python.push_back(python_run(o, params));
      vs_python.push_back(ddp.back() / python.back());
    }
  }
  bar.finish("");
  const auto rounded = [](const std::vector<double>& v) {
    nlohmann::json out = nlohmann::json::array();
    for (double x : v) out.push_back(std::round(x * 1000.0) / 1000.0);
    return out;
  };
  nlohmann::json j;
  j["model"] = o.model == "cnn" ? fmt::format("cnn (32-64-128, 2 convs per stage), {}, adamw", fmt::join(o.input, "x"))
                                : fmt::format("mobilenet_v3_small (torchvision's), {}, adamw", fmt::join(o.input, "x"));
  j["params"] = params;
  j["nproc"] = o.nproc;
  j["threads_per_process"] = 1;
  j["batch_size_per_rank"] = o.batch_size;
  j["steps"] = o.steps;
  j["warmup"] = o.warmup;
  j["repeats"] = o.repeats;
  j["backend"] = "gloo";
  j["gradient_transport"] = "shared memory";
  j["ddp_sps"] = median(ddp);
  j["ddp_gloo_sps"] = median(ddp_gloo);
  j["single_sps"] = median(single);
  j["python_ddp_sps"] = python.empty() ? nlohmann::json(nullptr) : nlohmann::json(median(python));
  j["scaling_efficiency"] = median(scaling);
  j["vs_python_ddp"] = vs_python.empty() ? nlohmann::json(nullptr) : nlohmann::json(median(vs_python));
  j["scaling_efficiency_runs"] = rounded(scaling);
  j["vs_python_ddp_runs"] = rounded(vs_python);
  return j;
}

}  // namespace glassbox::bench
