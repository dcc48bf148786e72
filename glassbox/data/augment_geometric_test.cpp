// Over 600 lines: one parity case list and one distribution case per transform.
// Geometric transforms against albumentations 2.0.8 (tests/reference/albu_geometric_ref.py):
// pixel parity given albumentations' drawn parameters, parameter distributions, and unit tests
// of masks, configs and p that need no Python.
#include "glassbox/data/augment_geometric.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "glassbox/base/config.h"
#include "glassbox/base/error.h"
#include "glassbox/data/npy.h"
#include "glassbox/testing/testing.h"

namespace glassbox::data {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kScript = "tests/reference/albu_geometric_ref.py";

// ---- helpers ------------------------------------------------------------------------------------

// Gradients, a sine texture and noise: every interpolation weight and border shows in it.
cv::Mat make_rgb(int h, int w) {
  cv::Mat img(h, w, CV_8UC3);
  cv::RNG rng(123);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const double r = 255.0 * x / (w - 1), g = 255.0 * y / (h - 1);
      const double b = 127.5 + 127.5 * std::sin(x / 3.0) * std::cos(y / 4.0);
      img.at<cv::Vec3b>(y, x) = {cv::saturate_cast<uchar>(r + rng.gaussian(12)),
                                 cv::saturate_cast<uchar>(g + rng.gaussian(12)),
                                 cv::saturate_cast<uchar>(b + rng.gaussian(12))};
    }
  return img;
}

cv::Mat make_gray(int h, int w) {
  cv::Mat gray;
  cv::cvtColor(make_rgb(h, w), gray, cv::COLOR_RGB2GRAY);
  return gray;
}

// A label mask with a few regions (0..3).
cv::Mat make_mask(int h, int w) {
  cv::Mat m = cv::Mat::zeros(h, w, CV_8UC1);
  m(cv::Rect(w / 5, h / 6, w / 2, h / 2)) = 1;
  m(cv::Rect(w / 2, h / 2, w / 3, h / 3)) = 2;
  cv::circle(m, {w / 4, 3 * h / 4}, std::min(h, w) / 6, cv::Scalar(3), -1);
  return m;
}

at::Tensor to_tensor(const cv::Mat& m) {
  const cv::Mat c = m.isContinuous() ? m : m.clone();
  std::vector<std::int64_t> sizes = {c.rows, c.cols};
  if (c.channels() > 1) sizes.push_back(c.channels());
  GB_CHECK(c.depth() == CV_8U, Internal, "test images are uint8", "");
  return torch::from_blob(c.data, sizes, torch::kUInt8).clone();
}

cv::Mat to_mat(const at::Tensor& t0) {
  const at::Tensor t = t0.contiguous();
  const int h = static_cast<int>(t.size(0)), w = t.dim() > 1 ? static_cast<int>(t.size(1)) : 1;
  const int c = t.dim() > 2 ? static_cast<int>(t.size(2)) : 1;
  int depth = CV_8U;
  switch (t.scalar_type()) {
    case torch::kUInt8: depth = CV_8U; break;
    case torch::kFloat32: depth = CV_32F; break;
    case torch::kFloat64: depth = CV_64F; break;
    case torch::kInt32: depth = CV_32S; break;
    case torch::kInt64: {
      const at::Tensor i32 = t.to(torch::kInt32);
      return cv::Mat(h, w, CV_MAKETYPE(CV_32S, c), i32.data_ptr()).clone();
    }
    default: GB_THROW(Internal, "unexpected npy dtype " << t.scalar_type(), "");
  }
  return cv::Mat(h, w, CV_MAKETYPE(depth, c), t.data_ptr()).clone();
}

cv::Mat load(const fs::path& p) { return to_mat(read_npy(p)); }

// The largest absolute difference; -1 when the shapes or types differ.
double max_diff(const cv::Mat& a, const cv::Mat& b) {
  if (a.size() != b.size() || a.type() != b.type()) return -1;
  if (a.empty()) return 0;
  cv::Mat d;
  cv::absdiff(a.reshape(1), b.reshape(1), d);
  double mx = 0;
  cv::minMaxLoc(d, nullptr, &mx);
  return mx;
}

std::string shape_of(const cv::Mat& m) { return fmt::format("{}x{}x{}", m.rows, m.cols, m.channels()); }

int kw_int(const json& kw, const char* key, int def) { return kw.contains(key) ? kw[key].get<int>() : def; }
bool kw_flag(const json& kw, const char* key, bool def) { return kw.contains(key) ? kw[key].get<bool>() : def; }
std::string kw_word(const json& kw, const char* key, const std::string& def) {
  return kw.contains(key) ? kw[key].get<std::string>() : def;
}
std::vector<double> kw_list(const json& kw, const char* key, std::vector<double> def) {
  if (!kw.contains(key)) return def;
  if (kw[key].is_array()) return kw[key].get<std::vector<double>>();
  return {kw[key].get<double>()};
}
AreaForDownscale kw_area(const json& kw) {
  const std::string a = kw_word(kw, "area_for_downscale", "none");
  return a == "image"        ? AreaForDownscale::kImage
         : a == "image_mask" ? AreaForDownscale::kImageMask
                             : AreaForDownscale::kNone;
}

// A config spec from the same values the Python side gets, through the registry's kinds.
TransformSpec spec_from(const std::string& name, const json& kw, double p = 1.0) {
  TransformSpec s;
  s.name = name;
  s.p = p;
  const TransformDef* def = find_transform(name);
  GB_CHECK(def != nullptr, Internal, "no transform " << name, "");
  for (const auto& [key, v] : kw.items()) {
    const auto it =
        std::find_if(def->params.begin(), def->params.end(), [&](const ParamDef& d) { return d.name == key; });
    GB_CHECK(it != def->params.end(), Internal, name << " has no parameter " << key, "");
    switch (it->kind) {
      case ParamKind::kNumber: s.reals[key] = v.get<double>(); break;
      case ParamKind::kInt: s.ints[key] = v.get<std::int64_t>(); break;
      case ParamKind::kRange:
      case ParamKind::kList:
        s.numbers[key] = v.is_array() ? v.get<std::vector<double>>() : std::vector<double>{v.get<double>()};
        break;
      case ParamKind::kWord: s.words[key] = v.get<std::string>(); break;
      case ParamKind::kFlag: s.flags[key] = v.get<bool>(); break;
    }
  }
  return s;
}

std::unique_ptr<Transform> make(const std::string& name, const json& kw, double p = 1.0) {
  return make_transform(spec_from(name, kw, p), "data.train_transforms[0]");
}

