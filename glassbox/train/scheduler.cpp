// The schedulers of scheduler.h. One file on purpose (~700 lines): the nine schedules, the warm-up
// wrapper, their options and their checkpoint state share private helpers and are read together
// against torch/optim/lr_scheduler.py.
#include "glassbox/train/scheduler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <utility>

#include <nlohmann/json.hpp>

#include "glassbox/base/error.h"

namespace glassbox::train {
namespace {

using nlohmann::json;

constexpr double kPi = std::numbers::pi;  // == Python's math.pi
constexpr const char* kStateHint = "the checkpoint is corrupt or was not written by glassbox; resume from another one";

// ---- state (de)serialisation: non-finite doubles become strings so the JSON text is valid ----

json encode(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

json encode(const std::vector<double>& xs) {
  json a = json::array();
  for (double x : xs) a.push_back(encode(x));
  return a;
}

bool decode(const json& j, double& out) {
  if (j.is_number()) {
    out = j.get<double>();
    return true;
  }
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s == "inf")
      out = std::numeric_limits<double>::infinity();
    else if (s == "-inf")
      out = -std::numeric_limits<double>::infinity();
    else if (s == "nan")
      out = std::numeric_limits<double>::quiet_NaN();
    else
      return false;
    return true;
  }
  return false;
}

const json& member(const json& state, const char* field) {
  GB_CHECK(state.is_object() && state.contains(field), DataLoss,
           "scheduler state: field \"" << field << "\" is missing", kStateHint);
  return state.at(field);
}

double get_double(const json& state, const char* field) {
  double x = 0;
  GB_CHECK(decode(member(state, field), x), DataLoss, "scheduler state: field \"" << field << "\" is not a number",
           kStateHint);
  return x;
}

std::int64_t get_int(const json& state, const char* field) {
  const json& j = member(state, field);
  GB_CHECK(j.is_number_integer(), DataLoss, "scheduler state: field \"" << field << "\" is not an integer", kStateHint);
  return j.get<std::int64_t>();
}

std::vector<double> get_doubles(const json& state, const char* field) {
  const json& j = member(state, field);
  GB_CHECK(j.is_array(), DataLoss, "scheduler state: field \"" << field << "\" is not an array", kStateHint);
  std::vector<double> out;
  for (const auto& e : j) {
    double x = 0;
    GB_CHECK(decode(e, x), DataLoss, "scheduler state: field \"" << field << "\" holds a non-number", kStateHint);
    out.push_back(x);
  }
  return out;
}

// Python's `a % b` for b > 0 (result in [0, b)).
std::int64_t py_mod(std::int64_t a, std::int64_t b) {
  const std::int64_t r = a % b;
  return r < 0 ? r + b : r;
}

// One value per group from a list of 1 or n values (PyTorch's "float or list" parameters).
std::vector<double> per_group(const std::vector<double>& values, std::size_t groups, const char* field) {
  if (values.size() == 1) return std::vector<double>(groups, values[0]);
  GB_CHECK(values.size() == groups, InvalidArgument,
           "scheduler." << field << " has " << values.size() << " values for " << groups << " param groups",
           "give one value for all groups or one per group");
  return values;
}

// ---- the schedulers ----------------------------------------------------------------------------

// A scheduler that can be (re)started at its epoch 0, as SequentialLR does at a milestone.
class Schedule : public LrScheduler {
 public:
  using LrScheduler::LrScheduler;
  // SequentialLR's `scheduler._update_lr(0)`: last_epoch = 0, lrs from the closed form at 0.
  virtual void restart() {
    last_epoch_ = 0;
    lrs_ = closed_form(0);
  }

 protected:
  virtual std::vector<double> closed_form(std::int64_t k) const = 0;
  void advance(double) override {
    ++last_epoch_;
    lrs_ = closed_form(last_epoch_);
  }
};

// Schedules with a closed form lr = f(base_lr, k) (PyTorch's _get_closed_form_lr; its chainable
// get_lr agrees to a few ulps): none, StepLR, MultiStepLR, ExponentialLR, LinearLR.
using LrFormula = std::function<double(double base, std::int64_t k)>;

class ClosedFormScheduler final : public Schedule {
 public:
  ClosedFormScheduler(std::string name, std::vector<double> base, LrFormula f)
      : Schedule(std::move(base)), name_(std::move(name)), f_(std::move(f)) {
    lrs_ = closed_form(0);
  }
  std::string name() const override { return name_; }

