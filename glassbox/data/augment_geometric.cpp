// Over 600 lines: sixteen transforms, each with its parameter table, validation and draws;
// the pixel work they call is in augment_geometric_ops.cpp.
// Tested by augment_geometric_test.cpp.
#include "glassbox/data/augment_geometric.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <opencv2/imgproc.hpp>

#include "glassbox/base/error.h"

namespace glassbox::data {

namespace {

// The cv::Scalar albumentations hands OpenCV: a single value repeated per channel, or the
// values per channel starting at `first` (missing ones 0).
cv::Scalar fill_scalar(const std::vector<double>& fill, int first = 0) {
  if (fill.empty()) return cv::Scalar::all(0);
  if (fill.size() == 1) return cv::Scalar::all(fill[0]);
  cv::Scalar s = cv::Scalar::all(0);
  for (int c = 0; c < 4; ++c) {
    const auto i = static_cast<std::size_t>(first + c);
    if (i < fill.size()) s[c] = fill[i];
  }
  return s;
}

// OpenCV's warps and borders handle at most 4 channels; albumentations runs wider images in
// chunks of 4 (the ops are per channel, so the result is the same as one call).
template <class Fn>
cv::Mat per_chunk(const cv::Mat& img, const std::vector<double>& fill, Fn fn) {
  const int channels = img.channels();
  if (channels <= 4) return fn(img, fill_scalar(fill));
  std::vector<cv::Mat> planes;
  cv::split(img, planes);
  std::vector<cv::Mat> outs;
  for (int c = 0; c < channels; c += 4) {
    const int n = std::min(4, channels - c);
    cv::Mat chunk;
    cv::merge(std::vector<cv::Mat>(planes.begin() + c, planes.begin() + c + n), chunk);
    std::vector<cv::Mat> done;
    cv::split(fn(chunk, fill_scalar(fill, c)), done);
    outs.insert(outs.end(), done.begin(), done.end());
  }
  cv::Mat out;
  cv::merge(outs, out);
  return out;
}

}  // namespace

namespace {

// ---- declaring parameters -----------------------------------------------------------------------

ParamDef number_param(std::string name, double def, std::string doc) {
  return {std::move(name), ParamKind::kNumber, {def}, "", false, {}, ScalarRange::kFixed, std::move(doc)};
}
ParamDef int_param(std::string name, double def, std::string doc) {
  return {std::move(name), ParamKind::kInt, {def}, "", false, {}, ScalarRange::kFixed, std::move(doc)};
}
ParamDef range_param(std::string name, std::vector<double> def, ScalarRange rule, std::string doc) {
  return {std::move(name), ParamKind::kRange, std::move(def), "", false, {}, rule, std::move(doc)};
}
ParamDef list_param(std::string name, std::vector<double> def, std::string doc) {
  return {std::move(name), ParamKind::kList, std::move(def), "", false, {}, ScalarRange::kFixed, std::move(doc)};
}
ParamDef word_param(std::string name, std::string def, std::vector<std::string> choices, std::string doc) {
  return {std::move(name),     ParamKind::kWord, {}, std::move(def), false, std::move(choices),
          ScalarRange::kFixed, std::move(doc)};
}
ParamDef flag_param(std::string name, bool def, std::string doc) {
  return {std::move(name), ParamKind::kFlag, {}, "", def, {}, ScalarRange::kFixed, std::move(doc)};
}

const std::vector<std::string> kPositions = {"center",      "top_left",     "top_right",
                                             "bottom_left", "bottom_right", "random"};

ParamDef interpolation_param(const std::string& name, int def, bool exact_ok) {
  return int_param(name, def,
                   exact_ok ? "OpenCV interpolation code: 0 nearest, 1 linear, 2 cubic, 3 area, 4 lanczos4, "
                              "5 linear exact, 6 nearest exact"
                            : "OpenCV interpolation code: 0 nearest, 1 linear, 2 cubic, 3 area, 4 lanczos4");
}
ParamDef border_param() {
  return int_param("border_mode", cv::BORDER_CONSTANT,
                   "OpenCV border code: 0 constant (fill), 1 replicate, 2 reflect, 3 wrap, 4 reflect 101");
}
ParamDef fill_param() { return list_param("fill", {0}, "border value: one for all channels or one per channel"); }
ParamDef fill_mask_param() { return list_param("fill_mask", {0}, "border value of masks"); }
ParamDef area_param() {
  return word_param("area_for_downscale", "none", {"none", "image", "image_mask"},
                    "use INTER_AREA when shrinking: \"image\" for images, \"image_mask\" for masks too "
                    "(albumentations' None is \"none\")");
}

// ---- reading parameters -------------------------------------------------------------------------

int read_interpolation(const Params& p, const std::string& key, bool exact_ok) {
  const std::int64_t v = p.integer(key);
  const std::int64_t hi = exact_ok ? 6 : 4;
  p.require(v >= 0 && v <= hi, key, fmt::format("must be an OpenCV interpolation code 0..{}, got {}", hi, v),
            exact_ok ? "0 nearest, 1 linear, 2 cubic, 3 area, 4 lanczos4, 5 linear exact, 6 nearest exact"
                     : "0 nearest, 1 linear, 2 cubic, 3 area, 4 lanczos4");
  return static_cast<int>(v);
}

int read_border(const Params& p) {
  const std::int64_t v = p.integer("border_mode");
  p.require(v >= 0 && v <= 4, "border_mode", fmt::format("must be an OpenCV border code 0..4, got {}", v),
            "0 constant, 1 replicate, 2 reflect, 3 wrap, 4 reflect 101");
  return static_cast<int>(v);
}

std::vector<double> read_fill(const Params& p, const std::string& key) {
  const std::vector<double>& v = p.list(key);
  p.require(!v.empty(), key, "must hold at least one value", "one value for all channels, or one per channel");
  return v;
}

AreaForDownscale read_area(const Params& p) {
  const std::string& w = p.word("area_for_downscale");
  if (w == "image") return AreaForDownscale::kImage;
  if (w == "image_mask") return AreaForDownscale::kImageMask;
  return AreaForDownscale::kNone;
}

PadPosition read_position(const Params& p, const std::string& key) {
  const std::string& w = p.word(key);
  for (std::size_t i = 0; i < kPositions.size(); ++i)
    if (kPositions[i] == w) return static_cast<PadPosition>(i);
  return PadPosition::kCenter;
}

int read_size(const Params& p, const std::string& key) {
  const std::int64_t v = p.integer(key);
  p.require(v >= 1, key, v == 0 ? "is required (a size >= 1)" : fmt::format("must be >= 1, got {}", v));
  return static_cast<int>(v);
}

bool is_integer(double v) { return std::isfinite(v) && v == std::floor(v); }

// A [lo, hi] list (albumentations' tuple-only parameters): two values, inside [lo_bound,
// hi_bound], nondecreasing when `ordered`.
std::pair<double, double> read_pair(const Params& p, const std::string& key, double lo_bound, double hi_bound,
                                    bool ordered = true) {
  const std::vector<double>& v = p.list(key);
  p.require(v.size() == 2, key, fmt::format("must be [lo, hi], got {} values", v.size()));
  p.require(v[0] >= lo_bound && v[0] <= hi_bound && v[1] >= lo_bound && v[1] <= hi_bound, key,
            fmt::format("must lie in [{}, {}], got [{}, {}]", lo_bound, hi_bound, v[0], v[1]));
  p.require(!ordered || v[0] <= v[1], key, fmt::format("must be nondecreasing, got [{}, {}]", v[0], v[1]));
  return {v[0], v[1]};
}

// A range checked against bounds after the rule turned one number into [lo, hi].
std::pair<double, double> read_range(const Params& p, const std::string& key, ScalarRange rule, double lo_bound,
                                     double hi_bound) {
  const auto r = p.range(key, rule);
  p.require(r.first >= lo_bound && r.first <= hi_bound && r.second >= lo_bound && r.second <= hi_bound, key,
            fmt::format("must lie in [{}, {}], got [{}, {}]", lo_bound, hi_bound, r.first, r.second));
  return r;
}

std::string size_text(int h, int w) { return fmt::format("{}x{}", h, w); }

// Settings shared by every step that warps: image and mask interpolation, border, fills.
struct WarpSettings {
  int interpolation = cv::INTER_LINEAR;
  int mask_interpolation = cv::INTER_NEAREST;
  int border_mode = cv::BORDER_CONSTANT;
  std::vector<double> fill{0}, fill_mask{0};

