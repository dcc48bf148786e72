// Model: the interface behind which glassbox holds "any model" — a zoo model or a user's module.
//
//   std::unique_ptr<Model> m = make_model(opts, ModelShape{{1, 28, 28}, 10});
//   at::Tensor logits = m->forward(x);        // x: [N, 1, 28, 28] float32 -> [N, 10]
//   m->module()->named_parameters();          // the underlying torch::nn::Module
//
// Ownership: a Model owns its module through a shared_ptr (LibTorch's modules are shared).
// Thread safety: forward on one module from several threads is safe only in eval mode with
// no_grad; training is single-threaded.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include "glassbox/base/config.h"

namespace glassbox::nn {

// What a model is built for: one input sample's shape and the number of outputs.
struct ModelShape {
  std::vector<std::int64_t> input_shape;  // e.g. {1, 28, 28} or {F}
  std::int64_t num_classes = 10;
};

// One step of a model whose forward is a chain: the output of one stage is the input of the
// next, and running every stage in order is exactly forward(). Explanations (Grad-CAM) split a
// forward at a stage to read its output and the gradient there — the C++ frontend has no hooks.
// name: the module path of the stage's output ("layer4.1", "features.relu1_1", "fc").
struct Stage {
  std::string name;
  std::function<at::Tensor(const at::Tensor&)> run;
  bool spatial = false;  // the output is a feature map [N, C, H, W]
};

// Evaluation mode for a scope, the module's own mode again afterwards (exceptions included).
//   { EvalModeScope eval(*model->module()); ... }
class EvalModeScope {
 public:
  explicit EvalModeScope(torch::nn::Module& m) : m_(m), was_training_(m.is_training()) { m_.eval(); }
  ~EvalModeScope() { m_.train(was_training_); }
  EvalModeScope(const EvalModeScope&) = delete;
  EvalModeScope& operator=(const EvalModeScope&) = delete;

 private:
  torch::nn::Module& m_;  // non-owning; outlives the scope
  bool was_training_;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual at::Tensor forward(const at::Tensor& x) = 0;
  virtual std::shared_ptr<torch::nn::Module> module() = 0;
  virtual std::string name() const = 0;
  // The forward as a chain of stages; empty when the model does not say (then only methods that
  // need the input's gradient alone, such as saliency, apply).
  virtual std::vector<Stage> stages() { return {}; }
  // Gradient checkpointing of the model's blocks (nn/checkpointing.h); false when the model has
  // none to checkpoint.
  virtual bool set_gradient_checkpointing(bool on) { return !on; }
};

// Wraps a TORCH_MODULE holder (e.g. Mlp) whose forward takes one tensor.
template <class Holder>
class ModuleModel final : public Model {
 public:
  ModuleModel(std::string name, Holder holder) : name_(std::move(name)), holder_(std::move(holder)) {}
  at::Tensor forward(const at::Tensor& x) override { return holder_->forward(x); }
  std::shared_ptr<torch::nn::Module> module() override { return holder_.ptr(); }
  std::string name() const override { return name_; }
  std::vector<Stage> stages() override {
    if constexpr (requires { holder_->stages(); }) {
      return holder_->stages();
    } else {
      return {};
    }
  }
  bool set_gradient_checkpointing(bool on) override {
    if constexpr (requires { holder_->set_checkpointing(on); }) {
      holder_->set_checkpointing(on);
      return true;
    } else {
      return !on;
    }
  }
  Holder& holder() { return holder_; }

 private:
  std::string name_;
  Holder holder_;
};

}  // namespace glassbox::nn