// ---- parity -------------------------------------------------------------------------------------

struct ParityCase {
  std::string id, name;
  json kwargs;
  std::string image;  // "rgb" or "gray"
  int seed;
};

std::vector<ParityCase> parity_cases() {
  std::vector<ParityCase> c = {
      {"resize", "Resize", {{"height", 50}, {"width", 70}}, "rgb", 1},
      {"resize_cubic", "Resize", {{"height", 20}, {"width", 31}, {"interpolation", 2}}, "rgb", 2},
      {"resize_area_gray", "Resize", {{"height", 20}, {"width", 25}, {"area_for_downscale", "image_mask"}}, "gray", 3},
      {"resize_lanczos_up",
       "Resize",
       {{"height", 61}, {"width", 80}, {"interpolation", 4}, {"mask_interpolation", 1}},
       "rgb",
       4},
      {"resize_exact",
       "Resize",
       {{"height", 30}, {"width", 66}, {"interpolation", 5}, {"mask_interpolation", 6}},
       "rgb",
       5},
      {"smallest", "SmallestMaxSize", {{"max_size", {24, 50}}}, "rgb", 6},
      {"smallest_hw", "SmallestMaxSize", {{"max_size_hw", {30, 40}}, {"area_for_downscale", "image"}}, "gray", 7},
      {"longest", "LongestMaxSize", {{"max_size", 64}}, "rgb", 8},
      {"longest_hw", "LongestMaxSize", {{"max_size_hw", {30, 0}}, {"interpolation", 3}}, "gray", 9},
      {"center_crop", "CenterCrop", {{"height", 20}, {"width", 31}}, "rgb", 10},
      {"center_crop_pad",
       "CenterCrop",
       {{"height", 50}, {"width", 60}, {"pad_if_needed", true}, {"fill", {7, 8, 9}}, {"fill_mask", {255}}},
       "rgb",
       11},
      {"random_crop", "RandomCrop", {{"height", 21}, {"width", 30}}, "gray", 12},
      {"random_crop_pad",
       "RandomCrop",
       {{"height", 45}, {"width", 40}, {"pad_if_needed", true}, {"pad_position", "random"}, {"border_mode", 4}},
       "rgb",
       13},
      {"rrc", "RandomResizedCrop", {{"size", {32, 32}}}, "rgb", 14},
      {"rrc_area_cubic",
       "RandomResizedCrop",
       {{"size", {16, 20}}, {"area_for_downscale", "image_mask"}, {"interpolation", 2}, {"scale", {0.5, 1.0}}},
       "rgb",
       15},
      {"rrc_gray", "RandomResizedCrop", {{"size", {40, 24}}, {"ratio", {0.5, 0.6}}}, "gray", 16},
      {"pad", "PadIfNeeded", {{"min_height", 50}, {"min_width", 64}, {"fill", {10}}, {"fill_mask", {3}}}, "rgb", 17},
      {"pad_divisor_random",
       "PadIfNeeded",
       {{"min_height", 0},
        {"min_width", 0},
        {"pad_height_divisor", 16},
        {"pad_width_divisor", 32},
        {"border_mode", 4},
        {"position", "random"}},
       "gray",
       18},
      {"pad_wrap_top_left",
       "PadIfNeeded",
       {{"min_height", 60}, {"min_width", 70}, {"border_mode", 3}, {"position", "top_left"}},
       "rgb",
       19},
      {"pad_reflect_bottom_right",
       "PadIfNeeded",
       {{"min_height", 45}, {"min_width", 20}, {"border_mode", 2}, {"position", "bottom_right"}},
       "rgb",
       20},
      {"hflip", "HorizontalFlip", json::object(), "rgb", 21},
      {"vflip", "VerticalFlip", json::object(), "gray", 22},
      {"rot90_a", "RandomRotate90", json::object(), "rgb", 23},
      {"rot90_b", "RandomRotate90", json::object(), "gray", 25},
      {"rot90_c", "RandomRotate90", json::object(), "rgb", 31},
      {"rotate", "Rotate", json::object(), "rgb", 24},
      {"rotate_crop_cubic_reflect",
       "Rotate",
       {{"limit", {10, 80}}, {"interpolation", 2}, {"border_mode", 2}, {"crop_border", true}},
       "rgb",
       25},
      {"rotate_fill", "Rotate", {{"limit", 45}, {"fill", {255, 0, 128}}, {"fill_mask", {9}}}, "rgb", 26},
      {"rotate_gray_replicate_lanczos",
       "Rotate",
       {{"limit", 30}, {"border_mode", 1}, {"interpolation", 4}, {"mask_interpolation", 1}},
       "gray",
       27},
      {"affine",
       "Affine",
       {{"scale", {0.8, 1.2}}, {"translate_percent", {-0.1, 0.1}}, {"rotate", {-30, 30}}, {"shear", {-10, 10}}},
       "rgb",
       28},
      {"affine_px_fit",
       "Affine",
       {{"translate_px", {-5, 5}},
        {"rotate", {20, 40}},
        {"fit_output", true},
        {"interpolation", 0},
        {"mask_interpolation", 1}},
       "rgb",
       29},
      {"affine_balanced",
       "Affine",
       {{"scale", {0.5, 1.5}},
        {"balanced_scale", true},
        {"keep_ratio", true},
        {"border_mode", 4},
        {"interpolation", 3},
        {"shear", 12}},
       "gray",
       30},
      {"ssr", "ShiftScaleRotate", json::object(), "rgb", 31},
      {"ssr_x",
       "ShiftScaleRotate",
       {{"shift_limit_x", 0.2}, {"scale_limit", 0.3}, {"rotate_limit", {-10, 30}}, {"border_mode", 1}},
       "gray",
       32},
      {"elastic", "ElasticTransform", {{"alpha", 30}, {"sigma", 5}}, "rgb", 33},
      {"elastic_default", "ElasticTransform", json::object(), "rgb", 34},
      {"elastic_approx",
       "ElasticTransform",
       {{"alpha", 50}, {"sigma", 4}, {"approximate", true}, {"same_dxdy", true}, {"border_mode", 4}},
       "gray",
       35},
      {"elastic_uniform",
       "ElasticTransform",
       {{"alpha", 20}, {"sigma", 3}, {"noise_distribution", "uniform"}, {"interpolation", 2}, {"fill", {200}}},
       "rgb",
       36},
      {"grid", "GridDistortion", json::object(), "rgb", 37},
      {"grid_unnormalized",
       "GridDistortion",
       {{"num_steps", 4}, {"distort_limit", 0.5}, {"normalized", false}, {"border_mode", 4}},
       "gray",
       38},
      {"grid_many",
       "GridDistortion",
       {{"num_steps", 9}, {"distort_limit", {-0.2, 0.6}}, {"interpolation", 2}},
       "rgb",
       39},
      {"grid_cells", "GridDistortion", {{"num_steps", 37}, {"distort_limit", 0.4}}, "gray", 40},
      {"dropout", "CoarseDropout", json::object(), "rgb", 41},
      {"dropout_px",
       "CoarseDropout",
       {{"num_holes_range", {3, 6}},
        {"hole_height_range", {4, 10}},
        {"hole_width_range", {5, 12}},
        {"fill", {1, 2, 3}},
        {"fill_mask", {7}}},
       "rgb",
       42},
      {"dropout_gray", "CoarseDropout", {{"num_holes_range", {2, 4}}, {"fill", 128.7}}, "gray", 43},
  };
  return c;
}

