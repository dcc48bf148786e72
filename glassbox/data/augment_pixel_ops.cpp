// Tested by augment_pixel_test.cpp (parity with albumentations given its drawn parameters).
// augment_pixel.h's apply functions: the deterministic half of each pixel transform.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "glassbox/base/error.h"
#include "glassbox/data/augment_pixel.h"
#include "glassbox/data/simd.h"

namespace glassbox::data {

namespace {

using Lut = std::array<std::uint8_t, 256>;

// numpy's float -> uint8 after np.clip(v, 0, 255): clamps, then truncates toward zero.
std::uint8_t clip_trunc(double v) {
  if (!(v > 0)) return 0;  // also NaN, which numpy's clip keeps and the cast turns into 0
  if (v >= 255) return 255;
  return static_cast<std::uint8_t>(v);
}

cv::Mat apply_lut(const cv::Mat& img, const Lut& lut) {
  // One 256-entry table for every channel, as albumentations' stringzilla translate does
  // (simd.h: 64 bytes per step with AVX-512 VBMI).
  const cv::Mat src = img.isContinuous() ? img : img.clone();
  cv::Mat out(src.size(), src.type());
  lut_bytes(src.data, out.data, src.total() * src.elemSize(), lut.data());
  return out;
}

// Python's float modulo (numpy.mod): the result takes the divisor's sign.
double py_mod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0) {
    if ((b < 0) != (m < 0)) m += b;
  } else {
    m = std::copysign(0.0, b);
  }
  return m;
}

void require_channels(const cv::Mat& img, std::string_view who, bool ok, const char* what) {
  GB_CHECK(ok, InvalidArgument, who << " needs " << what << ", got " << img.channels() << " channels",
           "convert the image to RGB or gray first");
}

bool is_gray(const cv::Mat& img) { return img.channels() == 1; }

}  // namespace

// ---- the apply functions (albumentations' apply with explicit parameters) -----------------------

cv::Mat clahe_apply(const cv::Mat& img, double clip_limit, cv::Size tile_grid_size) {
  require_channels(img, "CLAHE", img.channels() == 1 || img.channels() == 3, "a 1- or 3-channel image");
  cv::Ptr<cv::CLAHE> clahe = cv::createCLAHE(clip_limit, tile_grid_size);
  cv::Mat out;
  if (is_gray(img)) {
    clahe->apply(img, out);
    return out;
  }
  cv::Mat lab;
  cv::cvtColor(img, lab, cv::COLOR_RGB2Lab);
  std::vector<cv::Mat> planes;
  cv::split(lab, planes);
  cv::Mat l;
  clahe->apply(planes[0], l);
  planes[0] = l;
  cv::merge(planes, lab);
  cv::cvtColor(lab, out, cv::COLOR_Lab2RGB);
  return out;
}

cv::Mat brightness_contrast_apply(const cv::Mat& img, double alpha, double beta) {
  // numpy evaluates arange(256, float32) * alpha + beta in float32 (the file is built without
  // fused multiply-add so the two roundings happen as they do there).
  const float a = static_cast<float>(alpha);
  const float b = static_cast<float>(beta);
  Lut lut;
  for (int i = 0; i < 256; ++i) {
    const float prod = static_cast<float>(i) * a;
    lut[static_cast<std::size_t>(i)] = clip_trunc(prod + b);
  }
  return apply_lut(img, lut);
}

