#include "glassbox/metrics/running.h"

#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::metrics {

std::int64_t count_topk_correct(const at::Tensor& logits, const at::Tensor& targets, std::int64_t k) {
  GB_CHECK(logits.dim() == 2 && targets.dim() == 1 && logits.size(0) == targets.size(0), InvalidArgument,
           "accuracy needs logits [N, K] and targets [N], got " << logits.sizes() << " and " << targets.sizes(),
           "check the model output");
  if (logits.size(0) == 0) return 0;
  k = std::min<std::int64_t>(k, logits.size(1));
  if (k == 1) return logits.argmax(1).eq(targets).sum().item<std::int64_t>();
  at::Tensor top = std::get<1>(logits.topk(k, 1));
  return top.eq(targets.unsqueeze(1)).any(1).sum().item<std::int64_t>();
}

void AccuracyMetric::update(const at::Tensor& logits, const at::Tensor& targets) {
  correct_ += count_topk_correct(logits, targets, k_);
  total_ += targets.size(0);
}

}  // namespace glassbox::metrics