struct Outputs {
  cv::Mat image, mask;
};

// What glassbox computes for one case given albumentations' params; checks along the way that
// glassbox's own parameter arithmetic (matrices, maps, crop boxes) reproduces albumentations'.
Outputs glassbox_outputs(const ParityCase& c, const json& rec, const fs::path& dir, const cv::Mat& img,
                         const cv::Mat& mask, std::string& notes) {
  const json& kw = c.kwargs;
  const json& params = rec["params"];
  const std::vector<double> draws = rec["draws"].get<std::vector<double>>();
  const auto arr = [&](const std::string& key) { return load(dir / ("geo_" + c.id + "_" + key + ".npy")); };
  const int interp = kw_int(kw, "interpolation", cv::INTER_LINEAR);
  const int minterp = kw_int(kw, "mask_interpolation", cv::INTER_NEAREST);
  const int border = kw_int(kw, "border_mode", cv::BORDER_CONSTANT);
  const std::vector<double> fill = kw_list(kw, "fill", {0}), fill_mask = kw_list(kw, "fill_mask", {0});
  const int H = img.rows, W = img.cols;
  Outputs o;
  const std::string& n = c.name;

  if (n == "Resize") {
    const int h = kw["height"].get<int>(), w = kw["width"].get<int>();
    const bool down = h < H || w < W;
    o.image = resize_apply(img, h, w, resize_interpolation(down, interp, kw_area(kw), false));
    o.mask = resize_apply(mask, h, w, resize_interpolation(down, minterp, kw_area(kw), true));
  } else if (n == "SmallestMaxSize" || n == "LongestMaxSize") {
    const double scale = params["scale"].get<double>();
    o.image = max_size_apply(img, scale, resize_interpolation(scale < 1, interp, kw_area(kw), false));
    o.mask = max_size_apply(mask, scale, resize_interpolation(scale < 1, minterp, kw_area(kw), true));
  } else if (n == "CenterCrop" || n == "RandomCrop") {
    const auto cc = params["crop_coords"].get<std::vector<int>>();
    const CropCoords crop{cc[0], cc[1], cc[2], cc[3]};
    std::optional<PadParams> pad;
    int ph = H, pw = W;
    if (!params["pad_params"].is_null()) {
      const json& pp = params["pad_params"];
      pad = PadParams{pp["pad_top"].get<int>(), pp["pad_bottom"].get<int>(), pp["pad_left"].get<int>(),
                      pp["pad_right"].get<int>()};
      ph += pad->top + pad->bottom;
      pw += pad->left + pad->right;
    }
    const int h = kw["height"].get<int>(), w = kw["width"].get<int>();
    // The crop box from the draws (the last two are h_start, w_start for RandomCrop).
    const CropCoords mine = n == "CenterCrop" ? center_crop_coords(ph, pw, h, w)
                                              : random_crop_coords(ph, pw, h, w, draws[draws.size() - 2], draws.back());
    EXPECT_TRUE(mine.x0 == crop.x0 && mine.y0 == crop.y0 && mine.x1 == crop.x1 && mine.y1 == crop.y1) << c.id;
    o.image = crop_and_pad_apply(img, crop, pad, border, fill);
    o.mask = crop_and_pad_apply(mask, crop, pad, border, fill_mask);
  } else if (n == "RandomResizedCrop") {
    const auto cc = params["crop_coords"].get<std::vector<int>>();
    const CropCoords crop{cc[0], cc[1], cc[2], cc[3]};
    if (draws.size() != 20) {  // no fallback (10 failed tries): the last two draws placed the crop
      const CropCoords mine =
          random_crop_coords(H, W, crop.y1 - crop.y0, crop.x1 - crop.x0, draws[draws.size() - 2], draws.back());
      EXPECT_TRUE(mine.x0 == crop.x0 && mine.y0 == crop.y0) << c.id;
    }
    const auto size = kw["size"].get<std::vector<int>>();
    const cv::Size cs(crop.x1 - crop.x0, crop.y1 - crop.y0);
    o.image =
        random_resized_crop_apply(img, crop, size[0], size[1],
                                  random_resized_crop_interpolation(cs, size[0], size[1], interp, kw_area(kw), false));
    o.mask =
        random_resized_crop_apply(mask, crop, size[0], size[1],
                                  random_resized_crop_interpolation(cs, size[0], size[1], minterp, kw_area(kw), true));
  } else if (n == "PadIfNeeded") {
    const PadParams pad{params["pad_top"].get<int>(), params["pad_bottom"].get<int>(), params["pad_left"].get<int>(),
                        params["pad_right"].get<int>()};
    if (kw_word(kw, "position", "center") == "center") {
      const auto [t, b] = dimension_padding(H, kw_int(kw, "min_height", 1024), kw_int(kw, "pad_height_divisor", 0));
      const auto [l, r] = dimension_padding(W, kw_int(kw, "min_width", 1024), kw_int(kw, "pad_width_divisor", 0));
      EXPECT_TRUE(t == pad.top && b == pad.bottom && l == pad.left && r == pad.right) << c.id;
    }
    o.image = pad_apply(img, pad, border, fill);
    o.mask = pad_apply(mask, pad, border, fill_mask);
  } else if (n == "HorizontalFlip") {
    o.image = hflip_apply(img);
    o.mask = hflip_apply(mask);
  } else if (n == "VerticalFlip") {
    o.image = vflip_apply(img);
    o.mask = vflip_apply(mask);
  } else if (n == "RandomRotate90") {
    const int factor = params["factor"].get<int>();
    notes += fmt::format(" factor={}", factor);
    o.image = rot90_apply(img, factor);
    o.mask = rot90_apply(mask, factor);
  } else if (n == "Rotate") {
    const cv::Mat m = arr("matrix");
    const cv::Matx33d theirs(m.ptr<double>());
    const cv::Matx33d mine = affine_matrix({0, 0}, {0, 0}, {1, 1}, draws[0], image_center(H, W));
    const double dm = cv::norm(mine - theirs, cv::NORM_INF);
    EXPECT_LT(dm, 1e-9) << c.id;
    const RotateCrop crop{params["x_min"].get<int>(), params["x_max"].get<int>(), params["y_min"].get<int>(),
                          params["y_max"].get<int>()};
    if (kw_flag(kw, "crop_border", false)) {
      const RotateCrop box = rotate_crop_box(H, W, draws[0]);
      EXPECT_TRUE(box.x_min == crop.x_min && box.x_max == crop.x_max && box.y_min == crop.y_min &&
                  box.y_max == crop.y_max)
          << c.id;
    }
    const cv::Mat with_mine = rotate_apply(img, mine, crop, interp, border, fill);
    o.image = rotate_apply(img, theirs, crop, interp, border, fill);
    notes += fmt::format(" matrix|d|={:.1e} own-matrix-diff={}", dm, max_diff(with_mine, o.image));
    o.mask = rotate_apply(mask, theirs, crop, minterp, border, fill_mask);
  } else if (n == "Affine" || n == "ShiftScaleRotate") {
    const cv::Mat m = arr("matrix");
    const cv::Matx33d theirs(m.ptr<double>());
    const auto shape = params["output_shape"].get<std::vector<int>>();
    // Rebuild the matrix from the recorded draws: translation (2), shear (2), then scale, rotate.
    const bool percent = n == "ShiftScaleRotate" || kw.contains("translate_percent");
    const double tx = percent ? std::trunc(draws[0] * W) : draws[0], ty = percent ? std::trunc(draws[1] * H) : draws[1];
    cv::Matx33d mine = affine_matrix({tx, ty}, {-draws[2], -draws[3]},
                                     cv::Vec2d(params["scale"]["x"].get<double>(), params["scale"]["y"].get<double>()),
                                     params["rotate"].get<double>(), image_center(H, W));
    int oh = H, ow = W;
    if (kw_flag(kw, "fit_output", false)) {
      const FittedAffine f = fit_affine_output(mine, H, W);
      mine = f.matrix;
      oh = f.height;
      ow = f.width;
    }
    const double dm = cv::norm(mine - theirs, cv::NORM_INF);
    EXPECT_LT(dm, 1e-9) << c.id;
    EXPECT_EQ(oh, shape[0]) << c.id;
    EXPECT_EQ(ow, shape[1]) << c.id;
    o.image = warp_affine_apply(img, theirs, shape[0], shape[1], interp, border, fill);
    const cv::Mat with_mine = warp_affine_apply(img, mine, oh, ow, interp, border, fill);
    notes += fmt::format(" matrix|d|={:.1e} own-matrix-diff={}", dm, max_diff(with_mine, o.image));
    o.mask = warp_affine_apply(mask, theirs, shape[0], shape[1], minterp, border, fill_mask);
  } else if (n == "ElasticTransform") {
    cv::Mat mx, my;
    elastic_maps(arr("noise"), H, kw_word(kw, "noise_distribution", "gaussian") == "gaussian",
                 kw_list(kw, "alpha", {1}).at(0), kw_list(kw, "sigma", {50}).at(0), kw_flag(kw, "approximate", false),
                 kw_flag(kw, "same_dxdy", false), mx, my);
    const cv::Mat tx = arr("map_x"), ty = arr("map_y");
    const double dmap = std::max(max_diff(mx, tx), max_diff(my, ty));
    EXPECT_GE(dmap, 0) << c.id;
    EXPECT_LT(dmap, 1e-3) << c.id;  // bit-equal with the same OpenCV; 4.13 blurs float32 within 1 ulp
    const cv::Mat with_theirs = remap_apply(img, tx, ty, interp, border, fill);
    o.image = remap_apply(img, mx, my, interp, border, fill);
    notes += fmt::format(" maps|d|={:.1e} with-their-maps-diff={}", dmap, max_diff(with_theirs, o.image));
    o.mask = remap_apply(mask, mx, my, minterp, border, fill_mask);
  } else if (n == "GridDistortion") {
    const int steps = kw_int(kw, "num_steps", 5);
    const std::vector<double> sx(draws.begin(), draws.begin() + steps + 1),
        sy(draws.begin() + steps + 1, draws.begin() + 2 * (steps + 1));
    std::vector<double> fx, fy;
    for (double v : sx) fx.push_back(1 + v);
    for (double v : sy) fy.push_back(1 + v);
    cv::Mat mx, my;
    grid_distortion_maps(H, W, steps, fx, fy, kw_flag(kw, "normalized", true), mx, my);
    const double dmap = std::max(max_diff(mx, arr("map_x")), max_diff(my, arr("map_y")));
    EXPECT_EQ(dmap, 0) << c.id;
    o.image = remap_apply(img, mx, my, interp, border, fill);
    o.mask = remap_apply(mask, mx, my, minterp, border, fill_mask);
    notes += fmt::format(" maps|d|={}", dmap);
  } else if (n == "CoarseDropout") {
    const cv::Mat h = arr("holes");
    std::vector<Hole> holes;
    for (int i = 0; i < h.rows; ++i)
      holes.push_back({h.at<int>(i, 0), h.at<int>(i, 1), h.at<int>(i, 2), h.at<int>(i, 3)});
    notes += fmt::format(" holes={}", holes.size());
    o.image = coarse_dropout_apply(img, holes, fill);
    const std::vector<double> fm = kw_list(kw, "fill_mask", {});
    o.mask = fm.empty() ? mask.clone() : coarse_dropout_apply(mask, holes, fm);
  } else {
    ADD_FAILURE() << "no parity rule for " << n;
  }
  return o;
}

