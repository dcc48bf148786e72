// LayerMap: the module tree of a model flattened into "units" — the modules that do work in a
// forward pass — and the lookup from a tensor (parameter or buffer) to the unit that owns it.
//
// LibTorch's C++ modules have no forward hooks. glassbox observes ATen ops instead (see
// recorder.h) and attributes each op to a module: an op that reads a module's parameter or
// buffer belongs to that module; an op without parameters belongs to the next parameterless
// module of the matching kind (ReLU, MaxPool2d, Dropout, ...), to the parameterless custom
// module being run, or — when the model calls a function such as torch::relu in its forward —
// it is named "<previous module>:<op>".
//
//   LayerMap map(task.module());
//   for (const Unit& u : map.units()) std::cout << u.path << " " << u.type << "\n";
//   int owner = map.owner(weight.unsafeGetTensorImpl());   // index into units(), or -1
//
// Ownership: holds raw TensorImpl pointers of the module's tensors; valid while the module's
// parameters are not replaced (rebuild the map after load_state_dict into new tensors).
// Thread safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

namespace glassbox::inspect {

struct Unit {
  std::string path;          // "layers.fc0", "layer1.0.bn1"; "" for the root module
  std::string type;          // "Linear", "BatchNorm2d", "ReLU", or the user's class name
  bool has_tensors = false;  // owns parameters or buffers directly
  bool known_kind = false;   // parameterless and of a kind whose ops are known (ReLU, pooling, ...)
};

struct NamedParameter {
  std::string name;  // full name as named_parameters() gives it, e.g. "layers.fc0.weight"
  at::Tensor tensor;
  int unit = -1;
};

class LayerMap {
 public:
  explicit LayerMap(torch::nn::Module& root);

  const std::vector<Unit>& units() const { return units_; }
  // Parameters (trainable or not) in registration order, each with its unit.
  const std::vector<NamedParameter>& parameters() const { return parameters_; }
  // The unit owning this parameter or buffer, or -1.
  int owner(const c10::TensorImpl* impl) const;
  // Whether a parameterless unit of this type runs this ATen op ("aten::relu").
  static bool kind_runs_op(const std::string& type, const std::string& op);
  // "Linear" from "torch::nn::LinearImpl", "MyBlock" from "app::MyBlockImpl".
  static std::string short_type(const std::string& demangled);

 private:
  std::vector<Unit> units_;
  std::vector<NamedParameter> parameters_;
  std::unordered_map<const c10::TensorImpl*, int> owner_;
};

}  // namespace glassbox::inspect
