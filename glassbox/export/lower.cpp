// The built-in lowerings: LibTorch's layers and the zoo's models (see graph.h).
#include <variant>

#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/export/graph.h"
#include "glassbox/nn/batchnorm.h"
#include "glassbox/nn/blocks.h"
#include "glassbox/nn/cnn.h"
#include "glassbox/nn/efficientnet.h"
#include "glassbox/nn/mlp.h"
#include "glassbox/nn/mobilenet.h"
#include "glassbox/nn/resnet.h"
#include "glassbox/nn/vit.h"

namespace glassbox::exporter {

void register_builtin(std::type_index type, std::string type_name, Lowering lowering);  // graph.cpp

namespace {

namespace tnn = torch::nn;

template <class Impl>
void builtin(const char* type_name, std::function<int(const Impl&, GraphBuilder&)> fn) {
  register_builtin(std::type_index(typeid(Impl)), type_name,
                   [fn](const torch::nn::Module& m, GraphBuilder& b) { return fn(dynamic_cast<const Impl&>(m), b); });
}

template <std::size_t D>
std::vector<std::int64_t> vec(const torch::ExpandingArray<D>& a) {
  return std::vector<std::int64_t>(a->begin(), a->end());
}

// A normalisation layer's per-channel scale and shift.
void affine(Node& n, GraphBuilder& b) {
  n.weight = "weight";
  n.bias = "bias";
  b.parameter("weight");
  b.parameter("bias");
}

int lower_conv2d(const tnn::Conv2dImpl& m, GraphBuilder& b) {
  const auto& o = m.options;
  GB_CHECK(std::holds_alternative<torch::enumtype::kZeros>(o.padding_mode()), InvalidArgument,
           "padding_mode " << torch::enumtype::get_enum_name(o.padding_mode()) << " is not supported (only zeros)",
           "use zero padding, or pad explicitly before the convolution");
  Node n;
  n.kernel = vec(o.kernel_size());
  n.stride = vec(o.stride());
  n.dilation = vec(o.dilation());
  n.groups = o.groups();
  if (const auto* p = std::get_if<torch::ExpandingArray<2>>(&o.padding())) {
    n.padding = vec(*p);
  } else if (std::holds_alternative<torch::enumtype::kValid>(o.padding())) {
    n.padding = {0, 0};
  } else {  // kSame: stride 1; PyTorch puts the odd pixel on the bottom/right
    for (std::size_t i = 0; i < 2; ++i) {
      const std::int64_t total = n.dilation[i] * (n.kernel[i] - 1);
      GB_CHECK(total % 2 == 0, InvalidArgument, "padding \"same\" with an even kernel pads asymmetrically",
               "use an odd kernel size or explicit padding");
      n.padding.push_back(total / 2);
    }
  }
  n.weight = "weight";
  b.parameter("weight");
  if (m.bias.defined()) {
    n.bias = "bias";
    b.parameter("bias");
  }
  return b.op(OpKind::kConv2d, {b.input()}, n);
}

template <class Impl>
int lower_batch_norm(const Impl& m, GraphBuilder& b) {
  GB_CHECK(m.options.track_running_stats() && m.running_mean.defined(), InvalidArgument,
           "BatchNorm without running statistics normalises with each batch's own statistics at inference",
           "train with track_running_stats = true");
  Node n;
  n.eps = m.options.eps();
  if (m.options.affine()) affine(n, b);
  n.running_mean = "running_mean";
  n.running_var = "running_var";
  b.buffer("running_mean");
  b.buffer("running_var");
  return b.op(OpKind::kBatchNorm, {b.input()}, n);
}

int chain(const tnn::Module& m, GraphBuilder& b) {
  int x = b.input();
  for (const auto& c : m.named_children()) x = b.call(c.key(), x);
  return x;
}

int pool_flatten(GraphBuilder& b, int y) {
  Node avg;
  avg.shape = {1, 1};
  y = b.op(OpKind::kAdaptiveAvgPool2d, {y}, avg);
  Node flat;
  flat.dim = 1;
  flat.end_dim = -1;
  return b.op(OpKind::kFlatten, {y}, flat);
}

int lower_resnet(const nn::ResNetImpl& m, GraphBuilder& b) {
  int y = b.op(OpKind::kRelu, {b.call("bn1", b.call("conv1", b.input()))});
  if (m.imagenet_stem()) {
    Node pool;
    pool.kernel = {3, 3};
    pool.stride = {2, 2};
    pool.padding = {1, 1};
    pool.dilation = {1, 1};
    y = b.op(OpKind::kMaxPool2d, {y}, pool);
  }
  for (const char* layer : {"layer1", "layer2", "layer3", "layer4"}) y = b.call(layer, y);
  return b.call("fc", pool_flatten(b, y));  // dropout: the identity at inference
}

int lower_basic_block(const nn::BasicBlockImpl& m, GraphBuilder& b) {
  const int x = b.input();
  int y = b.op(OpKind::kRelu, {b.call("bn1", b.call("conv1", x))});
  y = b.call("bn2", b.call("conv2", y));
  const int identity = m.named_children().contains("downsample") ? b.call("downsample", x) : x;
  return b.op(OpKind::kRelu, {b.add(y, identity)});
}

int lower_bottleneck(const nn::BottleneckImpl& m, GraphBuilder& b) {
  const int x = b.input();
  int y = b.op(OpKind::kRelu, {b.call("bn1", b.call("conv1", x))});
  y = b.op(OpKind::kRelu, {b.call("bn2", b.call("conv2", y))});
  y = b.call("bn3", b.call("conv3", y));
  const int identity = m.named_children().contains("downsample") ? b.call("downsample", x) : x;
  return b.op(OpKind::kRelu, {b.add(y, identity)});
}

int activation(GraphBuilder& b, int x, nn::BlockAct a) {
  switch (a) {
    case nn::BlockAct::kNone: return x;
    case nn::BlockAct::kRelu: return b.op(OpKind::kRelu, {x});
    case nn::BlockAct::kHardswish: return b.op(OpKind::kHardswish, {x});
    case nn::BlockAct::kHardsigmoid: return b.op(OpKind::kHardsigmoid, {x});
    case nn::BlockAct::kSilu: return b.op(OpKind::kSilu, {x});
    case nn::BlockAct::kSigmoid: return b.op(OpKind::kSigmoid, {x});
  }
  return x;
}

int lower_squeeze_excitation(const nn::SqueezeExcitationImpl& m, GraphBuilder& b) {
  Node avg;
  avg.shape = {1, 1};
  int s = b.op(OpKind::kAdaptiveAvgPool2d, {b.input()}, avg);
  s = activation(b, b.call("fc1", s), m.activation());
  s = activation(b, b.call("fc2", s), m.scale_activation());
  return b.op(OpKind::kMul, {s, b.input()});
}

// A block with a residual connection when its shapes allow (stochastic depth: the identity at inference).
template <class Impl>
int lower_residual_block(const Impl& m, GraphBuilder& b) {
  const int y = b.call("block", b.input());
  return m.residual() ? b.add(y, b.input()) : y;
}

int lower_features_classifier(GraphBuilder& b) {
  return b.call("classifier", pool_flatten(b, b.call("features", b.input())));
}

int lower_vit(const nn::VisionTransformerImpl&, GraphBuilder& b) {
  Node tok;
  tok.weight = "class_token";
  b.parameter("class_token");
  int y = b.op(OpKind::kTokens, {b.call("conv_proj", b.input())}, tok);
  y = b.op(OpKind::kSelectFirst, {b.call("encoder", y)});
  return b.call("heads", y);
}

int lower_encoder(const nn::EncoderImpl&, GraphBuilder& b) {
  Node pos;
  pos.weight = "pos_embedding";
  b.parameter("pos_embedding");
  const int y = b.op(OpKind::kAddParameter, {b.input()}, pos);  // dropout: the identity at inference
  return b.call("ln", b.call("layers", y));
}

int lower_encoder_block(const nn::EncoderBlockImpl&, GraphBuilder& b) {
  const int x = b.input();
  const int a = b.add(b.call("self_attention", b.call("ln_1", x)), x);
  return b.add(a, b.call("mlp", b.call("ln_2", a)));
}

int lower_self_attention(const nn::SelfAttentionImpl& m, GraphBuilder& b) {
  Node n;
  n.weight = "in_proj_weight";
  n.bias = "in_proj_bias";
  n.groups = m.heads();
  b.parameter("in_proj_weight");
  b.parameter("in_proj_bias");
  return b.call("out_proj", b.op(OpKind::kSelfAttention, {b.input()}, n));
}

}  // namespace

void register_builtin_lowerings() {
  builtin<tnn::LinearImpl>("Linear", [](const tnn::LinearImpl& m, GraphBuilder& b) {
    Node n;
    n.weight = "weight";
    b.parameter("weight");
    if (m.bias.defined()) {
      n.bias = "bias";
      b.parameter("bias");
    }
    return b.op(OpKind::kLinear, {b.input()}, n);
  });
  builtin<tnn::Conv2dImpl>("Conv2d", lower_conv2d);
  builtin<tnn::BatchNorm1dImpl>("BatchNorm1d", lower_batch_norm<tnn::BatchNorm1dImpl>);
  builtin<tnn::BatchNorm2dImpl>("BatchNorm2d", lower_batch_norm<tnn::BatchNorm2dImpl>);
  // glassbox's BatchNorm layers (the zoo's; they can synchronise statistics in training).
  builtin<glassbox::nn::BatchNorm1dImpl>("BatchNorm1d", lower_batch_norm<tnn::BatchNorm1dImpl>);
  builtin<glassbox::nn::BatchNorm2dImpl>("BatchNorm2d", lower_batch_norm<tnn::BatchNorm2dImpl>);
  builtin<tnn::LayerNormImpl>("LayerNorm", [](const tnn::LayerNormImpl& m, GraphBuilder& b) {
    Node n;
    n.shape = m.options.normalized_shape();
    n.eps = m.options.eps();
    if (m.options.elementwise_affine()) affine(n, b);
    return b.op(OpKind::kLayerNorm, {b.input()}, n);
  });
  builtin<tnn::GroupNormImpl>("GroupNorm", [](const tnn::GroupNormImpl& m, GraphBuilder& b) {
    Node n;
    n.groups = m.options.num_groups();
    n.eps = m.options.eps();
    if (m.options.affine()) affine(n, b);
    return b.op(OpKind::kGroupNorm, {b.input()}, n);
  });
  builtin<tnn::ReLUImpl>("ReLU",
                         [](const tnn::ReLUImpl&, GraphBuilder& b) { return b.op(OpKind::kRelu, {b.input()}); });
  builtin<tnn::GELUImpl>("GELU", [](const tnn::GELUImpl& m, GraphBuilder& b) {
    Node n;
    n.approximate = m.options.approximate();
    GB_CHECK(n.approximate == "none" || n.approximate == "tanh", InvalidArgument,
             "GELU approximate=\"" << n.approximate << "\"", "use \"none\" or \"tanh\"");
    return b.op(OpKind::kGelu, {b.input()}, n);
  });
  builtin<tnn::TanhImpl>("Tanh",
                         [](const tnn::TanhImpl&, GraphBuilder& b) { return b.op(OpKind::kTanh, {b.input()}); });
  builtin<tnn::SigmoidImpl>(
      "Sigmoid", [](const tnn::SigmoidImpl&, GraphBuilder& b) { return b.op(OpKind::kSigmoid, {b.input()}); });
  builtin<tnn::SiLUImpl>("SiLU",
                         [](const tnn::SiLUImpl&, GraphBuilder& b) { return b.op(OpKind::kSilu, {b.input()}); });
  builtin<tnn::LeakyReLUImpl>("LeakyReLU", [](const tnn::LeakyReLUImpl& m, GraphBuilder& b) {
    Node n;
    n.alpha = m.options.negative_slope();
    return b.op(OpKind::kLeakyRelu, {b.input()}, n);
  });
  builtin<tnn::ELUImpl>("ELU", [](const tnn::ELUImpl& m, GraphBuilder& b) {
    Node n;
    n.alpha = m.options.alpha();
    return b.op(OpKind::kElu, {b.input()}, n);
  });
  builtin<tnn::MaxPool2dImpl>("MaxPool2d", [](const tnn::MaxPool2dImpl& m, GraphBuilder& b) {
    Node n;
    n.kernel = vec(m.options.kernel_size());
    n.stride = vec(m.options.stride());
    n.padding = vec(m.options.padding());
    n.dilation = vec(m.options.dilation());
    n.ceil_mode = m.options.ceil_mode();
    return b.op(OpKind::kMaxPool2d, {b.input()}, n);
  });
  builtin<tnn::AvgPool2dImpl>("AvgPool2d", [](const tnn::AvgPool2dImpl& m, GraphBuilder& b) {
    GB_CHECK(!m.options.divisor_override().has_value(), InvalidArgument, "divisor_override is set",
             "remove divisor_override");
    Node n;
    n.kernel = vec(m.options.kernel_size());
    n.stride = vec(m.options.stride());
    n.padding = vec(m.options.padding());
    n.dilation = {1, 1};
    n.ceil_mode = m.options.ceil_mode();
    n.count_include_pad = m.options.count_include_pad();
    return b.op(OpKind::kAvgPool2d, {b.input()}, n);
  });
  builtin<tnn::AdaptiveAvgPool2dImpl>("AdaptiveAvgPool2d", [](const tnn::AdaptiveAvgPool2dImpl& m, GraphBuilder& b) {
    Node n;
    for (const auto& s : *m.options.output_size()) {
      GB_CHECK(s.has_value(), InvalidArgument, "an adaptive pooling size of None (keep the input's size)",
               "give both output sizes");
      n.shape.push_back(*s);
    }
    return b.op(OpKind::kAdaptiveAvgPool2d, {b.input()}, n);
  });
  builtin<tnn::FlattenImpl>("Flatten", [](const tnn::FlattenImpl& m, GraphBuilder& b) {
    Node n;
    n.dim = m.options.start_dim();
    n.end_dim = m.options.end_dim();
    return b.op(OpKind::kFlatten, {b.input()}, n);
  });
  builtin<tnn::SoftmaxImpl>("Softmax", [](const tnn::SoftmaxImpl& m, GraphBuilder& b) {
    Node n;
    n.dim = m.options.dim();
    return b.op(OpKind::kSoftmax, {b.input()}, n);
  });
  builtin<tnn::LogSoftmaxImpl>("LogSoftmax", [](const tnn::LogSoftmaxImpl& m, GraphBuilder& b) {
    Node n;
    n.dim = m.options.dim();
    return b.op(OpKind::kLogSoftmax, {b.input()}, n);
  });
  // Dropout is the identity at inference.
  builtin<tnn::DropoutImpl>("Dropout", [](const tnn::DropoutImpl&, GraphBuilder& b) { return b.input(); });
  builtin<tnn::Dropout2dImpl>("Dropout2d", [](const tnn::Dropout2dImpl&, GraphBuilder& b) { return b.input(); });
  builtin<tnn::AlphaDropoutImpl>("AlphaDropout",
                                 [](const tnn::AlphaDropoutImpl&, GraphBuilder& b) { return b.input(); });
  builtin<tnn::IdentityImpl>("Identity", [](const tnn::IdentityImpl&, GraphBuilder& b) { return b.input(); });
  builtin<tnn::SequentialImpl>("Sequential", [](const tnn::SequentialImpl& m, GraphBuilder& b) { return chain(m, b); });
  builtin<nn::SeqImpl>("Sequential", [](const nn::SeqImpl& m, GraphBuilder& b) { return chain(m, b); });
  // The zoo.
  builtin<nn::MlpImpl>("Mlp", [](const nn::MlpImpl&, GraphBuilder& b) { return b.call("body", b.input()); });
  builtin<nn::CnnImpl>(
      "Cnn", [](const nn::CnnImpl&, GraphBuilder& b) { return b.call("classifier", b.call("features", b.input())); });
  builtin<nn::ResNetImpl>("ResNet", lower_resnet);
  builtin<nn::BasicBlockImpl>("BasicBlock", lower_basic_block);
  builtin<nn::BottleneckImpl>("Bottleneck", lower_bottleneck);
  builtin<nn::HardswishImpl>(
      "Hardswish", [](const nn::HardswishImpl&, GraphBuilder& b) { return b.op(OpKind::kHardswish, {b.input()}); });
  builtin<nn::HardsigmoidImpl>("Hardsigmoid", [](const nn::HardsigmoidImpl&, GraphBuilder& b) {
    return b.op(OpKind::kHardsigmoid, {b.input()});
  });
  builtin<nn::SqueezeExcitationImpl>("SqueezeExcitation", lower_squeeze_excitation);
  builtin<nn::InvertedResidualImpl>("InvertedResidual", lower_residual_block<nn::InvertedResidualImpl>);
  builtin<nn::MBConvImpl>("MBConv", lower_residual_block<nn::MBConvImpl>);
  builtin<nn::MobileNetV3Impl>(
      "MobileNetV3", [](const nn::MobileNetV3Impl&, GraphBuilder& b) { return lower_features_classifier(b); });
  builtin<nn::EfficientNetImpl>(
      "EfficientNet", [](const nn::EfficientNetImpl&, GraphBuilder& b) { return lower_features_classifier(b); });
  builtin<nn::VisionTransformerImpl>("VisionTransformer", lower_vit);
  builtin<nn::EncoderImpl>("Encoder", lower_encoder);
  builtin<nn::EncoderBlockImpl>("EncoderBlock", lower_encoder_block);
  builtin<nn::SelfAttentionImpl>("SelfAttention", lower_self_attention);
}

}  // namespace glassbox::exporter