 protected:
  std::vector<double> closed_form(std::int64_t k) const override {
    std::vector<double> out;
    for (double b : base_lrs_) out.push_back(f_(b, k));
    return out;
  }

 private:
  std::string name_;
  LrFormula f_;
};

// LinearLR: base * (start + (end - start) * min(total_iters, k) / total_iters).
LrFormula linear_formula(double start, double end, std::int64_t total_iters) {
  return [=](double b, std::int64_t k) {
    return b *
           (start + (end - start) * static_cast<double>(std::min(total_iters, k)) / static_cast<double>(total_iters));
  };
}

// CosineAnnealingLR with PyTorch's recursive form (its get_lr), operation for operation: the
// recursion and the closed form part ways by up to ~1e-11 relative over long runs.
class CosineScheduler final : public Schedule {
 public:
  CosineScheduler(std::vector<double> base, std::int64_t t_max, double eta_min)
      : Schedule(std::move(base)), t_max_(t_max), eta_min_(eta_min) {
    lrs_ = base_lrs_;  // the initial step keeps the group lr
  }
  std::string name() const override { return "cosine"; }

 protected:
  std::vector<double> closed_form(std::int64_t k) const override {
    std::vector<double> out;
    for (double b : base_lrs_) {
      out.push_back(eta_min_ +
                    (b - eta_min_) * (1 + std::cos(kPi * static_cast<double>(k) / static_cast<double>(t_max_))) / 2);
    }
    return out;
  }
  void advance(double) override {
    ++last_epoch_;
    const auto e = static_cast<double>(last_epoch_);
    const auto t = static_cast<double>(t_max_);
    if (py_mod(last_epoch_ - 1 - t_max_, 2 * t_max_) == 0) {
      for (std::size_t i = 0; i < lrs_.size(); ++i) {
        lrs_[i] = lrs_[i] + (base_lrs_[i] - eta_min_) * (1 - std::cos(kPi / t)) / 2;
      }
      return;
    }
    const double ratio = (1 + std::cos(kPi * e / t)) / (1 + std::cos(kPi * (e - 1) / t));
    for (double& lr : lrs_) lr = ratio * (lr - eta_min_) + eta_min_;
  }

 private:
  std::int64_t t_max_;
  double eta_min_;
};

// CosineAnnealingWarmRestarts (step() without an epoch argument).
class WarmRestartsScheduler final : public Schedule {
 public:
  WarmRestartsScheduler(std::vector<double> base, std::int64_t t_0, std::int64_t t_mult, double eta_min)
      : Schedule(std::move(base)), t_mult_(t_mult), eta_min_(eta_min), t_i_(t_0) {
    lrs_ = closed_form(0);
  }
  std::string name() const override { return "cosine_warm_restarts"; }
  // _update_lr(0) leaves T_cur and T_i as they are (0 and T_0 before the first step).
  void restart() override {
    last_epoch_ = 0;
    lrs_ = closed_form(0);
  }

 protected:
  std::vector<double> closed_form(std::int64_t) const override {
    std::vector<double> out;
    const double c = 1 + std::cos(kPi * static_cast<double>(t_cur_) / static_cast<double>(t_i_));
    for (double b : base_lrs_) out.push_back(eta_min_ + (b - eta_min_) * c / 2);
    return out;
  }
  void advance(double) override {
    ++last_epoch_;
    ++t_cur_;
    if (t_cur_ >= t_i_) {
      t_cur_ = t_cur_ % t_i_;
      t_i_ = t_i_ * t_mult_;
    }
    lrs_ = closed_form(last_epoch_);
  }
  void save_extra(json& s) const override {
    s["t_cur"] = t_cur_;
    s["t_i"] = t_i_;
  }
  void load_extra(const json& s) override {
    const std::int64_t t_cur = get_int(s, "t_cur");
    const std::int64_t t_i = get_int(s, "t_i");
    GB_CHECK(t_i >= 1 && t_cur >= 0 && t_cur < t_i, DataLoss,
             "scheduler state: field \"t_cur\" = " << t_cur << " / \"t_i\" = " << t_i << " are inconsistent",
             kStateHint);
    t_cur_ = t_cur;
    t_i_ = t_i;
  }

