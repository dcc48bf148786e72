#include "glassbox/nn/losses.h"

#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::nn {

namespace F = torch::nn::functional;

void LossOptions::visit(FieldVisitor& v) {
  v.choice("name", name,
           "loss function: auto (the task's usual one) | cross_entropy | focal (classification) | mse | mae | huber "
           "(regression) | bce (multilabel)");
  v.field("label_smoothing", label_smoothing, "cross_entropy: share of probability mass spread uniformly");
  v.field("class_weights", class_weights, "cross_entropy: one weight per class (empty: none)");
  v.field("alpha", alpha, "focal: weighting factor");
  v.field("gamma", gamma, "focal: focusing exponent");
  v.field("delta", delta, "huber: the error where the loss turns from quadratic to linear");
  v.field("pos_weight", pos_weight, "bce: one weight per label for its positive samples (empty: none)");
  v.choice("reduction", reduction, "how per-sample losses are combined");
}

void LossOptions::validate() const {
  GB_CHECK(label_smoothing >= 0 && label_smoothing <= 1, InvalidArgument,
           "loss.label_smoothing must be in [0, 1], got " << label_smoothing, "use e.g. 0.1");
  GB_CHECK(gamma >= 0, InvalidArgument, "loss.gamma must be >= 0, got " << gamma, "use 2 (the usual value)");
  GB_CHECK(alpha > 0, InvalidArgument, "loss.alpha must be > 0, got " << alpha, "use 1 or e.g. 0.25");
  for (double w : class_weights)
    GB_CHECK(w >= 0, InvalidArgument, "loss.class_weights must be >= 0, got " << w, "use positive weights");
  for (double w : pos_weight)
    GB_CHECK(w >= 0, InvalidArgument, "loss.pos_weight must be >= 0, got " << w, "use positive weights");
  GB_CHECK(delta > 0, InvalidArgument, "loss.delta must be > 0, got " << delta, "use 1 (PyTorch's default)");
  GB_CHECK(!(name == LossKind::kFocal && label_smoothing > 0), InvalidArgument,
           "loss.label_smoothing = " << label_smoothing
                                     << " with the focal loss: both lower confidence and together starve the gradient",
           "set loss.label_smoothing = 0 when loss.name = \"focal\"");
}

LossKind resolve_loss(LossKind name, TaskKind task) {
  if (name != LossKind::kAuto) return name;
  switch (task) {
    case TaskKind::kClassification: return LossKind::kCrossEntropy;
    case TaskKind::kRegression: return LossKind::kMse;
    case TaskKind::kMultilabel: return LossKind::kBce;
  }
  return LossKind::kCrossEntropy;
}

void check_loss_for_task(const LossOptions& o, TaskKind task) {
  const LossKind name = resolve_loss(o.name, task);
  const bool fits = [&] {
    switch (task) {
      case TaskKind::kClassification: return name == LossKind::kCrossEntropy || name == LossKind::kFocal;
      case TaskKind::kRegression: return name == LossKind::kMse || name == LossKind::kMae || name == LossKind::kHuber;
      case TaskKind::kMultilabel: return name == LossKind::kBce;
    }
    return false;
  }();
  const char* usual = task == TaskKind::kClassification ? "cross_entropy or focal"
                      : task == TaskKind::kRegression   ? "mse, mae or huber"
                                                        : "bce";
  GB_CHECK(fits, InvalidArgument,
           "loss.name = \"" << name_of(name) << "\" does not fit data.task = \"" << name_of(task) << "\"",
           std::string("use ") + usual + " (or \"auto\")");
  GB_CHECK(task == TaskKind::kClassification || (o.label_smoothing == 0 && o.class_weights.empty()), InvalidArgument,
           "loss.label_smoothing and loss.class_weights apply to classification, not data.task = \"" << name_of(task)
                                                                                                     << "\"",
           task == TaskKind::kMultilabel ? "weigh each label's positives with loss.pos_weight" : "remove them");
  GB_CHECK(task == TaskKind::kMultilabel || o.pos_weight.empty(), InvalidArgument,
           "loss.pos_weight applies to multi-label tasks (bce)", "use loss.class_weights for classification");
}

