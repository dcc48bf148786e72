// ResNet-18/34/50 (He et al. 2016) with torchvision's module tree and names (conv1, bn1,
// layer1..4 of BasicBlock or Bottleneck, fc), so torchvision's weights load one to one. The
// "small" stem (3x3 stride-1 conv, no max-pool) suits 28x28 / 32x32 images; the "imagenet" stem
// is torchvision's (7x7 stride 2 + max-pool).
//
//   ResNetOptions o; o.stem = Stem::kImagenet;
//   ResNet net(50, o, ModelShape{{3, 224, 224}, 10});
//   at::Tensor y = net->forward(x);   // x: [N, C, H, W] float32 -> [N, num_classes]
#pragma once

#include <string>

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include "glassbox/nn/batchnorm.h"
#include "glassbox/nn/blocks.h"
#include "glassbox/nn/model.h"

namespace glassbox::nn {

using ResNetStem = Stem;

struct ResNetOptions {
  std::string key = "resnet18";  // the config section, for messages
  Stem stem = Stem::kSmall;
  std::int64_t width = 64;  // channels of the first stage (doubling per stage)
  bool zero_init_residual = false;
  double bn_momentum = 0.1;
  double dropout = 0.0;  // before fc (torchvision has none)

  void visit(FieldVisitor& v);
  void validate() const;
};

class BasicBlockImpl : public torch::nn::Module {
 public:
  static constexpr std::int64_t kExpansion = 1;
  BasicBlockImpl(std::int64_t in, std::int64_t planes, std::int64_t stride, double bn_momentum);
  at::Tensor forward(const at::Tensor& x);
  BatchNorm2d& last_bn() { return bn2_; }

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  BatchNorm2d bn1_{nullptr}, bn2_{nullptr};
  torch::nn::Sequential downsample_{nullptr};
};
TORCH_MODULE(BasicBlock);

// torchvision's Bottleneck (ResNet v1.5: the stride on the 3x3 convolution): 1x1 - 3x3 - 1x1 (x4).
class BottleneckImpl : public torch::nn::Module {
 public:
  static constexpr std::int64_t kExpansion = 4;
  BottleneckImpl(std::int64_t in, std::int64_t planes, std::int64_t stride, double bn_momentum);
  at::Tensor forward(const at::Tensor& x);
  BatchNorm2d& last_bn() { return bn3_; }

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr};
  torch::nn::Sequential downsample_{nullptr};
};
TORCH_MODULE(Bottleneck);

class ResNetImpl : public torch::nn::Module {
 public:
  // depth: 18 or 34 (BasicBlock), 50 (Bottleneck).
  ResNetImpl(int depth, const ResNetOptions& options, const ModelShape& shape);
  at::Tensor forward(const at::Tensor& x);
  // torchvision's names: conv1, bn1, relu, [maxpool], layer1.0 ... layer4.N, avgpool (with the
  // flatten), fc.
  std::vector<Stage> stages();
  // torchvision's 7x7/2 stem with a 3x3/2 max-pool after it (else the small 3x3/1 stem).
  bool imagenet_stem() const { return imagenet_stem_; }
  double dropout() const { return dropout_; }
  // Gradient checkpointing of every residual block (checkpointing.h).
  void set_checkpointing(bool on) { checkpointing_ = on; }

 private:
  bool checkpointing_ = false;
  bool imagenet_stem_;
  double dropout_;
  torch::nn::Conv2d conv1_{nullptr};
  BatchNorm2d bn1_{nullptr};
  torch::nn::Sequential layer1_{nullptr}, layer2_{nullptr}, layer3_{nullptr}, layer4_{nullptr};
  torch::nn::Linear fc_{nullptr};
};
TORCH_MODULE(ResNet);

}  // namespace glassbox::nn
