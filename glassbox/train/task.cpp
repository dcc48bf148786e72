#include "glassbox/train/task.h"

#include <torch/torch.h>

#include "glassbox/nn/blocks.h"

namespace glassbox::train {

ClassificationTask::ClassificationTask(std::unique_ptr<nn::Model> model, nn::Loss loss)
    : model_(std::move(model)), loss_(std::move(loss)) {}

StepOutput ClassificationTask::training_step(const data::Batch& batch) {
  at::Tensor logits = model_->forward(batch.inputs);
  // Under autocast the logits may be bf16/fp16; the loss is computed in float32 for stability.
  if (logits.scalar_type() != at::kFloat && logits.is_floating_point() && logits.scalar_type() != at::kDouble)
    logits = logits.to(at::kFloat);
  // A MixUp/CutMix batch: the loss sees timm's soft targets, built from the original labels
  // (which the trainer's metrics keep using).
  if (batch.mix_lambda.defined() && batch.targets.dim() == 1) {
    const at::Tensor soft =
        nn::mixup_targets(batch.targets, batch.mix_lambda, logits.size(1), loss_.options().label_smoothing);
    return {loss_(logits, soft), logits};
  }
  return {loss_(logits, batch.targets), logits};
}

std::vector<std::string> ClassificationTask::blocks() { return nn::parameter_blocks(*model_); }

}  // namespace glassbox::train