 private:
  std::int64_t t_mult_;
  double eta_min_;
  std::int64_t t_cur_ = 0;
  std::int64_t t_i_;
};

// OneCycleLR (get_lr), with the momentum it would write into the param groups.
class OneCycleScheduler final : public LrScheduler {
 public:
  OneCycleScheduler(const std::vector<double>& max_lrs, const SchedulerOptions& o, std::int64_t total_steps)
      : LrScheduler(max_lrs), total_steps_(total_steps), cos_(o.anneal_strategy == AnnealStrategy::kCos) {
    const auto n = static_cast<double>(total_steps);
    for (double m : max_lrs) {
      const double initial = m / o.div_factor;
      initial_.push_back(initial);
      max_.push_back(m);
      min_.push_back(initial / o.final_div_factor);
    }
    base_lrs_ = initial_;  // PyTorch's base_lrs are the groups' initial_lr = max_lr / div_factor
    const double mmax = o.max_momentum;
    const double mbase = o.base_momentum;
    if (o.three_phase) {
      phases_ = {{o.pct_start * n - 1, &initial_, &max_, mmax, mbase},
                 {2 * o.pct_start * n - 2, &max_, &initial_, mbase, mmax},
                 {n - 1, &initial_, &min_, mmax, mmax}};
    } else {
      phases_ = {{o.pct_start * n - 1, &initial_, &max_, mmax, mbase}, {n - 1, &max_, &min_, mbase, mmax}};
    }
    // Where PyTorch would divide 0 by 0: a phase of zero length that some step 0..total_steps reaches
    // (the first phase is reached by step 0; a middle one never; the last one by the steps after
    // every other phase's end).
    double others_end = -std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i + 1 < phases_.size(); ++i) others_end = std::max(others_end, phases_[i].end_step);
    const bool first_empty = phases_.front().end_step == 0.0;
    const bool last_empty = phases_.back().end_step == phases_[phases_.size() - 2].end_step && others_end < n;
    GB_CHECK(!first_empty && !last_empty, InvalidArgument,
             "scheduler.pct_start = " << o.pct_start << " with total_steps = " << total_steps
                                      << " gives a onecycle phase of zero steps (PyTorch divides by zero there)",
             "change scheduler.pct_start or scheduler.total_steps");
    cycle_momentum_ = o.cycle_momentum;
    compute();
  }
  std::string name() const override { return "onecycle"; }

 protected:
  void advance(double) override {
    GB_CHECK(last_epoch_ + 1 <= total_steps_, FailedPrecondition,
             "onecycle was stepped " << last_epoch_ + 1 << " times, past scheduler.total_steps = " << total_steps_,
             "set scheduler.total_steps (or max_epochs / steps_per_epoch) to cover the whole run, and check "
             "scheduler.interval (\"step\" counts batches, \"epoch\" epochs)");
    ++last_epoch_;
    compute();
  }

 private:
  struct Phase {
    double end_step;
    const std::vector<double>* start_lr;
    const std::vector<double>* end_lr;
    double start_momentum;
    double end_momentum;
  };

  double anneal(double start, double end, double pct) const {
    if (cos_) {
      const double cos_out = std::cos(kPi * pct) + 1;
      return end + (start - end) / 2.0 * cos_out;
    }
    return (end - start) * pct + start;
  }

  void compute() {
    const auto step = static_cast<double>(last_epoch_);
    double start_step = 0.0;
    const Phase* phase = &phases_.back();
    for (std::size_t i = 0; i < phases_.size(); ++i) {
      if (step <= phases_[i].end_step || i + 1 == phases_.size()) {
        phase = &phases_[i];
        break;
      }
      start_step = phases_[i].end_step;
    }
    GB_CHECK(phase->end_step != start_step, Internal, "onecycle: phase of zero length at step " << last_epoch_,
             "report this bug");
    const double pct = (step - start_step) / (phase->end_step - start_step);
    lrs_.clear();
    for (std::size_t g = 0; g < max_.size(); ++g)
      lrs_.push_back(anneal((*phase->start_lr)[g], (*phase->end_lr)[g], pct));
    momentums_.clear();
    if (cycle_momentum_) {
      momentums_.assign(max_.size(), anneal(phase->start_momentum, phase->end_momentum, pct));
    }
  }

