// Tested by augment_geometric_test.cpp (parity with albumentations given its drawn parameters).
// augment_geometric.h's apply functions: the deterministic half of each geometric transform.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <opencv2/imgproc.hpp>

#include "glassbox/base/error.h"
#include "glassbox/data/augment_geometric.h"
#include "glassbox/data/simd.h"

namespace glassbox::data {

namespace {

// Python's float modulo: the result takes the divisor's sign (-30 % 360 == 330).
double py_mod(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

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

// np.linspace(start, stop, count) written into out[0..count) as float32.
void linspace_into(float* out, int count, double start, double stop) {
  if (count <= 0) return;
  if (count == 1) {
    out[0] = static_cast<float>(start);
    return;
  }
  const double div = count - 1;
  const double delta = stop - start;
  const double step = delta / div;
  for (int j = 0; j < count; ++j) {
    const double v = step == 0 ? (j / div) * delta + start : j * step + start;
    out[j] = static_cast<float>(v);
  }
  out[count - 1] = static_cast<float>(stop);
}

}  // namespace

// ---- resizing -----------------------------------------------------------------------------------

int resize_interpolation(bool downscale, int interpolation, AreaForDownscale area, bool is_mask) {
  const bool covered = is_mask ? area == AreaForDownscale::kImageMask : area != AreaForDownscale::kNone;
  return downscale && covered ? cv::INTER_AREA : interpolation;
}

cv::Mat resize_apply(const cv::Mat& img, int height, int width, int interpolation) {
  if (img.rows == height && img.cols == width) return img;
  return per_chunk(img, {}, [&](const cv::Mat& m, const cv::Scalar&) {
    cv::Mat out;
    cv::resize(m, out, cv::Size(width, height), 0, 0, interpolation);
    return out;
  });
}

cv::Size max_size_target(int height, int width, double scale) {
  return {std::max(1, py_round(width * scale)), std::max(1, py_round(height * scale))};
}

cv::Mat max_size_apply(const cv::Mat& img, double scale, int interpolation) {
  const cv::Size size = max_size_target(img.rows, img.cols, scale);
  return resize_apply(img, size.height, size.width, interpolation);
}

// ---- crops and padding --------------------------------------------------------------------------

std::pair<int, int> dimension_padding(int size, int min_size, int divisor) {
  if (min_size > 0) {
    if (size < min_size) {
      const int before = (min_size - size) / 2;
      return {before, min_size - size - before};
    }
  } else if (divisor > 0) {
    const int rest = size % divisor;
    if (rest > 0) {
      const int total = divisor - rest;
      return {total / 2, total - total / 2};
    }
  }
  return {0, 0};
}

PadParams position_padding(const PadParams& c, PadPosition position, AugmentRng& rng) {
  const int h = c.top + c.bottom, w = c.left + c.right;
  switch (position) {
    case PadPosition::kCenter: return c;
    // The names say where the image ends up: "top_left" pads below and to the right.
    case PadPosition::kTopLeft: return {0, h, 0, w};
    case PadPosition::kTopRight: return {0, h, w, 0};
    case PadPosition::kBottomLeft: return {h, 0, 0, w};
    case PadPosition::kBottomRight: return {h, 0, w, 0};
    case PadPosition::kRandom: {
      const int top = static_cast<int>(rng.randint(0, h));
      const int left = static_cast<int>(rng.randint(0, w));
      return {top, h - top, left, w - left};
    }
  }
  return c;
}

cv::Mat pad_apply(const cv::Mat& img, const PadParams& pad, int border_mode, const std::vector<double>& fill) {
  return per_chunk(img, fill, [&](const cv::Mat& m, const cv::Scalar& value) {
    cv::Mat out;
    cv::copyMakeBorder(m, out, pad.top, pad.bottom, pad.left, pad.right, border_mode, value);
    return out;
  });
}

cv::Mat crop_apply(const cv::Mat& img, const CropCoords& c) {
  GB_CHECK(c.x0 < c.x1 && c.y0 < c.y1 && c.x0 >= 0 && c.y0 >= 0 && c.x1 <= img.cols && c.y1 <= img.rows,
           InvalidArgument,
           "crop box x " << c.x0 << ".." << c.x1 << ", y " << c.y0 << ".." << c.y1 << " is not inside the " << img.rows
                         << "x" << img.cols << " (height x width) image",
           "crop boxes must be non-empty and lie inside the image");
  return img(cv::Range(c.y0, c.y1), cv::Range(c.x0, c.x1)).clone();
}

cv::Mat crop_and_pad_apply(const cv::Mat& img, const CropCoords& crop, const std::optional<PadParams>& pad,
                           int border_mode, const std::vector<double>& fill) {
  if (!pad) return crop_apply(img, crop);
  return crop_apply(pad_apply(img, *pad, border_mode, fill), crop);
}

CropCoords random_crop_coords(int height, int width, int crop_height, int crop_width, double h_start, double w_start) {
  const int ch = std::min(crop_height, height), cw = std::min(crop_width, width);
  const int y0 = py_int((height - ch + 1) * h_start), x0 = py_int((width - cw + 1) * w_start);
  return {x0, y0, x0 + cw, y0 + ch};
}

CropCoords center_crop_coords(int height, int width, int crop_height, int crop_width) {
  // Python's // floors; the difference is never negative where it is used, but stay exact.
  const int y0 = static_cast<int>(std::floor((height - crop_height) / 2.0));
  const int x0 = static_cast<int>(std::floor((width - crop_width) / 2.0));
  return {x0, y0, x0 + crop_width, y0 + crop_height};
}

int random_resized_crop_interpolation(const cv::Size& crop, int out_height, int out_width, int interpolation,
                                      AreaForDownscale area, bool is_mask) {
  const bool downscale = crop.height > out_height || crop.width > out_width;
  if (!is_mask && downscale && area != AreaForDownscale::kNone) return cv::INTER_AREA;
  if (is_mask && area == AreaForDownscale::kImageMask) return cv::INTER_AREA;
  return interpolation;
}

cv::Mat random_resized_crop_apply(const cv::Mat& img, const CropCoords& crop, int out_height, int out_width,
                                  int interpolation) {
  return resize_apply(crop_apply(img, crop), out_height, out_width, interpolation);
}

// ---- flips and quarter turns --------------------------------------------------------------------

cv::Mat hflip_apply(const cv::Mat& img) { return hflip_bytes(img); }  // simd.h; cv::flip beyond 8-bit

cv::Mat vflip_apply(const cv::Mat& img) {
  // Whole rows in reverse order: one memcpy per row (libc's, with the widest vectors the CPU has)
  // instead of OpenCV 4.6's 16-byte loop.
  cv::Mat out(img.size(), img.type());
  const std::size_t row = img.cols * img.elemSize();
  for (int y = 0; y < img.rows; ++y) std::memcpy(out.ptr(img.rows - 1 - y), img.ptr(y), row);
  return out;
}

cv::Mat rot90_apply(const cv::Mat& img, int factor) {
  cv::Mat out;
  switch (((factor % 4) + 4) % 4) {
    case 1: cv::rotate(img, out, cv::ROTATE_90_COUNTERCLOCKWISE); break;
    case 2: cv::rotate(img, out, cv::ROTATE_180); break;
    case 3: cv::rotate(img, out, cv::ROTATE_90_CLOCKWISE); break;
    default: out = img.clone();
  }
  return out;
}

// ---- affine warps -------------------------------------------------------------------------------

cv::Point2d image_center(int height, int width) { return {width / 2.0 - 0.5, height / 2.0 - 0.5}; }

cv::Matx33d affine_matrix(cv::Vec2d translate, cv::Vec2d shear_deg, cv::Vec2d scale, double rotate_deg,
                          cv::Point2d center) {
  // deg2rad multiplies by pi / 180, as numpy and Python's math.radians do.
  constexpr double kDegToRad = M_PI / 180.0;
  const double r = py_mod(rotate_deg, 360.0) * kDegToRad;
  const double shx = shear_deg[0] * kDegToRad, shy = shear_deg[1] * kDegToRad;
  const cv::Matx33d to_origin(1, 0, -center.x, 0, 1, -center.y, 0, 0, 1);
  const cv::Matx33d scaling(scale[0], 0, 0, 0, scale[1], 0, 0, 0, 1);
  const cv::Matx33d rotation(std::cos(r), std::sin(r), 0, -std::sin(r), std::cos(r), 0, 0, 0, 1);
  const cv::Matx33d shearing(1, std::tan(shx), 0, std::tan(shy), 1, 0, 0, 0, 1);
  const cv::Matx33d translation(1, 0, translate[0], 0, 1, translate[1], 0, 0, 1);
  const cv::Matx33d back(1, 0, center.x, 0, 1, center.y, 0, 0, 1);
  // Multiplied left to right, as numpy evaluates a @ b @ c.
  cv::Matx33d m = ((((back * translation) * shearing) * rotation) * scaling) * to_origin;
  m(2, 0) = 0;
  m(2, 1) = 0;
  m(2, 2) = 1;
  return m;
}

FittedAffine fit_affine_output(const cv::Matx33d& m, int height, int width) {
  if (height == 0 || width == 0) return {m, height, width};
  const double corners[4][2] = {{0, 0}, {double(width), 0}, {double(width), double(height)}, {0, double(height)}};
  double min_x = std::numeric_limits<double>::infinity(), min_y = min_x;
  double max_x = -min_x, max_y = -min_x;
  for (const auto& c : corners) {
    const double w = m(2, 0) * c[0] + m(2, 1) * c[1] + m(2, 2);
    const double x = (m(0, 0) * c[0] + m(0, 1) * c[1] + m(0, 2)) / w;
    const double y = (m(1, 0) * c[0] + m(1, 1) * c[1] + m(1, 2)) / w;
    min_x = std::min(min_x, x);
    max_x = std::max(max_x, x);
    min_y = std::min(min_y, y);
    max_y = std::max(max_y, y);
  }
  const int minc = static_cast<int>(std::floor(min_x)), minr = static_cast<int>(std::floor(min_y));
  const int maxc = static_cast<int>(std::ceil(max_x)), maxr = static_cast<int>(std::ceil(max_y));
  const cv::Matx33d shift(1, 0, -minc, 0, 1, -minr, 0, 0, 1);
  return {shift * m, maxr - minr + 1, maxc - minc + 1};
}

cv::Mat warp_affine_apply(const cv::Mat& img, const cv::Matx33d& m, int out_height, int out_width, int interpolation,
                          int border_mode, const std::vector<double>& fill) {
  // np.allclose(m, I): |m - I| <= 1e-8 + 1e-5 * |I| everywhere.
  bool identity = true;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) {
      const double id = r == c ? 1.0 : 0.0;
      if (!(std::abs(m(r, c) - id) <= 1e-8 + 1e-5 * std::abs(id))) identity = false;
    }
  if (identity) return img;
  const cv::Matx23d forward(m(0, 0), m(0, 1), m(0, 2), m(1, 0), m(1, 1), m(1, 2));
  return per_chunk(img, fill, [&](const cv::Mat& chunk, const cv::Scalar& value) {
    cv::Mat out;
    cv::warpAffine(chunk, out, forward, cv::Size(out_width, out_height), interpolation, border_mode, value);
    return out;
  });
}

RotateCrop rotate_crop_box(int height, int width, double angle_deg) {
  const double a = angle_deg * (M_PI / 180.0);
  const bool width_longer = width >= height;
  const double side_long = width_longer ? width : height, side_short = width_longer ? height : width;
  const double sin_a = std::abs(std::sin(a)), cos_a = std::abs(std::cos(a));
  double wr = 0, hr = 0;
  if (side_short <= 2.0 * sin_a * cos_a * side_long || std::abs(sin_a - cos_a) < 1e-10) {
    // Half-constrained: two crop corners touch the longer side.
    const double x = 0.5 * side_short;
    wr = width_longer ? x / sin_a : x / cos_a;
    hr = width_longer ? x / cos_a : x / sin_a;
  } else {
    const double cos_2a = cos_a * cos_a - sin_a * sin_a;
    wr = (width * cos_a - height * sin_a) / cos_2a;
    hr = (height * cos_a - width * sin_a) / cos_2a;
  }
  return {std::max(0, py_int(width / 2.0 - wr / 2)), std::min(width, py_int(width / 2.0 + wr / 2)),
          std::max(0, py_int(height / 2.0 - hr / 2)), std::min(height, py_int(height / 2.0 + hr / 2))};
}

cv::Mat rotate_apply(const cv::Mat& img, const cv::Matx33d& m, const RotateCrop& crop, int interpolation,
                     int border_mode, const std::vector<double>& fill) {
  cv::Mat out = warp_affine_apply(img, m, img.rows, img.cols, interpolation, border_mode, fill);
  if (crop.x_min < 0) return out;
  return crop_apply(out, {crop.x_min, crop.y_min, crop.x_max, crop.y_max});
}

// ---- distortions --------------------------------------------------------------------------------

void elastic_maps(const cv::Mat& noise, int height, bool gaussian, double alpha, double sigma, bool approximate,
                  bool same_dxdy, cv::Mat& map_x, cv::Mat& map_y) {
  const int k = same_dxdy ? 1 : 2;
  GB_CHECK(noise.type() == CV_32FC1 && noise.rows == k * height, InvalidArgument,
           "elastic noise must be float32 of " << k * height << " rows, got " << noise.rows, "");
  const int width = noise.cols;
  cv::Mat f = noise.clone();
  if (gaussian) {
    double max_abs = 0;
    cv::minMaxLoc(cv::abs(f), nullptr, &max_abs);
    // numpy divides the float32 array by its float32 maximum in float32.
    const float m = static_cast<float>(max_abs);
    if (m > 1e-6f) f.forEach<float>([m](float& v, const int*) { v = v / m; });
  }
  // The rows of dx and dy are blurred as one tall image, so dx's last rows leak into dy's first
  // ones; albumentations does this and the parity depends on it.
  const int ksize = approximate ? 17 : 0;
  f = gaussian_blur_replicate(f, ksize, sigma);  // cv::GaussianBlur(BORDER_REPLICATE), faster (simd.h)
  const float a = static_cast<float>(alpha);
  f.forEach<float>([a](float& v, const int*) { v = v * a; });
  const cv::Mat dx = f.rowRange(0, height), dy = same_dxdy ? dx : f.rowRange(height, 2 * height);
  map_x.create(height, width, CV_32FC1);
  map_y.create(height, width, CV_32FC1);
  for (int y = 0; y < height; ++y) {
    const float* px = dx.ptr<float>(y);
    const float* py = dy.ptr<float>(y);
    float* mx = map_x.ptr<float>(y);
    float* my = map_y.ptr<float>(y);
    for (int x = 0; x < width; ++x) {
      // int64 coordinates plus float32 displacements add in float64, then cast to float32.
      mx[x] = static_cast<float>(static_cast<double>(x) + static_cast<double>(px[x]));
      my[x] = static_cast<float>(static_cast<double>(y) + static_cast<double>(py[x]));
    }
  }
}

void grid_distortion_maps(int height, int width, int num_steps, std::vector<double> steps_x,
                          std::vector<double> steps_y, bool normalized, cv::Mat& map_x, cv::Mat& map_y) {
  GB_CHECK(
      num_steps >= 1 && steps_x.size() == static_cast<std::size_t>(num_steps + 1) && steps_y.size() == steps_x.size(),
      InvalidArgument, "grid distortion needs num_steps + 1 steps per axis", "");
  const auto axis = [&](int size, std::vector<double>& steps) {
    const int step = size / num_steps;
    if (normalized) {
      // The last cell absorbs the rest of size / num_steps; then the cells are scaled so they
      // sum to exactly `size` pixels.
      const int last = std::min(size, (num_steps + 1) * step) - num_steps * step;
      steps.back() *= static_cast<double>(last) / step;
      const double target = size / std::floor(static_cast<double>(size) / num_steps);
      const double factor = target / numpy_sum(steps.data(), steps.size());
      for (double& s : steps) s = s * factor;
    }
    std::vector<float> g(static_cast<std::size_t>(size), 0.0f);
    double prev = 0.0;
    for (int i = 0; i <= num_steps; ++i) {
      const int start = i * step, end = std::min(start + step, size);
      const double cur = prev + step * steps[static_cast<std::size_t>(i)];
      if (end > start) linspace_into(g.data() + start, end - start, prev, cur);
      prev = cur;
    }
    return g;
  };
  const std::vector<float> gx = axis(width, steps_x), gy = axis(height, steps_y);
  map_x.create(height, width, CV_32FC1);
  map_y.create(height, width, CV_32FC1);
  for (int y = 0; y < height; ++y) {
    std::copy(gx.begin(), gx.end(), map_x.ptr<float>(y));
    std::fill_n(map_y.ptr<float>(y), width, gy[static_cast<std::size_t>(y)]);
  }
}

cv::Mat remap_apply(const cv::Mat& img, const cv::Mat& map_x, const cv::Mat& map_y, int interpolation, int border_mode,
                    const std::vector<double>& fill) {
  // One two-channel float32 map, as albumentations stacks them (map2 empty).
  cv::Mat xy;
  cv::merge(std::vector<cv::Mat>{map_x, map_y}, xy);
  // albumentations hands remap a single fill value as it is, not repeated per channel (as its
  // warpAffine and copyMakeBorder calls do), and OpenCV reads one number as (v, 0, 0, 0): a
  // single value fills only the first channel. Kept for parity; give one value per channel for
  // a grey border.
  const std::vector<double> per_channel = fill.size() == 1 ? std::vector<double>{fill[0], 0, 0, 0} : fill;
  return per_chunk(img, per_channel, [&](const cv::Mat& chunk, const cv::Scalar& value) {
    cv::Mat out;
    cv::remap(chunk, out, xy, cv::noArray(), interpolation, border_mode, value);
    return out;
  });
}

// ---- dropout ------------------------------------------------------------------------------------

cv::Mat coarse_dropout_apply(const cv::Mat& img, const std::vector<Hole>& holes, const std::vector<double>& fill) {
  cv::Mat out = img.clone();
  if (holes.empty()) return out;
  const int channels = img.channels();
  GB_CHECK(fill.size() == 1 || static_cast<int>(fill.size()) == channels, InvalidArgument,
           "CoarseDropout fill has " << fill.size() << " values for a " << channels << "-channel image",
           "give one value, or one per channel");
  cv::Scalar value = cv::Scalar::all(0);
  // np.array(fill, uint8) truncates toward zero.
  for (int c = 0; c < std::min(channels, 4); ++c) value[c] = std::trunc(fill.size() == 1 ? fill[0] : fill[c]);
  for (const Hole& h : holes) {
    const int x0 = std::clamp(h[0], 0, img.cols), y0 = std::clamp(h[1], 0, img.rows);
    const int x1 = std::clamp(h[2], x0, img.cols), y1 = std::clamp(h[3], y0, img.rows);
    if (x1 > x0 && y1 > y0) out(cv::Range(y0, y1), cv::Range(x0, x1)).setTo(value);
  }
  return out;
}

}  // namespace glassbox::data
