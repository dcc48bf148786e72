// Starting a model from pretrained weights by name: torchvision's state_dict names (what
// `safetensors.torch.save_file(model.state_dict(), ...)` writes), timm's names for EfficientNet
// and ViT (mapped to torchvision's), or a glassbox checkpoint's. Reports what matched, what is
// missing, unexpected or of another shape; a classification head of another size (another
// number of classes) keeps its fresh initialisation and is named. The input convolution adapts to
// another number of input channels (ImageNet's RGB weights for gray X-rays, or the reverse) as
// timm's adapt_input_conv does, so that an image with equal channels gives the same response.
//
//   InitReport r = load_pretrained(*model->module(), file.tensors, {.strict = true});
//   std::cout << r.summary() << "\n";   // "loaded 320 of 322 tensors (torchvision names); head fc re-initialised (1000
//   -> 10 classes)"
//
// Thread safety: reentrant; the module must not be used concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

#include "glassbox/core/safetensors.h"

namespace glassbox::nn {

struct InitOptions {
  // Any misfit other than the head is an error (FailedPrecondition naming them).
  bool strict = true;
  // The file holds only the trained (not frozen) parameters: the rest may be missing.
  bool trainable_only = false;
  // false: the head keeps its fresh initialisation even when it fits (other classes, as many).
  bool load_head = true;
};

struct InitReport {
  std::string naming;                      // "torchvision" (glassbox's own) or "timm"
  std::int64_t matched = 0;                // tensors loaded
  std::int64_t model_tensors = 0;          // parameters and buffers of the model
  std::string head;                        // the head's module path ("fc", "classifier.3", "heads.head")
  std::vector<std::string> reinitialised;  // head tensors kept at their initialisation, with both shapes
  std::vector<std::string> missing;        // model tensors the file lacks
  std::vector<std::string> unexpected;     // file tensors the model lacks
  std::vector<std::string> mismatched;     // "name (file [..], model [..])"
  // The input convolution loaded from weights for another number of input channels (timm's
  // adapt_input_conv: RGB kernels summed for one channel, else repeated and scaled by in/out).
  std::vector<std::string> adapted;

  nlohmann::json to_json() const;
  std::string summary() const;  // one line
};

// The module path of the model's classification head: its last Linear layer ("" if none).
std::string head_module(const torch::nn::Module& module);

// timm's names for EfficientNet (conv_stem, blocks.S.B.conv_dw, ...) and ViT (cls_token,
// patch_embed.proj, blocks.i.attn.qkv, ...) as torchvision's; other names unchanged. Sets
// `naming` to "timm" when it mapped anything.
TensorMap map_timm_names(const TensorMap& tensors, std::string* naming = nullptr);

// Copies every tensor of `tensors` (after map_timm_names) whose name and shape fit the module.
InitReport load_pretrained(torch::nn::Module& module, const TensorMap& tensors, const InitOptions& options);

}  // namespace glassbox::nn
