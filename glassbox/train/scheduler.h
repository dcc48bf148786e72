// Learning-rate schedulers with the semantics of torch.optim.lr_scheduler, on plain doubles.
//
//   SchedulerOptions o;
//   o.name = "cosine"; o.interval = "step"; o.warmup_steps = 500; o.warmup_start_factor = 0.01;
//   auto sched = make_scheduler(o, {1e-3, 1e-4}, loader.num_batches(), max_epochs);
//   for (...) {                                  // one "interval": a batch or an epoch
//     apply sched->lrs() to the optimizer's param groups (and sched->momentums() if not empty);
//     optimizer.step();
//     sched->step();                             // plateau: sched->step(validation_metric)
//   }
//   nlohmann::json s = sched->state();           // into the checkpoint ...
//   sched->load_state(s);                        // ... and back: continues bit for bit
//
// Equivalence with PyTorch: right after construction lrs() is the param-group lr PyTorch has
// right after constructing the scheduler (OneCycle: max_lr / div_factor; LinearLR:
// base * start_factor), and after k calls of step() the lr PyTorch has after k calls of
// scheduler.step(). CosineAnnealingLR follows PyTorch's recursive (chainable) formula, so the
// values agree with PyTorch's to rounding, not with the textbook closed form. Warm-up
// (warmup_steps > 0) is SequentialLR([LinearLR(warmup_start_factor, 1, warmup_steps), main],
// milestones=[warmup_steps]). tests/reference/schedulers.py builds the PyTorch side of every
// tested configuration; docs/schedulers.md lists the TOML keys and the PyTorch equivalents.
//
// A scheduler never touches an optimizer: the caller copies lrs() (and, for OneCycle with
// cycle_momentum, momentums(): SGD momentum or Adam beta1) into its param groups before each
// optimizer step. That keeps this module free of LibTorch.
//
// Thread safety: none; one owner thread calls step(). Ownership: make_scheduler returns a
// unique_ptr the caller owns; schedulers hold no pointers.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "glassbox/base/config.h"
#include "glassbox/train/metric_mode.h"

namespace glassbox::train {

enum class SchedulerKind {
  kNone,
  kStep,
  kMultistep,
  kExponential,
  kCosine,
  kCosineWarmRestarts,
  kOnecycle,
  kLinear,
  kPlateau
};
constexpr NameTable<SchedulerKind, 9> enum_names(SchedulerKind) {
  return {{{SchedulerKind::kNone, "none"},
           {SchedulerKind::kStep, "step"},
           {SchedulerKind::kMultistep, "multistep"},
           {SchedulerKind::kExponential, "exponential"},
           {SchedulerKind::kCosine, "cosine"},
           {SchedulerKind::kCosineWarmRestarts, "cosine_warm_restarts"},
           {SchedulerKind::kOnecycle, "onecycle"},
           {SchedulerKind::kLinear, "linear"},
           {SchedulerKind::kPlateau, "plateau"}}};
}
static_assert(is_complete_table(enum_names(SchedulerKind{})));

// kStep: one scheduler step per optimizer step; kEpoch: one per epoch.
enum class SchedulerInterval { kStep, kEpoch };
constexpr NameTable<SchedulerInterval, 2> enum_names(SchedulerInterval) {
  return {{{SchedulerInterval::kStep, "step"}, {SchedulerInterval::kEpoch, "epoch"}}};
}
static_assert(is_complete_table(enum_names(SchedulerInterval{})));

enum class AnnealStrategy { kCos, kLinear };
constexpr NameTable<AnnealStrategy, 2> enum_names(AnnealStrategy) {
  return {{{AnnealStrategy::kCos, "cos"}, {AnnealStrategy::kLinear, "linear"}}};
}
static_assert(is_complete_table(enum_names(AnnealStrategy{})));

enum class ThresholdMode { kRel, kAbs };
constexpr NameTable<ThresholdMode, 2> enum_names(ThresholdMode) {
  return {{{ThresholdMode::kRel, "rel"}, {ThresholdMode::kAbs, "abs"}}};
}
static_assert(is_complete_table(enum_names(ThresholdMode{})));

// TOML section of the training config (e.g. [train.scheduler]). Field names are PyTorch's
// argument names in snake_case: T_max -> t_max, T_0 -> t_0, T_mult -> t_mult.
struct SchedulerOptions {
  SchedulerKind name = SchedulerKind::kNone;
  SchedulerInterval interval = SchedulerInterval::kEpoch;  // what one step() is

