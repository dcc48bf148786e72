// Tested by nn_test (ZooReference.*: against torchvision; Stages.*; Checkpointing.*).
#include "glassbox/nn/efficientnet.h"

#include <cmath>

#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::nn {

namespace tnn = torch::nn;

void EfficientNetOptions::visit(FieldVisitor& v) {
  v.field("dropout", dropout, "dropout before the last linear layer");
  v.field("stochastic_depth_prob", stochastic_depth_prob,
          "stochastic depth of the last block (rising linearly from 0 over the blocks); 0: off");
  v.field("width_mult", width_mult, "extra channel multiplier on top of the variant's (1: torchvision's)");
  v.choice("stem", stem, "imagenet: stride-2 first convolution (torchvision's); small: stride 1 for small images");
  v.field("bn_eps", bn_eps, "BatchNorm epsilon (torchvision: 1e-5)");
  v.field("bn_momentum", bn_momentum, "BatchNorm running-statistics momentum (torchvision: 0.1)");
}

void EfficientNetOptions::validate() const {
  GB_CHECK(dropout >= 0 && dropout < 1, InvalidArgument,
           "model." << key << ".dropout must be in [0, 1), got " << dropout, "use 0.2");
  GB_CHECK(stochastic_depth_prob >= 0 && stochastic_depth_prob < 1, InvalidArgument,
           "model." << key << ".stochastic_depth_prob must be in [0, 1), got " << stochastic_depth_prob, "use 0.2");
  GB_CHECK(width_mult > 0 && width_mult <= 4, InvalidArgument,
           "model." << key << ".width_mult must be in (0, 4], got " << width_mult, "use 1.0");
  GB_CHECK(bn_eps > 0, InvalidArgument, "model." << key << ".bn_eps must be positive, got " << bn_eps, "use 1e-5");
  GB_CHECK(bn_momentum > 0 && bn_momentum <= 1, InvalidArgument,
           "model." << key << ".bn_momentum must be in (0, 1], got " << bn_momentum, "use 0.1");
}

MBConvImpl::MBConvImpl(const Config& c, double stochastic_depth_prob, const BnSettings& bn)
    : sd_prob_(stochastic_depth_prob) {
  residual_ = c.stride == 1 && c.in == c.out;
  const std::int64_t expanded = make_divisible(static_cast<double>(c.in) * c.expand_ratio);
  Seq layers;
  std::int64_t k = 0;
  if (expanded != c.in)
    layers->push_back(std::to_string(k++), conv_norm_act({c.in, expanded, 1, 1, 1}, bn, BlockAct::kSilu));
  layers->push_back(std::to_string(k++),
                    conv_norm_act({expanded, expanded, c.kernel, c.stride, expanded}, bn, BlockAct::kSilu));
  const std::int64_t squeeze = std::max<std::int64_t>(1, c.in / 4);
  layers->push_back(std::to_string(k++), SqueezeExcitation(expanded, squeeze, BlockAct::kSilu, BlockAct::kSigmoid));
  layers->push_back(std::to_string(k++), conv_norm_act({expanded, c.out, 1, 1, 1}, bn, BlockAct::kNone));
  block_ = register_module("block", layers);
}

at::Tensor MBConvImpl::forward(const at::Tensor& x) {
  at::Tensor y = block_->forward(x);
  if (!residual_) return y;
  return stochastic_depth(y, sd_prob_, is_training()) + x;
}

