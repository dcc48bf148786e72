// mlp: a multi-layer perceptron over flattened inputs.
//
//   MlpOptions o; o.hidden = {512, 256}; o.activation = Activation::kGelu; o.dropout = 0.2;
//   o.norm = MlpNorm::kBatchNorm;
//   Mlp net(o, ModelShape{{1, 28, 28}, 10});   // Linear(784,512)-BN-GELU-Dropout-...-Linear(256,10)
//   at::Tensor y = net->forward(x);            // x: [N, ...] -> [N, num_classes] logits
#pragma once

#include <torch/nn/modules/container/sequential.h>

#include "glassbox/nn/model.h"

namespace glassbox::nn {

enum class Activation { kRelu, kGelu, kTanh, kSilu, kLeakyRelu };
constexpr NameTable<Activation, 5> enum_names(Activation) {
  return {{{Activation::kRelu, "relu"},
           {Activation::kGelu, "gelu"},
           {Activation::kTanh, "tanh"},
           {Activation::kSilu, "silu"},
           {Activation::kLeakyRelu, "leaky_relu"}}};
}
static_assert(is_complete_table(enum_names(Activation{})));

enum class MlpNorm { kNone, kBatchNorm, kLayerNorm };
constexpr NameTable<MlpNorm, 3> enum_names(MlpNorm) {
  return {{{MlpNorm::kNone, "none"}, {MlpNorm::kBatchNorm, "batchnorm"}, {MlpNorm::kLayerNorm, "layernorm"}}};
}
static_assert(is_complete_table(enum_names(MlpNorm{})));

enum class MlpOutput { kLogits, kSoftmax };
constexpr NameTable<MlpOutput, 2> enum_names(MlpOutput) {
  return {{{MlpOutput::kLogits, "logits"}, {MlpOutput::kSoftmax, "softmax"}}};
}
static_assert(is_complete_table(enum_names(MlpOutput{})));

struct MlpOptions {
  std::vector<std::int64_t> hidden{256, 128};
  Activation activation = Activation::kRelu;
  double dropout = 0.0;
  MlpNorm norm = MlpNorm::kNone;
  double bn_momentum = 0.1;
  // logits (for the training losses) | softmax (probabilities, e.g. for a model served as is;
  // training it with cross-entropy applies softmax twice — the doctor reports that)
  MlpOutput output = MlpOutput::kLogits;

  void visit(FieldVisitor& v);
  void validate() const;
};

class MlpImpl : public torch::nn::Module {
 public:
  MlpImpl(const MlpOptions& options, const ModelShape& shape);
  at::Tensor forward(const at::Tensor& x);

 private:
  torch::nn::Sequential body_{nullptr};
};
TORCH_MODULE(Mlp);

// The activation module (shared by the zoo).
torch::nn::AnyModule make_activation(Activation activation);

}  // namespace glassbox::nn
