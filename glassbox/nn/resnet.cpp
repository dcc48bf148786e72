#include "glassbox/nn/resnet.h"

#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::nn {

namespace tnn = torch::nn;

void ResNetOptions::visit(FieldVisitor& v) {
  v.choice("stem", stem, "small: 3x3 stride-1 stem for small images; imagenet: 7x7/2 + max-pool (torchvision's)");
  v.field("width", width, "channels of the first stage (64 in torchvision)");
  v.field("zero_init_residual", zero_init_residual, "zero-initialise the last BN of each block");
  v.field("bn_momentum", bn_momentum, "BatchNorm running-statistics momentum");
  v.field("dropout", dropout, "dropout before the last linear layer (torchvision: none)");
}

void ResNetOptions::validate() const {
  GB_CHECK(width > 0, InvalidArgument, "model." << key << ".width must be positive, got " << width, "use 64");
  GB_CHECK(bn_momentum > 0 && bn_momentum <= 1, InvalidArgument, "model." << key << ".bn_momentum must be in (0, 1]",
           "use 0.1");
  GB_CHECK(dropout >= 0 && dropout < 1, InvalidArgument,
           "model." << key << ".dropout must be in [0, 1), got " << dropout, "use 0 or e.g. 0.2");
}

namespace {

BatchNorm2d bn(std::int64_t c, double momentum) { return BatchNorm2d(tnn::BatchNorm2dOptions(c).momentum(momentum)); }

tnn::Conv2d conv(std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t stride) {
  return tnn::Conv2d(tnn::Conv2dOptions(in, out, k).stride(stride).padding(k / 2).bias(false));
}

tnn::Sequential downsample(std::int64_t in, std::int64_t out, std::int64_t stride, double momentum) {
  if (stride == 1 && in == out) return nullptr;
  tnn::Sequential ds;
  ds->push_back("0", conv(in, out, 1, stride));
  ds->push_back("1", bn(out, momentum));
  return ds;
}

}  // namespace

BasicBlockImpl::BasicBlockImpl(std::int64_t in, std::int64_t planes, std::int64_t stride, double bn_momentum) {
  conv1_ = register_module("conv1", conv(in, planes, 3, stride));
  bn1_ = register_module("bn1", bn(planes, bn_momentum));
  conv2_ = register_module("conv2", conv(planes, planes, 3, 1));
  bn2_ = register_module("bn2", bn(planes, bn_momentum));
  if (auto ds = downsample(in, planes, stride, bn_momentum)) downsample_ = register_module("downsample", ds);
}

at::Tensor BasicBlockImpl::forward(const at::Tensor& x) {
  at::Tensor y = torch::relu(bn1_->forward(conv1_->forward(x)));
  y = bn2_->forward(conv2_->forward(y));
  at::Tensor identity = downsample_ ? downsample_->forward(x) : x;
  return torch::relu(y + identity);
}

BottleneckImpl::BottleneckImpl(std::int64_t in, std::int64_t planes, std::int64_t stride, double bn_momentum) {
  const std::int64_t out = planes * kExpansion;
  conv1_ = register_module("conv1", conv(in, planes, 1, 1));
  bn1_ = register_module("bn1", bn(planes, bn_momentum));
  conv2_ = register_module("conv2", conv(planes, planes, 3, stride));
  bn2_ = register_module("bn2", bn(planes, bn_momentum));
  conv3_ = register_module("conv3", conv(planes, out, 1, 1));
  bn3_ = register_module("bn3", bn(out, bn_momentum));
  if (auto ds = downsample(in, out, stride, bn_momentum)) downsample_ = register_module("downsample", ds);
}

at::Tensor BottleneckImpl::forward(const at::Tensor& x) {
  at::Tensor y = torch::relu(bn1_->forward(conv1_->forward(x)));
  y = torch::relu(bn2_->forward(conv2_->forward(y)));
  y = bn3_->forward(conv3_->forward(y));
  at::Tensor identity = downsample_ ? downsample_->forward(x) : x;
  return torch::relu(y + identity);
}