cv::Mat gamma_apply(const cv::Mat& img, double gamma) {
  Lut lut;
  for (int i = 0; i < 256; ++i) {
    // i * (1/255), not i / 255: the two differ in the last bit for some i, which truncation shows.
    const double x = static_cast<double>(i) * (1.0 / 255.0);
    lut[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(std::pow(x, gamma) * 255.0);
  }
  return apply_lut(img, lut);
}

namespace {

// Hue table of OpenCV's 8-bit HSV: (i + shift) mod 180, truncated.
Lut hue_lut(double shift) {
  Lut lut;
  for (int i = 0; i < 256; ++i) lut[static_cast<std::size_t>(i)] = clip_trunc(py_mod(i + shift, 180.0));
  return lut;
}

// Saturating add of an integer constant (albumentations truncates the shift first).
cv::Mat add_int(const cv::Mat& plane, int v) {
  Lut lut;
  for (int i = 0; i < 256; ++i) lut[static_cast<std::size_t>(i)] = cv::saturate_cast<std::uint8_t>(i + v);
  return apply_lut(plane, lut);
}

}  // namespace

cv::Mat hue_saturation_value_apply(const cv::Mat& img, double hue_shift, double sat_shift, double val_shift) {
  require_channels(img, "HueSaturationValue", img.channels() == 1 || img.channels() == 3, "a 1- or 3-channel image");
  if (hue_shift == 0 && sat_shift == 0 && val_shift == 0) return img.clone();
  const bool gray = is_gray(img);
  cv::Mat rgb = img;
  if (gray) {
    hue_shift = 0;  // no hue or saturation in a gray image
    sat_shift = 0;
    cv::cvtColor(img, rgb, cv::COLOR_GRAY2RGB);
  }
  cv::Mat hsv;
  cv::cvtColor(rgb, hsv, cv::COLOR_RGB2HSV);
  std::vector<cv::Mat> p;
  cv::split(hsv, p);
  if (hue_shift != 0) p[0] = apply_lut(p[0], hue_lut(hue_shift));
  if (sat_shift != 0) {
    const cv::Mat unsaturated = p[1] == 0;  // grey pixels stay grey
    p[1] = add_int(p[1], static_cast<int>(sat_shift));
    p[1].setTo(0, unsaturated);
  }
  if (val_shift != 0) p[2] = add_int(p[2], static_cast<int>(val_shift));
  cv::merge(p, hsv);
  cv::Mat out;
  cv::cvtColor(hsv, out, cv::COLOR_HSV2RGB);
  if (gray) cv::cvtColor(out, out, cv::COLOR_RGB2GRAY);
  return out;
}

namespace {

cv::Mat jitter_brightness(const cv::Mat& img, double f) {
  if (f == 0) return cv::Mat::zeros(img.size(), img.type());
  if (f == 1) return img;
  const float ff = static_cast<float>(f);
  Lut lut;
  for (int i = 0; i < 256; ++i) lut[static_cast<std::size_t>(i)] = clip_trunc(static_cast<float>(i) * ff);
  return apply_lut(img, lut);
}

cv::Mat jitter_contrast(const cv::Mat& img, double f) {
  if (f == 1) return img;
  double m = 0;
  if (is_gray(img)) {
    m = mean_u8(img);
  } else {
    cv::Mat g;
    cv::cvtColor(img, g, cv::COLOR_RGB2GRAY);
    m = mean_u8(g);
  }
  if (f == 0) return cv::Mat(img.size(), img.type(), cv::Scalar::all(static_cast<int>(m + 0.5)));
  return brightness_contrast_apply(img, f, m * (1 - f));
}

cv::Mat jitter_saturation(const cv::Mat& img, double f) {
  if (f == 1 || is_gray(img)) return img;
  cv::Mat g, g3;
  cv::cvtColor(img, g, cv::COLOR_RGB2GRAY);
  cv::cvtColor(g, g3, cv::COLOR_GRAY2RGB);
  if (f == 0) return g3;
  cv::Mat out;
  cv::addWeighted(img, f, g3, 1 - f, 0, out);
  return out;
}

cv::Mat jitter_hue(const cv::Mat& img, double f) {
  if (is_gray(img) || f == 0) return img;
  cv::Mat hsv;
  cv::cvtColor(img, hsv, cv::COLOR_RGB2HSV);
  std::vector<cv::Mat> p;
  cv::split(hsv, p);
  p[0] = apply_lut(p[0], hue_lut(180 * f));
  cv::merge(p, hsv);
  cv::Mat out;
  cv::cvtColor(hsv, out, cv::COLOR_HSV2RGB);
  return out;
}

}  // namespace

cv::Mat color_jitter_apply(const cv::Mat& img, double brightness, double contrast, double saturation, double hue,
                           const std::array<int, 4>& order) {
  require_channels(img, "ColorJitter", img.channels() == 1 || img.channels() == 3, "a 1- or 3-channel image");
  cv::Mat out = img;
  for (int op : order) {
    switch (op) {
      case 0: out = jitter_brightness(out, brightness); break;
      case 1: out = jitter_contrast(out, contrast); break;
      case 2: out = jitter_saturation(out, saturation); break;
      case 3: out = jitter_hue(out, hue); break;
      default: GB_THROW(InvalidArgument, "ColorJitter order holds " << op << ", not 0..3", "");
    }
  }
  return out.data == img.data ? out.clone() : out;
}

cv::Mat solarize_apply(const cv::Mat& img, double threshold) {
  Lut lut;
  for (int i = 0; i < 256; ++i)
    lut[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i >= threshold * 255.0 ? 255 - i : i);
  return apply_lut(img, lut);
}

namespace {

// albumentations' "pil" equalisation (like PIL's ImageOps.equalize, but with the inclusive
// cumulative histogram).
cv::Mat equalize_pil(const cv::Mat& plane) {
  std::array<std::int64_t, 256> hist{};
  for (int y = 0; y < plane.rows; ++y) {
    const std::uint8_t* row = plane.ptr<std::uint8_t>(y);
    for (int x = 0; x < plane.cols; ++x) ++hist[row[x]];
  }
  std::vector<std::int64_t> nonzero;
  for (std::int64_t h : hist)
    if (h != 0) nonzero.push_back(h);
  if (nonzero.size() <= 1) return plane.clone();
  const std::int64_t step = (std::accumulate(nonzero.begin(), nonzero.end(), std::int64_t{0}) - nonzero.back()) / 255;
  if (step == 0) return plane.clone();
  Lut lut;
  std::int64_t cum = 0;
  for (int i = 0; i < 256; ++i) {
    cum += hist[static_cast<std::size_t>(i)];
    lut[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(std::min<std::int64_t>((cum + step / 2) / step, 255));
  }
  return apply_lut(plane, lut);
}

cv::Mat equalize_plane(const cv::Mat& plane, EqualizeMode mode) {
  if (mode == EqualizeMode::kPil) return equalize_pil(plane);
  cv::Mat out;
  cv::equalizeHist(plane, out);
  return out;
}

}  // namespace

cv::Mat equalize_apply(const cv::Mat& img, EqualizeMode mode, bool by_channels) {
  require_channels(img, "Equalize", img.channels() == 1 || img.channels() == 3, "a 1- or 3-channel image");
  if (is_gray(img)) return equalize_plane(img, mode);
  std::vector<cv::Mat> p;
  cv::Mat out;
  if (!by_channels) {
    cv::Mat ycc;
    cv::cvtColor(img, ycc, cv::COLOR_RGB2YCrCb);
    cv::split(ycc, p);
    p[0] = equalize_plane(p[0], mode);
    cv::merge(p, ycc);
    cv::cvtColor(ycc, out, cv::COLOR_YCrCb2RGB);
    return out;
  }
  cv::split(img, p);
  for (auto& plane : p) plane = equalize_plane(plane, mode);
  cv::merge(p, out);
  return out;
}

namespace {

cv::Mat gray_pca(const cv::Mat& img) {
  // Project every pixel on the first principal component of the pixel cloud (OpenCV's PCA, as
  // albumentations uses), then stretch to [0, 255].
  cv::Mat pixels;
  img.reshape(1, static_cast<int>(img.total())).convertTo(pixels, CV_64F);
  cv::Mat mean, vectors, values;
  cv::PCACompute(pixels, mean, vectors, values, 1);
  cv::Mat proj;
  cv::PCAProject(pixels, mean, vectors, proj);
  cv::Mat g32;
  proj.reshape(1, img.rows).convertTo(g32, CV_32F);
  cv::Mat unit;
  cv::normalize(g32, unit, 0, 1, cv::NORM_MINMAX, CV_32F);
  cv::Mat out(img.rows, img.cols, CV_8UC1);
  for (int y = 0; y < img.rows; ++y)
    for (int x = 0; x < img.cols; ++x)
      out.at<std::uint8_t>(y, x) = clip_trunc(std::nearbyint(unit.at<float>(y, x) * 255.0f));
  return out;
}

}  // namespace

cv::Mat to_gray_apply(const cv::Mat& img, int num_output_channels, GrayMethod method) {
  if (is_gray(img)) return img.clone();  // already gray: unchanged, whatever num_output_channels says
  const bool needs_rgb = method == GrayMethod::kWeightedAverage || method == GrayMethod::kFromLab;
  if (needs_rgb) require_channels(img, "ToGray", img.channels() == 3, "a 3-channel image for this method");
  cv::Mat g;
  switch (method) {
    case GrayMethod::kWeightedAverage: cv::cvtColor(img, g, cv::COLOR_RGB2GRAY); break;
    case GrayMethod::kFromLab: {
      cv::Mat lab;
      cv::cvtColor(img, lab, cv::COLOR_RGB2Lab);
      cv::extractChannel(lab, g, 0);
      break;
    }
    case GrayMethod::kDesaturation:
    case GrayMethod::kAverage:
    case GrayMethod::kMax: {
      const int cn = img.channels();
      g.create(img.rows, img.cols, CV_8UC1);
      for (int y = 0; y < img.rows; ++y) {
        const std::uint8_t* row = img.ptr<std::uint8_t>(y);
        std::uint8_t* dst = g.ptr<std::uint8_t>(y);
        for (int x = 0; x < img.cols; ++x) {
          const std::uint8_t* px = row + static_cast<std::ptrdiff_t>(x) * cn;
          int lo = 255, hi = 0, sum = 0;
          for (int c = 0; c < cn; ++c) {
            lo = std::min<int>(lo, px[c]);
            hi = std::max<int>(hi, px[c]);
            sum += px[c];
          }
          // (max + min) / 2 and the channel mean, truncated: exact in integers.
          dst[x] = static_cast<std::uint8_t>(method == GrayMethod::kDesaturation ? (hi + lo) / 2
                                             : method == GrayMethod::kAverage    ? sum / cn
                                                                                 : hi);
        }
      }
      break;
    }
    case GrayMethod::kPca: g = gray_pca(img); break;
  }
  if (num_output_channels == 1) return g;
  cv::Mat out;
  cv::merge(std::vector<cv::Mat>(static_cast<std::size_t>(num_output_channels), g), out);
  return out;
}

cv::Mat gaussian_kernel_1d(double sigma, int ksize) {
  int size = ksize == 0 ? static_cast<int>(sigma * 3.5) * 2 + 1 : ksize;
  if (size % 2 == 0) size += 1;
  std::vector<double> k(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i) {
    const double t = static_cast<double>(i - size / 2) / sigma;
    k[static_cast<std::size_t>(i)] = std::exp(-0.5 * (t * t));
  }
  const double total = numpy_sum(k.data(), k.size());
  cv::Mat out(1, size, CV_64F);
  for (int i = 0; i < size; ++i) out.at<double>(0, i) = k[static_cast<std::size_t>(i)] / total;
  return out;
}

cv::Mat gaussian_blur_apply(const cv::Mat& img, const cv::Mat& kernel) {
  cv::Mat out;
  cv::sepFilter2D(img, out, -1, kernel, kernel, cv::Point(-1, -1), 0, cv::BORDER_REFLECT_101);
  return out;
}

cv::Mat motion_kernel(int ksize, double angle, double direction, double shift_x, double shift_y) {
  direction = std::clamp(direction, -1.0, 1.0);
  const int center = ksize / 2;
  const double len = ksize / 2;
  const double rad = angle * (M_PI / 180.0);
  const double dx = std::cos(rad), dy = std::sin(rad);
  // The line runs through the centre; direction shortens one side (-1: only backwards, 1: forwards).
  double t0 = -len, t1 = len;
  if (direction < 0) t1 = len * (1 - std::abs(direction));
  if (direction > 0) t0 = -len * (1 - direction);
  cv::Mat k = cv::Mat::zeros(ksize, ksize, CV_32F);
  const double step = ksize > 1 ? (t1 - t0) / (ksize - 1) : 0;
  for (int j = 0; j < ksize; ++j) {
    const double t = (ksize > 1 && j == ksize - 1) ? t1 : j * step + t0;  // numpy.linspace
    const double x = (center + dx * t) + shift_x;
    const double y = (center + dy * t) + shift_y;
    // np.round rounds half to even (nearbyint in the default rounding mode).
    const int xi = static_cast<int>(std::clamp(std::nearbyint(x), 0.0, static_cast<double>(ksize - 1)));
    const int yi = static_cast<int>(std::clamp(std::nearbyint(y), 0.0, static_cast<double>(ksize - 1)));
    k.at<float>(yi, xi) = 1;
  }
  const int count = cv::countNonZero(k);
  if (count == 0) {
    k.at<float>(center, center) = 1;
    return k;
  }
  const float total = static_cast<float>(count);
  for (int y = 0; y < ksize; ++y)
    for (int x = 0; x < ksize; ++x) k.at<float>(y, x) = k.at<float>(y, x) / total;
  return k;
}

cv::Mat motion_blur_apply(const cv::Mat& img, const cv::Mat& kernel) {
  cv::Mat out;
  cv::filter2D(img, out, -1, kernel, cv::Point(-1, -1), 0, cv::BORDER_REFLECT_101);
  return out;
}

cv::Mat gauss_noise_map(int rows, int cols, int channels, double std, double mean, std::uint64_t seed, bool per_channel,
                        double noise_scale_factor) {
  int h = rows, w = cols;
  if (noise_scale_factor != 1.0) {
    h = std::max(1, static_cast<int>(rows * noise_scale_factor));
    w = std::max(1, static_cast<int>(cols * noise_scale_factor));
  }
  const int cn = per_channel ? channels : 1;
  // albumentations fills a zero float64 array with cv2.randn(mean, std) after cv2.setRNGSeed(seed);
  // mean and std travel as float32 vectors of one value per channel.
  cv::Mat dst(h, w, CV_64FC(cn), cv::Scalar::all(0));
  const cv::Mat m(cn, 1, CV_32F, cv::Scalar::all(static_cast<float>(mean)));
  const cv::Mat s(cn, 1, CV_32F, cv::Scalar::all(static_cast<float>(std)));
  cv::RNG rng(seed);
  rng.fill(dst, cv::RNG::NORMAL, m, s);
  cv::Mat noise;
  dst.convertTo(noise, CV_32F);  // float32 first, then * 255 in float32
  noise = noise.reshape(1);
  for (int y = 0; y < noise.rows; ++y) {
    float* row = noise.ptr<float>(y);
    for (int x = 0; x < noise.cols; ++x) row[x] = row[x] * 255.0f;
  }
  noise = noise.reshape(cn);
  if (h != rows || w != cols) cv::resize(noise, noise, cv::Size(cols, rows), 0, 0, cv::INTER_LINEAR);
  if (cn == channels) return noise;
  cv::Mat out;
  cv::merge(std::vector<cv::Mat>(static_cast<std::size_t>(channels), noise), out);
  return out;
}

cv::Mat gauss_noise(const cv::Mat& img, double std, double mean, std::uint64_t seed, bool per_channel,
                    double noise_scale_factor) {
  const int channels = img.channels();
  const int cn = per_channel ? channels : 1;
  if (noise_scale_factor != 1.0 || img.depth() != CV_8U) {
    return gauss_noise_apply(
        img, gauss_noise_map(img.rows, img.cols, channels, std, mean, seed, per_channel, noise_scale_factor));
  }
  // gauss_noise_map then gauss_noise_apply in one pass over the float64 draws (the same numbers:
  // OpenCV's normal fill overwrites every element, so the zeroing albumentations does first
  // changes nothing), a few rows at a time: the generator continues its sequence from one fill to
  // the next, and the draws stay in cache.
  const int rows_per_block = std::max(1, (16 << 10) / std::max(1, img.cols * cn));
  cv::Mat draws(std::min(rows_per_block, img.rows), img.cols, CV_64FC(cn));
  const cv::Mat m(cn, 1, CV_32F, cv::Scalar::all(static_cast<float>(mean)));
  const cv::Mat s(cn, 1, CV_32F, cv::Scalar::all(static_cast<float>(std)));
  cv::RNG rng(seed);
  cv::Mat out(img.size(), img.type());
  for (int y0 = 0; y0 < img.rows; y0 += rows_per_block) {
    const int n = std::min(rows_per_block, img.rows - y0);
    cv::Mat block = draws.rowRange(0, n);
    rng.fill(block, cv::RNG::NORMAL, m, s);
    for (int r = 0; r < n; ++r) {
      const std::uint8_t* src = img.ptr<std::uint8_t>(y0 + r);
      const double* nz = block.ptr<double>(r);
      std::uint8_t* dst = out.ptr<std::uint8_t>(y0 + r);
      // int(): truncation toward zero, as np.trunc then the cast; flat loops the compiler vectorises
      const auto add = [](int a, float v) {
        return static_cast<std::uint8_t>(std::clamp(a + static_cast<int>(v), 0, 255));
      };
      if (cn == channels) {
        const int len = img.cols * channels;
        for (int i = 0; i < len; ++i) dst[i] = add(src[i], static_cast<float>(nz[i]) * 255.0f);
      } else {
        for (int x = 0; x < img.cols; ++x) {
          const float v = static_cast<float>(nz[x]) * 255.0f;
          for (int c = 0; c < channels; ++c) dst[x * channels + c] = add(src[x * channels + c], v);
        }
      }
    }
  }
  return out;
}

cv::Mat gauss_noise_apply(const cv::Mat& img, const cv::Mat& noise_map) {
  GB_CHECK(noise_map.size() == img.size() && noise_map.channels() == img.channels() && noise_map.depth() == CV_32F,
           InvalidArgument, "GaussNoise's noise map does not match the image", "");
  cv::Mat out(img.size(), img.type());
  const int n = img.cols * img.channels();
  for (int y = 0; y < img.rows; ++y) {
    const std::uint8_t* src = img.ptr<std::uint8_t>(y);
    const float* nz = noise_map.ptr<float>(y);
    std::uint8_t* dst = out.ptr<std::uint8_t>(y);
    // int(): truncation toward zero, as np.trunc then the cast
    for (int x = 0; x < n; ++x)
      dst[x] = static_cast<std::uint8_t>(std::clamp(src[x] + static_cast<int>(nz[x]), 0, 255));
  }
  return out;
}

NormalizeTables normalize_tables(const cv::Mat& img, const std::vector<double>& mean, const std::vector<double>& std,
                                 double max_pixel_value, Normalization mode) {
  GB_CHECK(img.depth() == CV_8U, InvalidArgument, "Normalize expects an 8-bit image, got OpenCV depth " << img.depth(),
           "put Normalize after the pixel transforms");
  const int cn = img.channels();
  NormalizeTables luts;
  // Each table maps 0..255 to float32.
  auto lut_from = [](auto f) {
    std::array<float, 256> lut{};
    for (int i = 0; i < 256; ++i) lut[static_cast<std::size_t>(i)] = f(i);
    return lut;
  };
  if (mode == Normalization::kStandard) {
    GB_CHECK(!mean.empty() && !std.empty(), InvalidArgument, "Normalize needs mean and std", "");
    // float32 throughout: mean * max and 1 / (std * max) as albumentations precomputes them.
    const auto fmax = static_cast<float>(max_pixel_value);
    // A single channel, or fewer values than channels: the first value serves every channel.
    auto pick = [cn](const std::vector<double>& v, int c) {
      return cn == 1 || v.size() < static_cast<std::size_t>(cn) ? v[0] : v[static_cast<std::size_t>(c)];
    };
    for (int c = 0; c < cn; ++c) {
      const float m = static_cast<float>(pick(mean, c)) * fmax;
      const float den = 1.0f / (static_cast<float>(pick(std, c)) * fmax);
      luts.push_back(lut_from([&](int i) { return (static_cast<float>(i) - m) * den; }));
    }
    return luts;
  }
  // Statistics of the image itself, in double (numpy 2 computes these modes in float64).
  std::vector<cv::Mat> planes;
  cv::split(img, planes);
  const bool per_channel =
      cn > 1 && (mode == Normalization::kImagePerChannel || mode == Normalization::kMinMaxPerChannel);
  const bool minmax = mode == Normalization::kMinMax || mode == Normalization::kMinMaxPerChannel;
  const bool clip = !(per_channel && mode == Normalization::kMinMaxPerChannel);
  auto stats = [&](const std::vector<cv::Mat>& ps) {
    double lo = 255, hi = 0, sum = 0, n = 0;
    for (const cv::Mat& pl : ps) {
      double a, b;
      cv::minMaxLoc(pl, &a, &b);
      lo = std::min(lo, a);
      hi = std::max(hi, b);
      sum += cv::sum(pl)[0];
      n += static_cast<double>(pl.total());
    }
    const double mu = sum / n;
    double ss = 0;
    for (const cv::Mat& pl : ps)
      for (int y = 0; y < pl.rows; ++y)
        for (int x = 0; x < pl.cols; ++x) {
          const double d = pl.at<std::uint8_t>(y, x) - mu;
          ss += d * d;
        }
    return std::array<double, 4>{lo, hi, mu, std::sqrt(ss / n)};
  };
  for (int c = 0; c < cn; ++c) {
    if (!per_channel && c > 0) {
      luts.push_back(luts[0]);
      continue;
    }
    const auto st = per_channel ? stats({planes[static_cast<std::size_t>(c)]}) : stats(planes);
    const double shift = minmax ? st[0] : st[2];
    const double scale = minmax ? st[1] - st[0] + 1e-4 : st[3] + 1e-4;
    luts.push_back(lut_from([&](int i) {
      double v = (i - shift) / scale;
      if (clip) v = std::clamp(v, -20.0, 20.0);
      return static_cast<float>(v);
    }));
  }
  return luts;
}

namespace {

// dst[x * cn + c] = lut_c[src[x * cn + c]], or planar dst_c[x] = lut_c[src[x * cn + c]] (planes
// `plane` floats apart), with the channel count a compile-time constant where it is 1, 3 or 4.
template <int CN>
void lut_row(const std::uint8_t* src, int cols, const float* const* luts, float* dst, std::ptrdiff_t plane) {
  if (plane == 0) {
    for (int x = 0; x < cols; ++x)
      for (int c = 0; c < CN; ++c) dst[x * CN + c] = luts[c][src[x * CN + c]];
  } else {
    for (int c = 0; c < CN; ++c) {
      const float* lut = luts[c];
      float* d = dst + c * plane;
      for (int x = 0; x < cols; ++x) d[x] = lut[src[x * CN + c]];
    }
  }
}

void lut_row_any(const std::uint8_t* src, int cols, int cn, const float* const* luts, float* dst,
                 std::ptrdiff_t plane) {
  for (int x = 0; x < cols; ++x)
    for (int c = 0; c < cn; ++c) (plane == 0 ? dst[x * cn + c] : dst[c * plane + x]) = luts[c][src[x * cn + c]];
}

void lut_image(const cv::Mat& img, const NormalizeTables& luts, float* out, bool planar) {
  const int cn = img.channels();
  std::vector<const float*> t;
  for (const auto& l : luts) t.push_back(l.data());
  const std::ptrdiff_t plane = planar ? static_cast<std::ptrdiff_t>(img.rows) * img.cols : 0;
  for (int y = 0; y < img.rows; ++y) {
    const std::uint8_t* src = img.ptr<std::uint8_t>(y);
    float* dst = out + static_cast<std::ptrdiff_t>(y) * img.cols * (planar ? 1 : cn);
    switch (cn) {
      case 1: lut_row<1>(src, img.cols, t.data(), dst, plane); break;
      case 3: lut_row<3>(src, img.cols, t.data(), dst, plane); break;
      case 4: lut_row<4>(src, img.cols, t.data(), dst, plane); break;
      default: lut_row_any(src, img.cols, cn, t.data(), dst, plane);
    }
  }
}

}  // namespace

cv::Mat normalize_apply(const cv::Mat& img, const std::vector<double>& mean, const std::vector<double>& std,
                        double max_pixel_value, Normalization mode) {
  const NormalizeTables luts = normalize_tables(img, mean, std, max_pixel_value, mode);
  cv::Mat out(img.rows, img.cols, CV_MAKETYPE(CV_32F, img.channels()));
  lut_image(img, luts, out.ptr<float>(), false);
  return out;
}

void normalize_planes(const cv::Mat& img, const NormalizeTables& luts, float* out) { lut_image(img, luts, out, true); }

}  // namespace glassbox::data
