#include "glassbox/train/averaging.h"

#include <cmath>
#include <numbers>

#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/data/loader.h"
#include "glassbox/train/checkpoint.h"
#include "glassbox/train/trainer.h"

namespace glassbox::train {

namespace {

TensorMap state_of(const torch::nn::Module& module, bool buffers) {
  TensorMap out;
  for (const auto& p : module.named_parameters(true)) out.emplace_back(p.key(), p.value().detach().clone());
  if (buffers)
    for (const auto& b : module.named_buffers(true)) out.emplace_back(b.key(), b.value().detach().clone());
  return out;
}

// The module's tensors in the order of state_of.
std::vector<at::Tensor> live(const torch::nn::Module& module, bool buffers) {
  std::vector<at::Tensor> out;
  for (const auto& p : module.named_parameters(true)) out.push_back(p.value());
  if (buffers)
    for (const auto& b : module.named_buffers(true)) out.push_back(b.value());
  return out;
}

void check_same(const TensorMap& ours, const std::vector<at::Tensor>& theirs, const char* what) {
  GB_CHECK(ours.size() == theirs.size(), FailedPrecondition,
           what << ": the model has " << theirs.size() << " tensors, the average " << ours.size(),
           "average the model the averaging was created for");
}

void load_into(TensorMap& ours, const TensorMap& given, const char* what) {
  GB_CHECK(given.size() == ours.size(), DataLoss,
           what << ": the checkpoint holds " << given.size() << " averaged tensors, the model " << ours.size(),
           "resume with the same model");
  for (std::size_t i = 0; i < ours.size(); ++i) {
    GB_CHECK(given[i].first == ours[i].first && given[i].second.sizes() == ours[i].second.sizes(), DataLoss,
             what << ": the checkpoint's " << given[i].first << " does not fit " << ours[i].first,
             "resume with the same model");
    ours[i].second.copy_(given[i].second);
  }
}

}  // namespace

void EmaOptions::visit(FieldVisitor& v) {
  v.field("enabled", enabled, "keep an exponential moving average of the weights (timm's ModelEmaV2)");
  v.field("decay", decay, "ema = decay * ema + (1 - decay) * weights after each update (horizon ~ 1/(1-decay) steps)");
  v.field("warmup", warmup, "ModelEmaV3's warm-up: decay = 1 - (1 + step/warmup_gamma)^-warmup_power, capped at decay");
  v.field("warmup_gamma", warmup_gamma, "warm-up: gamma");
  v.field("warmup_power", warmup_power, "warm-up: power (2/3 for long runs, 3/4 for short ones)");
  v.field("min_decay", min_decay, "warm-up: lower bound of the decay");
  v.field("update_after_step", update_after_step, "warm-up: optimiser steps before the average follows the weights");
  v.field("every_n_steps", every_n_steps, "update the average every N optimiser steps");
  v.field("validate", validate,
          "validate with the averaged weights (the logged val_* metrics, the best checkpoint and early stopping "
          "follow them); the average replaces the weights when training ends");
}

void EmaOptions::validate_options() const {
  GB_CHECK(decay >= 0 && decay < 1, InvalidArgument, "ema.decay must be in [0, 1), got " << decay, "use e.g. 0.999");
  GB_CHECK(every_n_steps >= 1, InvalidArgument, "ema.every_n_steps must be >= 1, got " << every_n_steps, "use 1");
  GB_CHECK(warmup_gamma > 0 && warmup_power > 0, InvalidArgument, "ema.warmup_gamma and ema.warmup_power must be > 0",
           "use 1.0 and 0.6667");
}

ModelEma::ModelEma(const torch::nn::Module& module, EmaOptions options)
    : options_(options), tensors_(state_of(module, true)) {
  options_.validate_options();
}

double ModelEma::decay_at(std::int64_t step) const {
  if (!options_.warmup) return options_.decay;
  const std::int64_t s = std::max<std::int64_t>(0, step - options_.update_after_step - 1);
  if (s <= 0) return 0.0;
  const double d = 1 - std::pow(1 + static_cast<double>(s) / options_.warmup_gamma, -options_.warmup_power);
  return std::max(std::min(d, options_.decay), options_.min_decay);
}

void ModelEma::update(const torch::nn::Module& module, std::int64_t step) {
  const auto current = live(module, true);
  check_same(tensors_, current, "ema");
  torch::NoGradGuard ng;
  const double d = decay_at(step);
  for (std::size_t i = 0; i < current.size(); ++i) {
    at::Tensor& e = tensors_[i].second;
    const at::Tensor m = current[i].detach();
    if (!e.is_floating_point()) {
      e.copy_(m);
    } else if (options_.warmup) {
      e.lerp_(m.to(e.scalar_type()), 1.0 - d);
    } else {
      e.copy_(e * d + m * (1.0 - d));
    }
  }
}

void ModelEma::copy_to(torch::nn::Module& module) const {
  const auto current = live(module, true);
  check_same(tensors_, current, "ema");
  torch::NoGradGuard ng;
  for (std::size_t i = 0; i < current.size(); ++i) current[i].copy_(tensors_[i].second);
}

void ModelEma::swap(torch::nn::Module& module) {
  const auto current = live(module, true);
  check_same(tensors_, current, "ema");
  torch::NoGradGuard ng;
  for (std::size_t i = 0; i < current.size(); ++i) {
    at::Tensor keep = current[i].detach().clone();
    current[i].copy_(tensors_[i].second);
    tensors_[i].second.copy_(keep);
  }
}

void ModelEma::load(const TensorMap& tensors) { load_into(tensors_, tensors, "ema"); }

void SwaOptions::visit(FieldVisitor& v) {
  v.field("enabled", enabled, "stochastic weight averaging (Lightning's StochasticWeightAveraging)");
  v.field("epoch_start", epoch_start, "first averaged epoch: a fraction of max_epochs (< 1) or an epoch (>= 1)");
  v.field("lr", lr, "SWALR's swa_lr from epoch_start on (0: keep the configured schedule)");
  v.field("anneal_epochs", anneal_epochs, "epochs of annealing to swa.lr");
  v.choice("anneal_strategy", anneal_strategy, {"cos", "linear"}, "annealing shape");
}

void SwaOptions::validate() const {
  GB_CHECK(epoch_start > 0, InvalidArgument, "swa.epoch_start must be > 0, got " << epoch_start, "use e.g. 0.8");
  GB_CHECK(lr >= 0, InvalidArgument, "swa.lr must be >= 0, got " << lr, "use e.g. 0.05, or 0");
  GB_CHECK(anneal_epochs >= 0, InvalidArgument, "swa.anneal_epochs must be >= 0, got " << anneal_epochs, "use 10");
}

SwaAverage::SwaAverage(const torch::nn::Module& module) : tensors_(state_of(module, false)) {}

void SwaAverage::update(const torch::nn::Module& module) {
  const auto current = live(module, false);
  check_same(tensors_, current, "swa");
  torch::NoGradGuard ng;
  if (n_ == 0) {
    for (std::size_t i = 0; i < current.size(); ++i) tensors_[i].second.copy_(current[i]);
  } else {
    // AveragedModel's CPU path: avg + (p - avg) / (n_averaged + 1), n_averaged a long tensor.
    const at::Tensor n = torch::tensor(n_, torch::kLong);
    for (std::size_t i = 0; i < current.size(); ++i) {
      at::Tensor& a = tensors_[i].second;
      const at::Tensor p = current[i].detach().to(a.device());
      a.copy_(a + (p - a) / (n.to(a.device()) + 1));
    }
  }
  ++n_;
}

void SwaAverage::copy_to(torch::nn::Module& module) const {
  const auto current = live(module, false);
  check_same(tensors_, current, "swa");
  torch::NoGradGuard ng;
  for (std::size_t i = 0; i < current.size(); ++i) current[i].copy_(tensors_[i].second);
}

void SwaAverage::load(const TensorMap& tensors, std::int64_t count) {
  load_into(tensors_, tensors, "swa");
  n_ = count;
}

void update_bn(torch::nn::Module& module,
               const std::function<void(const std::function<void(const at::Tensor&)>&)>& batches,
               const std::function<void(const at::Tensor&)>& forward) {
  struct Saved {
    torch::nn::BatchNormImplBase<1, torch::nn::BatchNorm1dImpl>* bn1 = nullptr;
    torch::nn::BatchNormImplBase<2, torch::nn::BatchNorm2dImpl>* bn2 = nullptr;
    std::optional<double> momentum;
  };
  std::vector<Saved> saved;
  for (auto& m : module.modules(true)) {
    if (auto* b = m->as<torch::nn::BatchNorm1d>()) {
      b->reset_running_stats();
      saved.push_back({b, nullptr, b->options.momentum()});
      b->options.momentum(std::nullopt);
    } else if (auto* b2 = m->as<torch::nn::BatchNorm2d>()) {
      b2->reset_running_stats();
      saved.push_back({nullptr, b2, b2->options.momentum()});
      b2->options.momentum(std::nullopt);
    }
  }
  if (saved.empty()) return;
  const bool was_training = module.is_training();
  module.train();
  try {
    batches(forward);
  } catch (...) {
    for (auto& s : saved) (s.bn1 ? s.bn1->options.momentum(s.momentum) : s.bn2->options.momentum(s.momentum));
    module.train(was_training);
    throw;
  }
  for (auto& s : saved) {
    if (s.bn1) s.bn1->options.momentum(s.momentum);
    if (s.bn2) s.bn2->options.momentum(s.momentum);
  }
  module.train(was_training);
}

// --- EmaCallback ---

void EmaCallback::ensure(Trainer& t) {
  if (!ema_) ema_.emplace(t.task()->module(), options_);
}

void EmaCallback::on_fit_start(Trainer& t) {
  ensure(t);
  last_step_ = t.global_step();
}

void EmaCallback::on_train_batch_end(Trainer& t, const StepOutput&, const data::Batch&) {
  if (t.global_step() == last_step_) return;  // no optimiser step (accumulation)
  last_step_ = t.global_step();
  if (t.global_step() % options_.every_n_steps == 0) ema_->update(t.task()->module(), t.global_step());
}

void EmaCallback::on_validation_start(Trainer& t) {
  if (!options_.validate || swapped_) return;
  ensure(t);
  ema_->swap(t.task()->module());
  swapped_ = true;
}

void EmaCallback::on_validation_end(Trainer& t) {
  if (!swapped_) return;
  ema_->swap(t.task()->module());
  swapped_ = false;
}

void EmaCallback::on_exception(Trainer& t, const std::exception&) { on_validation_end(t); }

void EmaCallback::on_fit_end(Trainer& t) {
  if (options_.validate && ema_) ema_->copy_to(t.task()->module());
}

void EmaCallback::on_save_checkpoint(Trainer&, Checkpoint& c) {
  if (!ema_) return;
  std::map<std::string, const at::Tensor*> avg;
  for (const auto& [n, v] : ema_->tensors()) avg[n] = &v;
  const bool full = c.state.value("weights_only", false) == false;
  for (auto& [n, v] : c.model.tensors) {
    auto it = avg.find(n);
    if (it == avg.end()) continue;
    if (full) c.extra.tensors.emplace_back("ema.raw." + n, v);
    if (options_.validate) v = *it->second;
  }
  if (!options_.validate && full)
    for (const auto& [n, v] : ema_->tensors()) c.extra.tensors.emplace_back("ema.avg." + n, v);
  c.state["ema"] = {{"in_model", options_.validate}, {"decay", options_.decay}};
}

void EmaCallback::on_load_checkpoint(Trainer& t, const Checkpoint& c) {
  ensure(t);
  torch::NoGradGuard ng;
  auto params = t.task()->module().named_parameters(true);
  auto buffers = t.task()->module().named_buffers(true);
  TensorMap avg = ema_->tensors();
  for (auto& [n, v] : avg) {
    if (options_.validate) {
      // model.safetensors held the average; the training weights are the "ema.raw." copies.
      at::Tensor live = params.contains(n) ? params[n] : buffers[n];
      v = live.detach().clone();
      if (const at::Tensor* raw = c.extra.find("ema.raw." + n)) live.copy_(*raw);
    } else if (const at::Tensor* a = c.extra.find("ema.avg." + n)) {
      v = a->clone();
    }
  }
  ema_->load(avg);
}

// --- SwaCallback ---

std::int64_t SwaCallback::start_epoch(std::int64_t max_epochs) const {
  if (options_.epoch_start >= 1) return static_cast<std::int64_t>(options_.epoch_start);
  GB_CHECK(max_epochs > 0, InvalidArgument, "swa.epoch_start as a fraction needs trainer.max_epochs",
           "give swa.epoch_start as an epoch index (>= 1)");
  return static_cast<std::int64_t>(static_cast<double>(max_epochs) * options_.epoch_start);
}

double SwaCallback::swa_lr(std::int64_t k, double lr0) const {
  const std::int64_t a = std::max<std::int64_t>(1, options_.anneal_epochs);
  const double t =
      options_.anneal_epochs == 0 ? 1.0 : std::clamp(static_cast<double>(k) / static_cast<double>(a), 0.0, 1.0);
  const double alpha = options_.anneal_strategy == "cos" ? (1 - std::cos(std::numbers::pi * t)) / 2 : t;
  return options_.lr * alpha + lr0 * (1 - alpha);
}

void SwaCallback::on_fit_start(Trainer& t) {
  start_ = start_epoch(t.options().max_epochs);
  if (!swa_) swa_.emplace(t.task()->module());
}

void SwaCallback::on_train_epoch_start(Trainer& t) {
  if (options_.lr <= 0 || t.current_epoch() < start_ || !lr0_.empty()) return;
  for (std::size_t g = 0; g < t.optimizer()->num_groups(); ++g) lr0_.push_back(t.optimizer()->lr(g));
}

void SwaCallback::on_train_batch_start(Trainer& t, const data::Batch&) {
  if (options_.lr <= 0 || t.current_epoch() < start_ || lr0_.empty()) return;
  for (std::size_t g = 0; g < t.optimizer()->num_groups() && g < lr0_.size(); ++g)
    t.optimizer()->set_lr(g, swa_lr(t.current_epoch() - start_, lr0_[g]));
}

void SwaCallback::on_train_epoch_end(Trainer& t) {
  if (t.current_epoch() >= start_) swa_->update(t.task()->module());
}

void SwaCallback::on_fit_end(Trainer& t) {
  if (!swa_ || swa_->count() == 0) return;
  swa_->copy_to(t.task()->module());
  const auto set = t.train_dataset();
  if (!set) return;
  data::LoaderOptions lo;
  lo.batch_size = 64;
  lo.shuffle = false;
  data::Loader loader(set, lo);
  TaskModule* task = t.task();
  const c10::Device device = t.device();
  update_bn(
      task->module(),
      [&](const std::function<void(const at::Tensor&)>& f) {
        loader.start_epoch(0, 0);
        while (auto b = loader.next()) f(b->inputs.to(device));
      },
      [&](const at::Tensor& x) {
        torch::NoGradGuard ng;
        data::Batch b;
        b.inputs = x;
        b.targets = torch::zeros({x.size(0)}, torch::TensorOptions().dtype(torch::kLong).device(x.device()));
        task->validation_step(b);
      });
}

void SwaCallback::on_save_checkpoint(Trainer&, Checkpoint& c) {
  if (!swa_ || c.state.value("weights_only", false)) return;
  for (const auto& [n, v] : swa_->tensors()) c.extra.tensors.emplace_back("swa.avg." + n, v);
}

void SwaCallback::on_load_checkpoint(Trainer& t, const Checkpoint& c) {
  if (!swa_) swa_.emplace(t.task()->module());
  TensorMap avg = swa_->tensors();
  bool any = false;
  for (auto& [n, v] : avg) {
    if (const at::Tensor* a = c.extra.find("swa.avg." + n)) {
      v = a->clone();
      any = true;
    }
  }
  if (any) swa_->load(avg, pending_count_);
}

nlohmann::json SwaCallback::state() const { return {{"averaged", averaged()}, {"lr0", lr0_}}; }

void SwaCallback::load_state(const nlohmann::json& s) {
  pending_count_ = s.value("averaged", std::int64_t{0});
  lr0_ = s.value("lr0", std::vector<double>{});
}

}  // namespace glassbox::train
