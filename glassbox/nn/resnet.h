// resnet18: ResNet-18 (He et al. 2016) with torchvision's module names (conv1, bn1, layer1..4,
// fc), so weights map one to one. The "small" stem (3x3 stride-1 conv, no max-pool) suits
// 28x28 / 32x32 images; the "imagenet" stem is torchvision's (7x7 stride 2 + max-pool).
//
//   ResNetOptions o; o.stem = "small";
//   ResNet18 net(o, ModelShape{{1, 28, 28}, 10});
//   at::Tensor y = net->forward(x);   // x: [N, C, H, W] float32 -> [N, num_classes]
#pragma once

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "glassbox/nn/model.h"

namespace glassbox::nn {

// small: a 3x3 stride-1 convolution, no max-pool (CIFAR-sized inputs);
// imagenet: torchvision's 7x7 stride-2 convolution and 3x3 max-pool.
enum class ResNetStem { kSmall, kImagenet };
constexpr NameTable<ResNetStem, 2> enum_names(ResNetStem) {
  return {{{ResNetStem::kSmall, "small"}, {ResNetStem::kImagenet, "imagenet"}}};
}
static_assert(is_complete_table(enum_names(ResNetStem{})));

struct ResNetOptions {
  ResNetStem stem = ResNetStem::kSmall;
  std::int64_t width = 64;  // channels of the first stage (doubling per stage)
  bool zero_init_residual = false;
  double bn_momentum = 0.1;

  void visit(FieldVisitor& v);
  void validate() const;
};

class BasicBlockImpl : public torch::nn::Module {
 public:
  BasicBlockImpl(std::int64_t in, std::int64_t out, std::int64_t stride, double bn_momentum);
  at::Tensor forward(const at::Tensor& x);
  torch::nn::BatchNorm2d& bn2() { return bn2_; }

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr};
  torch::nn::Sequential downsample_{nullptr};
};
TORCH_MODULE(BasicBlock);

class ResNet18Impl : public torch::nn::Module {
 public:
  ResNet18Impl(const ResNetOptions& options, const ModelShape& shape);
  at::Tensor forward(const at::Tensor& x);
  // torchvision's names: conv1, bn1, relu, [maxpool], layer1.0 ... layer4.1, avgpool (with the
  // flatten), fc.
  std::vector<Stage> stages();
  // torchvision's 7x7/2 stem with a 3x3/2 max-pool after it (else the small 3x3/1 stem).
  bool imagenet_stem() const { return imagenet_stem_; }

 private:
  bool imagenet_stem_;
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr};
  torch::nn::Sequential layer1_{nullptr}, layer2_{nullptr}, layer3_{nullptr}, layer4_{nullptr};
  torch::nn::Linear fc_{nullptr};
};
TORCH_MODULE(ResNet18);

}  // namespace glassbox::nn