// Exact where albumentations' op is exact in every OpenCV 4 (crops, pads, flips, dropout, most
// resizes); INTER_CUBIC resizes and the warps may differ by one grey level between builds.
double tolerance(const ParityCase& c) {
  const std::string& n = c.name;
  if (n == "Resize" || n == "SmallestMaxSize" || n == "LongestMaxSize" || n == "RandomResizedCrop")
    return kw_int(c.kwargs, "interpolation", 1) == cv::INTER_CUBIC ? 1 : 0;
  if (n == "Rotate" || n == "Affine" || n == "ShiftScaleRotate" || n == "ElasticTransform" || n == "GridDistortion")
    return 1;
  return 0;
}

TEST(AugmentGeometricParity, MatchesAlbumentations) {
  const fs::path dir = testing::temp_dir("augment_geometric_parity");
  const cv::Mat rgb = make_rgb(37, 53), gray = make_gray(37, 53), mask = make_mask(37, 53);
  write_npy(dir / "rgb.npy", to_tensor(rgb));
  write_npy(dir / "gray.npy", to_tensor(gray));
  write_npy(dir / "mask.npy", to_tensor(mask));
  const std::vector<ParityCase> cases = parity_cases();
  json list = json::array();
  for (const ParityCase& c : cases)
    list.push_back({{"id", c.id}, {"name", c.name}, {"kwargs", c.kwargs}, {"image", c.image}, {"seed", c.seed}});
  std::ofstream(dir / "cases.json") << list.dump();

  const json summary = json::parse(testing::run_python(kScript, {"parity", dir.string()}));
  ASSERT_EQ(summary["albumentations"], "2.0.8");
  ASSERT_EQ(summary["cv2"].get<std::string>().substr(0, 2), "4.");
  std::ifstream in(dir / "params.json");
  const json report = json::parse(in);
  std::printf("albumentations %s, cv2 %s (reference); pixel differences per case:\n",
              report["albumentations"].get<std::string>().c_str(), report["cv2"].get<std::string>().c_str());

  std::map<std::string, double> worst;  // per transform
  std::set<std::string> names;
  for (const ParityCase& c : cases) {
    SCOPED_TRACE(c.id);
    names.insert(c.name);
    const cv::Mat& img = c.image == "rgb" ? rgb : gray;
    std::string notes;
    const Outputs ours = glassbox_outputs(c, report["cases"][c.id], dir, img, mask, notes);
    const cv::Mat theirs = load(dir / ("geo_" + c.id + "_image.npy"));
    const cv::Mat their_mask = load(dir / ("geo_" + c.id + "_mask.npy"));
    const double di = max_diff(ours.image, theirs), dm = max_diff(ours.mask, their_mask);
    std::printf("  %-30s %-18s image %s diff %g, mask %s diff %g%s\n", c.id.c_str(), c.name.c_str(),
                shape_of(ours.image).c_str(), di, shape_of(ours.mask).c_str(), dm, notes.c_str());
    EXPECT_GE(di, 0) << "image shapes differ: glassbox " << shape_of(ours.image) << ", albumentations "
                     << shape_of(theirs);
    EXPECT_GE(dm, 0) << "mask shapes differ: glassbox " << shape_of(ours.mask) << ", albumentations "
                     << shape_of(their_mask);
    EXPECT_LE(di, tolerance(c));
    // Masks use nearest-neighbour (or their own interpolation) and are exact but for the same
    // one-level rounding where a case interpolates them.
    EXPECT_LE(dm, kw_int(c.kwargs, "mask_interpolation", 0) == 0 ? 0 : tolerance(c));
    worst[c.name] = std::max({worst[c.name], di, dm});
  }
  std::printf("max difference per transform:\n");
  for (const auto& [name, d] : worst) std::printf("  %-18s %g\n", name.c_str(), d);
  // Every geometric transform in the registry is covered.
  for (const char* n : {"Resize", "SmallestMaxSize", "LongestMaxSize", "CenterCrop", "RandomCrop", "RandomResizedCrop",
                        "PadIfNeeded", "HorizontalFlip", "VerticalFlip", "RandomRotate90", "Rotate", "Affine",
                        "ShiftScaleRotate", "ElasticTransform", "GridDistortion", "CoarseDropout"})
    EXPECT_TRUE(names.count(n)) << n;
}

