// MobileNetV3 small and large (Howard et al. 2019) with torchvision's module tree, names and
// norm settings (BatchNorm eps 1e-3, momentum 0.01), so torchvision's weights load one to one:
// features.0 (stem), features.1..N (inverted residual blocks: block.K.{0,1} and the
// squeeze-excitation block.K.fc1/fc2), features.N+1 (last conv), classifier.0/3.
//
//   MobileNetV3Options o;                                  // torchvision's defaults
//   MobileNetV3 net(MobileNetV3Size::kSmall, o, ModelShape{{3, 224, 224}, 10});
#pragma once

#include <string>

#include <torch/nn/modules/container/sequential.h>

#include "glassbox/nn/blocks.h"
#include "glassbox/nn/model.h"

namespace glassbox::nn {

enum class MobileNetV3Size { kSmall, kLarge };

struct MobileNetV3Options {
  std::string key = "mobilenet_v3_small";  // the config section, for messages
  double width_mult = 1.0;                 // channel multiplier (rounded to multiples of 8)
  double dropout = 0.2;                    // before the last linear layer
  Stem stem = Stem::kImagenet;             // small: stride-1 first convolution
  double bn_eps = 1e-3;
  double bn_momentum = 0.01;

  void visit(FieldVisitor& v);
  void validate() const;
};

// One inverted residual block: [1x1 expand] - kxk depthwise - [SE] - 1x1 project, with the
// identity added when the shapes allow (stride 1, same channels).
class InvertedResidualImpl : public torch::nn::Module {
 public:
  struct Config {
    std::int64_t in, kernel, expanded, out;
    bool se;
    BlockAct act;
    std::int64_t stride;
  };
  InvertedResidualImpl(const Config& c, const BnSettings& bn);
  at::Tensor forward(const at::Tensor& x);
  bool residual() const { return residual_; }

 private:
  Seq block_{nullptr};
  bool residual_;
};
TORCH_MODULE(InvertedResidual);

class MobileNetV3Impl : public torch::nn::Module {
 public:
  MobileNetV3Impl(MobileNetV3Size size, const MobileNetV3Options& options, const ModelShape& shape);
  at::Tensor forward(const at::Tensor& x);
  // features.0 ... features.N, avgpool (with the flatten), classifier.
  std::vector<Stage> stages();
  // Gradient checkpointing of every block of features (checkpointing.h).
  void set_checkpointing(bool on) { checkpointing_ = on; }

 private:
  bool checkpointing_ = false;
  torch::nn::Sequential features_{nullptr}, classifier_{nullptr};
};
TORCH_MODULE(MobileNetV3);

}  // namespace glassbox::nn
