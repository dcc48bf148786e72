// EfficientNet B0-B3 (Tan & Le 2019) with torchvision's module tree and names, so its weights
// load one to one: features.0 (stem), features.1..7 (stages of MBConv blocks,
// features.S.B.block.K, squeeze-excitation block.K.fc1/fc2 with SiLU/Sigmoid), features.8 (last
// conv), classifier.1 after dropout. Per-block stochastic depth rises linearly to
// stochastic_depth_prob over the blocks, as in torchvision.
//
//   EfficientNetOptions o;                 // b0's defaults; b2/b3 use dropout 0.3
//   EfficientNet net(0, o, ModelShape{{3, 224, 224}, 10});
#pragma once

#include <string>

#include <torch/nn/modules/container/sequential.h>

#include "glassbox/nn/blocks.h"
#include "glassbox/nn/model.h"

namespace glassbox::nn {

struct EfficientNetOptions {
  std::string key = "efficientnet_b0";  // the config section, for messages
  double dropout = 0.2;                 // before the last linear layer (torchvision: b0/b1 0.2, b2/b3 0.3)
  double stochastic_depth_prob = 0.2;   // of the last block; 0 turns stochastic depth off
  double width_mult = 1.0;              // on top of the variant's own width
  Stem stem = Stem::kImagenet;          // small: stride-1 first convolution
  double bn_eps = 1e-5;
  double bn_momentum = 0.1;

  void visit(FieldVisitor& v);
  void validate() const;
};

// Mobile inverted bottleneck: [1x1 expand] - kxk depthwise - SE - 1x1 project (SiLU), with
// stochastic depth on the residual branch.
class MBConvImpl : public torch::nn::Module {
 public:
  struct Config {
    double expand_ratio;
    std::int64_t kernel, stride, in, out;
  };
  MBConvImpl(const Config& c, double stochastic_depth_prob, const BnSettings& bn);
  at::Tensor forward(const at::Tensor& x);
  bool residual() const { return residual_; }

 private:
  Seq block_{nullptr};
  bool residual_;
  double sd_prob_;
};
TORCH_MODULE(MBConv);

class EfficientNetImpl : public torch::nn::Module {
 public:
  // variant: 0..3 (B0..B3).
  EfficientNetImpl(int variant, const EfficientNetOptions& options, const ModelShape& shape);
  at::Tensor forward(const at::Tensor& x);
  // features.0, features.S.B for every block, features.8, avgpool (with the flatten), classifier.
  std::vector<Stage> stages();
  // Gradient checkpointing of every block of features (checkpointing.h).
  void set_checkpointing(bool on) { checkpointing_ = on; }

 private:
  bool checkpointing_ = false;
  torch::nn::Sequential features_{nullptr}, classifier_{nullptr};
};
TORCH_MODULE(EfficientNet);

}  // namespace glassbox::nn