// ---- distributions ------------------------------------------------------------------------------

struct DistCase {
  std::string id, name;
  json kwargs;
  int h, w;
  std::vector<std::pair<int, std::string>> columns;  // draw_params index, label
};

std::vector<DistCase> dist_cases() {
  const std::vector<std::pair<int, std::string>> crop = {{0, "x0"}, {1, "y0"}, {2, "x1"}, {3, "y1"}};
  const std::vector<std::pair<int, std::string>> pads = {
      {4, "pad_top"}, {5, "pad_bottom"}, {6, "pad_left"}, {7, "pad_right"}};
  std::vector<DistCase> c = {
      {"smallest", "SmallestMaxSize", {{"max_size", {20, 30, 40}}}, 37, 53, {{0, "scale"}}},
      {"longest", "LongestMaxSize", {{"max_size", {32, 64}}}, 37, 53, {{0, "scale"}}},
      {"center_crop_pad_random",
       "CenterCrop",
       {{"height", 50}, {"width", 60}, {"pad_if_needed", true}, {"pad_position", "random"}},
       37,
       53,
       pads},
      {"random_crop", "RandomCrop", {{"height", 20}, {"width", 30}}, 37, 53, crop},
      {"random_crop_pad",
       "RandomCrop",
       {{"height", 45}, {"width", 40}, {"pad_if_needed", true}, {"pad_position", "random"}},
       37,
       53,
       {{0, "x0"}, {1, "y0"}, {4, "pad_top"}, {5, "pad_bottom"}}},
      {"rrc", "RandomResizedCrop", {{"size", {20, 20}}}, 37, 53, crop},
      {"rrc_narrow",
       "RandomResizedCrop",
       {{"size", {20, 20}}, {"scale", {0.6, 1.0}}, {"ratio", {2.0, 3.0}}},
       37,
       53,
       crop},
      {"pad_random",
       "PadIfNeeded",
       {{"min_height", 50}, {"min_width", 60}, {"position", "random"}},
       37,
       53,
       {{0, "pad_top"}, {1, "pad_bottom"}, {2, "pad_left"}, {3, "pad_right"}}},
      {"rot90", "RandomRotate90", json::object(), 37, 53, {{0, "factor"}}},
      {"rotate",
       "Rotate",
       {{"crop_border", true}},
       37,
       53,
       {{0, "x_min"}, {1, "x_max"}, {2, "y_min"}, {3, "y_max"}, {4, "m00"}, {5, "m01"}, {6, "m02"}, {9, "m12"}}},
      {"rotate_limit", "Rotate", {{"limit", 15}}, 37, 53, {{4, "m00"}, {5, "m01"}, {6, "m02"}}},
      {"affine",
       "Affine",
       {{"scale", {0.8, 1.2}}, {"translate_percent", {-0.1, 0.1}}, {"rotate", {-30, 30}}, {"shear", {-10, 10}}},
       37,
       53,
       {{0, "rotate"}, {1, "scale_x"}, {2, "scale_y"}, {4, "m01"}, {5, "m02"}, {6, "m10"}, {8, "m12"}}},
      {"affine_balanced_px_fit",
       "Affine",
       {{"scale", {0.5, 2.0}},
        {"balanced_scale", true},
        {"keep_ratio", true},
        {"translate_px", {-5, 5}},
        {"fit_output", true}},
       37,
       53,
       {{1, "scale_x"}, {2, "scale_y"}, {5, "m02"}, {8, "m12"}, {9, "out_h"}, {10, "out_w"}}},
      {"ssr",
       "ShiftScaleRotate",
       json::object(),
       37,
       53,
       {{0, "rotate"}, {1, "scale_x"}, {2, "scale_y"}, {5, "m02"}, {8, "m12"}}},
      {"elastic",
       "ElasticTransform",
       {{"alpha", 5}, {"sigma", 2}},
       6,
       8,
       {{0, "map_x[0,0]"},
        {28, "map_x[3,4]"},
        {47, "map_x[5,7]"},
        {48, "map_y[0,0]"},
        {76, "map_y[3,4]"},
        {95, "map_y[5,7]"}}},
      {"elastic_uniform_default",
       "ElasticTransform",
       {{"noise_distribution", "uniform"}},
       6,
       8,
       {{0, "map_x[0,0]"}, {28, "map_x[3,4]"}, {76, "map_y[3,4]"}}},
      {"grid",
       "GridDistortion",
       json::object(),
       37,
       53,
       {{10, "map_x[10]"},
        {26, "map_x[26]"},
        {40, "map_x[40]"},
        {53 + 7, "map_y[7]"},
        {53 + 18, "map_y[18]"},
        {53 + 30, "map_y[30]"}}},
      {"dropout",
       "CoarseDropout",
       json::object(),
       37,
       53,
       {{0, "num_holes"}, {1, "x0"}, {2, "y0"}, {3, "x1"}, {4, "y1"}, {5, "hole2_x0"}, {8, "hole2_y1"}}},
      {"dropout_px",
       "CoarseDropout",
       {{"num_holes_range", {1, 3}}, {"hole_height_range", {5, 10}}, {"hole_width_range", {3, 8}}},
       37,
       53,
       {{0, "num_holes"}, {1, "x0"}, {2, "y0"}, {3, "x1"}, {4, "y1"}, {9, "hole3_x0"}}},
  };
  return c;
}