  static WarpSettings read(const Params& p) {
    return {read_interpolation(p, "interpolation", false), read_interpolation(p, "mask_interpolation", false),
            read_border(p), read_fill(p, "fill"), read_fill(p, "fill_mask")};
  }
};

std::vector<ParamDef> warp_params(bool remap = false) {
  return {interpolation_param("interpolation", cv::INTER_LINEAR, false),
          interpolation_param("mask_interpolation", cv::INTER_NEAREST, false), border_param(),
          remap ? list_param("fill", {0},
                             "border value, one per channel (as in albumentations, a single value fills only the "
                             "first channel and the others get 0)")
                : fill_param(),
          fill_mask_param()};
}

void append(std::vector<double>& out, const cv::Matx33d& m) {
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 3; ++c) out.push_back(m(r, c));
}

// ---- Resize, SmallestMaxSize, LongestMaxSize ----------------------------------------------------

class ResizeStep final : public Transform {
 public:
  explicit ResizeStep(const Params& p)
      : Transform(p.p()),
        height_(read_size(p, "height")),
        width_(read_size(p, "width")),
        interpolation_(read_interpolation(p, "interpolation", true)),
        mask_interpolation_(read_interpolation(p, "mask_interpolation", true)),
        area_(read_area(p)) {}
  std::string_view name() const override { return "Resize"; }
  void apply(Sample& s, AugmentRng&) const override {
    s.image = run(s.image, false);
    for (cv::Mat& m : s.masks) m = run(m, true);
  }

 private:
  cv::Mat run(const cv::Mat& img, bool is_mask) const {
    const bool down = height_ < img.rows || width_ < img.cols;
    return resize_apply(img, height_, width_,
                        resize_interpolation(down, is_mask ? mask_interpolation_ : interpolation_, area_, is_mask));
  }
  int height_, width_, interpolation_, mask_interpolation_;
  AreaForDownscale area_;
};

class MaxSizeStep final : public Transform {
 public:
  MaxSizeStep(const Params& p, bool smallest)
      : Transform(p.p()),
        smallest_(smallest),
        interpolation_(read_interpolation(p, "interpolation", true)),
        mask_interpolation_(read_interpolation(p, "mask_interpolation", true)),
        area_(read_area(p)) {
    const std::vector<double>& ms = p.list("max_size");
    const std::vector<double>& hw = p.list("max_size_hw");
    p.require(!ms.empty() || !hw.empty(), "max_size", "or max_size_hw is required",
              "max_size = 256 (or a list to pick from), or max_size_hw = [height, width] with 0 for \"any\"");
    p.require(ms.empty() || hw.empty(), "max_size", "and max_size_hw are exclusive: give only one");
    for (double v : ms) {
      p.require(is_integer(v) && v >= 1, "max_size", fmt::format("must hold integers >= 1, got {}", v));
      max_size_.push_back(static_cast<int>(v));
    }
    if (!hw.empty()) {
      p.require(hw.size() == 2, "max_size_hw", fmt::format("must be [height, width], got {} values", hw.size()));
      p.require(is_integer(hw[0]) && is_integer(hw[1]) && hw[0] >= 0 && hw[1] >= 0 && hw[0] + hw[1] > 0, "max_size_hw",
                fmt::format("must be integers >= 0, not both 0, got [{}, {}]", hw[0], hw[1]),
                "0 stands for albumentations' None (that side is free)");
      max_h_ = static_cast<int>(hw[0]);
      max_w_ = static_cast<int>(hw[1]);
    }
  }
  std::string_view name() const override { return smallest_ ? "SmallestMaxSize" : "LongestMaxSize"; }
  std::vector<double> draw_params(const Sample& s, AugmentRng& rng) const override {
    return {draw(s.image.rows, s.image.cols, rng)};
  }
  void apply(Sample& s, AugmentRng& rng) const override {
    const double scale = draw(s.image.rows, s.image.cols, rng);
    const auto run = [&](const cv::Mat& img, bool is_mask) {
      return max_size_apply(
          img, scale,
          resize_interpolation(scale < 1.0, is_mask ? mask_interpolation_ : interpolation_, area_, is_mask));
    };
    s.image = run(s.image, false);
    for (cv::Mat& m : s.masks) m = run(m, true);
  }

