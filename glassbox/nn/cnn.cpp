#include "glassbox/nn/cnn.h"

#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/nn/batchnorm.h"

namespace glassbox::nn {

void CnnOptions::visit(FieldVisitor& v) {
  v.field("channels", channels, "output channels of each stage; each stage halves the resolution");
  v.field("convs_per_stage", convs_per_stage, "conv-norm-relu blocks per stage");
  v.field("kernel_size", kernel_size, "odd convolution kernel size");
  v.choice("norm", norm, "normalisation after each convolution");
  v.field("groups", groups, "GroupNorm groups");
  v.field("bn_momentum", bn_momentum, "BatchNorm running-statistics momentum");
  v.field("hidden", hidden, "classifier hidden width (0: a single linear layer)");
  v.field("dropout", dropout, "dropout before the output layer");
}

void CnnOptions::validate() const {
  GB_CHECK(!channels.empty(), InvalidArgument, "model.cnn.channels must not be empty", "use e.g. [32, 64]");
  for (auto c : channels) {
    GB_CHECK(c > 0, InvalidArgument, "model.cnn.channels must be positive, got " << c, "use e.g. [32, 64]");
    GB_CHECK(norm != CnnNorm::kGroupNorm || (groups > 0 && c % groups == 0), InvalidArgument,
             "model.cnn.groups = " << groups << " does not divide stage channels " << c,
             "choose groups dividing every entry of channels");
  }
  GB_CHECK(convs_per_stage >= 1, InvalidArgument, "model.cnn.convs_per_stage must be >= 1, got " << convs_per_stage,
           "use 1 or 2");
  GB_CHECK(kernel_size >= 1 && kernel_size % 2 == 1, InvalidArgument,
           "model.cnn.kernel_size must be odd and positive, got " << kernel_size, "use 3 or 5");
  GB_CHECK(bn_momentum > 0 && bn_momentum <= 1, InvalidArgument,
           "model.cnn.bn_momentum must be in (0, 1], got " << bn_momentum, "use 0.1");
  GB_CHECK(hidden >= 0, InvalidArgument, "model.cnn.hidden must be >= 0, got " << hidden, "use e.g. 128");
  GB_CHECK(dropout >= 0 && dropout < 1, InvalidArgument, "model.cnn.dropout must be in [0, 1), got " << dropout,
           "use e.g. 0.25");
}

CnnImpl::CnnImpl(const CnnOptions& options, const ModelShape& shape) {
  options.validate();
  GB_CHECK(shape.input_shape.size() == 3, InvalidArgument,
           "cnn needs image inputs [C, H, W], got a sample shape of rank " << shape.input_shape.size(),
           "use model.name = \"mlp\" for tabular data");
  std::int64_t in = shape.input_shape[0];
  std::int64_t h = shape.input_shape[1];
  std::int64_t w = shape.input_shape[2];
  torch::nn::Sequential feats;
  for (std::size_t s = 0; s < options.channels.size(); ++s) {
    const std::int64_t out = options.channels[s];
    for (std::int64_t c = 0; c < options.convs_per_stage; ++c) {
      const std::string p = std::to_string(s) + "_" + std::to_string(c);
      feats->push_back("conv" + p, torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, options.kernel_size)
                                                         .padding(options.kernel_size / 2)
                                                         .bias(options.norm == CnnNorm::kNone)));
      switch (options.norm) {
        case CnnNorm::kBatchNorm:
          feats->push_back("bn" + p, BatchNorm2d(torch::nn::BatchNorm2dOptions(out).momentum(options.bn_momentum)));
          break;
        case CnnNorm::kGroupNorm:
          feats->push_back("gn" + p, torch::nn::GroupNorm(torch::nn::GroupNormOptions(options.groups, out)));
          break;
        case CnnNorm::kNone: break;
      }
      feats->push_back("relu" + p, torch::nn::ReLU(torch::nn::ReLUOptions().inplace(true)));
      in = out;
    }
    GB_CHECK(h >= 2 && w >= 2, InvalidArgument,
             "cnn: " << options.channels.size() << " stages halve a " << shape.input_shape[1] << "x"
                     << shape.input_shape[2] << " input below 1 pixel",
             "use fewer entries in model.cnn.channels");
    feats->push_back("pool" + std::to_string(s), torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2)));
    h /= 2;
    w /= 2;
  }
  features_ = register_module("features", feats);
  torch::nn::Sequential head;
  head->push_back("flatten", torch::nn::Flatten());
  std::int64_t flat = in * h * w;
  if (options.hidden > 0) {
    head->push_back("fc", torch::nn::Linear(flat, options.hidden));
    head->push_back("relu", torch::nn::ReLU(torch::nn::ReLUOptions().inplace(true)));
    flat = options.hidden;
  }
  if (options.dropout > 0) head->push_back("drop", torch::nn::Dropout(options.dropout));
  head->push_back("out", torch::nn::Linear(flat, shape.num_classes));
  classifier_ = register_module("classifier", head);
}

at::Tensor CnnImpl::forward(const at::Tensor& x) { return classifier_->forward(features_->forward(x)); }

std::vector<Stage> CnnImpl::stages() {
  std::vector<Stage> out;
  const auto names = features_->named_children();
  std::size_t i = 0;
  for (const auto& m : *features_) {
    torch::nn::AnyModule any = m;
    out.push_back(
        {"features." + names[i++].key(), [any](const at::Tensor& x) mutable { return any.forward(x); }, true});
  }
  torch::nn::Sequential head = classifier_;
  out.push_back({"classifier", [head](const at::Tensor& x) mutable { return head->forward(x); }, false});
  return out;
}

}  // namespace glassbox::nn