TEST(AugmentGeometricDistribution, MatchesAlbumentations) {
  constexpr int kDraws = 10000;
  const fs::path dir = testing::temp_dir("augment_geometric_dist");
  const std::vector<DistCase> cases = dist_cases();
  json list = json::array();
  int seed = 100;
  for (const DistCase& c : cases) {
    const auto t = make(c.name, c.kwargs);
    Sample s{cv::Mat::zeros(c.h, c.w, CV_8UC3), {}};
    AugmentRng rng(static_cast<std::uint64_t>(seed));
    std::vector<std::vector<double>> rows;
    std::size_t width = 0;
    for (int i = 0; i < kDraws; ++i) {
      rows.push_back(t->draw_params(s, rng));
      width = std::max(width, rows.back().size());
    }
    ASSERT_GT(width, 0u) << c.id;
    // Variable-length draws (CoarseDropout's holes) are padded with NaN.
    at::Tensor m = torch::full({kDraws, static_cast<std::int64_t>(width)}, NAN, torch::kFloat64);
    auto acc = m.accessor<double, 2>();
    for (int i = 0; i < kDraws; ++i)
      for (std::size_t j = 0; j < rows[static_cast<std::size_t>(i)].size(); ++j)
        acc[i][static_cast<std::int64_t>(j)] = rows[static_cast<std::size_t>(i)][j];
    write_npy(dir / ("draws_" + c.id + ".npy"), m);
    json cols = json::array();
    for (const auto& [index, label] : c.columns) cols.push_back({{"index", index}, {"name", label}});
    list.push_back({{"id", c.id},
                    {"name", c.name},
                    {"kwargs", c.kwargs},
                    {"shape", {c.h, c.w}},
                    {"seed", seed++},
                    {"columns", cols}});
  }
  std::ofstream(dir / "dist.json") << list.dump();

  const json result = json::parse(testing::run_python(kScript, {"dist", dir.string()}));
  ASSERT_EQ(result["albumentations"], "2.0.8");
  std::printf("p-values (%d draws each; chi2 for few integer levels, KS otherwise):\n", kDraws);
  for (const DistCase& c : cases) {
    SCOPED_TRACE(c.id);
    ASSERT_TRUE(result["dist"].contains(c.id));
    const json& r = result["dist"][c.id];
    double min_p = 1;
    int compared = 0;
    std::string line;
    for (const auto& [label, v] : r.items()) {
      const double p = v["p"];
      min_p = std::min(min_p, p);
      if (v["test"] != "constant") ++compared;
      line += fmt::format(" {}={:.3g}({})", label, p, v["test"].get<std::string>());
      EXPECT_GT(p, 1e-3) << label << ": " << v.dump();
    }
    std::printf("  %-26s %-18s min p %.3g:%s\n", c.id.c_str(), c.name.c_str(), min_p, line.c_str());
    EXPECT_GE(compared, 1) << "no parameter of " << c.id << " varied";
  }
}

// ---- unit tests without Python ------------------------------------------------------------------

