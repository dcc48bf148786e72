// Weight averaging: an exponential moving average of the weights (timm's ModelEmaV2, with
// ModelEmaV3's warm-up) and stochastic weight averaging (torch.optim.swa_utils' AveragedModel and
// update_bn), as the tensors they keep beside a model, and the callbacks that run them in the
// Trainer.
//
//   ModelEma ema(module, {.decay = 0.999});
//   ... after each optimiser step: ema.update(module, trainer.global_step());
//   ema.copy_to(module);                 // the averaged weights into the model
//
//   SwaAverage swa(module);
//   swa.update(module);                  // once per epoch from swa_epoch_start
//   swa.copy_to(module); update_bn(module, batches);   // then recompute BatchNorm statistics
//
// Thread safety: one training thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include "glassbox/base/config.h"
#include "glassbox/core/safetensors.h"
#include "glassbox/train/callback.h"

namespace glassbox::train {

struct EmaOptions {
  bool enabled = false;
  double decay = 0.9999;
  // ModelEmaV3's warm-up: decay = 1 - (1 + step / gamma)^-power, capped at `decay`.
  bool warmup = false;
  double warmup_gamma = 1.0;
  double warmup_power = 2.0 / 3.0;
  double min_decay = 0.0;
  std::int64_t update_after_step = 0;  // warm-up only: steps before the average starts following
  std::int64_t every_n_steps = 1;
  bool validate = true;  // validate (and pick the best checkpoint) with the averaged weights

  void visit(FieldVisitor& v);
  void validate_options() const;
};

// Every floating-point parameter and buffer averaged; integer buffers copied.
class ModelEma {
 public:
  ModelEma(const torch::nn::Module& module, EmaOptions options);
  // The decay of the update at optimiser step `step` (1 for the first); without warm-up, `decay`.
  double decay_at(std::int64_t step) const;
  // Without warm-up: ema = decay * ema + (1 - decay) * weights (ModelEmaV2); with warm-up:
  // ema.lerp_(weights, 1 - decay_at(step)) (ModelEmaV3).
  void update(const torch::nn::Module& module, std::int64_t step);
  void copy_to(torch::nn::Module& module) const;
  // The module's tensors and the average's swapped (validation with the averaged weights).
  void swap(torch::nn::Module& module);
  const TensorMap& tensors() const { return tensors_; }
  void load(const TensorMap& tensors);  // names must match the module's

 private:
  EmaOptions options_;
  TensorMap tensors_;
};

struct SwaOptions {
  bool enabled = false;
  double epoch_start = 0.8;  // fraction of max_epochs (< 1) or an epoch index (>= 1)
  double lr = 0.0;           // SWALR's swa_lr for every group; 0: keep the configured schedule
  std::int64_t anneal_epochs = 10;
  std::string anneal_strategy = "cos";  // cos | linear

  void visit(FieldVisitor& v);
  void validate() const;
};

// AveragedModel's equal average of the parameters (use_buffers = False): the first update copies,
// the n-th moves the average by (weights - average) / n.
class SwaAverage {
 public:
  explicit SwaAverage(const torch::nn::Module& module);
  void update(const torch::nn::Module& module);
  std::int64_t count() const { return n_; }
  void copy_to(torch::nn::Module& module) const;  // parameters only; then update_bn
  const TensorMap& tensors() const { return tensors_; }
  void load(const TensorMap& tensors, std::int64_t count);

 private:
  TensorMap tensors_;
  std::int64_t n_ = 0;
};

// torch.optim.swa_utils.update_bn: BatchNorm running statistics reset and recomputed as a
// cumulative average over `batches` (momentum None) in train mode; the model's mode and the
// momenta are restored. `forward` is called on each batch's inputs.
void update_bn(torch::nn::Module& module,
               const std::function<void(const std::function<void(const at::Tensor&)>&)>& batches,
               const std::function<void(const at::Tensor&)>& forward);

// The EMA in training: updated after every `every_n_steps`-th optimiser step; with `validate`,
// validation (and so the best checkpoint and early stopping) sees the averaged weights, every
// checkpoint's model.safetensors holds them (the training weights go to extra.safetensors as
// "ema.raw.<name>", so a resume continues exactly), and they replace the weights at the end of fit.
class EmaCallback final : public Callback {
 public:
  explicit EmaCallback(EmaOptions options) : options_(options) { options_.validate_options(); }
  std::string name() const override { return "EMA"; }
  void on_fit_start(Trainer& t) override;
  void on_train_batch_end(Trainer& t, const StepOutput&, const data::Batch&) override;
  void on_validation_start(Trainer& t) override;
  void on_validation_end(Trainer& t) override;
  void on_fit_end(Trainer& t) override;
  void on_exception(Trainer& t, const std::exception&) override;
  void on_save_checkpoint(Trainer& t, Checkpoint& c) override;
  void on_load_checkpoint(Trainer& t, const Checkpoint& c) override;
  const ModelEma* average() const { return ema_ ? &*ema_ : nullptr; }

 private:
  void ensure(Trainer& t);
  EmaOptions options_;
  std::optional<ModelEma> ema_;
  std::int64_t last_step_ = -1;
  bool swapped_ = false;
};

// Lightning's StochasticWeightAveraging: from epoch_start on, the learning rate anneals to swa.lr
// (SWALR) and the parameters are averaged at each epoch's end; at the end of fit the average
// replaces the weights and BatchNorm statistics are recomputed over the training set (update_bn).
class SwaCallback final : public Callback {
 public:
  explicit SwaCallback(SwaOptions options) : options_(std::move(options)) { options_.validate(); }
  std::string name() const override { return "SWA"; }
  void on_fit_start(Trainer& t) override;
  void on_train_epoch_start(Trainer& t) override;
  void on_train_batch_start(Trainer& t, const data::Batch&) override;
  void on_train_epoch_end(Trainer& t) override;
  void on_fit_end(Trainer& t) override;
  void on_save_checkpoint(Trainer& t, Checkpoint& c) override;
  void on_load_checkpoint(Trainer& t, const Checkpoint& c) override;
  nlohmann::json state() const override;
  void load_state(const nlohmann::json& s) override;
  // The first averaged epoch (0-based) for a run of max_epochs.
  std::int64_t start_epoch(std::int64_t max_epochs) const;
  // SWALR's learning rate `k` epochs after the start, from lr0 (the rate when averaging began).
  double swa_lr(std::int64_t k, double lr0) const;
  std::int64_t averaged() const { return swa_ ? swa_->count() : 0; }

 private:
  SwaOptions options_;
  std::optional<SwaAverage> swa_;
  std::vector<double> lr0_;  // per group, when the annealing began
  std::int64_t start_ = 0;
  std::int64_t pending_count_ = 0;  // from a resumed checkpoint's state
};

}  // namespace glassbox::train
