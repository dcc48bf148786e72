// `glassbox bench train`: samples/s of the glassbox Trainer against its anchors, all measured
// in one run on the same model (the quickstart MLP), batch size, thread count and data:
//   raw        a minimal hand-written LibTorch loop (torch::optim::AdamW)
//   python     a plain Python PyTorch loop (bench/python_loop.py, torch from .venv)
//   lightning  PyTorch Lightning's Trainer (bench/lightning_loop.py)
// and the Trainer with the default diagnostics (probes every 50 steps, TensorBoard histograms,
// non-finite monitor) against the same Trainer without: probes_vs_plain, the median ratio of
// back-to-back pairs in alternating order (probe_pairs of them).
//
//   TrainBenchOptions o; o.steps = 2000;
//   nlohmann::json r = run_train_bench(o);   // trainer_sps, raw_sps, ..., trainer_vs_raw, ...
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace glassbox::bench {

struct TrainBenchOptions {
  std::int64_t steps = 1000;
  std::int64_t warmup = 100;
  std::int64_t batch_size = 32;
  std::int64_t threads = 2;
  std::int64_t repeats = 3;       // best of N for every measurement
  std::int64_t probe_pairs = 10;  // plain/probed pairs behind probes_vs_plain
  std::string python;             // default: <source>/.venv/bin/python
  std::string source_dir;         // default: compile-time source dir
  bool skip_python = false;
};

nlohmann::json run_train_bench(const TrainBenchOptions& options);

}  // namespace glassbox::bench