  std::int64_t total_steps_;
  bool cos_;
  bool cycle_momentum_ = true;
  std::vector<double> initial_, max_, min_;
  std::vector<Phase> phases_;
};

// ReduceLROnPlateau.
class PlateauScheduler final : public LrScheduler {
 public:
  PlateauScheduler(std::vector<double> base, const SchedulerOptions& o)
      : LrScheduler(std::move(base)),
        max_mode_(o.mode == MetricMode::kMax),
        rel_(o.threshold_mode == ThresholdMode::kRel),
        factor_(o.factor),
        patience_(o.patience),
        threshold_(o.threshold),
        cooldown_(o.cooldown),
        eps_(o.eps) {
    min_lrs_ = per_group(o.min_lr, base_lrs_.size(), "min_lr");
    best_ = mode_worse();
  }
  std::string name() const override { return "plateau"; }
  bool needs_metric() const override { return true; }

 protected:
  void advance(double current) override {
    ++last_epoch_;
    if (is_better(current, best_)) {
      best_ = current;
      num_bad_epochs_ = 0;
    } else {
      ++num_bad_epochs_;
    }
    if (cooldown_counter_ > 0) {
      --cooldown_counter_;
      num_bad_epochs_ = 0;  // ignore any bad epochs in cooldown
    }
    if (num_bad_epochs_ > patience_) {
      for (std::size_t i = 0; i < lrs_.size(); ++i) {
        const double old_lr = lrs_[i];
        const double new_lr = std::max(old_lr * factor_, min_lrs_[i]);
        if (old_lr - new_lr > eps_) lrs_[i] = new_lr;
      }
      cooldown_counter_ = cooldown_;
      num_bad_epochs_ = 0;
    }
  }
  void save_extra(json& s) const override {
    s["best"] = encode(best_);
    s["num_bad_epochs"] = num_bad_epochs_;
    s["cooldown_counter"] = cooldown_counter_;
  }
  void load_extra(const json& s) override {
    const double best = get_double(s, "best");
    const std::int64_t bad = get_int(s, "num_bad_epochs");
    const std::int64_t cool = get_int(s, "cooldown_counter");
    GB_CHECK(bad >= 0, DataLoss, "scheduler state: field \"num_bad_epochs\" is negative (" << bad << ")", kStateHint);
    GB_CHECK(cool >= 0, DataLoss, "scheduler state: field \"cooldown_counter\" is negative (" << cool << ")",
             kStateHint);
    best_ = best;
    num_bad_epochs_ = bad;
    cooldown_counter_ = cool;
  }

 private:
  double mode_worse() const {
    return max_mode_ ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
  bool is_better(double a, double best) const {
    if (!max_mode_ && rel_) return a < best * (1.0 - threshold_);
    if (!max_mode_) return a < best - threshold_;
    if (rel_) return a > best * (threshold_ + 1.0);
    return a > best + threshold_;
  }

  bool max_mode_;
  bool rel_;
  double factor_;
  std::int64_t patience_;
  double threshold_;
  std::int64_t cooldown_;
  double eps_;
  std::vector<double> min_lrs_;
  double best_;
  std::int64_t num_bad_epochs_ = 0;
  std::int64_t cooldown_counter_ = 0;
};

// SequentialLR([LinearLR(start_factor, 1.0, warmup), main], milestones=[warmup]).
class WarmupScheduler final : public LrScheduler {
 public:
  WarmupScheduler(std::vector<double> base, std::unique_ptr<Schedule> main, std::int64_t warmup, double start_factor)
      : LrScheduler(base),
        main_(std::move(main)),
        warmup_("linear", std::move(base), linear_formula(start_factor, 1.0, warmup)),
        milestone_(warmup) {
    lrs_ = warmup_.lrs();
  }
  std::string name() const override { return main_->name() + "+warmup"; }

