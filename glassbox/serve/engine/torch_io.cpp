// Wire tensors <-> LibTorch tensors for the backends (torch_io.h).
#include "glassbox/serve/engine/torch_io.h"

#include <cstring>
#include <sstream>

#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::serve::detail {

namespace triton = exporter::triton;

DataType serve_datatype(triton::DataType type) {
  const std::optional<DataType> t = parse_datatype(exporter::kserve_datatype(type));
  GB_CHECK(t.has_value(), InvalidArgument, "data type " << triton::DataType_Name(type) << " has no KServe name",
           std::string("use TYPE_FP32, TYPE_INT64, TYPE_UINT8, TYPE_BOOL, TYPE_STRING, ..."));
  return *t;
}

std::optional<c10::ScalarType> torch_dtype(triton::DataType type) {
  switch (type) {
    case triton::TYPE_BOOL: return at::kBool;
    case triton::TYPE_UINT8: return at::kByte;
    case triton::TYPE_UINT16: return at::kUInt16;
    case triton::TYPE_UINT32: return at::kUInt32;
    case triton::TYPE_UINT64: return at::kUInt64;
    case triton::TYPE_INT8: return at::kChar;
    case triton::TYPE_INT16: return at::kShort;
    case triton::TYPE_INT32: return at::kInt;
    case triton::TYPE_INT64: return at::kLong;
    case triton::TYPE_FP16: return at::kHalf;
    case triton::TYPE_FP32: return at::kFloat;
    case triton::TYPE_FP64: return at::kDouble;
    case triton::TYPE_BF16: return at::kBFloat16;
    default: return std::nullopt;
  }
}

std::string dtype_text(c10::ScalarType type) {
  for (int i = triton::DataType_MIN; i <= triton::DataType_MAX; ++i) {
    const auto t = static_cast<triton::DataType>(i);
    if (triton::DataType_IsValid(i) && torch_dtype(t) == type)
      return triton::DataType_Name(t) + " (" + c10::toString(type) + ")";
  }
  return c10::toString(type);
}

at::Tensor gather_input(std::span<const BatchItem> items, std::size_t index, c10::ScalarType dtype, bool batched,
                        const std::string& model, const std::string& input) {
  GB_CHECK(!items.empty(), Internal, "model '" << model << "': an empty batch", std::string("report this as a bug"));
  GB_CHECK(
      batched || items.size() == 1, Internal,
      "model '" << model << "' has no batch axis (max_batch_size 0) but got a batch of " << items.size() << " requests",
      std::string("report this as a bug"));
  const Tensor& first = (*items[0].inputs).at(index);
  std::vector<std::int64_t> shape = first.shape;
  if (batched) {
    GB_CHECK(!shape.empty(), InvalidArgument,
             "input '" << input << "' of model '" << model << "' has no batch axis (shape [])",
             std::string("send shape [batch, ...dims]"));
    std::int64_t total = 0;
    for (const BatchItem& item : items) total += item.batch_size;
    shape[0] = total;
  }
  const std::size_t element = c10::elementSize(dtype);
  at::Tensor t = at::empty(shape, at::TensorOptions().dtype(dtype));
  auto* dst = static_cast<std::uint8_t*>(t.data_ptr());
  std::size_t offset = 0;
  for (const BatchItem& item : items) {
    const Tensor& in = (*item.inputs).at(index);
    const std::int64_t count = in.element_count();
    const bool same_sample =
        in.shape.size() == first.shape.size() &&
        std::equal(in.shape.begin() + (batched ? 1 : 0), in.shape.end(), first.shape.begin() + (batched ? 1 : 0));
    GB_CHECK(same_sample && count >= 0 && (!batched || in.shape[0] == item.batch_size), InvalidArgument,
             "input '" << input << "' of model '" << model << "' has shape " << shape_string(in.shape)
                       << " in a batch of shape " << shape_string(first.shape) << " (batch size " << item.batch_size
                       << ")",
             std::string("report this as a bug: the batcher only joins requests of equal shapes"));
    const std::size_t bytes = static_cast<std::size_t>(count) * element;
    GB_CHECK(in.size == bytes && offset + bytes <= t.nbytes(), InvalidArgument,
             "input '" << input << "' of model '" << model << "' holds " << in.size << " bytes, shape "
                       << shape_string(in.shape) << " needs " << bytes,
             std::string("send shape x element size bytes"));
    if (bytes != 0) std::memcpy(dst + offset, in.data, bytes);
    offset += bytes;
  }
  return t;
}