// Random blocks of 0 and 200: after a warp with nearest-neighbour for both, the mask built from
// the same pattern must still equal the thresholded image.
TEST(AugmentGeometric, MasksStayAligned) {
  cv::Mat small(6, 8, CV_8UC1);
  cv::RNG rng(7);
  rng.fill(small, cv::RNG::UNIFORM, 0, 2);
  cv::Mat pattern;
  cv::resize(small, pattern, cv::Size(53, 37), 0, 0, cv::INTER_NEAREST);
  cv::Mat gray = pattern * 200, rgb;
  cv::cvtColor(gray, rgb, cv::COLOR_GRAY2RGB);
  const json nearest = {{"interpolation", 0}};
  const std::vector<std::pair<std::string, json>> steps = {
      {"HorizontalFlip", json::object()},
      {"VerticalFlip", json::object()},
      {"RandomRotate90", json::object()},
      {"Rotate", nearest},
      {"Rotate", {{"interpolation", 0}, {"crop_border", true}}},
      {"Affine",
       {{"interpolation", 0},
        {"scale", {0.7, 1.3}},
        {"rotate", {-40, 40}},
        {"shear", {-10, 10}},
        {"translate_px", {-6, 6}},
        {"fit_output", true}}},
      {"ShiftScaleRotate", {{"interpolation", 0}, {"border_mode", 4}}},
      {"ElasticTransform", {{"interpolation", 0}, {"alpha", 20}, {"sigma", 4}}},
      {"GridDistortion", {{"interpolation", 0}, {"border_mode", 2}}},
      {"RandomCrop", {{"height", 30}, {"width", 30}}},
      {"CenterCrop", {{"height", 40}, {"width", 60}, {"pad_if_needed", true}, {"pad_position", "random"}}},
      {"RandomResizedCrop", {{"size", {50, 40}}, {"interpolation", 0}}},
      {"PadIfNeeded", {{"min_height", 64}, {"min_width", 64}, {"border_mode", 4}}},
      {"Resize", {{"height", 74}, {"width", 106}, {"interpolation", 0}}},
      {"LongestMaxSize", {{"max_size", 106}, {"interpolation", 0}}},
      {"CoarseDropout", {{"fill_mask", {0}}, {"num_holes_range", {3, 5}}}},
  };
  for (const auto& [name, kw] : steps) {
    const auto t = make(name, kw);
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
      Sample s{rgb.clone(), {pattern.clone()}};
      AugmentRng r(seed);
      (*t)(s, r);
      ASSERT_EQ(s.image.size(), s.masks[0].size()) << name;
      cv::Mat channels[3];
      cv::split(s.image, channels);
      cv::Mat expected = channels[0] > 100;
      expected /= 255;
      EXPECT_EQ(cv::countNonZero(expected != s.masks[0]), 0) << name << " seed " << seed;
    }
  }
}

TEST(AugmentGeometric, FlipsAndQuarterTurns) {
  cv::Mat m = (cv::Mat_<uchar>(2, 3) << 1, 2, 3, 4, 5, 6);
  EXPECT_EQ(cv::countNonZero(hflip_apply(m) != (cv::Mat_<uchar>(2, 3) << 3, 2, 1, 6, 5, 4)), 0);
  EXPECT_EQ(cv::countNonZero(vflip_apply(m) != (cv::Mat_<uchar>(2, 3) << 4, 5, 6, 1, 2, 3)), 0);
  // np.rot90: counter-clockwise, so the top row becomes the left column read upwards.
  EXPECT_EQ(cv::countNonZero(rot90_apply(m, 1) != (cv::Mat_<uchar>(3, 2) << 3, 6, 2, 5, 1, 4)), 0);
  EXPECT_EQ(cv::countNonZero(rot90_apply(m, 2) != (cv::Mat_<uchar>(2, 3) << 6, 5, 4, 3, 2, 1)), 0);
  EXPECT_EQ(cv::countNonZero(rot90_apply(m, 3) != rot90_apply(m, -1)), 0);
}

