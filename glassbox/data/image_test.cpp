#include "glassbox/data/image.h"

#include <gtest/gtest.h>
#include <opencv2/imgcodecs.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/testing/testing.h"

namespace glassbox::data {
namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.one_line();
  }
  return "<no error>";
}

// A 4x5 RGB image whose pixel (y, x) is (10y + x, 100 + x, 200 - y).
cv::Mat rgb_ramp() {
  cv::Mat m(4, 5, CV_8UC3);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 5; ++x) m.at<cv::Vec3b>(y, x) = cv::Vec3b(10 * y + x, 100 + x, 200 - y);
  return m;
}

TEST(Image, ExtensionsAreMatchedWithoutCase) {
  for (const char* f : {"a.jpg", "b.JPEG", "c.Png", "d.bmp", "e.tif", "f.TIFF", "g.webp", "h.pgm", "i.ppm"})
    EXPECT_TRUE(is_image_file(f)) << f;
  for (const char* f : {"a.gif", "b.txt", "c", "d.png.bak", "metadata.csv"}) EXPECT_FALSE(is_image_file(f)) << f;
}

TEST(Image, PngRoundTripKeepsRgbOrderAndPixels) {
  const cv::Mat rgb = rgb_ramp();
  const cv::Mat back = decode_image(encode_png(rgb), "ramp.png");
  ASSERT_EQ(back.type(), CV_8UC3);
  EXPECT_EQ(cv::norm(back, rgb, cv::NORM_INF), 0.0);
  // The file itself is in PNG's RGB order: OpenCV, which reads BGR, sees the channels reversed.
  const std::string png = encode_png(rgb);
  const cv::Mat raw = cv::imdecode(cv::Mat(1, static_cast<int>(png.size()), CV_8UC1, const_cast<char*>(png.data())),
                                   cv::IMREAD_UNCHANGED);
  EXPECT_EQ(raw.at<cv::Vec3b>(2, 3)[2], rgb.at<cv::Vec3b>(2, 3)[0]);
  // As a tensor: [3, H, W], channel 0 is red.
  const at::Tensor t = image_to_tensor(back);
  EXPECT_EQ(t.sizes(), (std::vector<std::int64_t>{3, 4, 5}));
  EXPECT_EQ(t[0][2][3].item<int>(), 23);
  EXPECT_EQ(t[1][2][3].item<int>(), 103);
  EXPECT_EQ(cv::norm(tensor_to_image(t), rgb, cv::NORM_INF), 0.0);
}

TEST(Image, ChannelConversions) {
  const cv::Mat rgb = rgb_ramp();
  const cv::Mat gray = decode_image(encode_png(rgb), "ramp.png", 1);
  ASSERT_EQ(gray.type(), CV_8UC1);
  // ITU-R 601 weights, as PIL's convert("L"): 0.299 R + 0.587 G + 0.114 B.
  const cv::Vec3b p = rgb.at<cv::Vec3b>(3, 4);
  EXPECT_NEAR(gray.at<std::uint8_t>(3, 4), 0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2], 0.6);
  const cv::Mat again = decode_image(encode_png(gray), "gray.png", 3);
  ASSERT_EQ(again.type(), CV_8UC3);
  EXPECT_EQ(again.at<cv::Vec3b>(1, 1)[0], gray.at<std::uint8_t>(1, 1));
  EXPECT_EQ(again.at<cv::Vec3b>(1, 1)[2], gray.at<std::uint8_t>(1, 1));
  EXPECT_EQ(decode_image(encode_png(gray), "gray.png").type(), CV_8UC1);  // 0: as stored

  // RGBA: alpha is dropped; 16-bit samples are scaled to 8 bits.
  cv::Mat bgra(2, 2, CV_8UC4, cv::Scalar(1, 2, 3, 40));
  std::vector<unsigned char> buf;
  cv::imencode(".png", bgra, buf);
  const cv::Mat rgb2 = decode_image(std::string(buf.begin(), buf.end()), "a.png");
  ASSERT_EQ(rgb2.type(), CV_8UC3);
  EXPECT_EQ(rgb2.at<cv::Vec3b>(0, 0), cv::Vec3b(3, 2, 1));
  cv::Mat deep(2, 3, CV_16UC1, cv::Scalar(0));
  deep.at<std::uint16_t>(0, 1) = 65535;
  deep.at<std::uint16_t>(1, 2) = 257 * 100 + 129;  // 100.502: rounds to 101
  cv::imencode(".png", deep, buf);
  const cv::Mat eight = decode_image(std::string(buf.begin(), buf.end()), "deep.png");
  ASSERT_EQ(eight.type(), CV_8UC1);
  EXPECT_EQ(eight.at<std::uint8_t>(0, 1), 255);
  EXPECT_EQ(eight.at<std::uint8_t>(1, 2), 101);
  EXPECT_EQ(eight.at<std::uint8_t>(0, 0), 0);
}

TEST(Image, BadFilesNameThemselves) {
  EXPECT_EQ(message_of([] { decode_image("", "x/empty.png"); }),
            "x/empty.png: empty file (0 bytes), not an image (hint: replace or delete the file, or set "
            "data.on_bad_image = \"skip\" to leave such files out)");
  EXPECT_NE(message_of([] {
              decode_image("hello, world", "notes.jpg");
            }).find("notes.jpg: not an image glassbox reads (no JPEG, PNG, BMP, TIFF, WebP or PNM signature"),
            std::string::npos);
  const std::string jpeg = encode_jpeg(rgb_ramp(), 90);
  const std::string cut = jpeg.substr(0, jpeg.size() * 2 / 3);
  EXPECT_NE(message_of([&] { decode_image(cut, "cut.jpg"); }).find("cut.jpg: truncated JPEG ("), std::string::npos);
  EXPECT_NO_THROW(decode_image(jpeg + std::string(3, '\0'), "padded.jpg"));  // padding after the end marker
  const std::string png = encode_png(rgb_ramp());
  EXPECT_NE(
      message_of([&] { decode_image(png.substr(0, png.size() / 2), "cut.png"); }).find("cut.png: truncated PNG ("),
      std::string::npos);
  // A 5-band TIFF (a multispectral tile): no gray, RGB or RGBA reading of it.
  const std::string msg = message_of([&] { decode_image(testing::tiff_with_bands(5), "bands.tif"); });
  EXPECT_NE(msg.find("bands.tif: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("unsupported channel count 5; glassbox reads gray, RGB and RGBA images"), std::string::npos)
      << msg;
  EXPECT_EQ(decode_image(testing::tiff_with_bands(3), "rgb.tif").type(), CV_8UC3);  // the writer itself is sound
  EXPECT_NE(message_of([] { read_image("/nonexistent/a.png"); }).find("no such file: /nonexistent/a.png"),
            std::string::npos);
  try {
    decode_image("", "e.png");
  } catch (const Error& e) {
    EXPECT_EQ(exit_code_for(e.code()), 2);
  }
}

TEST(Image, JpegDecodesCloseToItsSource) {
  const cv::Mat flat(16, 16, CV_8UC3, cv::Scalar(200, 40, 90));
  const cv::Mat back = decode_image(encode_jpeg(flat, 95), "flat.jpg");
  EXPECT_LE(cv::norm(back, flat, cv::NORM_INF), 3.0);
}

}  // namespace
}  // namespace glassbox::data
