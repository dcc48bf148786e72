#include "glassbox/base/png.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"

namespace glassbox {
namespace {

std::vector<std::uint8_t> pattern(int width, int height, int channels) {
  std::vector<std::uint8_t> px(static_cast<std::size_t>(width) * height * channels);
  for (std::size_t i = 0; i < px.size(); ++i) px[i] = static_cast<std::uint8_t>((i * 37 + i / 7) & 0xff);
  return px;
}

class PngRoundTrip : public ::testing::TestWithParam<int> {};

TEST_P(PngRoundTrip, Exact) {
  const int channels = GetParam();
  const int width = 13, height = 7;  // odd sizes: no row padding assumptions
  const auto px = pattern(width, height, channels);
  const std::string png = encode_png(px.data(), width, height, channels);
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  const DecodedPng d = decode_png(png);
  EXPECT_EQ(d.width, width);
  EXPECT_EQ(d.height, height);
  EXPECT_EQ(d.channels, channels);
  EXPECT_EQ(d.pixels, px);
}

INSTANTIATE_TEST_SUITE_P(Png, PngRoundTrip, ::testing::Values(1, 3, 4));

TEST(Png, OnePixelAndExtremes) {
  const std::uint8_t px[4] = {0, 255, 1, 254};
  const DecodedPng d = decode_png(encode_png(px, 1, 1, 4));
  EXPECT_EQ(d.pixels, std::vector<std::uint8_t>(px, px + 4));
}

TEST(Png, WritePngIsAtomicFile) {
  const fs::path dir = fs::temp_directory_path() / ("gb_png_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const auto px = pattern(5, 4, 3);
  write_png(dir / "sub" / "a.png", px.data(), 5, 4, 3);
  const DecodedPng d = decode_png(read_file(dir / "sub" / "a.png"));
  EXPECT_EQ(d.pixels, px);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "sub"), fs::directory_iterator()), 1);
  fs::remove_all(dir);
}

TEST(Png, BadShapesThrow) {
  const auto px = pattern(4, 4, 4);
  for (int channels : {0, 2, 5}) {
    try {
      encode_png(px.data(), 4, 4, channels);
      FAIL() << channels;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(e.message().find("channel"), std::string::npos) << e.message();
    }
  }
  EXPECT_THROW(encode_png(px.data(), 0, 4, 1), Error);
  EXPECT_THROW(encode_png(px.data(), 4, 0, 1), Error);
  EXPECT_THROW(encode_png(px.data(), -3, 4, 1), Error);
  EXPECT_THROW(encode_png(nullptr, 4, 4, 1), Error);
}

TEST(Png, CorruptBytesThrowDataLoss) {
  const auto px = pattern(16, 16, 3);
  const std::string good = encode_png(px.data(), 16, 16, 3);
  auto expect_data_loss = [](const std::string& bytes, const char* what) {
    try {
      decode_png(bytes);
      FAIL() << what;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kDataLoss) << what;
      EXPECT_NE(e.message().find("PNG"), std::string::npos) << e.message();
      EXPECT_FALSE(e.hint().empty());
    }
  };
  expect_data_loss("", "empty");
  expect_data_loss("not a png at all", "text");
  expect_data_loss(good.substr(0, good.size() / 2), "truncated");
  std::string flipped = good;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x5a);  // inside IDAT: CRC mismatch
  expect_data_loss(flipped, "flipped byte");
}

}  // namespace
}  // namespace glassbox
