#include "glassbox/train/task.h"

#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/nn/blocks.h"

namespace glassbox::train {

ModelTask::ModelTask(TaskKind kind, std::unique_ptr<nn::Model> model, nn::Loss loss)
    : kind_(kind), model_(std::move(model)), loss_(std::move(loss)) {}

StepOutput ModelTask::training_step(const data::Batch& batch) {
  at::Tensor logits = model_->forward(batch.inputs);
  // Under autocast the logits may be bf16/fp16; the loss is computed in float32 for stability.
  if (logits.scalar_type() != at::kFloat && logits.is_floating_point() && logits.scalar_type() != at::kDouble)
    logits = logits.to(at::kFloat);
  if (kind_ != TaskKind::kClassification) {
    GB_CHECK(
        batch.targets.is_floating_point() && batch.targets.dim() == 2 && batch.targets.sizes() == logits.sizes(),
        InvalidArgument,
        "a " << name_of(kind_) << " task needs float targets of the outputs' shape " << logits.sizes() << ", got "
             << batch.targets.scalar_type() << " " << batch.targets.sizes(),
        "load the data with data.task = \"" + std::string(name_of(kind_)) + "\" (and one target column per output)");
    // A mixed batch: the targets mixed with the inputs' weights (sample i with sample B-1-i).
    if (batch.mix_lambda.defined()) {
      const at::Tensor l = batch.mix_lambda.to(logits.device(), at::kFloat).view({-1, 1});
      const at::Tensor y = batch.targets.to(at::kFloat);
      return {loss_(logits, y * l + y.flip(0) * (1 - l)), logits};
    }
    return {loss_(logits, batch.targets), logits};
  }
  // A MixUp/CutMix batch: the loss sees timm's soft targets, built from the original labels
  // (which the trainer's metrics keep using).
  if (batch.mix_lambda.defined() && batch.targets.dim() == 1) {
    const at::Tensor soft =
        nn::mixup_targets(batch.targets, batch.mix_lambda, logits.size(1), loss_.options().label_smoothing);
    return {loss_(logits, soft), logits};
  }
  return {loss_(logits, batch.targets), logits};
}

std::vector<std::string> ModelTask::blocks() { return nn::parameter_blocks(*model_); }

}  // namespace glassbox::train
