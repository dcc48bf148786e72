// Test helpers for serve/engine (linked only into serve_engine_test): TorchScript models written
// from C++ source and small model repositories in a temporary directory, and conversions between
// LibTorch tensors and wire tensors.
//
//   fs::path repo = glassbox::testing::temp_dir("engine");
//   write_model(repo, "affine", kConfigText, "def forward(self, x):\n  return x * self.w\n",
//               {{"w", torch::ones({4})}});                       // repo/affine/{config.pbtxt,1/model.pt}
//   Tensor in = wire("INPUT__0", torch::rand({2, 4}));
//   at::Tensor back = from_wire(in);
//
// Thread safety: none needed (test thread); the functions are reentrant.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "glassbox/serve/engine/api.h"

namespace glassbox::serve::testing {

namespace fs = std::filesystem;

using Buffers = std::vector<std::pair<std::string, at::Tensor>>;

// A TorchScript module with `buffers` registered and `source` (TorchScript methods, forward among
// them) defined, saved to `file`. Attributes named in `int_attributes` are int attributes set to 0.
void save_script(const fs::path& file, const std::string& source, const Buffers& buffers = {},
                 const std::vector<std::string>& int_attributes = {});

// DIR/NAME/config.pbtxt = config_text and DIR/NAME/V/model.pt for every version. Returns DIR/NAME.
fs::path write_model(const fs::path& repo, const std::string& name, const std::string& config_text,
                     const std::string& source, const Buffers& buffers = {},
                     const std::vector<std::int64_t>& versions = {1},
                     const std::vector<std::string>& int_attributes = {});

// The wire datatype of a LibTorch dtype.
DataType wire_type(c10::ScalarType type);
// A wire tensor holding a copy of `t`'s bytes (made contiguous), shape t's.
Tensor wire(const std::string& name, const at::Tensor& t);
// A BYTES wire tensor of `values`, shape `shape`.
Tensor wire_strings(const std::string& name, const std::vector<std::string>& values, std::vector<std::int64_t> shape);
// A LibTorch tensor holding a copy of a fixed-size wire tensor.
at::Tensor from_wire(const Tensor& t);
// The elements of a BYTES wire tensor.
std::vector<std::string> strings_of(const Tensor& t);

}  // namespace glassbox::serve::testing
