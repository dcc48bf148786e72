// Over 600 lines: twelve transforms, each with its parameter table, validation and draws; the
// lookup tables, kernels and pixel work they call are in augment_pixel_ops.cpp.
// Tested by augment_pixel_test.cpp.
#include "glassbox/data/augment_pixel.h"

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

namespace glassbox::data {

namespace {

using Lut = std::array<std::uint8_t, 256>;

}  // namespace

// ---- the config side: parameter declarations, draws, steps ---------------------------------------

namespace {

ParamDef range_param(std::string name, std::vector<double> def, ScalarRange rule, std::string doc) {
  ParamDef d;
  d.name = std::move(name);
  d.kind = ParamKind::kRange;
  d.number = std::move(def);
  d.scalar = rule;
  d.doc = std::move(doc);
  return d;
}
ParamDef list_param(std::string name, std::vector<double> def, std::string doc) {
  ParamDef d = range_param(std::move(name), std::move(def), ScalarRange::kFixed, std::move(doc));
  d.kind = ParamKind::kList;
  return d;
}
ParamDef number_param(std::string name, double def, std::string doc) {
  ParamDef d = range_param(std::move(name), {def}, ScalarRange::kFixed, std::move(doc));
  d.kind = ParamKind::kNumber;
  return d;
}
ParamDef int_param(std::string name, std::int64_t def, std::string doc) {
  ParamDef d = range_param(std::move(name), {static_cast<double>(def)}, ScalarRange::kFixed, std::move(doc));
  d.kind = ParamKind::kInt;
  return d;
}
ParamDef flag_param(std::string name, bool def, std::string doc) {
  ParamDef d;
  d.name = std::move(name);
  d.kind = ParamKind::kFlag;
  d.flag = def;
  d.doc = std::move(doc);
  return d;
}
ParamDef word_param(std::string name, std::string def, std::vector<std::string> choices, std::string doc) {
  ParamDef d;
  d.name = std::move(name);
  d.kind = ParamKind::kWord;
  d.word = std::move(def);
  d.choices = std::move(choices);
  d.doc = std::move(doc);
  return d;
}

using Range = std::pair<double, double>;

std::string show(const Range& r) { return fmt::format("[{}, {}]", r.first, r.second); }

// A range albumentations sorts (to_tuple): [a, b] and [b, a] mean the same.
Range sorted_range(const Params& p, const std::string& key, ScalarRange rule) {
  const Range r = p.range(key, rule);
  return {std::min(r.first, r.second), std::max(r.first, r.second)};
}

// A range albumentations checks to lie in [lo, hi] and be nondecreasing.
Range bounded_range(const Params& p, const std::string& key, ScalarRange rule, double lo, double hi) {
  const Range r = p.range(key, rule);
  p.require(r.first >= lo && r.second <= hi && r.second >= lo && r.first <= hi, key,
            fmt::format("must lie in [{}, {}], got {}", lo, hi, show(r)));
  p.require(r.first <= r.second, key, fmt::format("must be [lo, hi] with lo <= hi, got {}", show(r)));
  return r;
}

// Integer kernel-size ranges (pydantic refuses fractional ints).
void require_ints(const Params& p, const std::string& key) {
  for (double v : p.list(key))
    p.require(v == std::floor(v), key, fmt::format("must hold integers, got {}", fmt::join(p.list(key), ", ")));
}

// Every pixel step: checks the image is still 8-bit, draws, applies; masks are not touched.
class PixelStep : public Transform {
 public:
  using Transform::Transform;
  void apply(Sample& s, AugmentRng& rng) const final {
    GB_CHECK(s.image.depth() == CV_8U, InvalidArgument,
             name() << " expects an 8-bit image, got one of OpenCV depth " << s.image.depth(),
             "put Normalize after the pixel transforms");
    const std::vector<double> v = draw_params(s, rng);
    s.image = run(s.image, v);
  }
  // The drawn values -> the new image (albumentations' apply).
  virtual cv::Mat run(const cv::Mat& img, const std::vector<double>& v) const = 0;
};

class ClaheStep final : public PixelStep {
 public:
  ClaheStep(double p, Range clip, cv::Size tile) : PixelStep(p), clip_(clip), tile_(tile) {}
  std::string_view name() const override { return "CLAHE"; }
  std::vector<double> draw_params(const Sample&, AugmentRng& rng) const override {
    return {rng.uniform(clip_.first, clip_.second)};
  }
  cv::Mat run(const cv::Mat& img, const std::vector<double>& v) const override { return clahe_apply(img, v[0], tile_); }