EfficientNetImpl::EfficientNetImpl(int variant, const EfficientNetOptions& options, const ModelShape& shape) {
  options.validate();
  GB_CHECK(shape.input_shape.size() == 3, InvalidArgument,
           options.key << " needs image inputs [C, H, W], got a sample shape of rank " << shape.input_shape.size(),
           "use model.name = \"mlp\"");
  GB_CHECK(variant >= 0 && variant <= 3, InvalidArgument, "EfficientNet-B" << variant << " is not built",
           "use b0, b1, b2 or b3");
  // torchvision's (width, depth) multipliers.
  constexpr double kWidth[] = {1.0, 1.0, 1.1, 1.2};
  constexpr double kDepth[] = {1.0, 1.1, 1.2, 1.4};
  const double width = kWidth[variant] * options.width_mult;
  const double depth = kDepth[variant];
  const BnSettings bn{options.bn_eps, options.bn_momentum};
  auto ch = [&](std::int64_t c) { return make_divisible(static_cast<double>(c) * width); };
  struct Row {
    double expand;
    std::int64_t kernel, stride, in, out, layers;
  };
  const Row rows[] = {{1, 3, 1, 32, 16, 1},  {6, 3, 2, 16, 24, 2},   {6, 5, 2, 24, 40, 2},  {6, 3, 2, 40, 80, 3},
                      {6, 5, 1, 80, 112, 3}, {6, 5, 2, 112, 192, 4}, {6, 3, 1, 192, 320, 1}};
  auto layers_of = [&](const Row& r) {
    return static_cast<std::int64_t>(std::ceil(static_cast<double>(r.layers) * depth));
  };
  std::int64_t total = 0;
  for (const Row& r : rows) total += layers_of(r);

  tnn::Sequential features;
  const std::int64_t stem_stride = options.stem == Stem::kImagenet ? 2 : 1;
  features->push_back("0",
                      conv_norm_act({shape.input_shape[0], ch(rows[0].in), 3, stem_stride, 1}, bn, BlockAct::kSilu));
  std::int64_t block_id = 0, s = 1;
  for (const Row& r : rows) {
    Seq stage;
    const std::int64_t n = layers_of(r);
    for (std::int64_t b = 0; b < n; ++b) {
      MBConvImpl::Config c{r.expand, r.kernel, b == 0 ? r.stride : 1, b == 0 ? ch(r.in) : ch(r.out), ch(r.out)};
      const double p = options.stochastic_depth_prob * static_cast<double>(block_id) / static_cast<double>(total);
      stage->push_back(std::to_string(b), MBConv(c, p, bn));
      ++block_id;
    }
    features->push_back(std::to_string(s++), stage);
  }
  const std::int64_t last_in = ch(rows[6].out);
  const std::int64_t last_out = 4 * last_in;
  features->push_back(std::to_string(s), conv_norm_act({last_in, last_out, 1, 1, 1}, bn, BlockAct::kSilu));
  features_ = register_module("features", features);
  tnn::Sequential classifier;
  classifier->push_back("0", tnn::Dropout(options.dropout));
  classifier->push_back("1", tnn::Linear(last_out, shape.num_classes));
  classifier_ = register_module("classifier", classifier);
  // torchvision's initialisation.
  init_conv_net(*this);
  for (auto& m : modules(false)) {
    if (auto* lin = m->as<tnn::Linear>()) {
      const double range = 1.0 / std::sqrt(static_cast<double>(lin->options.out_features()));
      tnn::init::uniform_(lin->weight, -range, range);
      tnn::init::zeros_(lin->bias);
    }
  }
}

at::Tensor EfficientNetImpl::forward(const at::Tensor& x) {
  at::Tensor y = forward_blocks(*features_, x, checkpointing_, /*descend=*/true);
  y = torch::adaptive_avg_pool2d(y, {1, 1}).flatten(1);
  return classifier_->forward(y);
}

std::vector<Stage> EfficientNetImpl::stages() {
  std::vector<Stage> out;
  const auto children = features_->named_children();
  for (const auto& c : children) {
    if (auto stage = std::dynamic_pointer_cast<tnn::SequentialImpl>(c.value());
        stage && !stage->is_empty() && stage->ptr(0)->as<MBConvImpl>()) {
      for (Stage& s : sequential_stages("features." + c.key(), tnn::Sequential(stage))) out.push_back(std::move(s));
    } else {
      auto one = std::dynamic_pointer_cast<tnn::SequentialImpl>(c.value());
      out.push_back({"features." + c.key(), [one](const at::Tensor& x) { return one->forward(x); }, true});
    }
  }
  out.push_back({"avgpool",
                 [](const at::Tensor& x) {
                   return torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
                 },
                 false});
  tnn::Sequential cl = classifier_;
  out.push_back({"classifier", [cl](const at::Tensor& x) mutable { return cl->forward(x); }, false});
  return out;
}

}  // namespace glassbox::nn