 private:
  double draw(int h, int w, AugmentRng& rng) const {
    if (!max_size_.empty()) {
      const int m = max_size_.size() == 1
                        ? max_size_[0]
                        : max_size_[static_cast<std::size_t>(rng.randint(0, std::int64_t(max_size_.size()) - 1))];
      return static_cast<double>(m) / (smallest_ ? std::min(h, w) : std::max(h, w));
    }
    const double hs = static_cast<double>(max_h_) / h, ws = static_cast<double>(max_w_) / w;
    if (max_h_ > 0 && max_w_ > 0) return smallest_ ? std::max(hs, ws) : std::min(hs, ws);
    return max_h_ > 0 ? hs : ws;
  }
  bool smallest_;
  int interpolation_, mask_interpolation_;
  AreaForDownscale area_;
  std::vector<int> max_size_;
  int max_h_ = 0, max_w_ = 0;
};

// ---- CenterCrop, RandomCrop ---------------------------------------------------------------------

class CropStep final : public Transform {
 public:
  CropStep(const Params& p, bool random)
      : Transform(p.p()),
        random_(random),
        height_(read_size(p, "height")),
        width_(read_size(p, "width")),
        pad_if_needed_(p.flag("pad_if_needed")),
        position_(read_position(p, "pad_position")),
        border_mode_(read_border(p)),
        fill_(read_fill(p, "fill")),
        fill_mask_(read_fill(p, "fill_mask")) {}
  std::string_view name() const override { return random_ ? "RandomCrop" : "CenterCrop"; }

  struct Drawn {
    CropCoords crop;
    std::optional<PadParams> pad;
  };
  Drawn draw(int h, int w, AugmentRng& rng) const {
    GB_CHECK(pad_if_needed_ || (height_ <= h && width_ <= w), InvalidArgument,
             name() << ": the crop " << size_text(height_, width_) << " (height x width) is larger than the image "
                    << size_text(h, w),
             "set pad_if_needed = true to pad small images, or resize them first (e.g. SmallestMaxSize)");
    Drawn d;
    int ph = h, pw = w;
    if (pad_if_needed_) {
      const auto [top, bottom] = dimension_padding(h, height_, 0);
      const auto [left, right] = dimension_padding(w, width_, 0);
      if (top + bottom + left + right > 0) {
        d.pad = position_padding({top, bottom, left, right}, position_, rng);
        ph = h + top + bottom;
        pw = w + left + right;
      }
    }
    if (random_) {
      const double hs = rng.uniform(), ws = rng.uniform();
      d.crop = random_crop_coords(ph, pw, height_, width_, hs, ws);
    } else {
      d.crop = center_crop_coords(ph, pw, height_, width_);
    }
    return d;
  }
  std::vector<double> draw_params(const Sample& s, AugmentRng& rng) const override {
    const Drawn d = draw(s.image.rows, s.image.cols, rng);
    const PadParams pad = d.pad.value_or(PadParams{});
    return {double(d.crop.x0), double(d.crop.y0),  double(d.crop.x1), double(d.crop.y1),
            double(pad.top),   double(pad.bottom), double(pad.left),  double(pad.right)};
  }
  void apply(Sample& s, AugmentRng& rng) const override {
    const Drawn d = draw(s.image.rows, s.image.cols, rng);
    s.image = crop_and_pad_apply(s.image, d.crop, d.pad, border_mode_, fill_);
    for (cv::Mat& m : s.masks) m = crop_and_pad_apply(m, d.crop, d.pad, border_mode_, fill_mask_);
  }

 private:
  bool random_;
  int height_, width_;
  bool pad_if_needed_;
  PadPosition position_;
  int border_mode_;
  std::vector<double> fill_, fill_mask_;
};

std::vector<ParamDef> crop_params() {
  return {int_param("height", 0, "crop height in pixels (required)"),
          int_param("width", 0, "crop width in pixels (required)"),
          flag_param("pad_if_needed", false, "pad images smaller than the crop instead of failing"),
          word_param("pad_position", "center", kPositions, "where the image sits inside the padding"),
          border_param(),
          fill_param(),
          fill_mask_param()};
}

// ---- RandomResizedCrop --------------------------------------------------------------------------

class RandomResizedCropStep final : public Transform, public RegionStep {
 public:
  explicit RandomResizedCropStep(const Params& p)
      : Transform(p.p()),
        interpolation_(read_interpolation(p, "interpolation", true)),
        mask_interpolation_(read_interpolation(p, "mask_interpolation", true)),
        area_(read_area(p)) {
    const std::vector<double>& size = p.list("size");
    p.require(size.size() == 2, "size", fmt::format("must be [height, width], got {} values", size.size()),
              "e.g. size = [224, 224]");
    p.require(is_integer(size[0]) && is_integer(size[1]) && size[0] >= 1 && size[1] >= 1, "size",
              fmt::format("must hold integers >= 1, got [{}, {}]", size[0], size[1]));
    out_h_ = static_cast<int>(size[0]);
    out_w_ = static_cast<int>(size[1]);
    scale_ = read_pair(p, "scale", 0, 1);
    ratio_ = read_pair(p, "ratio", 0, std::numeric_limits<double>::max());
    p.require(ratio_.first > 0, "ratio", fmt::format("must be > 0, got [{}, {}]", ratio_.first, ratio_.second));
  }
  std::string_view name() const override { return "RandomResizedCrop"; }
  CropCoords draw(int h, int w, AugmentRng& rng) const {
    const double area = static_cast<double>(h) * w;
    const double lr0 = std::log(ratio_.first), lr1 = std::log(ratio_.second);
    for (int attempt = 0; attempt < 10; ++attempt) {
      // torchvision's sampler: an area fraction and a log-uniform aspect ratio, up to 10 tries.
      const double target = rng.uniform(scale_.first * area, scale_.second * area);
      const double aspect = std::exp(rng.uniform(lr0, lr1));
      const int cw = py_round(std::sqrt(target * aspect)), ch = py_round(std::sqrt(target / aspect));
      if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
        const double hs = rng.uniform(), ws = rng.uniform();
        return random_crop_coords(h, w, ch, cw, hs, ws);
      }
    }
    const double in_ratio = static_cast<double>(w) / h;
    int cw = w, ch = h;
    if (in_ratio < ratio_.first) {
      ch = py_round(w / ratio_.first);
    } else if (in_ratio > ratio_.second) {
      cw = py_round(h * ratio_.second);
    }
    return center_crop_coords(h, w, ch, cw);
  }
  std::vector<double> draw_params(const Sample& s, AugmentRng& rng) const override {
    const CropCoords c = draw(s.image.rows, s.image.cols, rng);
    return {double(c.x0), double(c.y0), double(c.x1), double(c.y1)};
  }
  const RegionStep* region_step() const override { return this; }
  cv::Rect region(int height, int width, AugmentRng& rng) const override {
    const CropCoords c = draw(height, width, rng);
    return {c.x0, c.y0, c.x1 - c.x0, c.y1 - c.y0};
  }
  void apply_region(Sample& s) const override {
    s.image =
        resize_apply(s.image, out_h_, out_w_,
                     random_resized_crop_interpolation(s.image.size(), out_h_, out_w_, interpolation_, area_, false));
    if (!s.image.isContinuous()) s.image = s.image.clone();  // a crop already of the output size
  }
  void apply(Sample& s, AugmentRng& rng) const override {
    const CropCoords c = draw(s.image.rows, s.image.cols, rng);
    const cv::Size crop(c.x1 - c.x0, c.y1 - c.y0);
    s.image = random_resized_crop_apply(
        s.image, c, out_h_, out_w_,
        random_resized_crop_interpolation(crop, out_h_, out_w_, interpolation_, area_, false));
    for (cv::Mat& m : s.masks)
      m = random_resized_crop_apply(
          m, c, out_h_, out_w_,
          random_resized_crop_interpolation(crop, out_h_, out_w_, mask_interpolation_, area_, true));
  }