ResNetImpl::ResNetImpl(int depth, const ResNetOptions& options, const ModelShape& shape) {
  options.validate();
  GB_CHECK(shape.input_shape.size() == 3, InvalidArgument,
           options.key << " needs image inputs [C, H, W], got a sample shape of rank " << shape.input_shape.size(),
           "use model.name = \"mlp\"");
  std::vector<std::int64_t> blocks;
  if (depth == 18) blocks = {2, 2, 2, 2};
  if (depth == 34 || depth == 50) blocks = {3, 4, 6, 3};
  GB_CHECK(!blocks.empty(), InvalidArgument, "ResNet depth " << depth << " is not built", "use 18, 34 or 50");
  const bool bottleneck = depth >= 50;
  const std::int64_t expansion = bottleneck ? BottleneckImpl::kExpansion : BasicBlockImpl::kExpansion;
  imagenet_stem_ = options.stem == Stem::kImagenet;
  dropout_ = options.dropout;
  const std::int64_t in = shape.input_shape[0];
  const std::int64_t w = options.width;
  conv1_ = register_module("conv1", imagenet_stem_ ? conv(in, w, 7, 2) : conv(in, w, 3, 1));
  bn1_ = register_module("bn1", bn(w, options.bn_momentum));
  std::int64_t channels = w;
  auto make_layer = [&](std::int64_t planes, std::int64_t n, std::int64_t stride) {
    tnn::Sequential layer;
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t s = i == 0 ? stride : 1;
      if (bottleneck) {
        layer->push_back(std::to_string(i), Bottleneck(channels, planes, s, options.bn_momentum));
      } else {
        layer->push_back(std::to_string(i), BasicBlock(channels, planes, s, options.bn_momentum));
      }
      channels = planes * expansion;
    }
    return layer;
  };
  layer1_ = register_module("layer1", make_layer(w, blocks[0], 1));
  layer2_ = register_module("layer2", make_layer(2 * w, blocks[1], 2));
  layer3_ = register_module("layer3", make_layer(4 * w, blocks[2], 2));
  layer4_ = register_module("layer4", make_layer(8 * w, blocks[3], 2));
  fc_ = register_module("fc", tnn::Linear(channels, shape.num_classes));
  init_conv_net(*this);
  if (options.zero_init_residual) {
    for (auto& m : modules(false)) {
      if (auto* b = m->as<BasicBlockImpl>()) tnn::init::zeros_(b->last_bn()->weight);
      if (auto* b = m->as<BottleneckImpl>()) tnn::init::zeros_(b->last_bn()->weight);
    }
  }
}

at::Tensor ResNetImpl::forward(const at::Tensor& x) {
  at::Tensor y = torch::relu(bn1_->forward(conv1_->forward(x)));
  if (imagenet_stem_) y = torch::max_pool2d(y, 3, 2, 1);
  for (auto* layer : {&layer1_, &layer2_, &layer3_, &layer4_}) y = forward_blocks(**layer, y, checkpointing_);
  y = torch::adaptive_avg_pool2d(y, {1, 1}).flatten(1);
  if (dropout_ > 0) y = torch::dropout(y, dropout_, is_training());
  return fc_->forward(y);
}

std::vector<Stage> ResNetImpl::stages() {
  std::vector<Stage> out;
  tnn::Conv2d conv1 = conv1_;
  BatchNorm2d bn1 = bn1_;
  out.push_back({"conv1", [conv1](const at::Tensor& x) mutable { return conv1->forward(x); }, true});
  out.push_back({"bn1", [bn1](const at::Tensor& x) mutable { return bn1->forward(x); }, true});
  out.push_back({"relu", [](const at::Tensor& x) { return torch::relu(x); }, true});
  if (imagenet_stem_)
    out.push_back({"maxpool", [](const at::Tensor& x) { return torch::max_pool2d(x, 3, 2, 1); }, true});
  const std::pair<const char*, tnn::Sequential> layers[] = {
      {"layer1", layer1_}, {"layer2", layer2_}, {"layer3", layer3_}, {"layer4", layer4_}};
  for (const auto& [name, layer] : layers) {
    for (const auto& c : layer->named_children()) {
      std::function<at::Tensor(const at::Tensor&)> run;
      if (auto b = std::dynamic_pointer_cast<BasicBlockImpl>(c.value())) {
        run = [b](const at::Tensor& x) { return b->forward(x); };
      } else {
        auto bb = std::dynamic_pointer_cast<BottleneckImpl>(c.value());
        run = [bb](const at::Tensor& x) { return bb->forward(x); };
      }
      out.push_back({std::string(name) + "." + c.key(), run, true});
    }
  }
  const double p = dropout_;
  std::shared_ptr<tnn::Module> self = shared_from_this();
  out.push_back({"avgpool",
                 [p, self](const at::Tensor& x) {
                   at::Tensor y = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
                   return p > 0 ? torch::dropout(y, p, self->is_training()) : y;
                 },
                 false});
  tnn::Linear fc = fc_;
  out.push_back({"fc", [fc](const at::Tensor& x) mutable { return fc->forward(x); }, false});
  return out;
}

}  // namespace glassbox::nn
