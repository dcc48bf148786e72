// Tested by nn_test (ZooReference.*: against torchvision; Stages.*; Checkpointing.*).
#include "glassbox/nn/mobilenet.h"

#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::nn {

namespace tnn = torch::nn;

void MobileNetV3Options::visit(FieldVisitor& v) {
  v.field("width_mult", width_mult, "channel multiplier (channels rounded to multiples of 8)");
  v.field("dropout", dropout, "dropout before the last linear layer");
  v.choice("stem", stem, "imagenet: stride-2 first convolution (torchvision's); small: stride 1 for small images");
  v.field("bn_eps", bn_eps, "BatchNorm epsilon (torchvision: 0.001)");
  v.field("bn_momentum", bn_momentum, "BatchNorm running-statistics momentum (torchvision: 0.01)");
}

void MobileNetV3Options::validate() const {
  GB_CHECK(width_mult > 0 && width_mult <= 4, InvalidArgument,
           "model." << key << ".width_mult must be in (0, 4], got " << width_mult, "use 1.0, 0.75 or 0.5");
  GB_CHECK(dropout >= 0 && dropout < 1, InvalidArgument,
           "model." << key << ".dropout must be in [0, 1), got " << dropout, "use 0.2");
  GB_CHECK(bn_eps > 0, InvalidArgument, "model." << key << ".bn_eps must be positive, got " << bn_eps, "use 0.001");
  GB_CHECK(bn_momentum > 0 && bn_momentum <= 1, InvalidArgument,
           "model." << key << ".bn_momentum must be in (0, 1], got " << bn_momentum, "use 0.01");
}

InvertedResidualImpl::InvertedResidualImpl(const Config& c, const BnSettings& bn) {
  residual_ = c.stride == 1 && c.in == c.out;
  Seq layers;
  std::int64_t k = 0;
  if (c.expanded != c.in) layers->push_back(std::to_string(k++), conv_norm_act({c.in, c.expanded, 1, 1, 1}, bn, c.act));
  layers->push_back(std::to_string(k++),
                    conv_norm_act({c.expanded, c.expanded, c.kernel, c.stride, c.expanded}, bn, c.act));
  if (c.se) {
    const std::int64_t squeeze = make_divisible(static_cast<double>(c.expanded / 4));
    layers->push_back(std::to_string(k++),
                      SqueezeExcitation(c.expanded, squeeze, BlockAct::kRelu, BlockAct::kHardsigmoid));
  }
  layers->push_back(std::to_string(k++), conv_norm_act({c.expanded, c.out, 1, 1, 1}, bn, BlockAct::kNone));
  block_ = register_module("block", layers);
}

at::Tensor InvertedResidualImpl::forward(const at::Tensor& x) {
  at::Tensor y = block_->forward(x);
  return residual_ ? y + x : y;
}

MobileNetV3Impl::MobileNetV3Impl(MobileNetV3Size size, const MobileNetV3Options& options, const ModelShape& shape) {
  options.validate();
  GB_CHECK(shape.input_shape.size() == 3, InvalidArgument,
           options.key << " needs image inputs [C, H, W], got a sample shape of rank " << shape.input_shape.size(),
           "use model.name = \"mlp\"");
  const BnSettings bn{options.bn_eps, options.bn_momentum};
  auto ch = [&](std::int64_t c) { return make_divisible(static_cast<double>(c) * options.width_mult); };
  constexpr BlockAct RE = BlockAct::kRelu, HS = BlockAct::kHardswish;
  struct Row {
    std::int64_t in, kernel, expanded, out;
    bool se;
    BlockAct act;
    std::int64_t stride;
  };
  std::vector<Row> rows;
  std::int64_t last_channel = 0;
  if (size == MobileNetV3Size::kLarge) {
    rows = {{16, 3, 16, 16, false, RE, 1},   {16, 3, 64, 24, false, RE, 2},   {24, 3, 72, 24, false, RE, 1},
            {24, 5, 72, 40, true, RE, 2},    {40, 5, 120, 40, true, RE, 1},   {40, 5, 120, 40, true, RE, 1},
            {40, 3, 240, 80, false, HS, 2},  {80, 3, 200, 80, false, HS, 1},  {80, 3, 184, 80, false, HS, 1},
            {80, 3, 184, 80, false, HS, 1},  {80, 3, 480, 112, true, HS, 1},  {112, 3, 672, 112, true, HS, 1},
            {112, 5, 672, 160, true, HS, 2}, {160, 5, 960, 160, true, HS, 1}, {160, 5, 960, 160, true, HS, 1}};
    last_channel = ch(1280);
  } else {
    rows = {{16, 3, 16, 16, true, RE, 2},  {16, 3, 72, 24, false, RE, 2}, {24, 3, 88, 24, false, RE, 1},
            {24, 5, 96, 40, true, HS, 2},  {40, 5, 240, 40, true, HS, 1}, {40, 5, 240, 40, true, HS, 1},
            {40, 5, 120, 48, true, HS, 1}, {48, 5, 144, 48, true, HS, 1}, {48, 5, 288, 96, true, HS, 2},
            {96, 5, 576, 96, true, HS, 1}, {96, 5, 576, 96, true, HS, 1}};
    last_channel = ch(1024);
  }
  tnn::Sequential features;
  const std::int64_t first = ch(rows.front().in);
  const std::int64_t stem_stride = options.stem == Stem::kImagenet ? 2 : 1;
  features->push_back("0", conv_norm_act({shape.input_shape[0], first, 3, stem_stride, 1}, bn, HS));
  std::int64_t i = 1;
  for (const Row& r : rows) {
    features->push_back(
        std::to_string(i++),
        InvertedResidual(
            InvertedResidualImpl::Config{ch(r.in), r.kernel, ch(r.expanded), ch(r.out), r.se, r.act, r.stride}, bn));
  }
  const std::int64_t last_in = ch(rows.back().out);
  const std::int64_t last_out = 6 * last_in;
  features->push_back(std::to_string(i), conv_norm_act({last_in, last_out, 1, 1, 1}, bn, HS));
  features_ = register_module("features", features);
  tnn::Sequential classifier;
  classifier->push_back("0", tnn::Linear(last_out, last_channel));
  classifier->push_back("1", Hardswish());
  classifier->push_back("2", tnn::Dropout(options.dropout));
  classifier->push_back("3", tnn::Linear(last_channel, shape.num_classes));
  classifier_ = register_module("classifier", classifier);
  // torchvision's initialisation.
  init_conv_net(*this);
  for (auto& m : modules(false)) {
    if (auto* lin = m->as<tnn::Linear>()) {
      tnn::init::normal_(lin->weight, 0.0, 0.01);
      tnn::init::zeros_(lin->bias);
    }
  }
}

at::Tensor MobileNetV3Impl::forward(const at::Tensor& x) {
  at::Tensor y = forward_blocks(*features_, x, checkpointing_, /*descend=*/true);
  y = torch::adaptive_avg_pool2d(y, {1, 1}).flatten(1);
  return classifier_->forward(y);
}

std::vector<Stage> MobileNetV3Impl::stages() {
  std::vector<Stage> out = sequential_stages("features", features_);
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
