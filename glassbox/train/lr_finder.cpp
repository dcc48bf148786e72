#include "glassbox/train/lr_finder.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/train/callback.h"
#include "glassbox/train/scheduler.h"
#include "glassbox/train/trainer.h"

namespace glassbox::train {

void LrFinderOptions::validate() const {
  GB_CHECK(min_lr > 0 && max_lr > min_lr && std::isfinite(max_lr), InvalidArgument,
           "the learning-rate range must satisfy 0 < min_lr < max_lr, got " << min_lr << " .. " << max_lr,
           "use e.g. --min-lr 1e-8 --max-lr 1");
  GB_CHECK(num_training >= 2, InvalidArgument, "the range test needs at least 2 steps, got " << num_training,
           "use e.g. 100");
  GB_CHECK(beta >= 0 && beta < 1, InvalidArgument, "the loss smoothing beta must be in [0, 1), got " << beta,
           "use 0.98");
}

std::vector<double> lr_finder_schedule(const LrFinderOptions& o) {
  o.validate();
  std::vector<double> lrs;
  const double n = static_cast<double>(o.num_training);
  for (std::int64_t i = 0; i < o.num_training; ++i) {
    if (i == 0) {
      lrs.push_back(o.min_lr);
      continue;
    }
    const double r = static_cast<double>(i + 1) / n;
    lrs.push_back(o.mode == LrFinderMode::kExponential ? o.min_lr * std::pow(o.max_lr / o.min_lr, r)
                                                       : o.min_lr + r * (o.max_lr - o.min_lr));
  }
  return lrs;
}

double LossSmoother::push(double loss, std::int64_t step) {
  avg_ = beta_ * avg_ + (1 - beta_) * loss;
  const double smoothed = avg_ / (1 - std::pow(beta_, static_cast<double>(step + 1)));
  if (threshold_ > 0 && step > 1 && smoothed > threshold_ * best_) diverged_ = true;
  if (smoothed < best_ || step == 1) best_ = smoothed;
  return smoothed;
}

std::optional<std::size_t> suggest_steepest(const std::vector<double>& lrs, const std::vector<double>& losses,
                                            std::size_t skip_begin, std::size_t skip_end) {
  GB_CHECK(lrs.size() == losses.size(), InvalidArgument,
           "suggest_steepest: " << lrs.size() << " learning rates but " << losses.size() << " losses", "");
  // Python's [skip_begin:-skip_end] on the points, then the finite ones, in float32 as Lightning's tensors.
  const std::size_t n = losses.size();
  const std::size_t end = skip_end == 0 ? 0 : (n > skip_end ? n - skip_end : 0);
  std::vector<std::size_t> idx;
  std::vector<float> x, f;
  for (std::size_t i = skip_begin; i < end; ++i) {
    const float l = static_cast<float>(losses[i]);
    if (!std::isfinite(l)) continue;
    idx.push_back(i);
    x.push_back(static_cast<float>(lrs[i]));
    f.push_back(l);
  }
  const std::size_t m = f.size();
  if (m < 2) return std::nullopt;
  // torch.gradient(f, spacing=[x]) with edge_order 1: one-sided at the ends, and inside
  // a*f[i-1] + b*f[i] + c*f[i+1] with a = -dx2/(dx1(dx1+dx2)), b = (dx2-dx1)/(dx1 dx2), c = dx1/(dx2(dx1+dx2)).
  std::vector<float> g(m);
  g[0] = (f[1] - f[0]) / (x[1] - x[0]);
  g[m - 1] = (f[m - 1] - f[m - 2]) / (x[m - 1] - x[m - 2]);
  for (std::size_t i = 1; i + 1 < m; ++i) {
    const float dx1 = x[i] - x[i - 1], dx2 = x[i + 1] - x[i];
    const float a = -dx2 / (dx1 * (dx1 + dx2));
    const float b = (dx2 - dx1) / (dx1 * dx2);
    const float c = dx1 / (dx2 * (dx1 + dx2));
    g[i] = a * f[i - 1] + b * f[i] + c * f[i + 1];
  }
  // torch.argmin: the first NaN if there is one, else the first minimum.
  std::size_t best = 0;
  for (std::size_t i = 0; i < m; ++i) {
    if (std::isnan(g[i])) return idx[i];
    if (g[i] < g[best]) best = i;
  }
  return idx[best];
}

std::optional<std::size_t> suggest_valley(const std::vector<double>& lrs, const std::vector<double>& losses) {
  GB_CHECK(lrs.size() == losses.size(), InvalidArgument,
           "suggest_valley: " << lrs.size() << " learning rates but " << losses.size() << " losses", "");
  const std::size_t n_all = losses.size();
  const std::size_t begin = n_all / 10;
  const std::size_t end = n_all > 5 ? n_all - 5 : 0;
  std::vector<std::size_t> idx;
  std::vector<double> l;
  for (std::size_t i = begin; i < end; ++i) {
    if (!std::isfinite(losses[i])) continue;
    idx.push_back(i);
    l.push_back(losses[i]);
  }
  const std::size_t n = l.size();
  if (n < 2) return std::nullopt;
  // fastai's loop as written (max_start may come out one before the run's first point).
  std::vector<std::int64_t> lds(n, 1);
  std::int64_t max_start = 0, max_end = 0;
  for (std::size_t i = 1; i < n; ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (l[i] < l[j] && lds[i] < lds[j] + 1) lds[i] = lds[j] + 1;
      if (lds[static_cast<std::size_t>(max_end)] < lds[i]) {
        max_end = static_cast<std::int64_t>(i);
        max_start = max_end - lds[static_cast<std::size_t>(max_end)];
      }
    }
  }
  const double sections = static_cast<double>(max_end - max_start) / 3.0;
  const std::int64_t at = max_start + static_cast<std::int64_t>(sections) + static_cast<std::int64_t>(sections / 2.0);
  return idx[static_cast<std::size_t>(std::clamp<std::int64_t>(at, 0, static_cast<std::int64_t>(n) - 1))];
}

