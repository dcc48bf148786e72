#include "glassbox/nn/registry.h"

#include <map>

#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::nn {
namespace {

// The options section of each built-in model.
std::map<std::string, std::function<void(const ModelOptions&)>> validators() {
  return {
      {"mlp", [](const ModelOptions& o) { o.mlp.validate(); }},
      {"cnn", [](const ModelOptions& o) { o.cnn.validate(); }},
      {"resnet18", [](const ModelOptions& o) { o.resnet18.validate(); }},
      {"resnet34", [](const ModelOptions& o) { o.resnet34.validate(); }},
      {"resnet50", [](const ModelOptions& o) { o.resnet50.validate(); }},
      {"mobilenet_v3_small", [](const ModelOptions& o) { o.mobilenet_v3_small.validate(); }},
      {"mobilenet_v3_large", [](const ModelOptions& o) { o.mobilenet_v3_large.validate(); }},
      {"efficientnet_b0", [](const ModelOptions& o) { o.efficientnet_b0.validate(); }},
      {"efficientnet_b1", [](const ModelOptions& o) { o.efficientnet_b1.validate(); }},
      {"efficientnet_b2", [](const ModelOptions& o) { o.efficientnet_b2.validate(); }},
      {"efficientnet_b3", [](const ModelOptions& o) { o.efficientnet_b3.validate(); }},
      {"vit_b_16", [](const ModelOptions& o) { o.vit_b_16.validate(); }},
      {"vit_small", [](const ModelOptions& o) { o.vit_small.validate(); }},
      {"vit_hybrid", [](const ModelOptions& o) { o.vit_hybrid.validate(); }},
  };
}

std::map<std::string, ModelFactory>& registry() {
  static std::map<std::string, ModelFactory> r = {
      {"mlp",
       [](const ModelOptions& o, const ModelShape& s) -> std::unique_ptr<Model> {
         return std::make_unique<ModuleModel<Mlp>>("mlp", Mlp(o.mlp, s));
       }},
      {"cnn",
       [](const ModelOptions& o, const ModelShape& s) -> std::unique_ptr<Model> {
         return std::make_unique<ModuleModel<Cnn>>("cnn", Cnn(o.cnn, s));
       }},
      {"resnet18",
       [](const ModelOptions& o, const ModelShape& s) -> std::unique_ptr<Model> {
         return std::make_unique<ModuleModel<ResNet>>("resnet18", ResNet(18, o.resnet18, s));
       }},
      {"resnet34",
       [](const ModelOptions& o, const ModelShape& s) -> std::unique_ptr<Model> {
         return std::make_unique<ModuleModel<ResNet>>("resnet34", ResNet(34, o.resnet34, s));
       }},
      {"resnet50",
       [](const ModelOptions& o, const ModelShape& s) -> std::unique_ptr<Model> {
         return std::make_unique<ModuleModel<ResNet>>("resnet50", ResNet(50, o.resnet50, s));
       }},
      {"mobilenet_v3_small",
       [](const ModelOptions& o, const ModelShape& s) -> std::unique_ptr<Model> {
         return std::make_unique<ModuleModel<MobileNetV3>>(
             "mobilenet_v3_small", MobileNetV3(MobileNetV3Size::kSmall, o.mobilenet_v3_small, s));
       }},
      {"mobilenet_v3_large",
       [](const ModelOptions& o, const ModelShape& s) -> std::unique_ptr<Model> {
         return std::make_unique<ModuleModel<MobileNetV3>>(
             "mobilenet_v3_large", MobileNetV3(MobileNetV3Size::kLarge, o.mobilenet_v3_large, s));
       }},
      {"efficientnet_b0",
       [](const ModelOptions& o, const ModelShape& s) -> std::unique_ptr<Model> {
         return std::make_unique<ModuleModel<EfficientNet>>("efficientnet_b0", EfficientNet(0, o.efficientnet_b0, s));
       }},
      {"efficientnet_b1",
       [](const ModelOptions& o, const ModelShape& s) -> std::unique_ptr<Model> {
         return std::make_unique<ModuleModel<EfficientNet>>("efficientnet_b1", EfficientNet(1, o.efficientnet_b1, s));
       }},
      {"efficientnet_b2",
       [](const ModelOptions& o, const ModelShape& s) -> std::unique_ptr<Model> {
         return std::make_unique<ModuleModel<EfficientNet>>("efficientnet_b2", EfficientNet(2, o.efficientnet_b2, s));
       }},
      {"efficientnet_b3",
       [](const ModelOptions& o, const ModelShape& s) -> std::unique_ptr<Model> {
         return std::make_unique<ModuleModel<EfficientNet>>("efficientnet_b3", EfficientNet(3, o.efficientnet_b3, s));
       }},
      {"vit_b_16",
       [](const ModelOptions& o, const ModelShape& s) -> std::unique_ptr<Model> {
         return std::make_unique<ModuleModel<VisionTransformer>>("vit_b_16", VisionTransformer(o.vit_b_16, s));
       }},
      {"vit_small",
       [](const ModelOptions& o, const ModelShape& s) -> std::unique_ptr<Model> {
         return std::make_unique<ModuleModel<VisionTransformer>>("vit_small", VisionTransformer(o.vit_small, s));
       }},
      {"vit_hybrid",
       [](const ModelOptions& o, const ModelShape& s) -> std::unique_ptr<Model> {
         return std::make_unique<ModuleModel<VisionTransformer>>("vit_hybrid", VisionTransformer(o.vit_hybrid, s));
       }},
  };
  return r;
}

}  // namespace

