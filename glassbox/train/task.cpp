#include "glassbox/train/task.h"

#include <torch/torch.h>

namespace glassbox::train {

ClassificationTask::ClassificationTask(std::unique_ptr<nn::Model> model, nn::Loss loss)
    : model_(std::move(model)), loss_(std::move(loss)) {}

StepOutput ClassificationTask::training_step(const data::Batch& batch) {
  at::Tensor logits = model_->forward(batch.inputs);
  // Under autocast the logits may be bf16/fp16; the loss is computed in float32 for stability.
  if (logits.scalar_type() != at::kFloat && logits.is_floating_point() && logits.scalar_type() != at::kDouble)
    logits = logits.to(at::kFloat);
  return {loss_(logits, batch.targets), logits};
}

}  // namespace glassbox::train