TEST(AugmentGeometric, DefaultProbabilities) {
  const std::map<std::string, double> expected = {
      {"Resize", 1.0},           {"SmallestMaxSize", 1.0},   {"LongestMaxSize", 1.0}, {"CenterCrop", 1.0},
      {"RandomCrop", 1.0},       {"RandomResizedCrop", 1.0}, {"PadIfNeeded", 1.0},    {"HorizontalFlip", 0.5},
      {"VerticalFlip", 0.5},     {"RandomRotate90", 1.0},    {"Rotate", 0.5},         {"Affine", 0.5},
      {"ShiftScaleRotate", 0.5}, {"ElasticTransform", 0.5},  {"GridDistortion", 0.5}, {"CoarseDropout", 0.5}};
  for (const auto& [name, p] : expected) {
    const TransformDef* d = find_transform(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_EQ(d->default_p, p) << name;
  }
}

TEST(AugmentGeometric, ProbabilitySemantics) {
  const cv::Mat img = make_rgb(9, 11);
  const auto count_flips = [&](double p, int n) {
    const auto t = make("HorizontalFlip", json::object(), p);
    AugmentRng rng(3);
    int flipped = 0;
    for (int i = 0; i < n; ++i) {
      Sample s{img.clone(), {}};
      (*t)(s, rng);
      flipped += max_diff(s.image, img) > 0;
    }
    return flipped;
  };
  EXPECT_EQ(count_flips(0.0, 200), 0);
  EXPECT_EQ(count_flips(1.0, 200), 200);
  const int n = 10000, k = count_flips(0.3, n);
  EXPECT_NEAR(k, 0.3 * n, 4 * std::sqrt(n * 0.3 * 0.7));  // within 4 sigma
  // p = 1 makes no decision draw: the parameters are those of a bare draw_params.
  const auto rot = make("Rotate", json::object(), 1.0);
  Sample s{img.clone(), {}};
  AugmentRng a(11), b(11);
  const std::vector<double> first = rot->draw_params(s, a);
  EXPECT_EQ(first.size(), 10u);
  (*rot)(s, b);
  EXPECT_EQ(b.next_u64(), a.next_u64());
}

// A config section holding a transform list, as data.train_transforms does.
struct TransformsConfig {
  std::vector<TransformSpec> train_transforms;
  void visit(FieldVisitor& v) { v.list("train_transforms", train_transforms, "augmentation steps"); }
};

std::string build_error(const std::string& toml) {
  TransformsConfig cfg;
  try {
    load_config(toml, "test.toml", {}, visit_fn(cfg));
    make_pipeline(cfg.train_transforms, "data.train_transforms");
  } catch (const Error& e) {
    return e.one_line();
  }
  return "";
}

TEST(AugmentGeometric, ConfigValuesAndErrors) {
  // A config in albumentations' terms builds, and its numbers mean what they mean there.
  TransformsConfig cfg;
  load_config(
      "[[train_transforms]]\nname = \"Rotate\"\nlimit = 15\np = 0.5\n"
      "[[train_transforms]]\nname = \"RandomResizedCrop\"\nsize = [24, 32]\n",
      "test.toml", {}, visit_fn(cfg));
  const Pipeline pipe = make_pipeline(cfg.train_transforms, "data.train_transforms");
  ASSERT_EQ(pipe.steps().size(), 2u);
  EXPECT_EQ(pipe.steps()[0]->p(), 0.5);
  EXPECT_EQ(pipe.steps()[1]->p(), 1.0);  // RandomResizedCrop's default
  Sample s{make_rgb(37, 53), {make_mask(37, 53)}};
  AugmentRng rng(5);
  for (int i = 0; i < 200; ++i) {
    const std::vector<double> d = pipe.steps()[0]->draw_params(s, rng);
    EXPECT_GE(d[4], std::cos(15 * M_PI / 180) - 1e-12);  // m00 = cos(angle), |angle| <= 15
  }
  pipe.run(s, rng);
  EXPECT_EQ(s.image.size(), cv::Size(32, 24));
  EXPECT_EQ(s.masks[0].size(), cv::Size(32, 24));

  // A misspelt key: the config reader names the nearest one.
  EXPECT_NE(build_error("[[train_transforms]]\nname = \"Rotate\"\nlimt = 15\n").find("limit"), std::string::npos);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"name = \"GridDistortion\"\ndistort_limit = 2", "GridDistortion.distort_limit must lie in [-1, 1]"},
      {"name = \"Resize\"\nwidth = 10", "Resize.height is required"},
      {"name = \"Rotate\"\ninterpolation = 5", "Rotate.interpolation must be an OpenCV interpolation code 0..4"},
      {"name = \"Resize\"\nheight = 5\nwidth = 5\ninterpolation = 7",
       "Resize.interpolation must be an OpenCV interpolation code 0..6"},
      {"name = \"Affine\"\nborder_mode = 5", "Affine.border_mode must be an OpenCV border code"},
      {"name = \"RandomResizedCrop\"\nsize = [224]", "RandomResizedCrop.size must be [height, width]"},
      {"name = \"RandomResizedCrop\"\nsize = [8, 8]\nscale = [0.5, 1.5]", "RandomResizedCrop.scale must lie in [0, 1]"},
      {"name = \"RandomResizedCrop\"\nsize = [8, 8]\nscale = [0.9, 0.5]",
       "RandomResizedCrop.scale must be nondecreasing"},
      {"name = \"PadIfNeeded\"\npad_height_divisor = 32", "PadIfNeeded.min_height and pad_height_divisor"},
      {"name = \"SmallestMaxSize\"", "SmallestMaxSize.max_size or max_size_hw is required"},
      {"name = \"LongestMaxSize\"\nmax_size = 10\nmax_size_hw = [10, 10]",
       "LongestMaxSize.max_size and max_size_hw are exclusive"},
      {"name = \"Affine\"\ntranslate_px = 3\ntranslate_percent = 0.1", "Affine.translate_percent and translate_px"},
      {"name = \"ShiftScaleRotate\"\nshift_limit_x = 1.5", "ShiftScaleRotate.shift_limit_x must lie in [-1, 1]"},
      {"name = \"ShiftScaleRotate\"\nscale_limit = [-1.5, 0.1]", "ShiftScaleRotate.scale_limit must give scales >= 0"},
      {"name = \"ElasticTransform\"\nsigma = 0.5", "ElasticTransform.sigma must be >= 1"},
      {"name = \"ElasticTransform\"\nalpha = -1", "ElasticTransform.alpha must be >= 0"},
      {"name = \"GridDistortion\"\nnum_steps = 0", "GridDistortion.num_steps must be >= 1"},
      {"name = \"CoarseDropout\"\nnum_holes_range = [0, 2]", "CoarseDropout.num_holes_range must lie in"},
      {"name = \"CoarseDropout\"\nhole_width_range = [0.1, 2.0]", "CoarseDropout.hole_width_range must be fractions"},
      {"name = \"CenterCrop\"\nheight = 10\nwidth = -3", "CenterCrop.width must be >= 1"},
      {"name = \"Rotate\"\nfill = []", "Rotate.fill must hold at least one value"},
  };
  for (const auto& [body, message] : bad) {
    const std::string err = build_error("[[train_transforms]]\n" + body + "\n");
    EXPECT_NE(err.find("data.train_transforms[0]: " + message), std::string::npos) << body << "\n -> " << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;  // one line
  }
}

TEST(AugmentGeometric, CropLargerThanImageNamesBothSizes) {
  const auto t = make("RandomCrop", {{"height", 50}, {"width", 60}});
  Sample s{make_rgb(37, 53), {}};
  AugmentRng rng(1);
  try {
    (*t)(s, rng);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.message().find("50x60"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("37x53"), std::string::npos) << e.message();
    EXPECT_NE(e.hint().find("pad_if_needed"), std::string::npos) << e.hint();
  }
  // With pad_if_needed the same crop pads and succeeds.
  const auto padded = make("CenterCrop", {{"height", 50}, {"width", 60}, {"pad_if_needed", true}});
  (*padded)(s, rng);
  EXPECT_EQ(s.image.size(), cv::Size(60, 50));
}

TEST(AugmentGeometric, AffineMatrixConventions) {
  // A positive angle turns counter-clockwise on screen, like cv::getRotationMatrix2D.
  const cv::Point2d c = image_center(37, 53);
  const cv::Matx33d m = affine_matrix({0, 0}, {0, 0}, {1, 1}, 30, c);
  const cv::Mat ref = cv::getRotationMatrix2D(cv::Point2f(float(c.x), float(c.y)), 30, 1.0);
  for (int r = 0; r < 2; ++r)
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(m(r, k), ref.at<double>(r, k), 1e-5);
  // The identity warp returns the input itself, as albumentations skips it.
  const cv::Mat img = make_rgb(5, 7);
  const cv::Mat same = warp_affine_apply(img, affine_matrix({0, 0}, {0, 0}, {1, 1}, 360, image_center(5, 7)), 5, 7,
                                         cv::INTER_LINEAR, cv::BORDER_CONSTANT, {0});
  EXPECT_EQ(same.data, img.data);
  // fit_output grows the output to hold the whole warped image (plus albumentations' extra pixel)
  // and moves its top-left corner to the origin.
  const FittedAffine f = fit_affine_output(affine_matrix({0, 0}, {0, 0}, {2, 2}, 0, image_center(37, 53)), 37, 53);
  EXPECT_EQ(f.height, 75);
  EXPECT_EQ(f.width, 107);
  EXPECT_NEAR(f.matrix(0, 2), 0.0, 1e-12);
  EXPECT_NEAR(f.matrix(1, 2), 0.0, 1e-12);
}

}  // namespace
}  // namespace glassbox::data