nlohmann::json LrFinderResult::to_json() const {
  auto finite = [](const std::vector<double>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (double x : v) a.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr));
    return a;
  };
  nlohmann::json j = {{"lrs", lrs},
                      {"losses", finite(losses)},
                      {"raw_losses", finite(raw_losses)},
                      {"stopped_early", stopped_early},
                      {"stop_reason", stop_reason}};
  j["suggestion"] = suggestion ? nlohmann::json{{"lr", lrs[*suggestion]}, {"index", *suggestion}} : nlohmann::json();
  j["valley"] = valley ? nlohmann::json{{"lr", lrs[*valley]}, {"index", *valley}} : nlohmann::json();
  return j;
}

namespace {

// Sets every group's learning rate before each optimiser step and records the loss after it.
class LrFinderCallback final : public Callback {
 public:
  LrFinderCallback(const LrFinderOptions& o, LrFinderResult& out)
      : schedule_(lr_finder_schedule(o)), smoother_(o.beta, o.early_stop_threshold), out_(out) {}
  std::string name() const override { return "LrFinder"; }

  void on_train_batch_start(Trainer& t, const data::Batch&) override {
    const std::size_t k = static_cast<std::size_t>(t.global_step());
    if (k >= schedule_.size()) return;
    for (std::size_t g = 0; g < t.optimizer()->num_groups(); ++g) t.optimizer()->set_lr(g, schedule_[k]);
    lr_ = schedule_[k];
  }

  void on_train_batch_end(Trainer& t, const StepOutput& out, const data::Batch&) override {
    if (t.global_step() == last_step_) return;  // no optimiser step (gradient accumulation)
    last_step_ = t.global_step();
    const double raw = out.loss.defined() ? out.loss.detach().to(torch::kDouble).item<double>()
                                          : std::numeric_limits<double>::quiet_NaN();
    out_.lrs.push_back(lr_);
    out_.raw_losses.push_back(raw);
    out_.losses.push_back(smoother_.push(raw, t.global_step()));
    if (smoother_.diverged() && !t.should_stop()) {
      out_.stopped_early = true;
      out_.stop_reason = "the smoothed loss exceeded the threshold times its best";
      t.request_stop("lr finder: the loss diverged");
    }
  }

 private:
  std::vector<double> schedule_;
  LossSmoother smoother_;
  LrFinderResult& out_;
  double lr_ = 0.0;
  std::int64_t last_step_ = 0;
};

}  // namespace

LrFinderResult lr_range_test(TaskModule& task, DataModule& data, TrainerOptions trainer, OptimizerOptions optimizer,
                             const LrFinderOptions& options) {
  options.validate();
  // Everything the test changes, to put back afterwards.
  std::vector<std::pair<at::Tensor, at::Tensor>> saved;
  std::vector<std::pair<at::Tensor, bool>> flags;
  {
    torch::NoGradGuard ng;
    for (auto& p : task.module().parameters(true)) {
      saved.emplace_back(p, p.detach().clone());
      flags.emplace_back(p, p.requires_grad());
    }
    for (auto& b : task.module().buffers(true)) saved.emplace_back(b, b.clone());
  }
  const bool was_training = task.module().is_training();
  trainer.max_steps = options.num_training;
  trainer.max_epochs = -1;
  trainer.max_time = 0;
  trainer.limit_val_batches = 0;
  trainer.num_sanity_val_steps = 0;
  trainer.check_val_every_n_epoch = 1;
  trainer.val_check_interval = 1.0;
  trainer.enable_checkpointing = false;
  trainer.enable_progress_bar = false;
  trainer.enable_model_summary = false;
  trainer.fast_dev_run = 0;
  optimizer.lr = options.min_lr;
  LrFinderResult result;
  auto restore = [&] {
    torch::NoGradGuard ng;
    for (auto& [t, v] : saved) t.copy_(v);
    for (auto& [t, f] : flags) t.set_requires_grad(f);
    task.module().train(was_training);
  };
  try {
    Trainer t(trainer, optimizer, SchedulerOptions{});
    t.add_callback(std::make_unique<LrFinderCallback>(options, result));
    t.fit(task, data);
    if (!result.stopped_early && t.stop_kind() != StopKind::kMaxSteps && t.stop_kind() != StopKind::kNone) {
      result.stopped_early = true;
      result.stop_reason = t.stop_reason();
    }
  } catch (...) {
    restore();
    throw;
  }
  restore();
  result.suggestion = suggest_steepest(result.lrs, result.losses);
  result.valley = suggest_valley(result.lrs, result.losses);
  return result;
}

}  // namespace glassbox::train
