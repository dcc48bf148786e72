// Private to serve/engine: what the TorchScript/glassbox backend derives from a model's config and
// its forward() schema at load — the platform, how config inputs map to forward()'s arguments and
// outputs to the result's elements, data types, instance devices, thread parameters and the
// glassbox preprocessing constants (backend.h describes the rules).
//
//   std::shared_ptr<Plan> p = begin_plan(entry, 1);    // config only: platform, devices, threads
//   torch::jit::Module m = torch::jit::load(entry.model_path(1));
//   plan_signature(*p, m, entry);                      // inputs, outputs, glassbox contract
//
// Errors: glassbox::Error naming the model and version (InvalidArgument for a config the module
// or glassbox cannot serve, NotFound for a glassbox model without contract.json, Unavailable for
// KIND_GPU without CUDA). Thread safety: a finished Plan is immutable and shared by instances.
// Include from .cpp files only (LibTorch types; the precompiled header provides them).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "glassbox/data/image_preprocessing.h"
#include "glassbox/export/repository.h"
#include "glassbox/serve/engine/api.h"

namespace torch::jit {
struct Module;
}  // namespace torch::jit

namespace glassbox::serve::detail {

namespace triton = exporter::triton;

template <typename Repeated>
std::vector<std::int64_t> to_vector(const Repeated& r) {
  return std::vector<std::int64_t>(r.begin(), r.end());
}
// "a, b, c".
std::string join(const std::vector<std::string>& names);

enum class Platform { kTorchScript, kGlassbox };

struct InputPlan {
  std::string name;
  triton::DataType config_type = triton::TYPE_INVALID;
  DataType datatype = DataType::kFp32;
  bool bytes = false;
  c10::ScalarType dtype = c10::kFloat;               // fixed-size types
  std::optional<std::vector<std::int64_t>> reshape;  // the shape forward() sees, per sample
  std::size_t arg = 0;                               // forward()'s positional argument
};

struct OutputPlan {
  std::string name;
  triton::DataType config_type = triton::TYPE_INVALID;
  DataType datatype = DataType::kFp32;
  bool bytes = false;
  c10::ScalarType dtype = c10::kFloat;
  std::vector<std::int64_t> dims;        // what clients see, per sample
  std::vector<std::int64_t> model_dims;  // what forward() returns per sample (reshape, else dims)
  bool reshaped = false;
  std::size_t index = 0;  // element of a tuple/list result
};

// Everything derived from the config and the module at load; shared, immutable.
struct Plan {
  std::string model;
  std::int64_t version = 0;
  Platform platform = Platform::kTorchScript;
  triton::ModelConfig config;
  std::filesystem::path model_dir;
  bool batched = false;
  std::vector<InputPlan> inputs;
  std::vector<OutputPlan> outputs;
  std::size_t forward_args = 0;
  int config_intra_op_threads = 0;
  std::vector<c10::Device> devices;  // per instance index
  // glassbox: x * mul[c] - sub[c] after an optional channel flip; softmax on output 0.
  std::vector<float> pre_mul, pre_sub;
  std::vector<std::int64_t> pre_shape;  // [C, 1, ...] broadcasting over one sample
  bool flip_channels = false;
  // glassbox with a BYTES input: each element is an encoded image, decoded and transformed as
  // the contract's preprocessing.image says into a raw sample of shape image_shape.
  std::shared_ptr<const data::ImagePreprocessor> image;
  std::vector<std::int64_t> image_shape;
  bool probabilities = false;    // output 0 becomes probabilities: softmax, or sigmoid for sigmoid_outputs
  bool sigmoid_outputs = false;  // a multi-label model: each label's own sigmoid

  std::string who() const { return "model '" + model + "' version " + std::to_string(version); }
};

// A config parameter's string value, if set.
std::optional<std::string> parameter(const triton::ModelConfig& c, const std::string& key);
// A positive integer parameter; 0 when unset; InvalidArgument naming the key otherwise.
int positive_parameter(const triton::ModelConfig& c, const std::string& key);

// What the config alone decides: platform, batching, thread parameter, instance devices.
std::shared_ptr<Plan> begin_plan(const exporter::RepositoryEntry& entry, std::int64_t version);
// Inputs and outputs against forward()'s schema, and the glassbox contract.
void plan_signature(Plan& plan, const torch::jit::Module& module, const exporter::RepositoryEntry& entry);

}  // namespace glassbox::serve::detail
