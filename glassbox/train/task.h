// TaskModule: what is trained — the model, its loss, and its steps — separated from the data
// (DataModule) and the loop (Trainer), as in PyTorch Lightning.
//
//   class MyTask : public TaskModule {
//     torch::nn::Module& module() override { return *net_; }
//     StepOutput training_step(const data::Batch& b) override {
//       at::Tensor logits = net_->forward(b.inputs);
//       return {torch::cross_entropy_loss(logits, b.targets), logits};
//     }
//   };
//
// The Trainer moves module() to the device, switches train/eval, builds the optimiser from
// param_groups(), and calls the steps inside the precision context (autocast).
// Thread safety: steps are called from the training thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include "glassbox/data/dataset.h"
#include "glassbox/nn/losses.h"
#include "glassbox/nn/model.h"
#include "glassbox/train/optimizer.h"

namespace glassbox::train {

struct StepOutput {
  at::Tensor loss;    // scalar; the Trainer back-propagates it in training
  at::Tensor logits;  // [B, K] (optional): enables accuracy logging
};

class TaskModule {
 public:
  virtual ~TaskModule() = default;
  virtual torch::nn::Module& module() = 0;
  virtual std::shared_ptr<torch::nn::Module> module_ptr() = 0;
  virtual std::string name() const { return "task"; }
  virtual StepOutput training_step(const data::Batch& batch) = 0;
  // Default: the training step's computation without gradients.
  virtual StepOutput validation_step(const data::Batch& batch) { return training_step(batch); }
  virtual StepOutput test_step(const data::Batch& batch) { return validation_step(batch); }
  // Default: make_param_groups(module(), options).
  virtual std::vector<ParamGroup> param_groups(const OptimizerOptions& options) {
    return make_param_groups(module(), options);
  }
  // The model's blocks for trainer.freeze_blocks: module paths in forward order (empty: none).
  virtual std::vector<std::string> blocks() { return {}; }
};

// Classification with a zoo (or any) Model and a Loss.
class ClassificationTask final : public TaskModule {
 public:
  ClassificationTask(std::unique_ptr<nn::Model> model, nn::Loss loss);
  torch::nn::Module& module() override { return *model_->module(); }
  std::shared_ptr<torch::nn::Module> module_ptr() override { return model_->module(); }
  std::string name() const override { return model_->name(); }
  StepOutput training_step(const data::Batch& batch) override;
  // The model's stages that own parameters.
  std::vector<std::string> blocks() override;
  nn::Model& model() { return *model_; }

 private:
  std::unique_ptr<nn::Model> model_;
  nn::Loss loss_;
};

}  // namespace glassbox::train
