// The learning-rate range test (Smith 2017) as PyTorch Lightning's Tuner.lr_find runs it: the
// learning rate rises from min_lr to max_lr over num_training optimiser steps, the loss is
// smoothed (exponential average, beta 0.98, bias-corrected), the test stops once the smoothed loss
// exceeds early_stop_threshold times the best one, and the suggestion is the point of steepest
// descent of the smoothed loss (Lightning), beside fastai's "valley". The model's weights, its
// trainable flags and the optimiser start fresh afterwards: nothing of the test remains.
//
//   LrFinderResult r = lr_range_test(task, data, trainer_options, optimizer_options, LrFinderOptions{});
//   if (r.suggestion) std::cout << r.lrs[*r.suggestion] << "\n";
//
// Thread safety: one test at a time per task.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/base/config.h"
#include "glassbox/train/datamodule.h"
#include "glassbox/train/optimizer.h"
#include "glassbox/train/task.h"
#include "glassbox/train/trainer_options.h"

namespace glassbox::train {

enum class LrFinderMode { kExponential, kLinear };
constexpr NameTable<LrFinderMode, 2> enum_names(LrFinderMode) {
  return {{{LrFinderMode::kExponential, "exponential"}, {LrFinderMode::kLinear, "linear"}}};
}
static_assert(is_complete_table(enum_names(LrFinderMode{})));

struct LrFinderOptions {
  double min_lr = 1e-8;
  double max_lr = 1.0;
  std::int64_t num_training = 100;
  LrFinderMode mode = LrFinderMode::kExponential;
  double early_stop_threshold = 4.0;  // <= 0: never stop early
  double beta = 0.98;                 // loss smoothing

  void validate() const;
};

// Lightning's sequence: min_lr at the first step, then min_lr * (max_lr/min_lr)^((i+1)/N)
// (exponential) or min_lr + (i+1)/N * (max_lr - min_lr) (linear), reaching max_lr at step N-1.
std::vector<double> lr_finder_schedule(const LrFinderOptions& o);

// Lightning's loss smoothing and divergence test, one optimiser step at a time.
class LossSmoother {
 public:
  LossSmoother(double beta, double early_stop_threshold) : beta_(beta), threshold_(early_stop_threshold) {}
  // `step`: optimiser steps done, this one included (1 for the first). Returns the smoothed loss;
  // diverged() tells whether the test should stop after it.
  double push(double loss, std::int64_t step);
  bool diverged() const { return diverged_; }

 private:
  double beta_, threshold_;
  double avg_ = 0.0, best_ = 0.0;
  bool diverged_ = false;
};

// Lightning's suggestion: the index (into lrs) of the most negative gradient of the loss with
// respect to the learning rate (torch.gradient in float32, non-uniform spacing), skipping the
// first skip_begin and last skip_end points and non-finite losses; none below two points.
std::optional<std::size_t> suggest_steepest(const std::vector<double>& lrs, const std::vector<double>& losses,
                                            std::size_t skip_begin = 10, std::size_t skip_end = 1);

// fastai's "valley": the longest strictly descending run of the loss (as a longest decreasing
// subsequence), the point two thirds of the way down; over the points after the first N/10 and
// before the last 5 (fastai's lr_find), non-finite losses dropped.
std::optional<std::size_t> suggest_valley(const std::vector<double>& lrs, const std::vector<double>& losses);

struct LrFinderResult {
  std::vector<double> lrs;                // one per optimiser step taken
  std::vector<double> losses;             // smoothed
  std::vector<double> raw_losses;         // as the steps returned them
  std::optional<std::size_t> suggestion;  // Lightning's (steepest descent)
  std::optional<std::size_t> valley;      // fastai's
  bool stopped_early = false;             // the loss diverged before num_training steps
  std::string stop_reason;
  nlohmann::json to_json() const;
};

// Runs the test with a Trainer built from these options (no validation, checkpoints or logs; the
// learning rate of every parameter group set by the test), then restores the module's tensors and
// requires_grad flags.
LrFinderResult lr_range_test(TaskModule& task, DataModule& data, TrainerOptions trainer, OptimizerOptions optimizer,
                             const LrFinderOptions& options);

}  // namespace glassbox::train
