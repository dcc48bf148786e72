// Losses: classification, regression and multi-label.
//
//   auto:          the task's usual loss: cross_entropy, mse (regression) or bce (multilabel)
//   cross_entropy: PyTorch's F.cross_entropy with label_smoothing and per-class weights.
//   focal: alpha * (1 - p_t)^gamma * CE, with p_t = exp(-CE) (the usual definition), where CE is
//          the unweighted, unsmoothed per-sample cross-entropy; reduction mean | sum | none.
//   mse, mae, huber (regression): F.mse_loss, F.l1_loss, F.huber_loss(delta) on [N, T] float
//          targets, averaged over every element (PyTorch's "mean").
//   bce (multilabel): F.binary_cross_entropy_with_logits with pos_weight (one per label), on
//          [N, L] 0/1 targets.
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
#include "glassbox/core/task_kind.h"

namespace glassbox::nn {

enum class LossKind { kCrossEntropy, kFocal, kMse, kMae, kHuber, kBce, kAuto };
constexpr NameTable<LossKind, 7> enum_names(LossKind) {
  return {{{LossKind::kCrossEntropy, "cross_entropy"},
           {LossKind::kFocal, "focal"},
           {LossKind::kMse, "mse"},
           {LossKind::kMae, "mae"},
           {LossKind::kHuber, "huber"},
           {LossKind::kBce, "bce"},
           {LossKind::kAuto, "auto"}}};
}
static_assert(is_complete_table(enum_names(LossKind{})));

enum class Reduction { kMean, kSum, kNone };
constexpr NameTable<Reduction, 3> enum_names(Reduction) {
  return {{{Reduction::kMean, "mean"}, {Reduction::kSum, "sum"}, {Reduction::kNone, "none"}}};
}
static_assert(is_complete_table(enum_names(Reduction{})));

struct LossOptions {
  LossKind name = LossKind::kAuto;
  double label_smoothing = 0.0;
  std::vector<double> class_weights;  // empty: unweighted; else one weight per class
  double alpha = 1.0;                 // focal
  double gamma = 2.0;                 // focal
  double delta = 1.0;                 // huber: where the loss turns from quadratic to linear
  std::vector<double> pos_weight;     // bce: one weight per label for its positives (empty: none)
  Reduction reduction = Reduction::kMean;

  void visit(FieldVisitor& v);
  void validate() const;
};

// The loss `name` stands for with `task`: auto resolved, else `name` itself.
LossKind resolve_loss(LossKind name, TaskKind task);
// InvalidArgument naming loss.name when it does not fit the task (e.g. mse for classification),
// or an option that applies to another task (label_smoothing, class_weights, pos_weight).
void check_loss_for_task(const LossOptions& options, TaskKind task);

// timm's mixup_target: lam_i * y_i + (1 - lam_i) * y_{N-1-i}, each y one-hot with `smoothing`
// (on 1 - smoothing + smoothing / K, off smoothing / K). targets [N] int64, lam [N] float32.
at::Tensor mixup_targets(const at::Tensor& targets, const at::Tensor& lam, std::int64_t num_classes, double smoothing);

class Loss {
 public:
  // num_classes: the output width (classes, targets or labels). name = auto is resolved for `task`.
  Loss(LossOptions options, std::int64_t num_classes, TaskKind task = TaskKind::kClassification);
  at::Tensor operator()(const at::Tensor& logits, const at::Tensor& targets) const;
  const LossOptions& options() const { return options_; }

 private:
  LossOptions options_;
  at::Tensor weights_;     // [K] float32 or undefined
  at::Tensor pos_weight_;  // [L] float32 or undefined
};

}  // namespace glassbox::nn