std::vector<std::string> parse_strings(std::span<const std::uint8_t> bytes, std::int64_t count,
                                       const std::string& what) {
  std::vector<std::string> out;
  out.reserve(static_cast<std::size_t>(std::max<std::int64_t>(count, 0)));
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    GB_CHECK(pos + 4 <= bytes.size(), InvalidArgument,
             what << ": element " << out.size() << " has a truncated 4-byte length at byte " << pos,
             std::string("each BYTES element is a 4-byte little-endian length followed by that many bytes"));
    const std::uint32_t n = static_cast<std::uint32_t>(bytes[pos]) | static_cast<std::uint32_t>(bytes[pos + 1]) << 8 |
                            static_cast<std::uint32_t>(bytes[pos + 2]) << 16 |
                            static_cast<std::uint32_t>(bytes[pos + 3]) << 24;
    pos += 4;
    GB_CHECK(n <= bytes.size() - pos, InvalidArgument,
             what << ": element " << out.size() << " claims " << n << " bytes but " << bytes.size() - pos << " remain",
             std::string("each BYTES element is a 4-byte little-endian length followed by that many bytes"));
    out.emplace_back(reinterpret_cast<const char*>(bytes.data() + pos), n);
    pos += n;
  }
  GB_CHECK(static_cast<std::int64_t>(out.size()) == count, InvalidArgument,
           what << " holds " << out.size() << " BYTES elements, its shape needs " << count,
           std::string("send one serialized element per entry of the shape"));
  return out;
}

c10::List<std::string> gather_strings(std::span<const BatchItem> items, std::size_t index, const std::string& model,
                                      const std::string& input) {
  c10::List<std::string> list;
  for (const BatchItem& item : items) {
    const Tensor& in = (*item.inputs).at(index);
    for (std::string& s :
         parse_strings(in.bytes(), in.element_count(), "input '" + input + "' of model '" + model + "'"))
      list.push_back(std::move(s));
  }
  return list;
}

std::string serialize_strings(const c10::List<std::string>& values, std::size_t begin, std::size_t end) {
  std::size_t size = 0;
  for (std::size_t i = begin; i < end; ++i) size += 4 + values.get(i).size();
  std::string out;
  out.reserve(size);
  for (std::size_t i = begin; i < end; ++i) {
    const std::string s = values.get(i);
    const auto n = static_cast<std::uint32_t>(s.size());
    for (int b = 0; b < 4; ++b) out.push_back(static_cast<char>((n >> (8 * b)) & 0xff));
    out += s;
  }
  return out;
}

std::vector<Tensor> split_output(const at::Tensor& t, const std::string& name, DataType type,
                                 std::span<const std::int64_t> batch_sizes, bool batched,
                                 std::span<const std::int64_t> sample_dims) {
  // The owner keeps the torch tensor (and so its storage) alive as long as any view is held.
  auto owner = std::make_shared<const at::Tensor>(t);
  const auto* base = static_cast<const std::uint8_t*>(t.data_ptr());
  std::vector<Tensor> out;
  if (!batched) {
    std::vector<std::int64_t> shape(sample_dims.begin(), sample_dims.end());
    if (sample_dims.empty()) shape.assign(t.sizes().begin(), t.sizes().end());
    out.push_back(Tensor::view(name, type, std::move(shape), owner, base, t.nbytes()));
    return out;
  }
  std::vector<std::int64_t> dims(sample_dims.begin(), sample_dims.end());
  if (sample_dims.empty()) dims.assign(t.sizes().begin() + 1, t.sizes().end());
  const std::size_t row = t.size(0) == 0 ? 0 : t.nbytes() / static_cast<std::size_t>(t.size(0));
  std::size_t offset = 0;
  for (std::int64_t b : batch_sizes) {
    std::vector<std::int64_t> shape{b};
    shape.insert(shape.end(), dims.begin(), dims.end());
    const std::size_t size = row * static_cast<std::size_t>(b);
    out.push_back(Tensor::view(name, type, std::move(shape), owner, base + offset, size));
    offset += size;
  }
  return out;
}

std::optional<std::vector<std::int64_t>> resolve_dims(std::span<const std::int64_t> dims, std::int64_t elements) {
  std::vector<std::int64_t> out(dims.begin(), dims.end());
  std::int64_t known = 1;
  int wild = -1;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] < 0) {
      if (wild >= 0) return std::nullopt;
      wild = static_cast<int>(i);
    } else {
      known *= out[i];
    }
  }
  if (wild < 0) return known == elements ? std::optional(out) : std::nullopt;
  if (known == 0 || elements % known != 0) return std::nullopt;
  out[static_cast<std::size_t>(wild)] = elements / known;
  return out;
}

bool dims_match(std::span<const std::int64_t> expected, std::span<const std::int64_t> actual) {
  if (expected.size() != actual.size()) return false;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] >= 0 && expected[i] != actual[i]) return false;
  }
  return true;
}

std::string error_summary(const std::exception& e) {
  std::string text = e.what();
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) text = c->what_without_backtrace();
  std::istringstream in(text);
  std::string line, first, last;
  while (std::getline(in, line)) {
    const auto a = line.find_first_not_of(" \t\r");
    if (a == std::string::npos) continue;
    if (first.empty()) first = line.substr(a);
    last = line.substr(a);
  }
  // TorchScript's interpreter: "The following operation failed ... Traceback ... RuntimeError: why".
  if (text.find("Traceback of TorchScript") != std::string::npos ||
      text.find("The following operation failed") != std::string::npos)
    return last;
  return first.empty() ? text : first;
}

}  // namespace glassbox::serve::detail
