// Tested by nn_test (ZooReference.*: against torchvision and timm; Stages.*; Checkpointing.*).
#include "glassbox/nn/vit.h"

#include <cmath>

#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/nn/blocks.h"

namespace glassbox::nn {

namespace tnn = torch::nn;

VitOptions VitOptions::b16() { return VitOptions{}; }

VitOptions VitOptions::small() {
  VitOptions o;
  o.key = "vit_small";
  o.patch_size = 4;
  o.num_layers = 6;
  o.num_heads = 3;
  o.hidden_dim = 192;
  o.mlp_dim = 768;
  return o;
}

VitOptions VitOptions::hybrid() {
  VitOptions o = small();
  o.key = "vit_hybrid";
  o.stem_channels = {64, 128};
  o.stem_strides = {2, 2};
  return o;
}

std::int64_t VitOptions::token_stride() const {
  if (stem_channels.empty()) return patch_size;
  std::int64_t s = 1;
  for (auto v : stem_strides) s *= v;
  return s;
}

void VitOptions::visit(FieldVisitor& v) {
  v.field("patch_size", patch_size, "patch side in pixels (without a conv stem)");
  v.field("num_layers", num_layers, "transformer layers");
  v.field("num_heads", num_heads, "attention heads (must divide hidden_dim)");
  v.field("hidden_dim", hidden_dim, "token width");
  v.field("mlp_dim", mlp_dim, "hidden width of each layer's MLP");
  v.field("dropout", dropout, "dropout after the position embedding, the attention and in the MLPs");
  v.field("attention_dropout", attention_dropout, "dropout on the attention weights");
  v.field("stem_channels", stem_channels,
          "a convolutional stem: output channels of its 3x3 conv-BN-ReLU layers (empty: linear patch embedding)");
  v.field("stem_strides", stem_strides, "strides of the stem's layers; their product is the token size in pixels");
}

void VitOptions::validate() const {
  const std::string k = "model." + key;
  GB_CHECK(patch_size > 0, InvalidArgument, k << ".patch_size must be positive, got " << patch_size, "use 16 or 4");
  GB_CHECK(num_layers > 0 && num_heads > 0 && hidden_dim > 0 && mlp_dim > 0, InvalidArgument,
           k << ": num_layers, num_heads, hidden_dim and mlp_dim must be positive", "use e.g. 6, 3, 192, 768");
  GB_CHECK(hidden_dim % num_heads == 0, InvalidArgument,
           k << ".num_heads = " << num_heads << " does not divide hidden_dim = " << hidden_dim,
           "choose num_heads dividing hidden_dim (e.g. 3 for 192)");
  GB_CHECK(dropout >= 0 && dropout < 1 && attention_dropout >= 0 && attention_dropout < 1, InvalidArgument,
           k << ": dropout and attention_dropout must be in [0, 1)", "use 0 or e.g. 0.1");
  GB_CHECK(
      stem_channels.size() == stem_strides.size(), InvalidArgument,
      k << ".stem_channels has " << stem_channels.size() << " entries but stem_strides has " << stem_strides.size(),
      "give one stride per stem layer");
  for (std::size_t i = 0; i < stem_channels.size(); ++i) {
    GB_CHECK(stem_channels[i] > 0 && stem_strides[i] >= 1, InvalidArgument,
             k << ": stem layer " << i << " needs positive channels and stride", "use e.g. channels 64, stride 2");
  }
}

SelfAttentionImpl::SelfAttentionImpl(std::int64_t dim, std::int64_t heads, double dropout)
    : heads_(heads), dropout_(dropout) {
  in_proj_weight = register_parameter("in_proj_weight", torch::empty({3 * dim, dim}));
  in_proj_bias = register_parameter("in_proj_bias", torch::zeros({3 * dim}));
  out_proj_ = register_module("out_proj", tnn::Linear(dim, dim));
  // nn.MultiheadAttention's initialisation.
  tnn::init::xavier_uniform_(in_proj_weight);
  tnn::init::zeros_(out_proj_->bias);
}

at::Tensor SelfAttentionImpl::forward(const at::Tensor& x) {
  const std::int64_t n = x.size(0), l = x.size(1), e = x.size(2);
  const std::int64_t d = e / heads_;
  auto qkv = torch::linear(x, in_proj_weight, in_proj_bias).chunk(3, -1);
  auto split = [&](const at::Tensor& t) { return t.reshape({n, l, heads_, d}).transpose(1, 2); };
  at::Tensor y = at::scaled_dot_product_attention(split(qkv[0]), split(qkv[1]), split(qkv[2]), std::nullopt,
                                                  is_training() ? dropout_ : 0.0);
  return out_proj_->forward(y.transpose(1, 2).reshape({n, l, e}));
}

EncoderBlockImpl::EncoderBlockImpl(const VitOptions& o) : dropout_(o.dropout) {
  auto ln = [&] { return tnn::LayerNorm(tnn::LayerNormOptions({o.hidden_dim}).eps(1e-6)); };
  ln_1_ = register_module("ln_1", ln());
  self_attention_ = register_module("self_attention", SelfAttention(o.hidden_dim, o.num_heads, o.attention_dropout));
  ln_2_ = register_module("ln_2", ln());
  tnn::Sequential mlp;
  mlp->push_back("0", tnn::Linear(o.hidden_dim, o.mlp_dim));
  mlp->push_back("1", tnn::GELU());
  mlp->push_back("2", tnn::Dropout(o.dropout));
  mlp->push_back("3", tnn::Linear(o.mlp_dim, o.hidden_dim));
  mlp->push_back("4", tnn::Dropout(o.dropout));
  mlp_ = register_module("mlp", mlp);
  for (auto& m : mlp_->modules(false)) {
    if (auto* lin = m->as<tnn::Linear>()) {
      tnn::init::xavier_uniform_(lin->weight);
      tnn::init::normal_(lin->bias, 0.0, 1e-6);
    }
  }
}

at::Tensor EncoderBlockImpl::forward(const at::Tensor& x) {
  at::Tensor a = self_attention_->forward(ln_1_->forward(x));
  a = torch::dropout(a, dropout_, is_training()) + x;
  return a + mlp_->forward(ln_2_->forward(a));
}

EncoderImpl::EncoderImpl(const VitOptions& o, std::int64_t seq_length) : dropout_(o.dropout) {
  pos_embedding = register_parameter("pos_embedding", torch::empty({1, seq_length, o.hidden_dim}));
  tnn::init::normal_(pos_embedding, 0.0, 0.02);
  tnn::Sequential layers;
  for (std::int64_t i = 0; i < o.num_layers; ++i)
    layers->push_back("encoder_layer_" + std::to_string(i), EncoderBlock(o));
  layers_ = register_module("layers", layers);
  ln_ = register_module("ln", tnn::LayerNorm(tnn::LayerNormOptions({o.hidden_dim}).eps(1e-6)));
}

at::Tensor EncoderImpl::forward(const at::Tensor& x) {
  at::Tensor y = torch::dropout(x + pos_embedding, dropout_, is_training());
  return ln_->forward(forward_blocks(*layers_, y, checkpointing_));
}

VisionTransformerImpl::VisionTransformerImpl(const VitOptions& o, const ModelShape& shape) {
  o.validate();
  GB_CHECK(shape.input_shape.size() == 3, InvalidArgument,
           o.key << " needs image inputs [C, H, W], got a sample shape of rank " << shape.input_shape.size(),
           "use model.name = \"mlp\"");
  const std::int64_t c = shape.input_shape[0];
  height_ = shape.input_shape[1];
  width_ = shape.input_shape[2];
  const std::int64_t p = o.token_stride();
  GB_CHECK(height_ % p == 0 && width_ % p == 0, InvalidArgument,
           o.key << ": the images (" << height_ << "x" << width_ << ") are not a whole number of " << p << "x" << p
                 << " patches",
           "resize the images to a multiple of " + std::to_string(p) + " or change model." + o.key +
               (o.stem_channels.empty() ? ".patch_size" : ".stem_strides"));
  hidden_ = o.hidden_dim;
  if (o.stem_channels.empty()) {
    tnn::Conv2d proj(tnn::Conv2dOptions(c, o.hidden_dim, p).stride(p));
    const double fan_in = static_cast<double>(c * p * p);
    torch::NoGradGuard ng;
    tnn::init::normal_(proj->weight, 0.0, std::sqrt(1.0 / fan_in));
    proj->weight.clamp_(-2.0, 2.0);  // trunc_normal_(std, a=-2, b=2)
    tnn::init::zeros_(proj->bias);
    conv_proj_ = tnn::AnyModule(register_module("conv_proj", proj));
  } else {
    Seq stem;
    std::int64_t prev = c;
    for (std::size_t i = 0; i < o.stem_channels.size(); ++i) {
      stem->push_back(
          "conv_bn_relu_" + std::to_string(i),
          conv_norm_act({prev, o.stem_channels[i], 3, o.stem_strides[i], 1}, BnSettings{}, BlockAct::kRelu));
      prev = o.stem_channels[i];
    }
    tnn::Conv2d last(tnn::Conv2dOptions(prev, o.hidden_dim, 1));
    {
      torch::NoGradGuard ng;
      tnn::init::normal_(last->weight, 0.0, std::sqrt(2.0 / static_cast<double>(o.hidden_dim)));
      tnn::init::zeros_(last->bias);
    }
    stem->push_back("conv_last", last);
    conv_proj_ = tnn::AnyModule(register_module("conv_proj", stem));
  }
  class_token = register_parameter("class_token", torch::zeros({1, 1, o.hidden_dim}));
  const std::int64_t seq = (height_ / p) * (width_ / p) + 1;
  encoder_ = register_module("encoder", Encoder(o, seq));
  tnn::Sequential heads;
  tnn::Linear head(o.hidden_dim, shape.num_classes);
  tnn::init::zeros_(head->weight);
  tnn::init::zeros_(head->bias);
  heads->push_back("head", head);
  heads_ = register_module("heads", heads);
}

at::Tensor VisionTransformerImpl::tokens(const at::Tensor& map) const {
  const std::int64_t n = map.size(0);
  at::Tensor t = map.reshape({n, hidden_, -1}).permute({0, 2, 1});
  return torch::cat({class_token.expand({n, -1, -1}), t}, 1);
}

at::Tensor VisionTransformerImpl::forward(const at::Tensor& x) {
  GB_CHECK(x.dim() == 4 && x.size(2) == height_ && x.size(3) == width_, InvalidArgument,
           "the vision transformer was built for " << height_ << "x" << width_ << " images, got input " << x.sizes(),
           "resize the images to the size the model was built for");
  at::Tensor y = encoder_->forward(tokens(conv_proj_.forward(x)));
  return heads_->forward(y.select(1, 0));
}

std::vector<Stage> VisionTransformerImpl::stages() {
  std::vector<Stage> out;
  if (auto stem = std::dynamic_pointer_cast<SeqImpl>(conv_proj_.ptr())) {
    out = sequential_stages("conv_proj", tnn::Sequential(std::static_pointer_cast<tnn::SequentialImpl>(stem)));
  } else {
    tnn::AnyModule proj = conv_proj_;
    out.push_back({"conv_proj", [proj](const at::Tensor& x) mutable { return proj.forward(x); }, true});
  }
  auto self = std::dynamic_pointer_cast<VisionTransformerImpl>(shared_from_this());
  Encoder enc = encoder_;
  std::size_t i = 0;
  for (auto it = enc->layers()->begin(); it != enc->layers()->end(); ++it, ++i) {
    tnn::AnyModule layer = *it;
    const std::string name = "encoder.layers.encoder_layer_" + std::to_string(i);
    if (i == 0) {
      out.push_back({name,
                     [self, enc, layer](const at::Tensor& map) mutable {
                       at::Tensor t = self->tokens(map) + enc->pos_embedding;
                       return layer.forward(torch::dropout(t, enc->dropout(), enc->is_training()));
                     },
                     false});
    } else {
      out.push_back({name, [layer](const at::Tensor& t) mutable { return layer.forward(t); }, false});
    }
  }
  out.push_back({"encoder.ln", [enc](const at::Tensor& t) mutable { return enc->ln()->forward(t); }, false});
  tnn::Sequential heads = heads_;
  out.push_back({"heads", [heads](const at::Tensor& t) mutable { return heads->forward(t.select(1, 0)); }, false});
  return out;
}

}  // namespace glassbox::nn
