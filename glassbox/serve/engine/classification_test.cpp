// classify(): the classification extension's strings, order, clamping, labels and shapes.
#include "glassbox/serve/engine/classification.h"

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace glassbox::serve {
namespace {

template <typename T>
Tensor tensor_of(DataType type, std::vector<std::int64_t> shape, const std::vector<T>& values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return Tensor::owning("OUTPUT__0", type, std::move(shape), std::move(bytes));
}

std::vector<std::string> strings(const Tensor& t) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at + 4 <= t.size) {
    std::uint32_t n;
    std::memcpy(&n, t.data + at, 4);
    out.emplace_back(reinterpret_cast<const char*>(t.data + at + 4), n);
    at += 4 + n;
  }
  EXPECT_EQ(at, t.size);
  return out;
}

TEST(Classify, TopEntriesPerBatchItemHighestFirstWithLabels) {
  const Tensor scores = tensor_of<float>(DataType::kFp32, {2, 4}, {0.1f, 0.7f, 0.15f, 0.05f, 3, -1, 5, 4});
  const Tensor top = classify(scores, 2, {"cat", "dog", "bird", "fish"}, true);
  EXPECT_EQ(top.datatype, DataType::kBytes);
  EXPECT_EQ(top.shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(strings(top),
            (std::vector<std::string>{"0.700000:1:dog", "0.150000:2:bird", "5.000000:2:bird", "4.000000:3:fish"}));
}

TEST(Classify, WithoutLabelsClampedAndUnbatched) {
  const Tensor scores = tensor_of<std::int64_t>(DataType::kInt64, {3}, {7, -2, 9});
  const Tensor top = classify(scores, 10, {"only-zero"}, false);  // 10 > 3 entries: all three
  EXPECT_EQ(top.shape, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(strings(top), (std::vector<std::string>{"9:2", "7:0:only-zero", "-2:1"}));
}

TEST(Classify, TiesKeepIndexOrderAndNanRanksLast) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor scores = tensor_of<float>(DataType::kFp32, {1, 5}, {nan, 1, 2, 2, 1});
  EXPECT_EQ(strings(classify(scores, 5, {}, true)),
            (std::vector<std::string>{"2.000000:2", "2.000000:3", "1.000000:1", "1.000000:4", "nan:0"}));
}

TEST(Classify, MultiDimensionalItemsAndHalfPrecision) {
  // [1, 2, 2]: the item's four entries are ranked by their flat index.
  const std::vector<std::uint16_t> half = {0x3c00, 0x4000, 0xbc00, 0x3800};  // 1, 2, -1, 0.5
  const Tensor top = classify(tensor_of<std::uint16_t>(DataType::kFp16, {1, 2, 2}, half), 2, {}, true);
  EXPECT_EQ(top.shape, (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(strings(top), (std::vector<std::string>{"2.000000:1", "1.000000:0"}));
}

TEST(Classify, RefusesNonNumericScores) {
  const Tensor flags = tensor_of<std::uint8_t>(DataType::kBool, {1, 2}, {0, 1});
  try {
    classify(flags, 1, {}, true);
    FAIL() << "BOOL scores were ranked";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.message().find("needs numeric scores, got BOOL"), std::string::npos);
  }
}

}  // namespace
}  // namespace glassbox::serve
