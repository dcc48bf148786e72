// Test helpers for serve/engine (test_repository.h).
#include "glassbox/serve/engine/test_repository.h"

#include <cstring>

#include <torch/script.h>
#include <torch/torch.h>

#include "glassbox/base/files.h"
#include "glassbox/serve/engine/torch_io.h"

namespace glassbox::serve::testing {

void save_script(const fs::path& file, const std::string& source, const Buffers& buffers,
                 const std::vector<std::string>& int_attributes) {
  torch::jit::Module m("m");
  for (const auto& [name, value] : buffers) m.register_buffer(name, value);
  for (const std::string& name : int_attributes) m.register_attribute(name, c10::IntType::get(), 0);
  m.define(source);
  fs::create_directories(file.parent_path());
  m.save(file.string());
}

fs::path write_model(const fs::path& repo, const std::string& name, const std::string& config_text,
                     const std::string& source, const Buffers& buffers, const std::vector<std::int64_t>& versions,
                     const std::vector<std::string>& int_attributes) {
  const fs::path dir = repo / name;
  fs::create_directories(dir);
  write_file_atomic(dir / "config.pbtxt", config_text);
  for (std::int64_t v : versions) save_script(dir / std::to_string(v) / "model.pt", source, buffers, int_attributes);
  return dir;
}

DataType wire_type(c10::ScalarType type) {
  switch (type) {
    case at::kBool: return DataType::kBool;
    case at::kByte: return DataType::kUint8;
    case at::kUInt16: return DataType::kUint16;
    case at::kUInt32: return DataType::kUint32;
    case at::kUInt64: return DataType::kUint64;
    case at::kChar: return DataType::kInt8;
    case at::kShort: return DataType::kInt16;
    case at::kInt: return DataType::kInt32;
    case at::kLong: return DataType::kInt64;
    case at::kHalf: return DataType::kFp16;
    case at::kFloat: return DataType::kFp32;
    case at::kDouble: return DataType::kFp64;
    case at::kBFloat16: return DataType::kBf16;
    default: throw std::runtime_error("no wire type for " + std::string(c10::toString(type)));
  }
}

Tensor wire(const std::string& name, const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  std::string bytes(static_cast<const char*>(c.data_ptr()), c.nbytes());
  return Tensor::owning(name, wire_type(c.scalar_type()), std::vector<std::int64_t>(c.sizes().begin(), c.sizes().end()),
                        std::move(bytes));
}

Tensor wire_strings(const std::string& name, const std::vector<std::string>& values, std::vector<std::int64_t> shape) {
  c10::List<std::string> list;
  for (const std::string& v : values) list.push_back(v);
  return Tensor::owning(name, DataType::kBytes, std::move(shape), detail::serialize_strings(list, 0, list.size()));
}

at::Tensor from_wire(const Tensor& t) {
  const std::optional<DataType> dt = t.datatype;
  c10::ScalarType type = at::kFloat;
  for (c10::ScalarType s : {at::kBool, at::kByte, at::kUInt16, at::kUInt32, at::kUInt64, at::kChar, at::kShort,
                            at::kInt, at::kLong, at::kHalf, at::kFloat, at::kDouble, at::kBFloat16}) {
    if (wire_type(s) == *dt) type = s;
  }
  at::Tensor out = torch::empty(t.shape, torch::TensorOptions().dtype(type));
  if (t.size != out.nbytes())
    throw std::runtime_error("wire tensor " + t.name + " has " + std::to_string(t.size) + " bytes for shape " +
                             shape_string(t.shape));
  if (t.size != 0) std::memcpy(out.data_ptr(), t.data, t.size);
  return out;
}

std::vector<std::string> strings_of(const Tensor& t) {
  return detail::parse_strings(t.bytes(), t.element_count(), "output " + t.name);
}

}  // namespace glassbox::serve::testing
