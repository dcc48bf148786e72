// cnn: a configurable small convolutional network.
//
// Stages of `convs_per_stage` x [Conv3x3 - Norm - ReLU], each stage ending in 2x2 max-pooling,
// then Flatten - Linear(hidden) - ReLU - Dropout - Linear(num_classes).
//
//   CnnOptions o; o.channels = {32, 64}; o.norm = "groupnorm"; o.groups = 8;
//   Cnn net(o, ModelShape{{1, 28, 28}, 10});
//   at::Tensor y = net->forward(x);   // x: [N, C, H, W] float32 -> [N, num_classes]
#pragma once

#include <torch/nn/modules/container/sequential.h>

#include "glassbox/nn/model.h"

namespace glassbox::nn {

enum class CnnNorm { kBatchNorm, kGroupNorm, kNone };
constexpr NameTable<CnnNorm, 3> enum_names(CnnNorm) {
  return {{{CnnNorm::kBatchNorm, "batchnorm"}, {CnnNorm::kGroupNorm, "groupnorm"}, {CnnNorm::kNone, "none"}}};
}
static_assert(is_complete_table(enum_names(CnnNorm{})));

struct CnnOptions {
  std::vector<std::int64_t> channels{32, 64};  // output channels of each stage
  std::int64_t convs_per_stage = 2;
  std::int64_t kernel_size = 3;
  CnnNorm norm = CnnNorm::kBatchNorm;
  std::int64_t groups = 8;    // GroupNorm groups (must divide every stage's channels)
  double bn_momentum = 0.1;   // BatchNorm running-statistics momentum
  std::int64_t hidden = 128;  // width of the classifier's hidden layer (0: none)
  double dropout = 0.25;      // before the last linear layer

  void visit(FieldVisitor& v);
  void validate() const;
};

class CnnImpl : public torch::nn::Module {
 public:
  CnnImpl(const CnnOptions& options, const ModelShape& shape);
  at::Tensor forward(const at::Tensor& x);
  // features.<child> for every layer of the feature extractor, then "classifier".
  std::vector<Stage> stages();

 private:
  torch::nn::Sequential features_{nullptr};
  torch::nn::Sequential classifier_{nullptr};
};
TORCH_MODULE(Cnn);

}  // namespace glassbox::nn