 private:
  int interpolation_, mask_interpolation_;
  AreaForDownscale area_;
  int out_h_ = 0, out_w_ = 0;
  std::pair<double, double> scale_, ratio_;
};

// ---- PadIfNeeded --------------------------------------------------------------------------------

class PadIfNeededStep final : public Transform {
 public:
  explicit PadIfNeededStep(const Params& p)
      : Transform(p.p()),
        min_h_(static_cast<int>(p.integer("min_height"))),
        min_w_(static_cast<int>(p.integer("min_width"))),
        div_h_(static_cast<int>(p.integer("pad_height_divisor"))),
        div_w_(static_cast<int>(p.integer("pad_width_divisor"))),
        position_(read_position(p, "position")),
        border_mode_(read_border(p)),
        fill_(read_fill(p, "fill")),
        fill_mask_(read_fill(p, "fill_mask")) {
    for (const char* key : {"min_height", "min_width", "pad_height_divisor", "pad_width_divisor"})
      p.require(p.integer(key) >= 0, key, fmt::format("must be >= 1 (or 0 for None), got {}", p.integer(key)));
    p.require((min_h_ > 0) != (div_h_ > 0), "min_height",
              "and pad_height_divisor: exactly one must be set (0 stands for None)",
              "to pad to a multiple, set min_height = 0 and pad_height_divisor = 32");
    p.require((min_w_ > 0) != (div_w_ > 0), "min_width",
              "and pad_width_divisor: exactly one must be set (0 stands for None)",
              "to pad to a multiple, set min_width = 0 and pad_width_divisor = 32");
  }
  std::string_view name() const override { return "PadIfNeeded"; }
  PadParams draw(int h, int w, AugmentRng& rng) const {
    const auto [top, bottom] = dimension_padding(h, min_h_, div_h_);
    const auto [left, right] = dimension_padding(w, min_w_, div_w_);
    return position_padding({top, bottom, left, right}, position_, rng);
  }
  std::vector<double> draw_params(const Sample& s, AugmentRng& rng) const override {
    const PadParams d = draw(s.image.rows, s.image.cols, rng);
    return {double(d.top), double(d.bottom), double(d.left), double(d.right)};
  }
  void apply(Sample& s, AugmentRng& rng) const override {
    const PadParams d = draw(s.image.rows, s.image.cols, rng);
    s.image = pad_apply(s.image, d, border_mode_, fill_);
    for (cv::Mat& m : s.masks) m = pad_apply(m, d, border_mode_, fill_mask_);
  }

 private:
  int min_h_, min_w_, div_h_, div_w_;
  PadPosition position_;
  int border_mode_;
  std::vector<double> fill_, fill_mask_;
};

// ---- flips, RandomRotate90 ----------------------------------------------------------------------

class FlipStep final : public Transform {
 public:
  FlipStep(double p, bool horizontal) : Transform(p), horizontal_(horizontal) {}
  std::string_view name() const override { return horizontal_ ? "HorizontalFlip" : "VerticalFlip"; }
  void apply(Sample& s, AugmentRng&) const override {
    s.image = horizontal_ ? hflip_apply(s.image) : vflip_apply(s.image);
    for (cv::Mat& m : s.masks) m = horizontal_ ? hflip_apply(m) : vflip_apply(m);
  }

 private:
  bool horizontal_;
};

class RandomRotate90Step final : public Transform {
 public:
  explicit RandomRotate90Step(double p) : Transform(p) {}
  std::string_view name() const override { return "RandomRotate90"; }
  std::vector<double> draw_params(const Sample&, AugmentRng& rng) const override { return {double(rng.randint(0, 3))}; }
  void apply(Sample& s, AugmentRng& rng) const override {
    const int factor = static_cast<int>(rng.randint(0, 3));
    s.image = rot90_apply(s.image, factor);
    for (cv::Mat& m : s.masks) m = rot90_apply(m, factor);
  }
};

// ---- Rotate -------------------------------------------------------------------------------------

class RotateStep final : public Transform {
 public:
  explicit RotateStep(const Params& p)
      : Transform(p.p()),
        limit_(p.range("limit", ScalarRange::kSymmetric)),
        crop_border_(p.flag("crop_border")),
        warp_(WarpSettings::read(p)) {}
  std::string_view name() const override { return "Rotate"; }
  struct Drawn {
    RotateCrop crop;
    cv::Matx33d matrix;
  };
  Drawn draw(int h, int w, AugmentRng& rng) const {
    const double angle = rng.uniform(limit_.first, limit_.second);
    Drawn d;
    if (crop_border_) d.crop = rotate_crop_box(h, w, angle);
    d.matrix = affine_matrix({0, 0}, {0, 0}, {1, 1}, angle, image_center(h, w));
    return d;
  }
  std::vector<double> draw_params(const Sample& s, AugmentRng& rng) const override {
    const Drawn d = draw(s.image.rows, s.image.cols, rng);
    std::vector<double> out = {double(d.crop.x_min), double(d.crop.x_max), double(d.crop.y_min), double(d.crop.y_max)};
    append(out, d.matrix);
    return out;
  }
  void apply(Sample& s, AugmentRng& rng) const override {
    const Drawn d = draw(s.image.rows, s.image.cols, rng);
    s.image = rotate_apply(s.image, d.matrix, d.crop, warp_.interpolation, warp_.border_mode, warp_.fill);
    for (cv::Mat& m : s.masks)
      m = rotate_apply(m, d.matrix, d.crop, warp_.mask_interpolation, warp_.border_mode, warp_.fill_mask);
  }

