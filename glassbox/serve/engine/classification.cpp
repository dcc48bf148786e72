// classify(): the classification extension's top-k strings (see classification.h).
#include "glassbox/serve/engine/classification.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <numeric>

#include "glassbox/base/error.h"

namespace glassbox::serve {
namespace {

template <typename T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1f;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf, nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    exp = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

float bf16_to_float(std::uint16_t b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }

// The value of element i for ordering, and its text as std::to_string of its own type.
struct Reader {
  DataType type;
  const std::uint8_t* data;

  double value(std::size_t i) const {
    switch (type) {
      case DataType::kUint8: return data[i];
      case DataType::kUint16: return load<std::uint16_t>(data + 2 * i);
      case DataType::kUint32: return load<std::uint32_t>(data + 4 * i);
      case DataType::kUint64: return static_cast<double>(load<std::uint64_t>(data + 8 * i));
      case DataType::kInt8: return static_cast<std::int8_t>(data[i]);
      case DataType::kInt16: return load<std::int16_t>(data + 2 * i);
      case DataType::kInt32: return load<std::int32_t>(data + 4 * i);
      case DataType::kInt64: return static_cast<double>(load<std::int64_t>(data + 8 * i));
      case DataType::kFp16: return half_to_float(load<std::uint16_t>(data + 2 * i));
      case DataType::kBf16: return bf16_to_float(load<std::uint16_t>(data + 2 * i));
      case DataType::kFp32: return load<float>(data + 4 * i);
      case DataType::kFp64: return load<double>(data + 8 * i);
      case DataType::kBool:
      case DataType::kBytes: break;
    }
    return 0;
  }
  std::string text(std::size_t i) const {
    switch (type) {
      case DataType::kUint8: return std::to_string(data[i]);
      case DataType::kUint16: return std::to_string(load<std::uint16_t>(data + 2 * i));
      case DataType::kUint32: return std::to_string(load<std::uint32_t>(data + 4 * i));
      case DataType::kUint64: return std::to_string(load<std::uint64_t>(data + 8 * i));
      case DataType::kInt8: return std::to_string(static_cast<std::int8_t>(data[i]));
      case DataType::kInt16: return std::to_string(load<std::int16_t>(data + 2 * i));
      case DataType::kInt32: return std::to_string(load<std::int32_t>(data + 4 * i));
      case DataType::kInt64: return std::to_string(load<std::int64_t>(data + 8 * i));
      case DataType::kFp16: return std::to_string(half_to_float(load<std::uint16_t>(data + 2 * i)));
      case DataType::kBf16: return std::to_string(bf16_to_float(load<std::uint16_t>(data + 2 * i)));
      case DataType::kFp32: return std::to_string(load<float>(data + 4 * i));
      case DataType::kFp64: return std::to_string(load<double>(data + 8 * i));
      case DataType::kBool:
      case DataType::kBytes: break;
    }
    return {};
  }
};

}  // namespace

Tensor classify(const Tensor& scores, std::uint32_t class_count, const std::vector<std::string>& labels, bool batched) {
  GB_CHECK(
      scores.datatype != DataType::kBytes && scores.datatype != DataType::kBool, InvalidArgument,
      "classification of output '" << scores.name << "' needs numeric scores, got " << datatype_name(scores.datatype),
      std::string("ask for class_count only on an output of scores"));
  const std::int64_t count = scores.element_count();
  GB_CHECK(count >= 0 && scores.size == static_cast<std::size_t>(count) * element_size(scores.datatype), Internal,
           "output '" << scores.name << "' holds " << scores.size << " bytes for " << count << " elements",
           std::string("a backend must return outputs whose bytes match their shape"));
  const std::int64_t items = batched && !scores.shape.empty() ? scores.shape.front() : 1;
  const std::size_t per_item = items > 0 ? static_cast<std::size_t>(count / items) : 0;
  const std::size_t k = std::min<std::size_t>(class_count, per_item);
  const Reader reader{scores.datatype, scores.data};

  std::string bytes;
  std::vector<std::size_t> order(per_item);
  std::vector<double> values(per_item);
  for (std::int64_t item = 0; item < items; ++item) {
    const std::size_t base = static_cast<std::size_t>(item) * per_item;
    for (std::size_t i = 0; i < per_item; ++i) values[i] = reader.value(base + i);
    std::iota(order.begin(), order.end(), std::size_t{0});
    // The k highest, highest first; NaN ranks last, equal scores in index order.
    const auto higher = [&](std::size_t a, std::size_t b) {
      const double x = values[a], y = values[b];
      if (x != x || y != y) return y != y && x == x;
      return x > y || (x == y && a < b);
    };
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), higher);
    for (std::size_t r = 0; r < k; ++r) {
      const std::size_t index = order[r];
      std::string s = reader.text(base + index) + ":" + std::to_string(index);
      if (index < labels.size() && !labels[index].empty()) s += ":" + labels[index];
      const auto n = static_cast<std::uint32_t>(s.size());
      char len[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                     static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 24) & 0xff)};
      bytes.append(len, 4);
      bytes += s;
    }
  }
  std::vector<std::int64_t> shape;
  if (batched && !scores.shape.empty()) shape.push_back(items);
  shape.push_back(static_cast<std::int64_t>(k));
  return Tensor::owning(scores.name, DataType::kBytes, std::move(shape), std::move(bytes));
}

}  // namespace glassbox::serve
