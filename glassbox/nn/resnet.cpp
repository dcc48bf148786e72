#include "glassbox/nn/resnet.h"

#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::nn {

namespace tnn = torch::nn;

void ResNetOptions::visit(FieldVisitor& v) {
  v.choice("stem", stem, "small: 3x3 stride-1 stem for small images; imagenet: 7x7/2 + max-pool");
  v.field("width", width, "channels of the first stage");
  v.field("zero_init_residual", zero_init_residual, "zero-initialise the last BN of each block");
  v.field("bn_momentum", bn_momentum, "BatchNorm running-statistics momentum");
}

void ResNetOptions::validate() const {
  GB_CHECK(width > 0, InvalidArgument, "model.resnet18.width must be positive, got " << width, "use 64");
  GB_CHECK(bn_momentum > 0 && bn_momentum <= 1, InvalidArgument, "model.resnet18.bn_momentum must be in (0, 1]",
           "use 0.1");
}

BasicBlockImpl::BasicBlockImpl(std::int64_t in, std::int64_t out, std::int64_t stride, double bn_momentum) {
  conv1_ = register_module("conv1", tnn::Conv2d(tnn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)));
  bn1_ = register_module("bn1", tnn::BatchNorm2d(tnn::BatchNorm2dOptions(out).momentum(bn_momentum)));
  conv2_ = register_module("conv2", tnn::Conv2d(tnn::Conv2dOptions(out, out, 3).padding(1).bias(false)));
  bn2_ = register_module("bn2", tnn::BatchNorm2d(tnn::BatchNorm2dOptions(out).momentum(bn_momentum)));
  if (stride != 1 || in != out) {
    tnn::Sequential ds;
    ds->push_back("0", tnn::Conv2d(tnn::Conv2dOptions(in, out, 1).stride(stride).bias(false)));
    ds->push_back("1", tnn::BatchNorm2d(tnn::BatchNorm2dOptions(out).momentum(bn_momentum)));
    downsample_ = register_module("downsample", ds);
  }
}

at::Tensor BasicBlockImpl::forward(const at::Tensor& x) {
  at::Tensor y = torch::relu(bn1_->forward(conv1_->forward(x)));
  y = bn2_->forward(conv2_->forward(y));
  at::Tensor identity = downsample_ ? downsample_->forward(x) : x;
  return torch::relu(y + identity);
}

ResNet18Impl::ResNet18Impl(const ResNetOptions& options, const ModelShape& shape) {
  options.validate();
  GB_CHECK(shape.input_shape.size() == 3, InvalidArgument,
           "resnet18 needs image inputs [C, H, W], got a sample shape of rank " << shape.input_shape.size(),
           "use model.name = \"mlp\"");
  imagenet_stem_ = options.stem == ResNetStem::kImagenet;
  const std::int64_t in = shape.input_shape[0];
  const std::int64_t w = options.width;
  if (imagenet_stem_) {
    conv1_ = register_module("conv1", tnn::Conv2d(tnn::Conv2dOptions(in, w, 7).stride(2).padding(3).bias(false)));
  } else {
    conv1_ = register_module("conv1", tnn::Conv2d(tnn::Conv2dOptions(in, w, 3).stride(1).padding(1).bias(false)));
  }
  bn1_ = register_module("bn1", tnn::BatchNorm2d(tnn::BatchNorm2dOptions(w).momentum(options.bn_momentum)));
  auto make_layer = [&](std::int64_t cin, std::int64_t cout, std::int64_t stride) {
    tnn::Sequential layer;
    layer->push_back("0", BasicBlock(cin, cout, stride, options.bn_momentum));
    layer->push_back("1", BasicBlock(cout, cout, 1, options.bn_momentum));
    return layer;
  };
  layer1_ = register_module("layer1", make_layer(w, w, 1));
  layer2_ = register_module("layer2", make_layer(w, 2 * w, 2));
  layer3_ = register_module("layer3", make_layer(2 * w, 4 * w, 2));
  layer4_ = register_module("layer4", make_layer(4 * w, 8 * w, 2));
  fc_ = register_module("fc", tnn::Linear(8 * w, shape.num_classes));
  // torchvision's initialisation: Kaiming normal (fan_out) for convs, BN weight 1 bias 0.
  for (auto& m : modules(/*include_self=*/false)) {
    if (auto* conv = m->as<tnn::Conv2d>()) {
      tnn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
    } else if (auto* bn = m->as<tnn::BatchNorm2d>()) {
      tnn::init::ones_(bn->weight);
      tnn::init::zeros_(bn->bias);
    }
  }
  if (options.zero_init_residual) {
    for (auto& m : modules(false))
      if (auto* block = m->as<BasicBlockImpl>()) tnn::init::zeros_(block->bn2()->weight);
  }
}

at::Tensor ResNet18Impl::forward(const at::Tensor& x) {
  at::Tensor y = torch::relu(bn1_->forward(conv1_->forward(x)));
  if (imagenet_stem_) y = torch::max_pool2d(y, 3, 2, 1);
  y = layer4_->forward(layer3_->forward(layer2_->forward(layer1_->forward(y))));
  y = torch::adaptive_avg_pool2d(y, {1, 1}).flatten(1);
  return fc_->forward(y);
}

std::vector<Stage> ResNet18Impl::stages() {
  std::vector<Stage> out;
  tnn::Conv2d conv1 = conv1_;
  tnn::BatchNorm2d bn1 = bn1_;
  out.push_back({"conv1", [conv1](const at::Tensor& x) mutable { return conv1->forward(x); }, true});
  out.push_back({"bn1", [bn1](const at::Tensor& x) mutable { return bn1->forward(x); }, true});
  out.push_back({"relu", [](const at::Tensor& x) { return torch::relu(x); }, true});
  if (imagenet_stem_)
    out.push_back({"maxpool", [](const at::Tensor& x) { return torch::max_pool2d(x, 3, 2, 1); }, true});
  const std::pair<const char*, tnn::Sequential> layers[] = {
      {"layer1", layer1_}, {"layer2", layer2_}, {"layer3", layer3_}, {"layer4", layer4_}};
  for (const auto& [name, layer] : layers) {
    const auto children = layer->named_children();
    for (const auto& c : children) {
      auto block = std::dynamic_pointer_cast<BasicBlockImpl>(c.value());
      out.push_back(
          {std::string(name) + "." + c.key(), [block](const at::Tensor& x) { return block->forward(x); }, true});
    }
  }
  out.push_back({"avgpool",
                 [](const at::Tensor& x) {
                   return torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
                 },
                 false});
  tnn::Linear fc = fc_;
  out.push_back({"fc", [fc](const at::Tensor& x) mutable { return fc->forward(x); }, false});
  return out;
}

}  // namespace glassbox::nn