 private:
  std::pair<double, double> limit_;
  bool crop_border_;
  WarpSettings warp_;
};

// ---- Affine, ShiftScaleRotate -------------------------------------------------------------------

struct AffineRanges {
  std::pair<double, double> scale_x{1, 1}, scale_y{1, 1};
  bool translate_px = true;  // else percent of the image size
  std::pair<double, double> translate_x{0, 0}, translate_y{0, 0};
  std::pair<double, double> shear_x{0, 0}, shear_y{0, 0};
  std::pair<double, double> rotate{0, 0};
  bool fit_output = false, keep_ratio = false, balanced_scale = false;
};

class AffineStep final : public Transform {
 public:
  AffineStep(double p, std::string_view name, AffineRanges r, WarpSettings warp)
      : Transform(p), name_(name), r_(std::move(r)), warp_(std::move(warp)) {}
  std::string_view name() const override { return name_; }
  struct Drawn {
    double rotate = 0, scale_x = 1, scale_y = 1;
    cv::Matx33d matrix;
    int out_h = 0, out_w = 0;
  };
  Drawn draw(int h, int w, AugmentRng& rng) const {
    double tx = 0, ty = 0;
    if (r_.translate_px) {
      tx = double(rng.randint(py_int(r_.translate_x.first), py_int(r_.translate_x.second)));
      ty = double(rng.randint(py_int(r_.translate_y.first), py_int(r_.translate_y.second)));
    } else {
      const double ux = rng.uniform(r_.translate_x.first, r_.translate_x.second);
      const double uy = rng.uniform(r_.translate_y.first, r_.translate_y.second);
      tx = py_int(ux * w);
      ty = py_int(uy * h);
    }
    // albumentations negates the drawn shear so positive values lean the same way as imgaug's.
    const double shx = -rng.uniform(r_.shear_x.first, r_.shear_x.second);
    const double shy = -rng.uniform(r_.shear_y.first, r_.shear_y.second);
    Drawn d;
    d.scale_x = draw_scale(r_.scale_x, rng);
    d.scale_y = draw_scale(r_.scale_y, rng);
    if (r_.keep_ratio) d.scale_y = d.scale_x;
    d.rotate = rng.uniform(r_.rotate.first, r_.rotate.second);
    d.matrix = affine_matrix({tx, ty}, {shx, shy}, {d.scale_x, d.scale_y}, d.rotate, image_center(h, w));
    d.out_h = h;
    d.out_w = w;
    if (r_.fit_output) {
      const FittedAffine f = fit_affine_output(d.matrix, h, w);
      d.matrix = f.matrix;
      d.out_h = f.height;
      d.out_w = f.width;
    }
    return d;
  }
  std::vector<double> draw_params(const Sample& s, AugmentRng& rng) const override {
    const Drawn d = draw(s.image.rows, s.image.cols, rng);
    std::vector<double> out = {d.rotate, d.scale_x, d.scale_y};
    append(out, d.matrix);
    out.push_back(d.out_h);
    out.push_back(d.out_w);
    return out;
  }
  void apply(Sample& s, AugmentRng& rng) const override {
    const Drawn d = draw(s.image.rows, s.image.cols, rng);
    s.image =
        warp_affine_apply(s.image, d.matrix, d.out_h, d.out_w, warp_.interpolation, warp_.border_mode, warp_.fill);
    for (cv::Mat& m : s.masks)
      m = warp_affine_apply(m, d.matrix, d.out_h, d.out_w, warp_.mask_interpolation, warp_.border_mode,
                            warp_.fill_mask);
  }

 private:
  double draw_scale(const std::pair<double, double>& range, AugmentRng& rng) const {
    if (!r_.balanced_scale) return rng.uniform(range.first, range.second);
    // balanced_scale: first pick the shrinking or the growing half with equal odds, so zooming
    // out is as likely as zooming in whatever the range's asymmetry.
    const bool lower = range.first<1, upper = range.second> 1;
    if (lower && upper) return rng.randint(0, 1) == 0 ? rng.uniform(range.first, 1.0) : rng.uniform(1.0, range.second);
    if (lower) return rng.uniform(range.first, 1.0);
    if (upper) return rng.uniform(1.0, range.second);
    return 1.0;
  }
  std::string_view name_;
  AffineRanges r_;
  WarpSettings warp_;
};

std::unique_ptr<Transform> make_affine(const Params& p) {
  AffineRanges r;
  const auto scale = p.range("scale", ScalarRange::kFixed);
  p.require(scale.first > 0 && scale.second > 0, "scale",
            fmt::format("must be > 0, got [{}, {}]", scale.first, scale.second));
  r.scale_x = r.scale_y = scale;
  const bool has_percent = !p.list("translate_percent").empty(), has_px = !p.list("translate_px").empty();
  p.require(!(has_percent && has_px), "translate_percent", "and translate_px are exclusive: give only one");
  if (has_percent) {
    r.translate_px = false;
    r.translate_x = r.translate_y = p.range("translate_percent", ScalarRange::kFixed);
  } else if (has_px) {
    const auto px = p.range("translate_px", ScalarRange::kFixed);
    p.require(py_int(px.first) <= py_int(px.second), "translate_px",
              fmt::format("must be nondecreasing, got [{}, {}]", px.first, px.second));
    r.translate_x = r.translate_y = px;
  }
  r.shear_x = r.shear_y = p.range("shear", ScalarRange::kFixed);
  r.rotate = p.range("rotate", ScalarRange::kFixed);
  r.fit_output = p.flag("fit_output");
  r.keep_ratio = p.flag("keep_ratio");
  r.balanced_scale = p.flag("balanced_scale");
  return std::make_unique<AffineStep>(p.p(), "Affine", r, WarpSettings::read(p));
}