 protected:
  void advance(double metric) override {
    ++last_epoch_;
    if (last_epoch_ < milestone_) {
      warmup_.step(metric);
      lrs_ = warmup_.lrs();
    } else {
      if (last_epoch_ == milestone_) {
        main_->restart();
      } else {
        main_->step(metric);
      }
      lrs_ = main_->lrs();
    }
  }
  void save_extra(json& s) const override {
    s["warmup"] = warmup_.state();
    s["main"] = main_->state();
  }
  void load_extra(const json& s) override {
    const json& w = member(s, "warmup");
    const json& m = member(s, "main");
    const json backup = warmup_.state();
    warmup_.load_state(w);
    try {
      main_->load_state(m);
    } catch (...) {
      warmup_.load_state(backup);  // on error nothing changes
      throw;
    }
  }

 private:
  std::unique_ptr<Schedule> main_;
  ClosedFormScheduler warmup_;
  std::int64_t milestone_;
};

}  // namespace

// ---- LrScheduler -------------------------------------------------------------------------------

LrScheduler::LrScheduler(std::vector<double> base_lrs) : base_lrs_(std::move(base_lrs)), lrs_(base_lrs_) {}

void LrScheduler::save_extra(json&) const {}
void LrScheduler::load_extra(const json&) {}

json LrScheduler::state() const {
  json s = json::object();
  s["name"] = name();
  s["last_epoch"] = last_epoch_;
  s["base_lrs"] = encode(base_lrs_);
  s["lrs"] = encode(lrs_);
  s["momentums"] = encode(momentums_);
  save_extra(s);
  return s;
}

void LrScheduler::load_state(const json& s) {
  GB_CHECK(s.is_object(), DataLoss, "scheduler state: expected a JSON object, got " << s.type_name(), kStateHint);
  const json& n = member(s, "name");
  GB_CHECK(n.is_string(), DataLoss, "scheduler state: field \"name\" is not a string", kStateHint);
  GB_CHECK(n.get<std::string>() == name(), FailedPrecondition,
           "the checkpoint holds the state of scheduler \"" << n.get<std::string>() << "\", this run uses \"" << name()
                                                            << "\"",
           "resume with the scheduler options the checkpoint was trained with");
  const std::int64_t last_epoch = get_int(s, "last_epoch");
  GB_CHECK(last_epoch >= 0, DataLoss, "scheduler state: field \"last_epoch\" is negative (" << last_epoch << ")",
           kStateHint);
  std::vector<double> base = get_doubles(s, "base_lrs");
  std::vector<double> lrs = get_doubles(s, "lrs");
  std::vector<double> momentums = get_doubles(s, "momentums");
  GB_CHECK(base.size() == base_lrs_.size(), FailedPrecondition,
           "the scheduler state has " << base.size() << " param groups, the optimizer has " << base_lrs_.size(),
           "resume with the same model and optimizer param groups");
  GB_CHECK(lrs.size() == base.size(), DataLoss,
           "scheduler state: field \"lrs\" has " << lrs.size() << " values for " << base.size() << " param groups",
           kStateHint);
  GB_CHECK(momentums.empty() || momentums.size() == base.size(), DataLoss,
           "scheduler state: field \"momentums\" has " << momentums.size() << " values for " << base.size()
                                                       << " param groups",
           kStateHint);
  load_extra(s);
  last_epoch_ = last_epoch;
  base_lrs_ = std::move(base);
  lrs_ = std::move(lrs);
  momentums_ = std::move(momentums);
}

// ---- options -----------------------------------------------------------------------------------

