#include "glassbox/nn/mlp.h"

#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/nn/batchnorm.h"

namespace glassbox::nn {

void MlpOptions::visit(FieldVisitor& v) {
  v.field("hidden", hidden, "hidden layer sizes, input to output");
  v.choice("activation", activation, "activation after each hidden layer");
  v.field("dropout", dropout, "dropout probability after each hidden activation");
  v.choice("norm", norm, "normalisation after each hidden linear layer");
  v.field("bn_momentum", bn_momentum, "BatchNorm running-statistics momentum");
  v.choice("output", output, "logits (what the losses expect) or softmax probabilities");
}

void MlpOptions::validate() const {
  for (auto h : hidden)
    GB_CHECK(h > 0, InvalidArgument, "model.mlp.hidden sizes must be positive, got " << h, "use e.g. [256, 128]");
  GB_CHECK(dropout >= 0 && dropout < 1, InvalidArgument, "model.mlp.dropout must be in [0, 1), got " << dropout,
           "use e.g. 0.1");
  GB_CHECK(bn_momentum > 0 && bn_momentum <= 1, InvalidArgument,
           "model.mlp.bn_momentum must be in (0, 1], got " << bn_momentum, "use 0.1 (PyTorch's default)");
}

torch::nn::AnyModule make_activation(Activation activation) {
  switch (activation) {
    case Activation::kRelu: return torch::nn::AnyModule(torch::nn::ReLU());
    case Activation::kGelu: return torch::nn::AnyModule(torch::nn::GELU());
    case Activation::kTanh: return torch::nn::AnyModule(torch::nn::Tanh());
    case Activation::kSilu: return torch::nn::AnyModule(torch::nn::SiLU());
    case Activation::kLeakyRelu: return torch::nn::AnyModule(torch::nn::LeakyReLU());
  }
  GB_THROW(Internal, "activation " << static_cast<int>(activation) << " is not in its table", "report this as a bug");
}

MlpImpl::MlpImpl(const MlpOptions& options, const ModelShape& shape) {
  options.validate();
  std::int64_t in = 1;
  for (auto d : shape.input_shape) in *= d;
  torch::nn::Sequential seq;
  seq->push_back("flatten", torch::nn::Flatten());
  for (std::size_t i = 0; i < options.hidden.size(); ++i) {
    const std::int64_t out = options.hidden[i];
    const std::string p = std::to_string(i);
    seq->push_back("fc" + p, torch::nn::Linear(in, out));
    switch (options.norm) {
      case MlpNorm::kBatchNorm:
        seq->push_back("bn" + p, BatchNorm1d(torch::nn::BatchNorm1dOptions(out).momentum(options.bn_momentum)));
        break;
      case MlpNorm::kLayerNorm:
        seq->push_back("ln" + p, torch::nn::LayerNorm(torch::nn::LayerNormOptions({out})));
        break;
      case MlpNorm::kNone: break;
    }
    seq->push_back("act" + p, make_activation(options.activation));
    if (options.dropout > 0) seq->push_back("drop" + p, torch::nn::Dropout(options.dropout));
    in = out;
  }
  seq->push_back("head", torch::nn::Linear(in, shape.num_classes));
  if (options.output == MlpOutput::kSoftmax)
    seq->push_back("softmax", torch::nn::Softmax(torch::nn::SoftmaxOptions(1)));
  body_ = register_module("body", seq);
}

at::Tensor MlpImpl::forward(const at::Tensor& x) { return body_->forward(x); }

}  // namespace glassbox::nn