  // step (StepLR), multistep (MultiStepLR), exponential (ExponentialLR)
  std::int64_t step_size = 0;            // step: required, >= 1
  double gamma = 0.1;                    // step, multistep, exponential
  std::vector<std::int64_t> milestones;  // multistep: strictly increasing, >= 0
  // cosine (CosineAnnealingLR)
  std::int64_t t_max = 0;  // 0: the whole run (derived from steps_per_epoch, max_epochs) minus warmup_steps
  double eta_min = 0.0;    // cosine, cosine_warm_restarts
  // cosine_warm_restarts (CosineAnnealingWarmRestarts)
  std::int64_t t_0 = 0;  // required, >= 1
  std::int64_t t_mult = 1;
  // onecycle (OneCycleLR)
  std::vector<double> max_lr;    // one value for all groups, or one per group; empty: each group's base lr
  std::int64_t total_steps = 0;  // 0: derived from steps_per_epoch and max_epochs (per interval)
  double pct_start = 0.3;
  AnnealStrategy anneal_strategy = AnnealStrategy::kCos;
  bool cycle_momentum = true;  // momentums() cycles from max_momentum to base_momentum and back
  double base_momentum = 0.85;
  double max_momentum = 0.95;
  double div_factor = 25.0;
  double final_div_factor = 1e4;
  bool three_phase = false;
  // linear (LinearLR)
  double start_factor = 1.0 / 3.0;
  double end_factor = 1.0;
  std::int64_t total_iters = 5;
  // plateau (ReduceLROnPlateau)
  std::string monitor = "val_loss";  // the logged metric the trainer passes to step() (Lightning's "monitor")
  MetricMode mode = MetricMode::kMin;
  double factor = 0.1;
  std::int64_t patience = 10;
  double threshold = 1e-4;
  ThresholdMode threshold_mode = ThresholdMode::kRel;
  std::int64_t cooldown = 0;
  std::vector<double> min_lr{0.0};  // one value for all groups, or one per group
  double eps = 1e-8;
  // linear warm-up before the main schedule (not with onecycle or plateau)
  std::int64_t warmup_steps = 0;  // in intervals; 0: none
  double warmup_start_factor = 1.0 / 3.0;

  void visit(FieldVisitor& v);
  void validate() const;  // throws InvalidArgument naming the field ("scheduler.<key>")
};

class LrScheduler {
 public:
  virtual ~LrScheduler() = default;
  LrScheduler(const LrScheduler&) = delete;
  LrScheduler& operator=(const LrScheduler&) = delete;

  // Advances one interval. `metric` is read only by plateau (needs_metric()); like PyTorch's
  // float('nan'), a NaN metric counts as "no improvement".
  void step(double metric = std::numeric_limits<double>::quiet_NaN()) { advance(metric); }

  // The lr of each param group for the next optimizer step.
  const std::vector<double>& lrs() const { return lrs_; }
  // Momentum (SGD) or beta1 (Adam) of each group for the next step; empty when not scheduled.
  const std::vector<double>& momentums() const { return momentums_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  // Number of step() calls so far (PyTorch's last_epoch).
  std::int64_t steps_taken() const { return last_epoch_; }
  virtual bool needs_metric() const { return false; }
  // The options name ("cosine", ...), "+warmup" appended when a warm-up is prepended.
  virtual std::string name() const = 0;

  // Everything needed to continue exactly (counters, current lrs, plateau's best...).
  // Hyper-parameters come from the options the scheduler is rebuilt with. Non-finite numbers
  // are stored as the strings "inf", "-inf", "nan", so the JSON survives a text round trip.
  nlohmann::json state() const;
  // Throws DataLoss naming the field for a malformed state, FailedPrecondition for the state of
  // another scheduler or another number of param groups; on error nothing changes.
  void load_state(const nlohmann::json& state);

 protected:
  explicit LrScheduler(std::vector<double> base_lrs);
  virtual void advance(double metric) = 0;
  // Subclass state beyond the common fields; load_extra validates everything before it assigns.
  virtual void save_extra(nlohmann::json& state) const;
  virtual void load_extra(const nlohmann::json& state);

  std::vector<double> base_lrs_;
  std::vector<double> lrs_;
  std::vector<double> momentums_;
  std::int64_t last_epoch_ = 0;
};

// Builds the scheduler named by `options` (validated here) for param groups with `base_lrs`.
// steps_per_epoch and max_epochs derive onecycle's total_steps and cosine's t_max when those are
// 0: intervals per run = max_epochs * (interval == "step" ? steps_per_epoch : 1).
// "none" gives constant lrs (or just the warm-up). Throws InvalidArgument.
std::unique_ptr<LrScheduler> make_scheduler(const SchedulerOptions& options, std::vector<double> base_lrs,
                                            std::int64_t steps_per_epoch, std::int64_t max_epochs);

}  // namespace glassbox::train