void SchedulerOptions::visit(FieldVisitor& v) {
  v.choice("name", name, "learning-rate schedule (torch.optim.lr_scheduler equivalent: see docs/schedulers.md)");
  v.choice("interval", interval, "one scheduler step per optimizer step or per epoch");
  v.field("step_size", step_size, "step: period of the decay, in intervals");
  v.field("gamma", gamma, "step, multistep, exponential: multiplicative decay factor");
  v.field("milestones", milestones, "multistep: intervals at which the lr is multiplied by gamma (increasing)");
  v.field("t_max", t_max, "cosine: T_max, intervals of the half cosine (0: the rest of the run after warm-up)");
  v.field("eta_min", eta_min, "cosine, cosine_warm_restarts: minimum lr");
  v.field("t_0", t_0, "cosine_warm_restarts: T_0, intervals until the first restart");
  v.field("t_mult", t_mult, "cosine_warm_restarts: T_mult, factor by which the period grows after a restart");
  v.field("max_lr", max_lr, "onecycle: peak lr, one for all groups or one per group (empty: the groups' lr)");
  v.field("total_steps", total_steps, "onecycle: length of the cycle in intervals (0: the whole run)");
  v.field("pct_start", pct_start, "onecycle: share of the cycle spent raising the lr");
  v.choice("anneal_strategy", anneal_strategy, "onecycle: annealing shape");
  v.field("cycle_momentum", cycle_momentum, "onecycle: cycle momentum (SGD) / beta1 (Adam) inversely to the lr");
  v.field("base_momentum", base_momentum, "onecycle: momentum at the peak lr");
  v.field("max_momentum", max_momentum, "onecycle: momentum at the start and the end");
  v.field("div_factor", div_factor, "onecycle: initial lr = max_lr / div_factor");
  v.field("final_div_factor", final_div_factor, "onecycle: final lr = initial lr / final_div_factor");
  v.field("three_phase", three_phase, "onecycle: symmetric rise and fall, then a final annihilation phase");
  v.field("start_factor", start_factor, "linear: lr factor at the start");
  v.field("end_factor", end_factor, "linear: lr factor after total_iters");
  v.field("total_iters", total_iters, "linear: intervals from start_factor to end_factor");
  v.field("monitor", monitor, "plateau: logged metric whose value each step() receives, e.g. val_loss");
  v.choice("mode", mode, "plateau: whether the metric should fall (min) or rise (max)");
  v.field("factor", factor, "plateau: lr multiplier on a plateau");
  v.field("patience", patience, "plateau: intervals without improvement before reducing");
  v.field("threshold", threshold, "plateau: least change that counts as an improvement");
  v.choice("threshold_mode", threshold_mode, "plateau: threshold relative to the best or absolute");
  v.field("cooldown", cooldown, "plateau: intervals to wait after a reduction");
  v.field("min_lr", min_lr, "plateau: lower bound of the lr, one for all groups or one per group");
  v.field("eps", eps, "plateau: smallest lr change that is applied");
  v.field("warmup_steps", warmup_steps, "linear warm-up before the schedule, in intervals (0: none)");
  v.field("warmup_start_factor", warmup_start_factor, "lr factor at the start of the warm-up (rises to 1)");
}

