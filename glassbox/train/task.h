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

#include "glassbox/core/task_kind.h"
#include "glassbox/data/dataset.h"
#include "glassbox/nn/losses.h"
#include "glassbox/nn/model.h"
#include "glassbox/train/eval_metrics.h"
#include "glassbox/train/optimizer.h"

namespace glassbox::train {

struct StepOutput {
  at::Tensor loss;    // scalar; the Trainer back-propagates it in training
  at::Tensor logits;  // [B, K] (optional): the outputs the task's metrics read (accuracy, F1, R², ...)
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
  // What the outputs mean; the Trainer's validation and test metrics follow it.
  virtual TaskKind kind() const { return TaskKind::kClassification; }
  virtual std::unique_ptr<EvalMetrics> eval_metrics() const { return make_eval_metrics(kind()); }
};

// A zoo (or any) Model trained with a Loss, for one kind of task:
//   classification  targets [B] int64 (a MixUp batch: timm's soft targets for the loss)
//   regression      targets [B, T] float32 (a MixUp batch: the targets mixed with the same weights)
//   multilabel      targets [B, L] 0/1 float32 (mixed like regression's)
class ModelTask : public TaskModule {
 public:
  ModelTask(TaskKind kind, std::unique_ptr<nn::Model> model, nn::Loss loss);
  torch::nn::Module& module() override { return *model_->module(); }
  std::shared_ptr<torch::nn::Module> module_ptr() override { return model_->module(); }
  std::string name() const override { return model_->name(); }
  StepOutput training_step(const data::Batch& batch) override;
  // The model's stages that own parameters.
  std::vector<std::string> blocks() override;
  TaskKind kind() const override { return kind_; }
  nn::Model& model() { return *model_; }

 private:
  TaskKind kind_;
  std::unique_ptr<nn::Model> model_;
  nn::Loss loss_;
};

class ClassificationTask final : public ModelTask {
 public:
  ClassificationTask(std::unique_ptr<nn::Model> model, nn::Loss loss)
      : ModelTask(TaskKind::kClassification, std::move(model), std::move(loss)) {}
};

}  // namespace glassbox::train