 private:
  Range clip_;
  cv::Size tile_;
};

class BrightnessContrastStep final : public PixelStep {
 public:
  BrightnessContrastStep(double p, Range b, Range c, bool by_max, bool safe)
      : PixelStep(p), b_(b), c_(c), by_max_(by_max), safe_(safe) {}
  std::string_view name() const override { return "RandomBrightnessContrast"; }
  std::vector<double> draw_params(const Sample& s, AugmentRng& rng) const override {
    double alpha = 1.0 + rng.uniform(c_.first, c_.second);  // contrast is drawn first
    double beta = rng.uniform(b_.first, b_.second);
    beta = by_max_ ? beta * 255 : beta * mean_u8(s.image);
    if (safe_) {
      // Keep i * alpha + beta inside [0, 255] for every i.
      if (alpha > 0) {
        beta = std::clamp(beta, 0.0, 255.0);
        alpha = std::min(alpha, (255 - beta) / 255);
      } else {
        beta = std::min(beta, 255.0);
        alpha = std::max(alpha, -beta / 255);
      }
    }
    return {alpha, beta};
  }
  cv::Mat run(const cv::Mat& img, const std::vector<double>& v) const override {
    return brightness_contrast_apply(img, v[0], v[1]);
  }

 private:
  Range b_, c_;
  bool by_max_, safe_;
};

class GammaStep final : public PixelStep {
 public:
  GammaStep(double p, Range limit) : PixelStep(p), limit_(limit) {}
  std::string_view name() const override { return "RandomGamma"; }
  std::vector<double> draw_params(const Sample&, AugmentRng& rng) const override {
    return {rng.uniform(limit_.first, limit_.second) / 100.0};
  }
  cv::Mat run(const cv::Mat& img, const std::vector<double>& v) const override { return gamma_apply(img, v[0]); }

 private:
  Range limit_;
};

class HsvStep final : public PixelStep {
 public:
  HsvStep(double p, Range h, Range s, Range v) : PixelStep(p), h_(h), s_(s), v_(v) {}
  std::string_view name() const override { return "HueSaturationValue"; }
  std::vector<double> draw_params(const Sample&, AugmentRng& rng) const override {
    const double h = rng.uniform(h_.first, h_.second);
    const double s = rng.uniform(s_.first, s_.second);
    return {h, s, rng.uniform(v_.first, v_.second)};
  }
  cv::Mat run(const cv::Mat& img, const std::vector<double>& v) const override {
    return hue_saturation_value_apply(img, v[0], v[1], v[2]);
  }

 private:
  Range h_, s_, v_;
};

class ColorJitterStep final : public PixelStep {
 public:
  ColorJitterStep(double p, Range b, Range c, Range s, Range h) : PixelStep(p), b_(b), c_(c), s_(s), h_(h) {}
  std::string_view name() const override { return "ColorJitter"; }
  // brightness, contrast, saturation, hue, then the order of the four operations.
  std::vector<double> draw_params(const Sample&, AugmentRng& rng) const override {
    std::vector<double> v;
    for (const Range& r : {b_, c_, s_, h_}) v.push_back(rng.uniform(r.first, r.second));
    std::array<int, 4> order{0, 1, 2, 3};
    for (int i = 3; i > 0; --i) std::swap(order[static_cast<std::size_t>(i)], order[rng.randint(0, i)]);
    for (int o : order) v.push_back(o);
    return v;
  }
  cv::Mat run(const cv::Mat& img, const std::vector<double>& v) const override {
    const std::array<int, 4> order{static_cast<int>(v[4]), static_cast<int>(v[5]), static_cast<int>(v[6]),
                                   static_cast<int>(v[7])};
    return color_jitter_apply(img, v[0], v[1], v[2], v[3], order);
  }

 private:
  Range b_, c_, s_, h_;
};

class SolarizeStep final : public PixelStep {
 public:
  SolarizeStep(double p, Range t) : PixelStep(p), t_(t) {}
  std::string_view name() const override { return "Solarize"; }
  std::vector<double> draw_params(const Sample&, AugmentRng& rng) const override {
    return {rng.uniform(t_.first, t_.second)};
  }
  cv::Mat run(const cv::Mat& img, const std::vector<double>& v) const override { return solarize_apply(img, v[0]); }

