// Optimisers with PyTorch's update rules, run through LibTorch's multi-tensor kernels:
// SGD (momentum, dampening, Nesterov, weight decay) with _foreach_* ops, Adam and AdamW with the
// fused kernels (_fused_adam_ / _fused_adamw_, CPU and CUDA) or _foreach_* ops.
//
//   OptimizerOptions o; o.name = "adamw"; o.lr = 1e-3; o.weight_decay = 0.01;
//   Optimizer opt(make_param_groups(*module, o), o);
//   opt.zero_grad(); loss.backward(); opt.step();
//   opt.set_lr(0, 5e-4);                       // schedulers write per-group learning rates
//   TensorMap state = opt.state_tensors();      // for checkpoints (safetensors)
//
// Parameters without a gradient are skipped (as in PyTorch). State is created lazily at the
// first step of each parameter. Thread safety: not thread-safe; one training thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

#include "glassbox/base/config.h"
#include "glassbox/core/safetensors.h"

namespace glassbox::train {

enum class OptimizerKind { kSgd, kAdam, kAdamW };
constexpr NameTable<OptimizerKind, 3> enum_names(OptimizerKind) {
  return {{{OptimizerKind::kSgd, "sgd"}, {OptimizerKind::kAdam, "adam"}, {OptimizerKind::kAdamW, "adamw"}}};
}
static_assert(is_complete_table(enum_names(OptimizerKind{})));

// auto: fused where the device supports it, else foreach (PyTorch's own default order).
enum class OptimizerImpl { kAuto, kFused, kForeach };
constexpr NameTable<OptimizerImpl, 3> enum_names(OptimizerImpl) {
  return {{{OptimizerImpl::kAuto, "auto"}, {OptimizerImpl::kFused, "fused"}, {OptimizerImpl::kForeach, "foreach"}}};
}
static_assert(is_complete_table(enum_names(OptimizerImpl{})));

struct OptimizerOptions {
  OptimizerKind name = OptimizerKind::kAdam;
  double lr = 1e-3;
  double weight_decay = 0.0;              // sgd/adam: L2 added to the gradient; adamw: decoupled
  double momentum = 0.0;                  // sgd
  double dampening = 0.0;                 // sgd
  bool nesterov = false;                  // sgd
  std::vector<double> betas{0.9, 0.999};  // adam/adamw
  double eps = 1e-8;
  bool amsgrad = false;
  OptimizerImpl implementation = OptimizerImpl::kAuto;
  bool no_decay_for_bias_and_norm = false;  // put biases and 1-d (norm) weights in a group without weight decay
  double backbone_lr_scale = 1.0;           // the learning rate of everything but the head (last Linear), relative

  void visit(FieldVisitor& v);
  void validate() const;
};

struct ParamGroup {
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
  double lr = 1e-3;
  double weight_decay = 0.0;
  double momentum = 0.0;  // sgd momentum, or adam/adamw beta1 (schedulers may cycle it)
};

// One group (or two with no_decay_for_bias_and_norm) of the module's trainable parameters; with
// backbone_lr_scale != 1 the backbone's (everything but the head, the last Linear layer) come
// first in groups of their own at lr * backbone_lr_scale.
std::vector<ParamGroup> make_param_groups(const torch::nn::Module& module, const OptimizerOptions& options);

class Optimizer {
 public:
  Optimizer(std::vector<ParamGroup> groups, OptimizerOptions options);

  void zero_grad(bool set_to_none = true);
  void step();

  std::size_t num_groups() const { return groups_.size(); }
  // Appends a group (torch.optim.Optimizer.add_param_group): its parameters start with no state.
  void add_param_group(ParamGroup group);
  double lr(std::size_t group) const { return groups_.at(group).lr; }
  void set_lr(std::size_t group, double lr) { groups_.at(group).lr = lr; }
  // SGD's momentum or Adam's beta1 of a group (OneCycle's cycle_momentum).
  void set_momentum(std::size_t group, double m) { groups_.at(group).momentum = m; }
  double momentum(std::size_t group) const { return groups_.at(group).momentum; }
  std::vector<double> lrs() const;
  const std::vector<ParamGroup>& groups() const { return groups_; }
  const OptimizerOptions& options() const { return options_; }
  // "fused" or "foreach": what step() runs.
  const std::string& implementation() const { return impl_; }

  // Checkpoint state: tensors named "<param name>.<slot>" and JSON (lrs, steps).
  TensorMap state_tensors() const;
  nlohmann::json state_json() const;
  // Restores state saved by the same architecture and options; DataLoss/FailedPrecondition
  // errors name the tensors that do not fit.
  void load_state(const SafetensorsFile& tensors, const nlohmann::json& json);

 private:
  struct Slot {  // per-parameter state
    at::Tensor momentum_buffer;
    at::Tensor exp_avg, exp_avg_sq, max_exp_avg_sq;
    at::Tensor step;  // float32 scalar, on the parameter's device
    bool initialised = false;
  };
  void step_sgd(ParamGroup& g, std::vector<Slot>& slots);
  void step_adam(ParamGroup& g, std::vector<Slot>& slots, bool decoupled);

  OptimizerOptions options_;
  std::vector<ParamGroup> groups_;
  std::vector<std::vector<Slot>> slots_;
  std::string impl_;
};

}  // namespace glassbox::train
