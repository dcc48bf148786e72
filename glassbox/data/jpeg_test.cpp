// jpeg.h against OpenCV's imdecode (whole images) and against cropping that decode (regions), over
// the kinds of JPEG encoders write: chroma subsampling 4:4:4, 4:2:2, 4:2:0 and 4:4:0, gray,
// progressive, restart markers, sizes that are not multiples of the MCU; and the fused loader path
// (a RandomResizedCrop that decodes its rectangle only) against decode-then-augment.
#include "glassbox/data/jpeg.h"

#include <jpeglib.h>

#include <cstdio>
#include <random>

#include <gtest/gtest.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "glassbox/base/error.h"
#include "glassbox/data/augment.h"
#include "glassbox/data/image.h"

namespace glassbox::data {
namespace {

struct Encoding {
  const char* what;
  int h_samp = 2, v_samp = 2;  // luma sampling factors: (1,1) 4:4:4, (2,1) 4:2:2, (2,2) 4:2:0, (1,2) 4:4:0
  bool gray = false;
  bool progressive = false;
  int restart_rows = 0;
  int quality = 90;
};

// A photograph-like test image: smooth gradients, hard edges and noise, so that every DCT
// coefficient and the chroma upsampling matter.
cv::Mat test_image(int height, int width, int channels, std::uint32_t seed) {
  cv::Mat m(height, width, channels == 1 ? CV_8UC1 : CV_8UC3);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> noise(-20, 20);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const int edge = ((x / 13 + y / 7) % 2) * 60;
      for (int c = 0; c < channels; ++c) {
        const int v = (x * (3 + c) + y * (5 - c)) % 200 + edge + noise(rng);
        m.ptr<std::uint8_t>(y)[x * channels + c] = static_cast<std::uint8_t>(std::clamp(v, 0, 255));
      }
    }
  }
  return m;
}

// libjpeg's encoder with the sampling and scan options OpenCV's imencode does not expose.
std::string encode(const cv::Mat& img, const Encoding& e) {
  jpeg_compress_struct c{};
  jpeg_error_mgr err{};
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &out, &size);
  c.image_width = static_cast<JDIMENSION>(img.cols);
  c.image_height = static_cast<JDIMENSION>(img.rows);
  c.input_components = img.channels();
  c.in_color_space = img.channels() == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, e.quality, TRUE);
  if (img.channels() == 3) {
    c.comp_info[0].h_samp_factor = e.h_samp;
    c.comp_info[0].v_samp_factor = e.v_samp;
  }
  if (e.progressive) jpeg_simple_progression(&c);
  c.restart_in_rows = e.restart_rows;
  jpeg_start_compress(&c, TRUE);
  for (int y = 0; y < img.rows; ++y) {
    JSAMPROW row = const_cast<JSAMPROW>(img.ptr<std::uint8_t>(y));
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  std::string bytes(reinterpret_cast<const char*>(out), size);
  jpeg_destroy_compress(&c);
  std::free(out);
  return bytes;
}

// What OpenCV gives, in RGB order.
cv::Mat opencv_decode(const std::string& bytes) {
  const cv::Mat raw = cv::imdecode(cv::Mat(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data())),
                                   cv::IMREAD_UNCHANGED);
  if (raw.channels() == 1) return raw;
  cv::Mat rgb;
  cv::cvtColor(raw, rgb, cv::COLOR_BGR2RGB);
  return rgb;
}

bool same(const cv::Mat& a, const cv::Mat& b) {
  return a.size() == b.size() && a.type() == b.type() && cv::norm(a, b, cv::NORM_INF) == 0;
}

const std::vector<Encoding>& encodings() {
  static const std::vector<Encoding> all = {
      {"4:2:0", 2, 2},
      {"4:2:2", 2, 1},
      {"4:4:4", 1, 1},
      {"4:4:0", 1, 2},
      {"gray", 1, 1, true},
      {"progressive 4:2:0", 2, 2, false, true},
      {"progressive gray", 1, 1, true, true},
      {"restart markers every 2 MCU rows", 2, 2, false, false, 2},
      {"quality 40 4:2:2", 2, 1, false, false, 0, 40},
  };
  return all;
}

TEST(Jpeg, WholeDecodeEqualsOpenCv) {
  for (const Encoding& e : encodings()) {
    for (const cv::Size size : {cv::Size(500, 375), cv::Size(37, 23), cv::Size(1, 1), cv::Size(17, 64)}) {
      const cv::Mat src = test_image(size.height, size.width, e.gray ? 1 : 3, 7);
      const std::string bytes = encode(src, e);
      const auto info = jpeg_info(bytes);
      ASSERT_TRUE(info.has_value()) << e.what;
      EXPECT_EQ(info->width, size.width);
      EXPECT_EQ(info->height, size.height);
      EXPECT_EQ(info->channels, e.gray ? 1 : 3);
      EXPECT_TRUE(same(decode_jpeg(bytes, "x.jpg"), opencv_decode(bytes))) << e.what << " " << size;
      // decode_image goes through jpeg.h now; every channel request still equals OpenCV's path.
      cv::Mat gray_cv, rgb_cv;
      const cv::Mat cv_rgb = opencv_decode(bytes);
      if (e.gray) {
        gray_cv = cv_rgb;
        cv::cvtColor(cv_rgb, rgb_cv, cv::COLOR_GRAY2RGB);
      } else {
        rgb_cv = cv_rgb;
        cv::cvtColor(cv_rgb, gray_cv, cv::COLOR_RGB2GRAY);
      }
      EXPECT_TRUE(same(decode_image(bytes, "x.jpg", 1), gray_cv)) << e.what;
      EXPECT_TRUE(same(decode_image(bytes, "x.jpg", 3), rgb_cv)) << e.what;
    }
  }
}

