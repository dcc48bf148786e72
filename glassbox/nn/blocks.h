// Building blocks shared by the zoo's torchvision-equal models: conv-norm-activation stacks,
// squeeze-and-excitation, hard activations, stochastic depth, the stem choice.
//
//   torch::nn::Sequential s = conv_norm_act({.in = 16, .out = 64, .kernel = 1}, bn, BlockAct::kHardswish);
//   // children "0" (Conv2d), "1" (BatchNorm2d), "2" (the activation): torchvision's names
//   SqueezeExcitation se(64, 16, BlockAct::kRelu, BlockAct::kHardsigmoid);
//   at::Tensor y = stochastic_depth(x, 0.1, is_training());   // drops whole rows
//
// Thread safety: modules follow LibTorch's rules (see model.h).
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>

#include "glassbox/base/config.h"
#include "glassbox/nn/model.h"

namespace glassbox::nn {

// imagenet: the architecture's own stem (a stride-2 first convolution, ResNet's max-pool);
// small: stride 1 and no max-pool, for 28x28 / 32x32 / 64x64 images.
enum class Stem { kSmall, kImagenet };
constexpr NameTable<Stem, 2> enum_names(Stem) { return {{{Stem::kSmall, "small"}, {Stem::kImagenet, "imagenet"}}}; }
static_assert(is_complete_table(enum_names(Stem{})));

enum class BlockAct { kNone, kRelu, kHardswish, kHardsigmoid, kSilu, kSigmoid };

// BatchNorm settings of an architecture (torchvision: eps 1e-5 / momentum 0.1; MobileNetV3: 1e-3 / 0.01).
struct BnSettings {
  double eps = 1e-5;
  double momentum = 0.1;
};

struct ConvSpec {
  std::int64_t in = 0;
  std::int64_t out = 0;
  std::int64_t kernel = 3;
  std::int64_t stride = 1;
  std::int64_t groups = 1;
};

// A Sequential that can sit inside another Sequential or an AnyModule (LibTorch's own has a
// templated forward, which AnyModule cannot hold). Exports as a Sequential.
class SeqImpl : public torch::nn::SequentialImpl {
 public:
  using SequentialImpl::SequentialImpl;
  at::Tensor forward(const at::Tensor& x) { return SequentialImpl::forward(x); }
};
TORCH_MODULE(Seq);

// x * relu6(x + 3) / 6 (torch.nn.Hardswish)
class HardswishImpl : public torch::nn::Module {
 public:
  at::Tensor forward(const at::Tensor& x);
};
TORCH_MODULE(Hardswish);

// relu6(x + 3) / 6 (torch.nn.Hardsigmoid)
class HardsigmoidImpl : public torch::nn::Module {
 public:
  at::Tensor forward(const at::Tensor& x);
};
TORCH_MODULE(Hardsigmoid);

// The activation as a module (ReLU, Hardswish, SiLU, ...); kNone is not a module.
torch::nn::AnyModule activation_module(BlockAct a);
at::Tensor activate(const at::Tensor& x, BlockAct a);

// torchvision's Conv2dNormActivation: Conv2d (no bias, padding (k-1)/2) - BatchNorm2d - activation,
// children "0", "1", "2" (no "2" for kNone).
Seq conv_norm_act(const ConvSpec& c, const BnSettings& bn, BlockAct act);

// Squeeze-and-excitation (torchvision.ops.SqueezeExcitation): y = x * scale(fc2(act(fc1(avgpool(x))))),
// fc1 / fc2 being 1x1 convolutions with bias.
class SqueezeExcitationImpl : public torch::nn::Module {
 public:
  SqueezeExcitationImpl(std::int64_t channels, std::int64_t squeeze, BlockAct act, BlockAct scale);
  at::Tensor forward(const at::Tensor& x);
  BlockAct activation() const { return act_; }
  BlockAct scale_activation() const { return scale_; }

 private:
  torch::nn::Conv2d fc1_{nullptr}, fc2_{nullptr};
  BlockAct act_, scale_;
};
TORCH_MODULE(SqueezeExcitation);

// torchvision.ops.stochastic_depth(x, p, "row", training): zeroes whole samples with probability p
// and scales the rest by 1/(1-p); the same draws as Python's for the same generator state.
at::Tensor stochastic_depth(const at::Tensor& x, double p, bool training);

// Channels rounded to a multiple of `divisor`, never more than 10 % below v (torchvision's _make_divisible).
std::int64_t make_divisible(double v, std::int64_t divisor = 8);

// A Sequential's forward, each child under gradient checkpointing when `checkpointing` (see
// checkpointing.h); with `descend`, a child that is itself a Seq is entered and its children
// checkpointed one by one (EfficientNet's stages of blocks).
at::Tensor forward_blocks(torch::nn::SequentialImpl& seq, const at::Tensor& x, bool checkpointing,
                          bool descend = false);

// One spatial stage per child of a Sequential, named "<prefix>.<child>".
std::vector<Stage> sequential_stages(const std::string& prefix, const torch::nn::Sequential& seq);

// The model's blocks: the names of its stages that own parameters, in forward order (a ResNet's
// conv1, bn1, layer1.0, ..., fc); empty for a model without stages.
std::vector<std::string> parameter_blocks(Model& model);

// torchvision's initialisation of a convolutional network: Kaiming normal (fan_out) for convolutions
// with zero bias, BatchNorm/GroupNorm weight 1 and bias 0. Linear layers are left to the caller.
void init_conv_net(torch::nn::Module& m);

}  // namespace glassbox::nn
