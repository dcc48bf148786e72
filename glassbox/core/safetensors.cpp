#include "glassbox/core/safetensors.h"

#include <cstring>

#include <nlohmann/json.hpp>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"

namespace glassbox {
namespace {

struct DtypeName {
  c10::ScalarType type;
  const char* name;
};

constexpr DtypeName kDtypes[] = {
    {c10::kFloat, "F32"}, {c10::kDouble, "F64"}, {c10::kHalf, "F16"}, {c10::kBFloat16, "BF16"}, {c10::kLong, "I64"},
    {c10::kInt, "I32"},   {c10::kShort, "I16"},  {c10::kChar, "I8"},  {c10::kByte, "U8"},       {c10::kBool, "BOOL"},
};

const char* dtype_to_name(c10::ScalarType t) {
  for (const auto& d : kDtypes)
    if (d.type == t) return d.name;
  GB_THROW(InvalidArgument, "safetensors: unsupported dtype " << c10::toString(t),
           "convert the tensor to a numeric dtype");
}

bool name_to_dtype(const std::string& name, c10::ScalarType* out) {
  for (const auto& d : kDtypes) {
    if (name == d.name) {
      *out = d.type;
      return true;
    }
  }
  return false;
}

}  // namespace

const at::Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

std::string encode_safetensors(const TensorMap& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> contiguous;
  contiguous.reserve(tensors.size());
  std::size_t offset = 0;
  for (const auto& [name, t] : tensors) {
    GB_CHECK(name != "__metadata__", InvalidArgument, "safetensors: reserved tensor name __metadata__",
             "rename the tensor");
    at::Tensor c = t.detach().to(c10::kCPU).contiguous();
    const std::size_t nbytes = c.numel() * c.element_size();
    header[name] = {{"dtype", dtype_to_name(c.scalar_type())},
                    {"shape", c.sizes().vec()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    contiguous.push_back(std::move(c));
  }
  std::string head = header.dump();
  while ((head.size() + 8) % 8 != 0) head.push_back(' ');
  std::string out;
  out.resize(8 + head.size() + offset);
  const std::uint64_t n = head.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  std::memcpy(out.data() + 8, head.data(), head.size());
  char* data = out.data() + 8 + head.size();
  std::size_t pos = 0;
  for (const auto& c : contiguous) {
    const std::size_t nbytes = c.numel() * c.element_size();
    if (nbytes > 0) std::memcpy(data + pos, c.data_ptr(), nbytes);
    pos += nbytes;
  }
  return out;
}

SafetensorsFile decode_safetensors(const std::string& bytes, const std::string& source) {
  GB_CHECK(bytes.size() >= 8, DataLoss, source << ": not a safetensors file (only " << bytes.size() << " bytes)",
           "the file is truncated; restore it from a good copy");
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)])) << (8 * i);
  GB_CHECK(n <= bytes.size() - 8, DataLoss,
           source << ": header length " << n << " exceeds the file size " << bytes.size(),
           "the file is truncated or not safetensors");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  } catch (const nlohmann::json::exception& e) {
    GB_THROW(DataLoss, source << ": corrupt safetensors header: " << e.what(), "restore the file from a good copy");
  }
  GB_CHECK(header.is_object(), DataLoss, source << ": safetensors header is not a JSON object", "restore the file");
  const std::size_t data_size = bytes.size() - 8 - n;
  const char* data = bytes.data() + 8 + n;
  SafetensorsFile file;
  std::vector<std::pair<std::size_t, std::pair<std::string, at::Tensor>>> ordered;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (it.value().is_object()) {
        for (auto m = it.value().begin(); m != it.value().end(); ++m)
          if (m.value().is_string()) file.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const auto& e = it.value();
    const std::string& name = it.key();
    GB_CHECK(e.is_object() && e.contains("dtype") && e.contains("shape") && e.contains("data_offsets"), DataLoss,
             source << ": tensor " << name << " has an incomplete header entry", "restore the file");
    c10::ScalarType type{};
    GB_CHECK(e["dtype"].is_string() && name_to_dtype(e["dtype"].get<std::string>(), &type), DataLoss,
             source << ": tensor " << name << " has unsupported dtype " << e["dtype"].dump(),
             "re-save it as F32/F64/I64/...");
    std::vector<std::int64_t> shape;
    std::int64_t numel = 1;
    for (const auto& d : e["shape"]) {
      GB_CHECK(d.is_number_integer() && d.get<std::int64_t>() >= 0, DataLoss,
               source << ": tensor " << name << " has a bad shape", "restore the file");
      shape.push_back(d.get<std::int64_t>());
      numel *= shape.back();
    }
    const auto& off = e["data_offsets"];
    GB_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(), DataLoss,
             source << ": tensor " << name << " has bad data_offsets", "restore the file");
    const auto begin = off[0].get<std::size_t>();
    const auto end = off[1].get<std::size_t>();
    const std::size_t expected = static_cast<std::size_t>(numel) * c10::elementSize(type);
    GB_CHECK(
        begin <= end && end <= data_size, DataLoss,
        source << ": tensor " << name << " lies past the end of the file (" << end << " > " << data_size << " bytes)",
        "the file is truncated; restore it from a good copy");
    GB_CHECK(end - begin == expected, DataLoss,
             source << ": tensor " << name << " has " << (end - begin) << " bytes, its shape needs " << expected,
             "restore the file");
    at::Tensor t = at::empty(shape, at::TensorOptions().dtype(type));
    if (expected > 0) std::memcpy(t.data_ptr(), data + begin, expected);
    ordered.push_back({begin, {name, std::move(t)}});
  }
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [_, nt] : ordered) file.tensors.push_back(std::move(nt));
  return file;
}

void save_safetensors(const std::filesystem::path& path, const TensorMap& tensors,
                      const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, encode_safetensors(tensors, metadata));
}

SafetensorsFile load_safetensors(const std::filesystem::path& path) {
  return decode_safetensors(read_file(path), path.string());
}

}  // namespace glassbox
