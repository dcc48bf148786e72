// glassbox tune lr: the learning-rate range test on a config's model and data (PyTorch
// Lightning's Tuner.lr_find: same schedule, smoothing, early stop and suggestion), with fastai's
// "valley" beside it; writes lr_find.json, lr_find.png and TensorBoard scalars, and with `apply`
// a copy of the config carrying the suggestion (OneCycle's max_lr when that scheduler is set,
// else optim.lr).
//
//   TuneLrRequest r; r.config_file = "configs/defects.toml"; r.apply = "defects-tuned.toml";
//   TuneLrOutcome o = tune_lr(r, std::cout);   // o.result.lrs[*o.result.suggestion]
//
// Errors: bad config or data (InvalidArgument / NotFound); an existing `apply` file is refused
// (AlreadyExists) before anything runs. Thread safety: one call at a time.
#pragma once

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/train/lr_finder.h"

namespace glassbox::app {

struct TuneLrRequest {
  std::filesystem::path config_file;
  std::vector<std::string> overrides;
  train::LrFinderOptions options;
  std::filesystem::path out_dir;  // default runs/<run.name>-lr_find (not the run directory train will create)
  std::filesystem::path apply;    // write a copy of the config with the suggestion here
  bool use_valley = false;        // apply fastai's valley instead of Lightning's suggestion
  bool quiet = false;
};

struct TuneLrOutcome {
  train::LrFinderResult result;
  std::filesystem::path out_dir;
  std::string applied_key;  // "optim.lr" or "scheduler.max_lr" (empty: nothing applied)
  std::optional<double> applied_lr;
  std::string warning;  // the suggestion looks unusable (at the very start of the range), and why
};

TuneLrOutcome tune_lr(const TuneLrRequest& request, std::ostream& out);

// glassbox tune batch-size: the largest training batch that fits (Lightning's BatchSizeFinder,
// mode "power"): from `init` the batch size doubles after every trial of `steps_per_trial`
// optimiser steps that fits, until one does not (CUDA out of memory on a GPU; on the CPU the
// process's peak resident memory above `memory_limit_mb`), `max_trials` trials were run, or the
// batch would exceed the training set; the answer is the last size that fitted.
struct TuneBatchRequest {
  std::filesystem::path config_file;
  std::vector<std::string> overrides;
  std::int64_t init = 2;
  std::int64_t steps_per_trial = 3;
  std::int64_t max_trials = 25;
  double memory_limit_mb = 0;   // CPU: the limit on peak resident memory (0: none, only CUDA OOM stops)
  std::filesystem::path apply;  // write a copy of the config with data.loader.batch_size
  bool quiet = false;
};

struct BatchTrial {
  std::int64_t batch_size = 0;
  bool fits = false;
  double peak_rss_mb = 0;
  std::string why;  // when it did not fit
};

struct TuneBatchOutcome {
  std::int64_t batch_size = 0;  // the largest that fitted (0: none did)
  std::vector<BatchTrial> trials;
  std::string stop_reason;
  nlohmann::json to_json() const;
};

TuneBatchOutcome tune_batch_size(const TuneBatchRequest& request, std::ostream& out);

// The plot as an RGB image (height * width * 3 bytes): smoothed loss against log10(lr), raw
// losses as dots, the suggestions as vertical lines.
std::vector<std::uint8_t> plot_lr_find(const train::LrFinderResult& r, int width, int height);

}  // namespace glassbox::app
