// Vision Transformers with torchvision's module tree and names (class_token, conv_proj,
// encoder.pos_embedding, encoder.layers.encoder_layer_i.{ln_1, self_attention.in_proj_weight,
// in_proj_bias, out_proj, ln_2, mlp.0, mlp.3}, encoder.ln, heads.head), so torchvision's weights
// load one to one:
// - vit_b_16: ViT-Base/16 (86.6 M parameters at 224x224);
// - vit_small: 6 layers of width 192 with 3 heads on 4x4 patches, for small images;
// - vit_hybrid: a convolutional stem (conv-BN-ReLU stages, then a 1x1 convolution to the width)
//   feeding the transformer encoder with its class token: torchvision's VisionTransformer with
//   conv_stem_configs, for data too small for a pure ViT.
//
//   VitOptions o = VitOptions::small();
//   VisionTransformer net(o, ModelShape{{3, 32, 32}, 10});
#pragma once

#include <string>
#include <vector>

#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "glassbox/nn/model.h"

namespace glassbox::nn {

struct VitOptions {
  std::string key = "vit_b_16";  // the config section, for messages
  std::int64_t patch_size = 16;  // without a conv stem: the patch embedding's kernel and stride
  std::int64_t num_layers = 12;
  std::int64_t num_heads = 12;
  std::int64_t hidden_dim = 768;
  std::int64_t mlp_dim = 3072;
  double dropout = 0.0;
  double attention_dropout = 0.0;
  // A convolutional stem: output channels and strides of its 3x3 conv-BN-ReLU layers (empty: patches).
  std::vector<std::int64_t> stem_channels;
  std::vector<std::int64_t> stem_strides;

  static VitOptions b16();
  static VitOptions small();
  static VitOptions hybrid();
  // Pixels per token side: patch_size, or the product of the stem's strides.
  std::int64_t token_stride() const;
  void visit(FieldVisitor& v);
  void validate() const;
};

// nn.MultiheadAttention(batch_first=True) used as self-attention, with its parameter names.
class SelfAttentionImpl : public torch::nn::Module {
 public:
  SelfAttentionImpl(std::int64_t dim, std::int64_t heads, double dropout);
  at::Tensor forward(const at::Tensor& x);  // [N, L, E] -> [N, L, E]
  std::int64_t heads() const { return heads_; }
  at::Tensor in_proj_weight, in_proj_bias;

 private:
  std::int64_t heads_;
  double dropout_;
  torch::nn::Linear out_proj_{nullptr};
};
TORCH_MODULE(SelfAttention);

// Pre-norm transformer layer: x + attn(ln_1(x)), then y + mlp(ln_2(y)).
class EncoderBlockImpl : public torch::nn::Module {
 public:
  EncoderBlockImpl(const VitOptions& o);
  at::Tensor forward(const at::Tensor& x);

 private:
  torch::nn::LayerNorm ln_1_{nullptr}, ln_2_{nullptr};
  SelfAttention self_attention_{nullptr};
  torch::nn::Sequential mlp_{nullptr};
  double dropout_;
};
TORCH_MODULE(EncoderBlock);

// Adds the position embedding, then dropout, the layers and a final LayerNorm.
class EncoderImpl : public torch::nn::Module {
 public:
  EncoderImpl(const VitOptions& o, std::int64_t seq_length);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor pos_embedding;
  torch::nn::Sequential& layers() { return layers_; }
  torch::nn::LayerNorm& ln() { return ln_; }
  double dropout() const { return dropout_; }
  void set_checkpointing(bool on) { checkpointing_ = on; }

 private:
  bool checkpointing_ = false;
  torch::nn::Sequential layers_{nullptr};
  torch::nn::LayerNorm ln_{nullptr};
  double dropout_;
};
TORCH_MODULE(Encoder);

class VisionTransformerImpl : public torch::nn::Module {
 public:
  VisionTransformerImpl(const VitOptions& options, const ModelShape& shape);
  at::Tensor forward(const at::Tensor& x);
  // The patch embedding (or each conv-stem layer), then every encoder layer (the first one
  // also forms the tokens), encoder.ln, heads.
  std::vector<Stage> stages();
  // [N, E, h, w] feature map -> [N, 1 + h*w, E] tokens with the class token first.
  at::Tensor tokens(const at::Tensor& map) const;
  at::Tensor class_token;
  std::int64_t hidden_dim() const { return hidden_; }
  // Gradient checkpointing of every encoder layer (checkpointing.h).
  void set_checkpointing(bool on) { encoder_->set_checkpointing(on); }

 private:
  std::int64_t hidden_, height_, width_;
  torch::nn::AnyModule conv_proj_;
  Encoder encoder_{nullptr};
  torch::nn::Sequential heads_{nullptr};
};
TORCH_MODULE(VisionTransformer);

}  // namespace glassbox::nn
