// mlp: a multi-layer perceptron over flattened inputs.
//
//   MlpOptions o; o.hidden = {512, 256}; o.activation = "gelu"; o.dropout = 0.2; o.norm = "batchnorm";
//   Mlp net(o, ModelShape{{1, 28, 28}, 10});   // Linear(784,512)-BN-GELU-Dropout-...-Linear(256,10)
//   at::Tensor y = net->forward(x);            // x: [N, ...] -> [N, num_classes] logits
#pragma once

#include <torch/nn/modules/container/sequential.h>

#include "glassbox/nn/model.h"

namespace glassbox::nn {

struct MlpOptions {
  std::vector<std::int64_t> hidden{256, 128};
  std::string activation = "relu";  // relu | gelu | tanh | silu | leaky_relu
  double dropout = 0.0;
  std::string norm = "none";  // none | batchnorm | layernorm
  double bn_momentum = 0.1;
  // logits (for the training losses) | softmax (probabilities, e.g. for a model served as is;
  // training it with cross-entropy applies softmax twice — the doctor reports that)
  std::string output = "logits";

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

// The activation module for a name (shared by the zoo).
torch::nn::AnyModule make_activation(const std::string& name);

}  // namespace glassbox::nn