void SchedulerOptions::validate() const {
  // need(ok, field, what it must be, the value, hint)
  const auto need = [&](bool ok, const char* field, const char* must, const auto& got, const char* hint) {
    GB_CHECK(ok, InvalidArgument,
             "scheduler." << field << " must be " << must << ", got " << got << " (scheduler.name = \"" << name_of(name)
                          << "\")",
             hint);
  };
  need(warmup_steps >= 0, "warmup_steps", ">= 0", warmup_steps, "use 0 for no warm-up");
  if (warmup_steps > 0) {
    need(warmup_start_factor > 0 && warmup_start_factor <= 1, "warmup_start_factor", "in (0, 1]", warmup_start_factor,
         "use e.g. 0.01");
    need(name != SchedulerKind::kOnecycle && name != SchedulerKind::kPlateau, "warmup_steps", "0 with this scheduler",
         warmup_steps,
         name == SchedulerKind::kOnecycle
             ? "onecycle has its own warm-up: set scheduler.pct_start and scheduler.div_factor"
             : "set it to 0 (PyTorch's SequentialLR does not take ReduceLROnPlateau)");
  }
  if (name == SchedulerKind::kStep)
    need(step_size >= 1, "step_size", ">= 1", step_size, "set the decay period in intervals");
  if (name == SchedulerKind::kStep || name == SchedulerKind::kMultistep || name == SchedulerKind::kExponential) {
    need(gamma > 0 && std::isfinite(gamma), "gamma", "> 0", gamma,
         "use e.g. 0.1 (step, multistep), 0.95 (exponential)");
  }
  if (name == SchedulerKind::kMultistep) {
    need(!milestones.empty(), "milestones", "a non-empty list", "[]", "e.g. milestones = [30, 60, 90]");
    for (std::size_t i = 0; i < milestones.size(); ++i) {
      need(milestones[i] >= 0 && (i == 0 || milestones[i] > milestones[i - 1]), "milestones",
           "non-negative and strictly increasing", milestones[i], "sort the milestones and remove duplicates");
    }
  }
  if (name == SchedulerKind::kCosine)
    need(t_max >= 0, "t_max", ">= 1 (or 0: the rest of the run)", t_max, "e.g. t_max = 100");
  if (name == SchedulerKind::kCosine || name == SchedulerKind::kCosineWarmRestarts) {
    need(eta_min >= 0 && std::isfinite(eta_min), "eta_min", ">= 0", eta_min, "use 0 or a small lr such as 1e-6");
  }
  if (name == SchedulerKind::kCosineWarmRestarts) {
    need(t_0 >= 1, "t_0", ">= 1", t_0, "set the intervals until the first restart");
    need(t_mult >= 1, "t_mult", "an integer >= 1", t_mult, "use 1 (equal periods) or 2 (doubling periods)");
  }
  if (name == SchedulerKind::kOnecycle) {
    for (double m : max_lr) {
      need(m > 0 && std::isfinite(m), "max_lr", "> 0", m,
           "give the peak lr, or leave it empty to peak at the optimizer's lr");
    }
    need(total_steps >= 0, "total_steps", ">= 1 (or 0: the whole run)", total_steps, "use 0 to derive it");
    need(pct_start >= 0 && pct_start <= 1, "pct_start", "in [0, 1]", pct_start, "use e.g. 0.3");
    need(div_factor > 0, "div_factor", "> 0", div_factor, "use e.g. 25");
    need(final_div_factor > 0, "final_div_factor", "> 0", final_div_factor, "use e.g. 1e4");
    need(base_momentum >= 0 && base_momentum <= 1, "base_momentum", "in [0, 1]", base_momentum, "use e.g. 0.85");
    need(max_momentum >= 0 && max_momentum <= 1, "max_momentum", "in [0, 1]", max_momentum, "use e.g. 0.95");
  }
  if (name == SchedulerKind::kLinear) {
    need(start_factor > 0 && start_factor <= 1, "start_factor", "in (0, 1]", start_factor, "use e.g. 1/3");
    need(end_factor >= 0 && end_factor <= 1, "end_factor", "in [0, 1]", end_factor, "use e.g. 1.0");
    need(total_iters >= 1, "total_iters", ">= 1", total_iters, "use e.g. 5");
  }
  if (name == SchedulerKind::kPlateau) {
    need(!monitor.empty(), "monitor", "a metric name", "\"\"", "e.g. monitor = \"val_loss\"");
    need(factor >= 0 && factor < 1, "factor", "in [0, 1)", factor, "use e.g. 0.1");
    need(patience >= 0, "patience", ">= 0", patience, "use e.g. 10");
    need(threshold >= 0, "threshold", ">= 0", threshold, "use e.g. 1e-4");
    need(cooldown >= 0, "cooldown", ">= 0", cooldown, "use e.g. 0");
    need(!min_lr.empty(), "min_lr", "a number or a list", "[]", "use 0, or one value per param group");
    for (double m : min_lr) need(m >= 0, "min_lr", ">= 0", m, "use 0 or a small lr");
    need(eps >= 0, "eps", ">= 0", eps, "use e.g. 1e-8");
  }
}

// ---- factory -----------------------------------------------------------------------------------

