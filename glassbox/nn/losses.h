// Classification losses.
//
//   cross_entropy: PyTorch's F.cross_entropy with label_smoothing and per-class weights.
//   focal: alpha * (1 - p_t)^gamma * CE, with p_t = exp(-CE) (the usual definition), where CE is
//          the unweighted, unsmoothed per-sample cross-entropy; reduction mean | sum | none.
//
//   LossOptions o; o.name = LossKind::kFocal; o.gamma = 2; o.alpha = 0.75;
//   Loss loss(o, /*num_classes=*/10);
//   at::Tensor l = loss(logits, targets);   // logits [N, K] float, targets [N] int64 -> scalar
//
// Soft targets ([N, K] float probabilities, e.g. mixup_targets' of a MixUp/CutMix batch) are
// used as they are - label smoothing is then already in them: cross_entropy is
// sum_k -w_k y_k log p_k per sample (timm's SoftTargetCrossEntropy when unweighted), and focal
// uses that soft CE as its CE.
//
// Thread safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "glassbox/base/config.h"

namespace glassbox::nn {

enum class LossKind { kCrossEntropy, kFocal };
constexpr NameTable<LossKind, 2> enum_names(LossKind) {
  return {{{LossKind::kCrossEntropy, "cross_entropy"}, {LossKind::kFocal, "focal"}}};
}
static_assert(is_complete_table(enum_names(LossKind{})));

enum class Reduction { kMean, kSum, kNone };
constexpr NameTable<Reduction, 3> enum_names(Reduction) {
  return {{{Reduction::kMean, "mean"}, {Reduction::kSum, "sum"}, {Reduction::kNone, "none"}}};
}
static_assert(is_complete_table(enum_names(Reduction{})));

struct LossOptions {
  LossKind name = LossKind::kCrossEntropy;
  double label_smoothing = 0.0;
  std::vector<double> class_weights;  // empty: unweighted; else one weight per class
  double alpha = 1.0;                 // focal
  double gamma = 2.0;                 // focal
  Reduction reduction = Reduction::kMean;

  void visit(FieldVisitor& v);
  void validate() const;
};

// timm's mixup_target: lam_i * y_i + (1 - lam_i) * y_{N-1-i}, each y one-hot with `smoothing`
// (on 1 - smoothing + smoothing / K, off smoothing / K). targets [N] int64, lam [N] float32.
at::Tensor mixup_targets(const at::Tensor& targets, const at::Tensor& lam, std::int64_t num_classes, double smoothing);

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
