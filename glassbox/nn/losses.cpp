#include "glassbox/nn/losses.h"

#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::nn {

namespace F = torch::nn::functional;

void LossOptions::visit(FieldVisitor& v) {
  v.choice("name", name, "loss function");
  v.field("label_smoothing", label_smoothing, "cross_entropy: share of probability mass spread uniformly");
  v.field("class_weights", class_weights, "cross_entropy: one weight per class (empty: none)");
  v.field("alpha", alpha, "focal: weighting factor");
  v.field("gamma", gamma, "focal: focusing exponent");
  v.choice("reduction", reduction, "how per-sample losses are combined");
}

void LossOptions::validate() const {
  GB_CHECK(label_smoothing >= 0 && label_smoothing <= 1, InvalidArgument,
           "loss.label_smoothing must be in [0, 1], got " << label_smoothing, "use e.g. 0.1");
  GB_CHECK(gamma >= 0, InvalidArgument, "loss.gamma must be >= 0, got " << gamma, "use 2 (the usual value)");
  GB_CHECK(alpha > 0, InvalidArgument, "loss.alpha must be > 0, got " << alpha, "use 1 or e.g. 0.25");
  for (double w : class_weights)
    GB_CHECK(w >= 0, InvalidArgument, "loss.class_weights must be >= 0, got " << w, "use positive weights");
  GB_CHECK(!(name == LossKind::kFocal && label_smoothing > 0), InvalidArgument,
           "loss.label_smoothing = " << label_smoothing
                                     << " with the focal loss: both lower confidence and together starve the gradient",
           "set loss.label_smoothing = 0 when loss.name = \"focal\"");
}

Loss::Loss(LossOptions options, std::int64_t num_classes) : options_(std::move(options)) {
  options_.validate();
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
  switch (o.name) {
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
    case LossKind::kFocal: break;
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