std::unique_ptr<Transform> make_shift_scale_rotate(const Params& p) {
  AffineRanges r;
  const auto shift = p.range("shift_limit", ScalarRange::kSymmetric);
  const auto axis = [&](const char* key) {
    const auto v = p.list(key).empty() ? shift : p.range(key, ScalarRange::kSymmetric);
    p.require(v.first >= -1 && v.second <= 1, p.list(key).empty() ? "shift_limit" : key,
              fmt::format("must lie in [-1, 1], got [{}, {}]", v.first, v.second));
    return v;
  };
  r.translate_px = false;
  r.translate_x = axis("shift_limit_x");
  r.translate_y = axis("shift_limit_y");
  auto scale = p.range("scale_limit", ScalarRange::kBias1);
  if (scale.first > scale.second) std::swap(scale.first, scale.second);  // albumentations sorts the limit first
  p.require(scale.first >= 0, "scale_limit",
            fmt::format("must give scales >= 0 (limit + 1), got [{}, {}]", scale.first, scale.second));
  r.scale_x = r.scale_y = scale;
  r.rotate = p.range("rotate_limit", ScalarRange::kSymmetric);
  return std::make_unique<AffineStep>(p.p(), "ShiftScaleRotate", r, WarpSettings::read(p));
}

// ---- ElasticTransform, GridDistortion -----------------------------------------------------------

class ElasticStep final : public Transform {
 public:
  explicit ElasticStep(const Params& p)
      : Transform(p.p()),
        alpha_(p.number("alpha")),
        sigma_(p.number("sigma")),
        approximate_(p.flag("approximate")),
        same_dxdy_(p.flag("same_dxdy")),
        gaussian_(p.word("noise_distribution") == "gaussian"),
        warp_(WarpSettings::read(p)) {
    p.require(alpha_ >= 0, "alpha", fmt::format("must be >= 0, got {}", alpha_));
    p.require(sigma_ >= 1, "sigma", fmt::format("must be >= 1, got {}", sigma_));
  }
  std::string_view name() const override { return "ElasticTransform"; }
  void draw(int h, int w, AugmentRng& rng, cv::Mat& map_x, cv::Mat& map_y) const {
    const int k = same_dxdy_ ? 1 : 2;
    cv::Mat noise(k * h, w, CV_32FC1);
    // Row-major fill, as numpy lays out a (k, H, W) draw.
    for (int r = 0; r < noise.rows; ++r) {
      float* row = noise.ptr<float>(r);
      for (int c = 0; c < w; ++c) row[c] = static_cast<float>(gaussian_ ? rng.normal() : rng.uniform(-1.0, 1.0));
    }
    elastic_maps(noise, h, gaussian_, alpha_, sigma_, approximate_, same_dxdy_, map_x, map_y);
  }
  std::vector<double> draw_params(const Sample& s, AugmentRng& rng) const override {
    cv::Mat mx, my;
    draw(s.image.rows, s.image.cols, rng, mx, my);
    std::vector<double> out(mx.begin<float>(), mx.end<float>());
    out.insert(out.end(), my.begin<float>(), my.end<float>());
    return out;
  }
  void apply(Sample& s, AugmentRng& rng) const override {
    cv::Mat mx, my;
    draw(s.image.rows, s.image.cols, rng, mx, my);
    s.image = remap_apply(s.image, mx, my, warp_.interpolation, warp_.border_mode, warp_.fill);
    for (cv::Mat& m : s.masks) m = remap_apply(m, mx, my, warp_.mask_interpolation, warp_.border_mode, warp_.fill_mask);
  }

 private:
  double alpha_, sigma_;
  bool approximate_, same_dxdy_, gaussian_;
  WarpSettings warp_;
};

class GridDistortionStep final : public Transform {
 public:
  explicit GridDistortionStep(const Params& p)
      : Transform(p.p()),
        num_steps_(static_cast<int>(p.integer("num_steps"))),
        limit_(read_range(p, "distort_limit", ScalarRange::kSymmetric, -1, 1)),
        normalized_(p.flag("normalized")),
        warp_(WarpSettings::read(p)) {
    p.require(p.integer("num_steps") >= 1, "num_steps", fmt::format("must be >= 1, got {}", p.integer("num_steps")));
  }
  std::string_view name() const override { return "GridDistortion"; }
  void draw(int h, int w, AugmentRng& rng, cv::Mat& map_x, cv::Mat& map_y) const {
    std::vector<double> sx, sy;
    for (int i = 0; i <= num_steps_; ++i) sx.push_back(1 + rng.uniform(limit_.first, limit_.second));
    for (int i = 0; i <= num_steps_; ++i) sy.push_back(1 + rng.uniform(limit_.first, limit_.second));
    grid_distortion_maps(h, w, num_steps_, sx, sy, normalized_, map_x, map_y);
  }
  // The maps repeat one row (x) and one column (y): map_x's first row, then map_y's first column.
  std::vector<double> draw_params(const Sample& s, AugmentRng& rng) const override {
    cv::Mat mx, my;
    draw(s.image.rows, s.image.cols, rng, mx, my);
    std::vector<double> out(mx.ptr<float>(0), mx.ptr<float>(0) + mx.cols);
    for (int y = 0; y < my.rows; ++y) out.push_back(my.at<float>(y, 0));
    return out;
  }
  void apply(Sample& s, AugmentRng& rng) const override {
    cv::Mat mx, my;
    draw(s.image.rows, s.image.cols, rng, mx, my);
    s.image = remap_apply(s.image, mx, my, warp_.interpolation, warp_.border_mode, warp_.fill);
    for (cv::Mat& m : s.masks) m = remap_apply(m, mx, my, warp_.mask_interpolation, warp_.border_mode, warp_.fill_mask);
  }

 private:
  int num_steps_;
  std::pair<double, double> limit_;
  bool normalized_;
  WarpSettings warp_;
};

// ---- CoarseDropout ------------------------------------------------------------------------------

