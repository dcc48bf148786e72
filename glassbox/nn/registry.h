// The model zoo: models by name, each configured by its own options section.
//
//   [model]
//   name = "cnn"
//   [model.cnn]
//   channels = [32, 64]
//
//   std::unique_ptr<Model> m = make_model(options, ModelShape{{1, 28, 28}, 10});
//   register_model("mine", [](const ModelOptions&, const ModelShape& s) { return ...; });
//
// Thread safety: register_model is not thread-safe; register at start-up.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "glassbox/nn/cnn.h"
#include "glassbox/nn/mlp.h"
#include "glassbox/nn/model.h"
#include "glassbox/nn/resnet.h"

namespace glassbox::nn {

struct ModelOptions {
  std::string name = "mlp";
  // Weights to start from (a checkpoint directory or a .safetensors file): a new run, not a resume.
  std::string init_from;
  MlpOptions mlp;
  CnnOptions cnn;
  ResNetOptions resnet18;

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