 private:
  Range t_;
};

class EqualizeStep final : public PixelStep {
 public:
  EqualizeStep(double p, EqualizeMode mode, bool by_channels) : PixelStep(p), mode_(mode), by_channels_(by_channels) {}
  std::string_view name() const override { return "Equalize"; }
  cv::Mat run(const cv::Mat& img, const std::vector<double>&) const override {
    return equalize_apply(img, mode_, by_channels_);
  }

 private:
  EqualizeMode mode_;
  bool by_channels_;
};

class ToGrayStep final : public PixelStep {
 public:
  ToGrayStep(double p, int n, GrayMethod method) : PixelStep(p), n_(n), method_(method) {}
  std::string_view name() const override { return "ToGray"; }
  cv::Mat run(const cv::Mat& img, const std::vector<double>&) const override { return to_gray_apply(img, n_, method_); }

 private:
  int n_;
  GrayMethod method_;
};

class GaussianBlurStep final : public PixelStep {
 public:
  GaussianBlurStep(double p, Range ksize, Range sigma) : PixelStep(p), ksize_(ksize), sigma_(sigma) {}
  std::string_view name() const override { return "GaussianBlur"; }
  // sigma, then the kernel size (0: derived from sigma), in albumentations' order.
  std::vector<double> draw_params(const Sample&, AugmentRng& rng) const override {
    const double sigma = rng.uniform(sigma_.first, sigma_.second);
    const auto k = rng.randint(static_cast<std::int64_t>(ksize_.first), static_cast<std::int64_t>(ksize_.second));
    return {sigma, static_cast<double>(k)};
  }
  cv::Mat run(const cv::Mat& img, const std::vector<double>& v) const override {
    return gaussian_blur_apply(img, gaussian_kernel_1d(v[0], static_cast<int>(v[1])));
  }

 private:
  Range ksize_, sigma_;
};

class MotionBlurStep final : public PixelStep {
 public:
  MotionBlurStep(double p, int lo, int hi, bool shifted, Range angle, Range direction)
      : PixelStep(p), lo_(lo), hi_(hi), shifted_(shifted), angle_(angle), direction_(direction) {}
  std::string_view name() const override { return "MotionBlur"; }
  // ksize, angle, direction, then shift_x and shift_y in pixels when allow_shifted.
  std::vector<double> draw_params(const Sample&, AugmentRng& rng) const override {
    const int k = lo_ == hi_ ? lo_ : lo_ + 2 * static_cast<int>(rng.randint(0, (hi_ - lo_) / 2));
    std::vector<double> v{static_cast<double>(k), rng.uniform(angle_.first, angle_.second)};
    v.push_back(rng.uniform(direction_.first, direction_.second));
    if (shifted_) {
      const double half = k / 2;
      const double sx = rng.uniform(-1, 1) * half / 2;
      v.push_back(sx);
      v.push_back(rng.uniform(-1, 1) * half / 2);
    }
    return v;
  }
  cv::Mat run(const cv::Mat& img, const std::vector<double>& v) const override {
    const bool s = v.size() > 3;
    return motion_blur_apply(img, motion_kernel(static_cast<int>(v[0]), v[1], v[2], s ? v[3] : 0, s ? v[4] : 0));
  }

 private:
  int lo_, hi_;
  bool shifted_;
  Range angle_, direction_;
};

class GaussNoiseStep final : public PixelStep {
 public:
  GaussNoiseStep(double p, Range std, Range mean, bool per_channel, double scale)
      : PixelStep(p), std_(std), mean_(mean), per_channel_(per_channel), scale_(scale) {}
  std::string_view name() const override { return "GaussNoise"; }
  // std and mean (fractions of 255), then the seed of OpenCV's generator.
  std::vector<double> draw_params(const Sample&, AugmentRng& rng) const override {
    const double sigma = rng.uniform(std_.first, std_.second);
    const double mean = rng.uniform(mean_.first, mean_.second);
    return {sigma, mean, static_cast<double>(rng.randint(0, 65535))};
  }
  cv::Mat run(const cv::Mat& img, const std::vector<double>& v) const override {
    return gauss_noise(img, v[0], v[1], static_cast<std::uint64_t>(v[2]), per_channel_, scale_);
  }

