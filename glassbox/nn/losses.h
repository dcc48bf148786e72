// Classification losses.
//
//   cross_entropy: PyTorch's F.cross_entropy with label_smoothing and per-class weights.
//   focal: alpha * (1 - p_t)^gamma * CE, with p_t = exp(-CE) (the usual definition), where CE is
//          the unweighted, unsmoothed per-sample cross-entropy; reduction mean | sum | none.
//
//   LossOptions o; o.name = "focal"; o.gamma = 2; o.alpha = 0.75;
//   Loss loss(o, /*num_classes=*/10);
//   at::Tensor l = loss(logits, targets);   // logits [N, K] float, targets [N] int64 -> scalar
//
// Thread safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "glassbox/base/config.h"

namespace glassbox::nn {

struct LossOptions {
  std::string name = "cross_entropy";  // cross_entropy | focal
  double label_smoothing = 0.0;
  std::vector<double> class_weights;  // empty: unweighted; else one weight per class
  double alpha = 1.0;                 // focal
  double gamma = 2.0;                 // focal
  std::string reduction = "mean";     // mean | sum | none

  void visit(FieldVisitor& v);
  void validate() const;
};

class Loss {
 public:
  Loss(LossOptions options, std::int64_t num_classes);
  at::Tensor operator()(const at::Tensor& logits, const at::Tensor& targets) const;
  const LossOptions& options() const { return options_; }

 private:
  LossOptions options_;
  at::Tensor weights_;  // [K] float32 or undefined
};

}  // namespace glassbox::nn
