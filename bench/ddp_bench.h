// `glassbox bench ddp`: data-parallel training throughput on torchvision's mobilenet_v3_small
// (synthetic 3x64x64 images) or the zoo's "cnn" (VGG-style: dense 3x3 convolutions with BatchNorm,
// 32-64-128 channels, 0.55 M parameters; --input 3x32x32), with AdamW and cross-entropy, all
// measured in one run with one intra-op thread per process:
//   ddp_sps       the glassbox Trainer as N ranks (c10d's Reducer; gradients averaged through shared
//                 memory, the default on one machine), global samples/s
//   ddp_gloo_sps  the same with the gradients over Gloo's TCP (trainer.ddp_shared_memory = false)
//   single_sps    the same Trainer as one process
//   python_ddp_sps  PyTorch's DistributedDataParallel under torchrun (Gloo, AdamW(fused=True)),
//                   the same model, batch and data (bench/ddp_python.py)
// and the ratios scaling_efficiency = ddp_sps / (N x single_sps), vs_python_ddp = ddp_sps /
// python_ddp_sps. A run times each step after `warmup` steps (the Reducer rebuilds its buckets
// after the first) and reports the global batch over the median step time ("sps"; "sps_mean" over
// the total); a shared machine's stalls hit single steps, and the median leaves them out. The
// runs are interleaved in `repeats` rounds; each ratio is taken within a round and the median
// round's is reported, with every round's in scaling_efficiency_runs and vs_python_ddp_runs.
//
//   DdpBenchOptions o; nlohmann::json r = run_ddp_bench(o);   // r["scaling_efficiency"], ...
//
// The worker side (run_ddp_bench_worker) is one rank of such a run: `glassbox bench ddp
// --worker` in a process with torchrun's environment, or one process without it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace glassbox::bench {

struct DdpBenchOptions {
  std::string model = "mobilenet_v3_small";  // or "cnn"
  std::int64_t nproc = 2;
  std::int64_t batch_size = 32;  // per rank (the single process uses the same)
  std::int64_t steps = 40;       // measured optimiser steps per run
  std::int64_t warmup = 5;
  std::int64_t repeats = 5;
  std::vector<std::int64_t> input{3, 64, 64};  // 3x32x32 suits the cnn
  std::int64_t samples = 1024;                 // the synthetic data set (every rank holds it; the sampler shards it)
  std::string python;                          // default: <source>/.venv/bin/python
  std::string source_dir;                      // default: compile-time source dir
  bool skip_python = false;
  bool gloo = false;  // worker: average the gradients over Gloo even on one machine (ddp_gloo_sps)
};

nlohmann::json run_ddp_bench(const DdpBenchOptions& options);
// One rank (or the single process): {"sps": global samples per second, "world_size": N}.
nlohmann::json run_ddp_bench_worker(const DdpBenchOptions& options);

}  // namespace glassbox::bench
