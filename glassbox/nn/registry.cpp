#include "glassbox/nn/registry.h"

#include <map>

#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::nn {
namespace {

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
         return std::make_unique<ModuleModel<ResNet18>>("resnet18", ResNet18(o.resnet18, s));
       }},
  };
  return r;
}

}  // namespace

void ModelOptions::visit(FieldVisitor& v) {
  v.field("name", name, "model name from the zoo: mlp, cnn, resnet18 (or one registered by your code)");
  v.field("init_from", init_from,
          "start from these weights: a checkpoint directory or a .safetensors file (a new run, not a resume)");
  v.section("mlp", [this](FieldVisitor& s) { mlp.visit(s); });
  v.section("cnn", [this](FieldVisitor& s) { cnn.visit(s); });
  v.section("resnet18", [this](FieldVisitor& s) { resnet18.visit(s); });
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
  if (name == "mlp") mlp.validate();
  if (name == "cnn") cnn.validate();
  if (name == "resnet18") resnet18.validate();
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