 private:
  Range std_, mean_;
  bool per_channel_;
  double scale_;
};

class NormalizeStep final : public PixelStep, public PlanarStep {
 public:
  NormalizeStep(double p, std::vector<double> mean, std::vector<double> std, double max, Normalization mode)
      : PixelStep(p), mean_(std::move(mean)), std_(std::move(std)), max_(max), mode_(mode) {}
  std::string_view name() const override { return "Normalize"; }
  cv::Mat run(const cv::Mat& img, const std::vector<double>&) const override {
    return normalize_apply(img, mean_, std_, max_, mode_);
  }
  const PlanarStep* planar_step() const override { return this; }
  void apply_planar(const cv::Mat& img, float* out) const override {
    normalize_planes(img, normalize_tables(img, mean_, std_, max_, mode_), out);
  }

 private:
  std::vector<double> mean_, std_;
  double max_;
  Normalization mode_;
};

}  // namespace

void add_pixel_transforms(std::vector<TransformDef>& out) {
  const auto kSym = ScalarRange::kSymmetric;
  const auto kFixed = ScalarRange::kFixed;

  out.push_back(
      {"CLAHE",
       "contrast-limited adaptive histogram equalisation (of L in Lab for RGB)",
       0.5,
       {range_param("clip_limit", {4.0}, ScalarRange::kOnePlus, "contrast limit, drawn uniformly; v means [1, v]"),
        list_param("tile_grid_size", {8, 8}, "[width, height] of the tile grid")},
       [](const Params& p) -> std::unique_ptr<Transform> {
         const Range clip = sorted_range(p, "clip_limit", ScalarRange::kOnePlus);
         p.require(clip.first >= 1, "clip_limit", fmt::format("must be >= 1, got {}", show(clip)));
         const auto& t = p.list("tile_grid_size");
         p.require(t.size() == 2 && t[0] >= 1 && t[1] >= 1 && t[0] == std::floor(t[0]) && t[1] == std::floor(t[1]),
                   "tile_grid_size", fmt::format("must be two integers >= 1, got [{}]", fmt::join(t, ", ")));
         return std::make_unique<ClaheStep>(p.p(), clip, cv::Size(static_cast<int>(t[0]), static_cast<int>(t[1])));
       }});

  out.push_back({"RandomBrightnessContrast",
                 "out = i * (1 + c) + b * 255 (b * image mean unless brightness_by_max)",
                 0.5,
                 {range_param("brightness_limit", {-0.2, 0.2}, kSym, "b, drawn uniformly; v means [-v, v]"),
                  range_param("contrast_limit", {-0.2, 0.2}, kSym, "c, drawn uniformly; v means [-v, v]"),
                  flag_param("brightness_by_max", true, "brightness relative to 255 (else to the image mean)"),
                  flag_param("ensure_safe_range", false, "limit alpha and beta so no pixel saturates")},
                 [](const Params& p) -> std::unique_ptr<Transform> {
                   return std::make_unique<BrightnessContrastStep>(
                       p.p(), p.range("brightness_limit", kSym), p.range("contrast_limit", kSym),
                       p.flag("brightness_by_max"), p.flag("ensure_safe_range"));
                 }});

  out.push_back({"RandomGamma",
                 "out = 255 * (i / 255) ^ (g / 100)",
                 0.5,
                 {range_param("gamma_limit", {80, 120}, ScalarRange::kOnePlus, "g, drawn uniformly; v means [1, v]")},
                 [](const Params& p) -> std::unique_ptr<Transform> {
                   const Range g = sorted_range(p, "gamma_limit", ScalarRange::kOnePlus);
                   p.require(g.first >= 1, "gamma_limit", fmt::format("must be >= 1, got {}", show(g)));
                   return std::make_unique<GammaStep>(p.p(), g);
                 }});

  out.push_back({"HueSaturationValue",
                 "shifts hue, saturation and value in OpenCV's 8-bit HSV (hue in [0, 180))",
                 0.5,
                 {range_param("hue_shift_limit", {-20, 20}, kSym, "hue shift, drawn uniformly; v means [-v, v]"),
                  range_param("sat_shift_limit", {-30, 30}, kSym, "saturation shift (truncated to an integer)"),
                  range_param("val_shift_limit", {-20, 20}, kSym, "value shift (truncated to an integer)")},
                 [](const Params& p) -> std::unique_ptr<Transform> {
                   return std::make_unique<HsvStep>(p.p(), p.range("hue_shift_limit", kSym),
                                                    p.range("sat_shift_limit", kSym), p.range("val_shift_limit", kSym));
                 }});

  out.push_back(
      {"ColorJitter",
       "torchvision-style brightness, contrast, saturation and hue factors, applied in random order",
       0.5,
       {range_param("brightness", {0.8, 1.2}, ScalarRange::kJitter, "factor, drawn uniformly; v means [1-v, 1+v]"),
        range_param("contrast", {0.8, 1.2}, ScalarRange::kJitter, "factor, drawn uniformly; v means [1-v, 1+v]"),
        range_param("saturation", {0.8, 1.2}, ScalarRange::kJitter, "factor, drawn uniformly; v means [1-v, 1+v]"),
        range_param("hue", {-0.5, 0.5}, kSym, "hue shift in turns, drawn uniformly; v means [-v, v]")},
       [](const Params& p) -> std::unique_ptr<Transform> {
         std::vector<Range> r;
         for (const std::string key : {"brightness", "contrast", "saturation", "hue"}) {
           const bool hue = key == "hue";
           const auto& raw = p.list(key);
           p.require(raw.size() != 1 || raw[0] >= 0, key,
                     fmt::format("must be >= 0 when one number, got {}", raw.empty() ? 0.0 : raw[0]));
           if (raw.size() == 1) {
             r.push_back(p.range(key, hue ? kSym : ScalarRange::kJitter));
           } else {
             r.push_back(hue ? bounded_range(p, key, kFixed, -0.5, 0.5)
                             : bounded_range(p, key, kFixed, 0, std::numeric_limits<double>::infinity()));
           }
         }
         return std::make_unique<ColorJitterStep>(p.p(), r[0], r[1], r[2], r[3]);
       }});

  out.push_back({"Solarize",
                 "inverts the pixels at or above threshold * 255",
                 0.5,
                 {range_param("threshold_range", {0.5, 0.5}, kFixed, "threshold in [0, 1], drawn uniformly")},
                 [](const Params& p) -> std::unique_ptr<Transform> {
                   return std::make_unique<SolarizeStep>(p.p(), bounded_range(p, "threshold_range", kFixed, 0, 1));
                 }});

  out.push_back({"Equalize",
                 "histogram equalisation (albumentations' mask parameter is not available from configs)",
                 0.5,
                 {word_param("mode", "cv", {"cv", "pil"}, "OpenCV's equalizeHist or the PIL-style table"),
                  flag_param("by_channels", true, "each channel separately (else Y of YCrCb)")},
                 [](const Params& p) -> std::unique_ptr<Transform> {
                   return std::make_unique<EqualizeStep>(
                       p.p(), p.word("mode") == "pil" ? EqualizeMode::kPil : EqualizeMode::kCv, p.flag("by_channels"));
                 }});

  out.push_back(
      {"ToGray",
       "converts RGB to gray, repeated over num_output_channels (1: a one-channel image)",
       0.5,
       {int_param("num_output_channels", 3, "channels of the result"),
        word_param("method", "weighted_average",
                   {"weighted_average", "from_lab", "desaturation", "average", "max", "pca"}, "how gray is computed")},
       [](const Params& p) -> std::unique_ptr<Transform> {
         const std::int64_t n = p.integer("num_output_channels");
         p.require(n >= 1 && n <= 512, "num_output_channels",
                   fmt::format("must be >= 1 (and <= 512, OpenCV's channel limit), got {}", n));
         static const std::vector<std::pair<std::string, GrayMethod>> methods = {
             {"weighted_average", GrayMethod::kWeightedAverage},
             {"from_lab", GrayMethod::kFromLab},
             {"desaturation", GrayMethod::kDesaturation},
             {"average", GrayMethod::kAverage},
             {"max", GrayMethod::kMax},
             {"pca", GrayMethod::kPca}};
         GrayMethod m = GrayMethod::kWeightedAverage;
         for (const auto& [w, g] : methods)
           if (w == p.word("method")) m = g;
         return std::make_unique<ToGrayStep>(p.p(), static_cast<int>(n), m);
       }});

  out.push_back(
      {"GaussianBlur",
       "separable Gaussian blur (kernel size 0: int(3.5 sigma) * 2 + 1)",
       0.5,
       {range_param("blur_limit", {0}, ScalarRange::kZeroPlus, "kernel size, drawn as an integer; v means [0, v]"),
        range_param("sigma_limit", {0.5, 3.0}, ScalarRange::kZeroPlus, "sigma, drawn uniformly; v means [0, v]")},
       [](const Params& p) -> std::unique_ptr<Transform> {
         require_ints(p, "blur_limit");
         const Range k = sorted_range(p, "blur_limit", ScalarRange::kZeroPlus);
         p.require(k.first >= 0, "blur_limit", fmt::format("must be >= 0, got {}", show(k)));
         const Range s = sorted_range(p, "sigma_limit", ScalarRange::kZeroPlus);
         p.require(s.first >= 0, "sigma_limit", fmt::format("must be >= 0, got {}", show(s)));
         return std::make_unique<GaussianBlurStep>(p.p(), k, s);
       }});

  out.push_back(
      {"MotionBlur",
       "blurs along a random line through the kernel centre",
       0.5,
       {range_param("blur_limit", {3, 7}, ScalarRange::kFromThree,
                    "odd kernel size, drawn uniformly; v means [3, v] (raised to odd and >= 3)"),
        flag_param("allow_shifted", true, "shift the line off the centre randomly"),
        range_param("angle_range", {0, 360}, kFixed, "line angle in degrees, in [0, 360]"),
        range_param("direction_range", {-1, 1}, kFixed, "-1: line only backwards, 0: both ways, 1: only forwards")},
       [](const Params& p) -> std::unique_ptr<Transform> {
         require_ints(p, "blur_limit");
         const Range k = p.range("blur_limit", ScalarRange::kFromThree);
         // albumentations raises sizes below 3 to 3 and even sizes to the next odd (with warnings),
         // and turns lo > hi into [hi, hi].
         auto fix = [](double v) {
           int i = std::max(3, static_cast<int>(v));
           return i % 2 == 0 ? i + 1 : i;
         };
         int lo = fix(k.first), hi = fix(k.second);
         if (lo > hi) lo = hi;
         return std::make_unique<MotionBlurStep>(p.p(), lo, hi, p.flag("allow_shifted"),
                                                 bounded_range(p, "angle_range", kFixed, 0, 360),
                                                 bounded_range(p, "direction_range", kFixed, -1, 1));
       }});

  out.push_back({"GaussNoise",
                 "adds Gaussian noise; std and mean are fractions of 255",
                 0.5,
                 {range_param("std_range", {0.2, 0.44}, kFixed, "noise std / 255, drawn uniformly in [0, 1]"),
                  range_param("mean_range", {0.0, 0.0}, kFixed, "noise mean / 255, drawn uniformly in [-1, 1]"),
                  flag_param("per_channel", true, "independent noise per channel (else one plane for all)"),
                  number_param("noise_scale_factor", 1.0, "generate at this fraction of the size, then resize")},
                 [](const Params& p) -> std::unique_ptr<Transform> {
                   const double f = p.number("noise_scale_factor");
                   p.require(f > 0 && f <= 1, "noise_scale_factor", fmt::format("must be in (0, 1], got {}", f));
                   return std::make_unique<GaussNoiseStep>(p.p(), bounded_range(p, "std_range", kFixed, 0, 1),
                                                           bounded_range(p, "mean_range", kFixed, -1, 1),
                                                           p.flag("per_channel"), f);
                 }});

  out.push_back({"Normalize",
                 "uint8 -> float32: (i - mean * max_pixel_value) / (std * max_pixel_value) per channel",
                 1.0,
                 {list_param("mean", {0.485, 0.456, 0.406}, "per-channel mean, as a fraction of max_pixel_value"),
                  list_param("std", {0.229, 0.224, 0.225}, "per-channel std, as a fraction of max_pixel_value"),
                  number_param("max_pixel_value", 255.0, "the pixel value mean and std are fractions of"),
                  word_param("normalization", "standard",
                             {"standard", "image", "image_per_channel", "min_max", "min_max_per_channel"},
                             "standard uses mean/std; the others the image's own statistics")},
                 [](const Params& p) -> std::unique_ptr<Transform> {
                   const auto& mean = p.list("mean");
                   const auto& std = p.list("std");
                   p.require(!mean.empty(), "mean", "must hold at least one number");
                   p.require(!std.empty(), "std", "must hold at least one number");
                   const std::string& w = p.word("normalization");
                   Normalization mode = w == "image"                 ? Normalization::kImage
                                        : w == "image_per_channel"   ? Normalization::kImagePerChannel
                                        : w == "min_max"             ? Normalization::kMinMax
                                        : w == "min_max_per_channel" ? Normalization::kMinMaxPerChannel
                                                                     : Normalization::kStandard;
                   return std::make_unique<NormalizeStep>(p.p(), mean, std, p.number("max_pixel_value"), mode);
                 }});
}

}  // namespace glassbox::data
