// safetensors reader and writer (the format of Hugging Face's `safetensors` package):
// 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}},
// optional "__metadata__" string map, then the raw little-endian tensor bytes.
//
//   TensorMap weights = {{"fc1.weight", w}, {"fc1.bias", b}};
//   save_safetensors("model.safetensors", weights, {{"format", "pt"}});
//   SafetensorsFile f = load_safetensors("model.safetensors");
//
// Files are written atomically. Loading validates the header, every dtype, shape and offset,
// and reports a truncated or corrupt file naming the path and the tensor.
// Thread safety: reentrant.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace glassbox {

// Ordered list of named tensors (order is kept in the file).
using TensorMap = std::vector<std::pair<std::string, at::Tensor>>;

struct SafetensorsFile {
  TensorMap tensors;
  std::map<std::string, std::string> metadata;
  const at::Tensor* find(const std::string& name) const;
};

std::string encode_safetensors(const TensorMap& tensors, const std::map<std::string, std::string>& metadata = {});
SafetensorsFile decode_safetensors(const std::string& bytes, const std::string& source);

void save_safetensors(const std::filesystem::path& path, const TensorMap& tensors,
                      const std::map<std::string, std::string>& metadata = {});
SafetensorsFile load_safetensors(const std::filesystem::path& path);

}  // namespace glassbox
