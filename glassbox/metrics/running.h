// Streaming metrics used by the training loops.
//
//   MeanMetric loss;  loss.update(batch_loss, batch_size);  loss.compute();
//   AccuracyMetric acc(/*k=*/1);  acc.update(logits, targets);  acc.compute();
//
// Values accumulate in double on the host; updating from device tensors synchronises once per
// call. Thread safety: not thread-safe.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace glassbox::metrics {

// Number of samples whose target is among the k highest logits. logits [N, K], targets [N].
std::int64_t count_topk_correct(const at::Tensor& logits, const at::Tensor& targets, std::int64_t k = 1);

class MeanMetric {
 public:
  void update(double value, double weight = 1.0) {
    sum_ += value * weight;
    weight_ += weight;
  }
  double compute() const { return weight_ > 0 ? sum_ / weight_ : 0.0; }
  double weight() const { return weight_; }
  void reset() { sum_ = weight_ = 0.0; }

 private:
  double sum_ = 0.0;
  double weight_ = 0.0;
};

class AccuracyMetric {
 public:
  explicit AccuracyMetric(std::int64_t k = 1) : k_(k) {}
  void update(const at::Tensor& logits, const at::Tensor& targets);
  double compute() const { return total_ > 0 ? static_cast<double>(correct_) / static_cast<double>(total_) : 0.0; }
  std::int64_t total() const { return total_; }
  void reset() { correct_ = total_ = 0; }

 private:
  std::int64_t k_;
  std::int64_t correct_ = 0;
  std::int64_t total_ = 0;
};

}  // namespace glassbox::metrics