std::unique_ptr<LrScheduler> make_scheduler(const SchedulerOptions& o, std::vector<double> base_lrs,
                                            std::int64_t steps_per_epoch, std::int64_t max_epochs) {
  o.validate();
  GB_CHECK(!base_lrs.empty(), InvalidArgument, "a scheduler needs at least one param group, got none",
           "build the scheduler after the optimizer");
  for (double lr : base_lrs) {
    GB_CHECK(lr >= 0 && std::isfinite(lr), InvalidArgument, "learning rate must be finite and >= 0, got " << lr,
             "check optimizer.lr");
  }
  // Intervals in the whole run (0 when it cannot be derived).
  const std::int64_t per_epoch = o.interval == SchedulerInterval::kStep ? steps_per_epoch : 1;
  const std::int64_t run = (per_epoch > 0 && max_epochs > 0) ? per_epoch * max_epochs : 0;
  const auto derived = [&](const char* field) {
    GB_CHECK(run > 0, InvalidArgument,
             "scheduler." << field << " is 0 and cannot be derived: steps_per_epoch = " << steps_per_epoch
                          << ", max_epochs = " << max_epochs,
             std::string("set scheduler.") + field + " or trainer.max_epochs");
    return run;
  };

  if (o.name == SchedulerKind::kOnecycle) {
    const std::int64_t total = o.total_steps > 0 ? o.total_steps : derived("total_steps");
    std::vector<double> max_lrs = o.max_lr.empty() ? base_lrs : per_group(o.max_lr, base_lrs.size(), "max_lr");
    return std::make_unique<OneCycleScheduler>(max_lrs, o, total);
  }
  if (o.name == SchedulerKind::kPlateau) return std::make_unique<PlateauScheduler>(std::move(base_lrs), o);

  std::unique_ptr<Schedule> main;
  const double gamma = o.gamma;
  switch (o.name) {
    case SchedulerKind::kOnecycle:
    case SchedulerKind::kPlateau: break;  // returned above
    case SchedulerKind::kNone:
      main = std::make_unique<ClosedFormScheduler>("none", base_lrs, [](double b, std::int64_t) { return b; });
      break;
    case SchedulerKind::kStep:  // StepLR: base * gamma ** (k // step_size)
      main =
          std::make_unique<ClosedFormScheduler>("step", base_lrs, [gamma, n = o.step_size](double b, std::int64_t k) {
            const std::int64_t decays = k / n;  // k >= 0: Python's k // n
            return b * std::pow(gamma, static_cast<double>(decays));
          });
      break;
    case SchedulerKind::kMultistep:  // MultiStepLR: base * gamma ** bisect_right(milestones, k)
      main = std::make_unique<ClosedFormScheduler>(
          "multistep", base_lrs, [gamma, m = o.milestones](double b, std::int64_t k) {
            return b * std::pow(gamma, static_cast<double>(std::upper_bound(m.begin(), m.end(), k) - m.begin()));
          });
      break;
    case SchedulerKind::kExponential:  // ExponentialLR: base * gamma ** k
      main = std::make_unique<ClosedFormScheduler>("exponential", base_lrs, [gamma](double b, std::int64_t k) {
        return b * std::pow(gamma, static_cast<double>(k));
      });
      break;
    case SchedulerKind::kLinear:
      main = std::make_unique<ClosedFormScheduler>("linear", base_lrs,
                                                   linear_formula(o.start_factor, o.end_factor, o.total_iters));
      break;
    case SchedulerKind::kCosine: {
      std::int64_t t_max = o.t_max;
      if (t_max == 0) {
        t_max = derived("t_max") - o.warmup_steps;
        GB_CHECK(t_max >= 1, InvalidArgument,
                 "scheduler.t_max derived from the run is " << t_max << " (warmup_steps = " << o.warmup_steps
                                                            << " leaves no intervals to anneal)",
                 "set scheduler.t_max or shorten scheduler.warmup_steps");
      }
      main = std::make_unique<CosineScheduler>(base_lrs, t_max, o.eta_min);
      break;
    }
    case SchedulerKind::kCosineWarmRestarts:
      main = std::make_unique<WarmRestartsScheduler>(base_lrs, o.t_0, o.t_mult, o.eta_min);
      break;
  }
  if (o.warmup_steps == 0) return main;
  return std::make_unique<WarmupScheduler>(std::move(base_lrs), std::move(main), o.warmup_steps, o.warmup_start_factor);
}

}  // namespace glassbox::train