void ModelOptions::visit(FieldVisitor& v) {
  v.field("name", name,
          "model name from the zoo: mlp, cnn, resnet18/34/50, mobilenet_v3_small/large, efficientnet_b0..b3, "
          "vit_b_16, vit_small, vit_hybrid (or one registered by your code)");
  v.field("init_from", init_from,
          "start from these weights: a checkpoint directory or a .safetensors file (torchvision's or timm's "
          "state_dict names; a new run, not a resume)");
  v.field("init_strict", init_strict,
          "every tensor of init_from must fit (a head of another size is always re-initialised); false: report "
          "the misfits and keep their fresh initialisation");
  v.field("init_head", init_head,
          "load init_from's head (the last Linear layer) when it fits; false: keep a fresh head, for other classes "
          "(a head of another size is always fresh)");
  v.section("mlp", [this](FieldVisitor& s) { mlp.visit(s); });
  v.section("cnn", [this](FieldVisitor& s) { cnn.visit(s); });
  v.section("resnet18", [this](FieldVisitor& s) { resnet18.visit(s); });
  v.section("resnet34", [this](FieldVisitor& s) { resnet34.visit(s); });
  v.section("resnet50", [this](FieldVisitor& s) { resnet50.visit(s); });
  v.section("mobilenet_v3_small", [this](FieldVisitor& s) { mobilenet_v3_small.visit(s); });
  v.section("mobilenet_v3_large", [this](FieldVisitor& s) { mobilenet_v3_large.visit(s); });
  v.section("efficientnet_b0", [this](FieldVisitor& s) { efficientnet_b0.visit(s); });
  v.section("efficientnet_b1", [this](FieldVisitor& s) { efficientnet_b1.visit(s); });
  v.section("efficientnet_b2", [this](FieldVisitor& s) { efficientnet_b2.visit(s); });
  v.section("efficientnet_b3", [this](FieldVisitor& s) { efficientnet_b3.visit(s); });
  v.section("vit_b_16", [this](FieldVisitor& s) { vit_b_16.visit(s); });
  v.section("vit_small", [this](FieldVisitor& s) { vit_small.visit(s); });
  v.section("vit_hybrid", [this](FieldVisitor& s) { vit_hybrid.visit(s); });
}

void ModelOptions::validate() const {
  const auto names = registered_models();
  if (registry().count(name) == 0) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    const std::string near = closest_match(name, names);
    GB_THROW(NotFound, "model.name = \"" << name << "\" is not in the zoo (" << list << ")",
             near.empty() ? "pick one of the listed models" : "did you mean \"" + near + "\"?");
  }
  static const auto checks = validators();
  if (auto it = checks.find(name); it != checks.end()) it->second(*this);
}

void register_model(const std::string& name, ModelFactory factory) { registry()[name] = std::move(factory); }

std::vector<std::string> registered_models() {
  std::vector<std::string> out;
  for (const auto& [n, _] : registry()) out.push_back(n);
  return out;
}

std::unique_ptr<Model> make_model(const ModelOptions& options, const ModelShape& shape) {
  options.validate();
  GB_CHECK(shape.num_classes > 0, InvalidArgument,
           "the model needs at least one output class, got " << shape.num_classes, "check the labels of the data set");
  return registry().at(options.name)(options, shape);
}

std::int64_t count_parameters(const torch::nn::Module& module, bool trainable_only) {
  std::int64_t n = 0;
  for (const auto& p : module.parameters()) {
    if (!trainable_only || p.requires_grad()) n += p.numel();
  }
  return n;
}

}  // namespace glassbox::nn