Loss::Loss(LossOptions options, std::int64_t num_classes, TaskKind task) : options_(std::move(options)) {
  options_.validate();
  check_loss_for_task(options_, task);
  options_.name = resolve_loss(options_.name, task);
  if (!options_.pos_weight.empty()) {
    GB_CHECK(
        static_cast<std::int64_t>(options_.pos_weight.size()) == num_classes, InvalidArgument,
        "loss.pos_weight has " << options_.pos_weight.size() << " entries, the model has " << num_classes << " labels",
        "give one weight per label");
    pos_weight_ = torch::tensor(options_.pos_weight, torch::kFloat);
  }
  if (!options_.class_weights.empty()) {
    GB_CHECK(static_cast<std::int64_t>(options_.class_weights.size()) == num_classes, InvalidArgument,
             "loss.class_weights has " << options_.class_weights.size() << " entries, the model has " << num_classes
                                       << " classes",
             "give one weight per class");
    weights_ = torch::tensor(options_.class_weights, torch::kFloat);
  }
}

at::Tensor mixup_targets(const at::Tensor& targets, const at::Tensor& lam, std::int64_t num_classes, double smoothing) {
  const double off = smoothing / static_cast<double>(num_classes);
  const double on = 1.0 - smoothing + off;
  const at::Tensor y1 = torch::full({targets.size(0), num_classes}, off,
                                    torch::TensorOptions().dtype(torch::kFloat).device(targets.device()))
                            .scatter_(1, targets.to(torch::kLong).view({-1, 1}), on);
  const at::Tensor l = lam.to(y1.device(), torch::kFloat).view({-1, 1});
  return y1 * l + y1.flip(0) * (1 - l);
}

at::Tensor Loss::operator()(const at::Tensor& logits, const at::Tensor& targets) const {
  const auto& o = options_;
  const bool soft = targets.is_floating_point();
  if (soft) {
    GB_CHECK(targets.sizes() == logits.sizes(), InvalidArgument,
             "soft targets " << targets.sizes() << " do not match the logits " << logits.sizes(), "");
  }
  const auto reduce = [&](const at::Tensor& per_element) {
    switch (o.reduction) {
      case Reduction::kMean: return per_element.mean();
      case Reduction::kSum: return per_element.sum();
      case Reduction::kNone: break;
    }
    return per_element;
  };
  switch (o.name) {
    case LossKind::kMse:
    case LossKind::kMae:
    case LossKind::kHuber:
    case LossKind::kBce: {
      GB_CHECK(soft, InvalidArgument,
               "loss." << name_of(o.name) << " needs real-valued targets, got " << targets.scalar_type() << " labels",
               "set data.task to \"regression\" or \"multilabel\" for these targets");
      const at::Tensor y = targets.to(logits.scalar_type());
      if (o.name == LossKind::kMse) return reduce((logits - y).square());
      if (o.name == LossKind::kMae) return reduce((logits - y).abs());
      if (o.name == LossKind::kHuber) {
        return reduce(F::huber_loss(logits, y, F::HuberLossFuncOptions().reduction(torch::kNone).delta(o.delta)));
      }
      auto opts = F::BinaryCrossEntropyWithLogitsFuncOptions().reduction(torch::kNone);
      if (pos_weight_.defined()) opts = opts.pos_weight(pos_weight_.to(logits.device(), logits.scalar_type()));
      return reduce(F::binary_cross_entropy_with_logits(logits, y, opts));
    }
    case LossKind::kCrossEntropy: {
      auto opts = F::CrossEntropyFuncOptions().label_smoothing(soft ? 0.0 : o.label_smoothing);
      if (weights_.defined()) opts = opts.weight(weights_.to(logits.device(), logits.scalar_type()));
      switch (o.reduction) {
        case Reduction::kMean: opts = opts.reduction(torch::kMean); break;
        case Reduction::kSum: opts = opts.reduction(torch::kSum); break;
        case Reduction::kNone: opts = opts.reduction(torch::kNone); break;
      }
      return F::cross_entropy(logits, targets, opts);
    }
    case LossKind::kFocal:
    case LossKind::kAuto: break;  // auto was resolved at construction
  }
  at::Tensor ce = F::cross_entropy(logits, soft ? targets.to(logits.scalar_type()) : targets,
                                   F::CrossEntropyFuncOptions().reduction(torch::kNone));
  at::Tensor pt = torch::exp(-ce);
  at::Tensor loss = o.alpha * torch::pow(1 - pt, o.gamma) * ce;
  switch (o.reduction) {
    case Reduction::kMean: return loss.mean();
    case Reduction::kSum: return loss.sum();
    case Reduction::kNone: break;
  }
  return loss;
}

}  // namespace glassbox::nn
