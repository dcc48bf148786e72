// The model zoo: models by name, each configured by its own options section.
//
//   [model]
//   name = "efficientnet_b0"
//   init_from = "efficientnet_b0.safetensors"   # torchvision's weights, converted once
//   [model.efficientnet_b0]
//   dropout = 0.3
//
//   std::unique_ptr<Model> m = make_model(options, ModelShape{{3, 224, 224}, 10});
//   register_model("mine", [](const ModelOptions&, const ModelShape& s) { return ...; });
//
// The torchvision-equal models (module tree, state_dict names, norm settings, initialisation):
// resnet18/34/50, mobilenet_v3_small/large, efficientnet_b0..b3, vit_b_16; and vit_small and
// vit_hybrid, built from torchvision's VisionTransformer with other sizes.
//
// Thread safety: register_model is not thread-safe; register at start-up.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "glassbox/nn/cnn.h"
#include "glassbox/nn/efficientnet.h"
#include "glassbox/nn/mlp.h"
#include "glassbox/nn/mobilenet.h"
#include "glassbox/nn/model.h"
#include "glassbox/nn/resnet.h"
#include "glassbox/nn/vit.h"

namespace glassbox::nn {

struct ModelOptions {
  std::string name = "mlp";
  // Weights to start from (a checkpoint directory or a .safetensors file): a new run, not a resume.
  std::string init_from;
  // Any tensor of init_from that does not fit (other than a head of another size) is an error;
  // false: reported, and the model's own initialisation kept for it.
  bool init_strict = true;
  // A head (the last Linear layer) that fits is loaded too; false keeps its fresh initialisation:
  // the new data's classes are others, even when there are as many.
  bool init_head = true;
  MlpOptions mlp;
  CnnOptions cnn;
  ResNetOptions resnet18{.key = "resnet18"};
  ResNetOptions resnet34{.key = "resnet34", .stem = Stem::kImagenet};
  ResNetOptions resnet50{.key = "resnet50", .stem = Stem::kImagenet};
  MobileNetV3Options mobilenet_v3_small{.key = "mobilenet_v3_small"};
  MobileNetV3Options mobilenet_v3_large{.key = "mobilenet_v3_large"};
  EfficientNetOptions efficientnet_b0{.key = "efficientnet_b0"};
  EfficientNetOptions efficientnet_b1{.key = "efficientnet_b1"};
  EfficientNetOptions efficientnet_b2{.key = "efficientnet_b2", .dropout = 0.3};
  EfficientNetOptions efficientnet_b3{.key = "efficientnet_b3", .dropout = 0.3};
  VitOptions vit_b_16 = VitOptions::b16();
  VitOptions vit_small = VitOptions::small();
  VitOptions vit_hybrid = VitOptions::hybrid();

  void visit(FieldVisitor& v);
  void validate() const;  // the name must be registered; the chosen section must be valid
};

using ModelFactory = std::function<std::unique_ptr<Model>(const ModelOptions&, const ModelShape&)>;

void register_model(const std::string& name, ModelFactory factory);
std::vector<std::string> registered_models();
// NotFound (with "did you mean") for an unknown name.
std::unique_ptr<Model> make_model(const ModelOptions& options, const ModelShape& shape);

// Parameter counts.
std::int64_t count_parameters(const torch::nn::Module& module, bool trainable_only);

}  // namespace glassbox::nn