TEST(Jpeg, RegionDecodeEqualsCroppingTheWholeDecode) {
  std::mt19937 rng(3);
  for (const Encoding& e : encodings()) {
    const cv::Mat src = test_image(375, 500, e.gray ? 1 : 3, 11);
    const std::string bytes = encode(src, e);
    const cv::Mat whole = opencv_decode(bytes);
    std::vector<cv::Rect> regions = {{0, 0, 500, 375}, {0, 0, 1, 1},       {499, 374, 1, 1}, {16, 16, 32, 32},
                                     {15, 17, 33, 31}, {250, 0, 250, 375}, {0, 200, 500, 1}, {123, 45, 1, 300}};
    for (int i = 0; i < 60; ++i) {
      const int w = std::uniform_int_distribution<int>(1, 500)(rng),
                h = std::uniform_int_distribution<int>(1, 375)(rng);
      regions.emplace_back(std::uniform_int_distribution<int>(0, 500 - w)(rng),
                           std::uniform_int_distribution<int>(0, 375 - h)(rng), w, h);
    }
    for (const cv::Rect& r : regions) {
      const cv::Mat got = decode_jpeg(bytes, "x.jpg", r);
      ASSERT_TRUE(same(got, whole(r))) << e.what << " region " << r;
    }
  }
}

TEST(Jpeg, CorruptDataNamesTheFile) {
  const std::string good = encode(test_image(64, 64, 3, 1), Encoding{"4:2:0"});
  // The start-of-frame marker's height set to 0: libjpeg refuses the header.
  std::string bad = good;
  const std::size_t sof = bad.find("\xFF\xC0");
  ASSERT_NE(sof, std::string::npos);
  bad[sof + 5] = 0;
  bad[sof + 6] = 0;
  try {
    decode_image(bad, "frame.jpg");
    ADD_FAILURE() << "no error";
  } catch (const Error& err) {
    EXPECT_NE(err.one_line().find("frame.jpg: corrupt"), std::string::npos) << err.one_line();
    EXPECT_EQ(exit_code_for(err.code()), 2);
  }
  // Not a kind handled here: left to OpenCV.
  EXPECT_FALSE(jpeg_info("not a jpeg").has_value());
  EXPECT_FALSE(jpeg_info(bad).has_value());
}

TEST(Jpeg, LoaderRegionPathEqualsDecodeThenAugment) {
  // A RandomResizedCrop that leads the pipeline decodes its rectangle only; the samples must equal
  // decoding whole and running the pipeline, for every seed.
  TransformSpec crop;
  crop.name = "RandomResizedCrop";
  crop.numbers["size"] = {64, 48};
  TransformSpec flip;
  flip.name = "HorizontalFlip";
  const Pipeline pipe = make_pipeline({crop, flip}, "data.train_transforms");
  ASSERT_NE(pipe.leading_region(), nullptr);
  for (const Encoding& e : {encodings()[0], encodings()[4], encodings()[5]}) {
    const std::string bytes = encode(test_image(240, 320, e.gray ? 1 : 3, 5), e);
    for (int channels : {0, 1, 3}) {
      for (std::uint64_t seed = 0; seed < 40; ++seed) {
        Sample want{decode_image(bytes, "x.jpg", channels), {}};
        AugmentRng a(seed);
        pipe.run(want, a);
        AugmentRng b(seed);
        const RegionStep* lead = pipe.leading_region();
        Sample got{decode_image_region(bytes, "x.jpg", channels, [&](int h, int w) { return lead->region(h, w, b); }),
                   {}};
        lead->apply_region(got);
        pipe.run_from(1, got, b);
        ASSERT_TRUE(same(got.image, want.image)) << e.what << " channels " << channels << " seed " << seed;
        EXPECT_EQ(a.next_u64(), b.next_u64()) << "the two paths drew differently";
      }
    }
  }
  // A step with p < 1 first, or no region step first: no fused path.
  TransformSpec maybe = crop;
  maybe.p = 0.5;
  EXPECT_EQ(make_pipeline({maybe}, "t").leading_region(), nullptr);
  EXPECT_EQ(make_pipeline({flip, crop}, "t").leading_region(), nullptr);
}

}  // namespace
}  // namespace glassbox::data
