#include "glassbox/core/safetensors.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"

namespace glassbox {
namespace {

TEST(Safetensors, RoundTripKeepsDtypesShapesAndOrder) {
  TensorMap m = {{"b.weight", torch::randn({3, 4})},
                 {"a.bias", torch::arange(5, torch::kLong)},
                 {"flag", torch::tensor({true, false})},
                 {"half", torch::randn({2, 2}).to(torch::kBFloat16)},
                 {"empty", torch::empty({0, 3})}};
  SafetensorsFile f = decode_safetensors(encode_safetensors(m, {{"format", "pt"}}), "mem");
  ASSERT_EQ(f.tensors.size(), m.size());
  for (std::size_t i = 0; i < m.size(); ++i) {
    EXPECT_EQ(f.tensors[i].first, m[i].first);
    EXPECT_TRUE(torch::equal(f.tensors[i].second, m[i].second)) << m[i].first;
  }
  EXPECT_EQ(f.metadata.at("format"), "pt");
}

TEST(Safetensors, TruncatedFileIsDataLossNamingTensor) {
  std::string bytes = encode_safetensors({{"w", torch::randn({100})}});
  bytes.resize(bytes.size() - 10);
  try {
    decode_safetensors(bytes, "x.safetensors");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDataLoss);
    EXPECT_NE(e.message().find("x.safetensors: tensor w lies past the end"), std::string::npos) << e.message();
  }
  EXPECT_THROW(decode_safetensors("abc", "y"), Error);
  EXPECT_THROW(decode_safetensors(std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8) + "{}", "z"), Error);
}

}  // namespace
}  // namespace glassbox
