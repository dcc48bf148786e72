// `glassbox bench train`: samples/s of the glassbox Trainer against its anchors, all measured
// in one run with the same batch size, thread count, synthetic data and AdamW (lr 1e-3, weight
// decay 0.01).
//
// Top level (the quickstart MLP, unchanged keys): trainer_sps against
//   raw        a minimal hand-written LibTorch loop (torch::optim::AdamW, a kernel per parameter)
//   python     a plain Python PyTorch loop (bench/python_loop.py, torch from .venv)
//   lightning  PyTorch Lightning's Trainer (bench/lightning_loop.py)
// and the Trainer with the default diagnostics (probes every 50 steps, TensorBoard histograms,
// non-finite monitor) against the same Trainer without: probes_vs_plain, the median ratio of
// back-to-back pairs in alternating order (probe_pairs of them).
//
// One object per model of `models` ("mlp": overhead-bound, 1x28x28; "mobilenet_v3_small":
// compute-bound, torchvision's architecture at mobilenet_input) against the anchors a demanding
// user would pick, all with the fused AdamW kernel (_fused_adamw_):
//   raw_fused     forward, loss, backward, glassbox's fused AdamW step and nothing else (the
//                 framework's limit: the same zoo model and optimiser the Trainer runs)
//   python_fused  Python with torch.optim.AdamW(fused=True) (the best eager Python)
//   compiled      the same with torch.compile(model), compilation excluded (null + compiled_error
//                 when torch.compile cannot run here)
//   lightning     Lightning's Trainer with AdamW(fused=True)
// keys <model>.{trainer,raw_fused,python_fused,compiled,lightning}_sps and
// <model>.trainer_vs_{raw_fused,python_fused,compiled,lightning} (Python anchors null with
// skip_python). On mobilenet_v3_small also the Trainer with trainer.channels_last
// (trainer_channels_last_sps, trainer_channels_last_vs_compiled), and with gradient
// checkpointing (Model::set_gradient_checkpointing, as trainer.gradient_checkpointing):
// checkpointing_sps, checkpointing_time_ratio (step time with / without) and peak memory as the
// growth of the process's peak RSS over one fit (VmHWM reset through /proc/self/clear_refs after
// malloc_trim): peak_rss_growth_mb, checkpointing_peak_rss_growth_mb, checkpointing_memory_ratio
// (with / without).
//
//   TrainBenchOptions o; o.steps = 2000;
//   nlohmann::json r = run_train_bench(o);   // trainer_sps, ..., r["mobilenet_v3_small"]["trainer_vs_compiled"]
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace glassbox::bench {

struct TrainBenchOptions {
  std::int64_t steps = 1000;  // the MLP's measured steps
  std::int64_t warmup = 100;
  std::int64_t batch_size = 32;
  std::int64_t threads = 2;
  std::int64_t repeats = 3;       // best of N for every measurement
  std::int64_t probe_pairs = 10;  // plain/probed pairs behind probes_vs_plain
  // The per-model sections: "mlp", "mobilenet_v3_small" (the top-level MLP figures always run).
  std::vector<std::string> models{"mlp", "mobilenet_v3_small"};
  std::vector<std::int64_t> mobilenet_input{3, 64, 64};
  std::int64_t compute_steps = 0;   // mobilenet_v3_small's measured steps; 0: steps / 6, at least 2
  std::int64_t compute_warmup = 0;  // its warm-up steps; 0: warmup / 20, at least 1
  std::string python;               // default: <source>/.venv/bin/python
  std::string source_dir;           // default: compile-time source dir
  bool skip_python = false;
  bool skip_compile = false;  // no torch.compile anchor (compiled_sps null)
};

nlohmann::json run_train_bench(const TrainBenchOptions& options);

}  // namespace glassbox::bench