class CoarseDropoutStep final : public Transform {
 public:
  explicit CoarseDropoutStep(const Params& p)
      : Transform(p.p()),
        num_holes_(read_pair(p, "num_holes_range", 1, std::numeric_limits<double>::max())),
        hole_h_(read_pair(p, "hole_height_range", 0, std::numeric_limits<double>::max())),
        hole_w_(read_pair(p, "hole_width_range", 0, std::numeric_limits<double>::max())),
        fill_(read_fill(p, "fill")),
        fill_mask_(p.list("fill_mask")) {
    p.require(is_integer(num_holes_.first) && is_integer(num_holes_.second), "num_holes_range",
              fmt::format("must hold integers, got [{}, {}]", num_holes_.first, num_holes_.second));
    // The height range alone decides between pixels (upper bound >= 1) and fractions; fractions
    // of the width above 1 would make holes wider than the image.
    p.require(hole_h_.second >= 1 || hole_w_.second <= 1, "hole_width_range",
              fmt::format("must be fractions in [0, 1] when hole_height_range is, got [{}, {}]", hole_w_.first,
                          hole_w_.second),
              "give both ranges in pixels (upper bound >= 1) or both as fractions of the image size");
    for (double v : fill_)
      p.require(v >= 0 && v <= 255, "fill", fmt::format("must hold values in [0, 255], got {}", v));
    for (double v : fill_mask_)
      p.require(v >= 0 && v <= 255, "fill_mask", fmt::format("must hold values in [0, 255], got {}", v));
  }
  std::string_view name() const override { return "CoarseDropout"; }
  std::vector<Hole> draw(int h, int w, AugmentRng& rng) const {
    const auto n =
        static_cast<std::size_t>(rng.randint(std::int64_t(num_holes_.first), std::int64_t(num_holes_.second)));
    std::vector<int> hh(n), ww(n);
    if (hole_h_.second >= 1) {
      // Pixels: integers in [int(lo), int(min(hi, size) + 1)).
      const auto sizes = [&](std::vector<int>& out, std::pair<double, double> r, int size, const char* what) {
        const int lo = py_int(r.first), hi = py_int(std::min(r.second, double(size)) + 1) - 1;
        GB_CHECK(
            lo <= hi, InvalidArgument,
            "CoarseDropout: the smallest hole " << what << " " << lo << " exceeds the image " << what << " " << size,
            "lower the hole size ranges or resize the images first");
        for (int& v : out) v = static_cast<int>(rng.randint(lo, hi));
      };
      sizes(hh, hole_h_, h, "height");
      sizes(ww, hole_w_, w, "width");
    } else {
      for (int& v : hh) v = py_int(h * rng.uniform(hole_h_.first, hole_h_.second));
      for (int& v : ww) v = py_int(w * rng.uniform(hole_w_.first, hole_w_.second));
    }
    std::vector<Hole> holes(n);
    for (std::size_t i = 0; i < n; ++i) holes[i][1] = static_cast<int>(rng.randint(0, h - hh[i]));
    for (std::size_t i = 0; i < n; ++i) holes[i][0] = static_cast<int>(rng.randint(0, w - ww[i]));
    for (std::size_t i = 0; i < n; ++i) {
      holes[i][2] = holes[i][0] + ww[i];
      holes[i][3] = holes[i][1] + hh[i];
    }
    return holes;
  }
  // The hole count, then x0, y0, x1, y1 per hole.
  std::vector<double> draw_params(const Sample& s, AugmentRng& rng) const override {
    const std::vector<Hole> holes = draw(s.image.rows, s.image.cols, rng);
    std::vector<double> out = {double(holes.size())};
    for (const Hole& h : holes) out.insert(out.end(), h.begin(), h.end());
    return out;
  }
  void apply(Sample& s, AugmentRng& rng) const override {
    const std::vector<Hole> holes = draw(s.image.rows, s.image.cols, rng);
    s.image = coarse_dropout_apply(s.image, holes, fill_);
    if (fill_mask_.empty()) return;  // albumentations' fill_mask=None: masks keep their labels
    for (cv::Mat& m : s.masks) m = coarse_dropout_apply(m, holes, fill_mask_);
  }

 private:
  std::pair<double, double> num_holes_, hole_h_, hole_w_;
  std::vector<double> fill_, fill_mask_;
};

}  // namespace

