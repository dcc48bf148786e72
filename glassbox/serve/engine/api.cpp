// The torch-free helpers of api.h: datatype names and sizes, shapes, tensors, options.
#include "glassbox/serve/engine/api.h"

#include <array>
#include <utility>

namespace glassbox::serve {
namespace {

struct TypeInfo {
  DataType type;
  const char* name;
  std::size_t size;
};
constexpr std::array<TypeInfo, 14> kTypes = {{
    {DataType::kBool, "BOOL", 1},
    {DataType::kUint8, "UINT8", 1},
    {DataType::kUint16, "UINT16", 2},
    {DataType::kUint32, "UINT32", 4},
    {DataType::kUint64, "UINT64", 8},
    {DataType::kInt8, "INT8", 1},
    {DataType::kInt16, "INT16", 2},
    {DataType::kInt32, "INT32", 4},
    {DataType::kInt64, "INT64", 8},
    {DataType::kFp16, "FP16", 2},
    {DataType::kFp32, "FP32", 4},
    {DataType::kFp64, "FP64", 8},
    {DataType::kBf16, "BF16", 2},
    {DataType::kBytes, "BYTES", 0},
}};

const TypeInfo& info(DataType type) {
  for (const TypeInfo& t : kTypes) {
    if (t.type == type) return t;
  }
  return kTypes.back();  // unreachable for a valid enum value
}

}  // namespace

const char* datatype_name(DataType type) { return info(type).name; }

std::optional<DataType> parse_datatype(std::string_view name) {
  for (const TypeInfo& t : kTypes) {
    if (name == t.name) return t.type;
  }
  return std::nullopt;
}

std::size_t element_size(DataType type) { return info(type).size; }

std::int64_t element_count(std::span<const std::int64_t> shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) return -1;
    n *= d;
  }
  return n;
}

std::string shape_string(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Tensor Tensor::owning(std::string name, DataType type, std::vector<std::int64_t> shape, std::string bytes) {
  auto holder = std::make_shared<const std::string>(std::move(bytes));
  const auto* data = reinterpret_cast<const std::uint8_t*>(holder->data());
  const std::size_t size = holder->size();
  return view(std::move(name), type, std::move(shape), std::move(holder), data, size);
}

Tensor Tensor::view(std::string name, DataType type, std::vector<std::int64_t> shape, std::shared_ptr<const void> owner,
                    const std::uint8_t* data, std::size_t size) {
  Tensor t;
  t.name = std::move(name);
  t.datatype = type;
  t.shape = std::move(shape);
  t.owner = std::move(owner);
  t.data = data;
  t.size = size;
  return t;
}

void EngineOptions::validate() const {
  GB_CHECK(!repository.empty(), InvalidArgument, "no model repository given",
           std::string("pass --model-repository DIR (a folder of NAME/config.pbtxt and NAME/1/model.pt)"));
  GB_CHECK(default_intra_op_threads >= 0, InvalidArgument,
           "intra-op thread count must be >= 0, got " << default_intra_op_threads,
           std::string("use 0 for LibTorch's default or a positive count"));
  GB_CHECK(control_mode == ModelControlMode::kExplicit || startup_models.empty(), InvalidArgument,
           "models to load at startup were given but the model control mode is none (every model loads)",
           std::string("add --model-control-mode explicit, or drop --load-model"));
  monitor_options.validate();
}

monitor::MonitorSnapshot Engine::set_monitor_sample_rate(const std::string& model, std::int64_t version, double) {
  return monitor_snapshot(model, version);  // throws: this engine monitors nothing
}

monitor::MonitorSnapshot Engine::monitor_snapshot(const std::string& model, std::int64_t version) const {
  model_metadata(model, version);  // unknown models and versions, as everywhere
  GB_THROW(FailedPrecondition, "model '" << model << "' is not monitored by this engine",
           "serve it with glassbox serve, which monitors models exported with a profile");
}

namespace {

std::optional<monitor::ElementType> monitor_type(DataType t) {
  using E = monitor::ElementType;
  switch (t) {
    case DataType::kBool: return E::kBool;
    case DataType::kUint8: return E::kUint8;
    case DataType::kUint16: return E::kUint16;
    case DataType::kUint32: return E::kUint32;
    case DataType::kUint64: return E::kUint64;
    case DataType::kInt8: return E::kInt8;
    case DataType::kInt16: return E::kInt16;
    case DataType::kInt32: return E::kInt32;
    case DataType::kInt64: return E::kInt64;
    case DataType::kFp16: return E::kFp16;
    case DataType::kFp32: return E::kFp32;
    case DataType::kFp64: return E::kFp64;
    case DataType::kBf16: return E::kBf16;
    case DataType::kBytes: return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

std::optional<monitor::TensorBytes> monitor_bytes(const Tensor& t) {
  const auto type = monitor_type(t.datatype);
  if (!type) return std::nullopt;
  return monitor::TensorBytes{*type, t.data, t.size,
                              static_cast<std::size_t>(std::max<std::int64_t>(0, t.element_count()))};
}

std::optional<monitor::RawTensor> monitor_tensor(const Tensor& t) {
  const auto type = monitor_type(t.datatype);
  if (!type) return std::nullopt;
  monitor::RawTensor r;
  r.type = *type;
  r.shape = t.shape;
  r.owner = t.owner;
  r.data = t.data;
  r.size = t.size;
  return r;
}

Error explicit_version_zero(const Engine& engine, const std::string& model) {
  for (const IndexEntry& e : engine.repository_index(false)) {
    if (e.name == model) {
      return Error(ErrorCode::kNotFound, "Request for unknown model: '" + model + "' version 0 is not found",
                   "versions are numbered from 1; name no version for the highest ready one");
    }
  }
  return Error(ErrorCode::kInvalidArgument, "Request for unknown model: '" + model + "' is not found");
}

}  // namespace glassbox::serve