void add_geometric_transforms(std::vector<TransformDef>& out) {
  const auto resize_common = [] {
    return std::vector<ParamDef>{interpolation_param("interpolation", cv::INTER_LINEAR, true),
                                 interpolation_param("mask_interpolation", cv::INTER_NEAREST, true), area_param()};
  };
  std::vector<ParamDef> resize = {int_param("height", 0, "output height in pixels (required)"),
                                  int_param("width", 0, "output width in pixels (required)")};
  for (auto& d : resize_common()) resize.push_back(d);
  out.push_back({"Resize", "resizes to height x width", 1.0, resize,
                 [](const Params& p) { return std::make_unique<ResizeStep>(p); }});

  std::vector<ParamDef> max_size = {
      list_param("max_size", {}, "target size of the side (one number, or a list to pick from at random)"),
      list_param("max_size_hw", {}, "[height, width] bounds instead of max_size; 0 leaves a side free")};
  for (auto& d : resize_common()) max_size.push_back(d);
  out.push_back({"SmallestMaxSize", "scales so the shorter side is max_size, keeping the aspect ratio", 1.0, max_size,
                 [](const Params& p) { return std::make_unique<MaxSizeStep>(p, true); }});
  out.push_back({"LongestMaxSize", "scales so the longer side is max_size, keeping the aspect ratio", 1.0, max_size,
                 [](const Params& p) { return std::make_unique<MaxSizeStep>(p, false); }});

  out.push_back({"CenterCrop", "crops the centre height x width", 1.0, crop_params(),
                 [](const Params& p) { return std::make_unique<CropStep>(p, false); }});
  out.push_back({"RandomCrop", "crops height x width at a random place", 1.0, crop_params(),
                 [](const Params& p) { return std::make_unique<CropStep>(p, true); }});

  std::vector<ParamDef> rrc = {list_param("size", {}, "output [height, width] (required)"),
                               list_param("scale", {0.08, 1.0}, "[lo, hi] fraction of the image area to crop"),
                               list_param("ratio", {0.75, 1.3333333333333333}, "[lo, hi] aspect ratio (w / h)")};
  for (auto& d : resize_common()) rrc.push_back(d);
  out.push_back({"RandomResizedCrop", "crops a random area and aspect ratio, then resizes to size", 1.0, rrc,
                 [](const Params& p) { return std::make_unique<RandomResizedCropStep>(p); }});

  out.push_back({"PadIfNeeded",
                 "pads to at least min_height x min_width (or to multiples of the divisors)",
                 1.0,
                 {int_param("min_height", 1024, "minimum height (0 for None)"),
                  int_param("min_width", 1024, "minimum width (0 for None)"),
                  int_param("pad_height_divisor", 0, "pad the height to a multiple of this (0 for None)"),
                  int_param("pad_width_divisor", 0, "pad the width to a multiple of this (0 for None)"),
                  word_param("position", "center", kPositions, "where the image sits inside the padding"),
                  border_param(), fill_param(), fill_mask_param()},
                 [](const Params& p) { return std::make_unique<PadIfNeededStep>(p); }});

  out.push_back({"HorizontalFlip", "mirrors left-right", 0.5, {}, [](const Params& p) {
                   return std::make_unique<FlipStep>(p.p(), true);
                 }});
  out.push_back({"VerticalFlip", "mirrors top-bottom", 0.5, {}, [](const Params& p) {
                   return std::make_unique<FlipStep>(p.p(), false);
                 }});
  out.push_back({"RandomRotate90", "rotates by 0, 90, 180 or 270 degrees, uniformly", 1.0, {}, [](const Params& p) {
                   return std::make_unique<RandomRotate90Step>(p.p());
                 }});

  std::vector<ParamDef> rotate = {
      range_param("limit", {-90, 90}, ScalarRange::kSymmetric, "angle range in degrees (one number v: [-v, v])")};
  for (auto& d : warp_params()) rotate.push_back(d);
  rotate.push_back(word_param("rotate_method", "largest_box", {"largest_box", "ellipse"},
                              "bounding-box rule (glassbox has no boxes: accepted, no effect)"));
  rotate.push_back(flag_param("crop_border", false, "crop to the largest rectangle without border pixels"));
  out.push_back({"Rotate", "rotates by a random angle about the centre", 0.5, rotate,
                 [](const Params& p) { return std::make_unique<RotateStep>(p); }});

  std::vector<ParamDef> affine = {
      range_param("scale", {1.0, 1.0}, ScalarRange::kFixed, "scale range, drawn per axis (one number: fixed)"),
      range_param("translate_percent", {}, ScalarRange::kFixed,
                  "shift range as a fraction of the size, drawn per axis (unset: None)"),
      range_param("translate_px", {}, ScalarRange::kFixed, "shift range in pixels, drawn per axis (unset: None)"),
      range_param("rotate", {0.0}, ScalarRange::kFixed, "angle range in degrees (one number: fixed)"),
      range_param("shear", {0.0, 0.0}, ScalarRange::kFixed, "shear range in degrees, drawn per axis"),
      flag_param("fit_output", false, "grow the output so no part of the image is cut off"),
      flag_param("keep_ratio", false, "use the x scale for y too"),
      flag_param("balanced_scale", false, "zoom in and out with equal odds"),
      word_param("rotate_method", "largest_box", {"largest_box", "ellipse"},
                 "bounding-box rule (glassbox has no boxes: accepted, no effect)")};
  for (auto& d : warp_params()) affine.push_back(d);
  out.push_back({"Affine", "scales, shifts, rotates and shears about the centre", 0.5, affine, make_affine});

  std::vector<ParamDef> ssr = {
      range_param("shift_limit", {-0.0625, 0.0625}, ScalarRange::kSymmetric, "shift range as a fraction of the size"),
      range_param("scale_limit", {-0.1, 0.1}, ScalarRange::kBias1,
                  "scale range minus 1 (0.1: [0.9, 1.1]), drawn per axis"),
      range_param("rotate_limit", {-45, 45}, ScalarRange::kSymmetric, "angle range in degrees"),
      range_param("shift_limit_x", {}, ScalarRange::kSymmetric, "x shift range (unset: shift_limit)"),
      range_param("shift_limit_y", {}, ScalarRange::kSymmetric, "y shift range (unset: shift_limit)"),
      word_param("rotate_method", "largest_box", {"largest_box", "ellipse"},
                 "bounding-box rule (glassbox has no boxes: accepted, no effect)")};
  for (auto& d : warp_params()) ssr.push_back(d);
  out.push_back({"ShiftScaleRotate", "Affine with symmetric shift, scale and rotation limits", 0.5, ssr,
                 make_shift_scale_rotate});

  std::vector<ParamDef> elastic = {
      number_param("alpha", 1.0, "displacement scale in pixels"),
      number_param("sigma", 50.0, "Gaussian smoothing of the displacement field"),
      flag_param("approximate", false, "blur with a fixed 17x17 kernel"),
      flag_param("same_dxdy", false, "one field for both axes"),
      word_param("noise_distribution", "gaussian", {"gaussian", "uniform"}, "the field's noise"),
      word_param("keypoint_remapping_method", "mask", {"mask", "direct"},
                 "keypoint rule (glassbox has no keypoints: accepted, no effect)")};
  for (auto& d : warp_params(true)) elastic.push_back(d);
  out.push_back({"ElasticTransform", "warps with a smoothed random displacement field", 0.5, elastic,
                 [](const Params& p) { return std::make_unique<ElasticStep>(p); }});

  std::vector<ParamDef> grid = {
      int_param("num_steps", 5, "grid cells per side"),
      range_param("distort_limit", {-0.3, 0.3}, ScalarRange::kSymmetric, "cell size change range, in [-1, 1]"),
      flag_param("normalized", true, "keep the grid spanning exactly the image"),
      word_param("keypoint_remapping_method", "mask", {"mask", "direct"},
                 "keypoint rule (glassbox has no keypoints: accepted, no effect)")};
  for (auto& d : warp_params(true)) grid.push_back(d);
  out.push_back({"GridDistortion", "stretches and squeezes the cells of a grid", 0.5, grid,
                 [](const Params& p) { return std::make_unique<GridDistortionStep>(p); }});

  out.push_back(
      {"CoarseDropout",
       "blanks random rectangles",
       0.5,
       {list_param("num_holes_range", {1, 2}, "[lo, hi] number of holes"),
        list_param("hole_height_range", {0.1, 0.2},
                   "[lo, hi] hole height: pixels if hi >= 1, else a fraction of the image height"),
        list_param("hole_width_range", {0.1, 0.2}, "[lo, hi] hole width: pixels or a fraction, as the height"),
        list_param("fill", {0}, "hole value: one for all channels or one per channel"),
        list_param("fill_mask", {}, "hole value in masks (unset: masks untouched)")},
       [](const Params& p) { return std::make_unique<CoarseDropoutStep>(p); }});
}

}  // namespace glassbox::data
