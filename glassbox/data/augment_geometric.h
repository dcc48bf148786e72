// augment_geometric: albumentations 2.0.8's geometric transforms (they move masks with the image).
//
// The transforms themselves are registered by add_geometric_transforms (augment.h) and built from
// configs; this header holds the deterministic halves, one function per albumentations apply():
// given the parameters albumentations drew (t.params), each returns the same pixels. The parity
// tests feed them albumentations' draws; the transforms call them with their own draws.
//
//   cv::Matx33d m = affine_matrix({0, 0}, {0, 0}, {1, 1}, 17.0, image_center(img.rows, img.cols));
//   cv::Mat out = warp_affine_apply(img, m, img.rows, img.cols, cv::INTER_LINEAR, cv::BORDER_CONSTANT, {0});
//
// Conventions: images are HWC uint8 (1 or 3 channels, any count works); interpolation and border
// codes are OpenCV's (albumentations passes cv2 constants through); `fill` is one value for every
// channel or one per channel (missing channels get 0, as cv::Scalar does). Functions return a new
// matrix or, where albumentations returns its input untouched (a resize to the same size, an
// identity warp), the input itself (shared data).
// Thread safety: reentrant.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include <opencv2/core.hpp>

#include "glassbox/data/augment.h"

namespace glassbox::data {

// ---- resizing -----------------------------------------------------------------------------------

// albumentations' area_for_downscale: INTER_AREA instead of `interpolation` when shrinking.
enum class AreaForDownscale { kNone, kImage, kImageMask };

// The interpolation Resize, SmallestMaxSize and LongestMaxSize use: INTER_AREA when downscaling
// and the mode covers the target (kImage: images only; kImageMask: images and masks).
int resize_interpolation(bool downscale, int interpolation, AreaForDownscale area, bool is_mask);

// cv::resize to height x width; the input itself when it already has that size.
cv::Mat resize_apply(const cv::Mat& img, int height, int width, int interpolation);

// SmallestMaxSize / LongestMaxSize: the size max(1, round(H * scale)) x max(1, round(W * scale)),
// rounding half to even as Python's round() does.
cv::Size max_size_target(int height, int width, double scale);
cv::Mat max_size_apply(const cv::Mat& img, double scale, int interpolation);

// ---- crops and padding --------------------------------------------------------------------------

struct PadParams {
  int top = 0, bottom = 0, left = 0, right = 0;
};

// [x0, x1) x [y0, y1), albumentations' crop_coords order.
struct CropCoords {
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

// Where padding goes ("center", "top_left", "top_right", "bottom_left", "bottom_right", "random").
enum class PadPosition { kCenter, kTopLeft, kTopRight, kBottomLeft, kBottomRight, kRandom };

// The padding that brings `size` up to `min_size` (min_size > 0) or to a multiple of `divisor`
// (divisor > 0): {before, after} with the odd pixel after.
std::pair<int, int> dimension_padding(int size, int min_size, int divisor);

// Moves centred padding to `position`; kRandom draws the top, then the left share.
PadParams position_padding(const PadParams& centred, PadPosition position, AugmentRng& rng);

// cv::copyMakeBorder with `fill` per channel (always called, even with zero padding).
cv::Mat pad_apply(const cv::Mat& img, const PadParams& pad, int border_mode, const std::vector<double>& fill);

// img[y0:y1, x0:x1] (a copy); an InvalidArgument naming both sizes when the box is not inside.
cv::Mat crop_apply(const cv::Mat& img, const CropCoords& crop);

// CenterCrop / RandomCrop: optional padding (pad_if_needed), then the crop.
cv::Mat crop_and_pad_apply(const cv::Mat& img, const CropCoords& crop, const std::optional<PadParams>& pad,
                           int border_mode, const std::vector<double>& fill);

// RandomCrop's coordinates: the top-left corner int((H - h + 1) * h_start), int((W - w + 1) * w_start),
// with the crop clipped to the image.
CropCoords random_crop_coords(int height, int width, int crop_height, int crop_width, double h_start, double w_start);
CropCoords center_crop_coords(int height, int width, int crop_height, int crop_width);

// RandomResizedCrop's interpolation: INTER_AREA for images when the crop is larger than the
// output and the mode is kImage or kImageMask; for masks whenever the mode is kImageMask
// (albumentations does that even when upscaling).
int random_resized_crop_interpolation(const cv::Size& crop, int out_height, int out_width, int interpolation,
                                      AreaForDownscale area, bool is_mask);
cv::Mat random_resized_crop_apply(const cv::Mat& img, const CropCoords& crop, int out_height, int out_width,
                                  int interpolation);

// ---- flips and quarter turns --------------------------------------------------------------------

cv::Mat hflip_apply(const cv::Mat& img);
cv::Mat vflip_apply(const cv::Mat& img);
// np.rot90(img, factor): `factor` quarter turns counter-clockwise (any integer, taken mod 4).
cv::Mat rot90_apply(const cv::Mat& img, int factor);

// ---- affine warps -------------------------------------------------------------------------------

// The pixel centre of an image, (W/2 - 0.5, H/2 - 0.5), the point rotations and scalings keep.
cv::Point2d image_center(int height, int width);

// albumentations' create_affine_transformation_matrix: centre . translate . shear . rotate .
// scale . centre^-1, with angles in degrees (positive rotation is counter-clockwise on screen,
// positive shear_x leans the image's vertical lines to the right by tan(shear_x)).
cv::Matx33d affine_matrix(cv::Vec2d translate, cv::Vec2d shear_deg, cv::Vec2d scale, double rotate_deg,
                          cv::Point2d center);

// Affine(fit_output=True): shifts `m` so the whole warped image lands inside the output and
// returns the output size needed.
struct FittedAffine {
  cv::Matx33d matrix;
  int height = 0, width = 0;
};
FittedAffine fit_affine_output(const cv::Matx33d& m, int height, int width);

// cv::warpAffine with the forward matrix (OpenCV inverts it); the input itself when `m` is the
// identity (np.allclose), as albumentations skips the warp then.
cv::Mat warp_affine_apply(const cv::Mat& img, const cv::Matx33d& m, int out_height, int out_width, int interpolation,
                          int border_mode, const std::vector<double>& fill);

// Rotate(crop_border=True): the largest upright rectangle inside the rotated image, as
// x_min, x_max, y_min, y_max (all -1 without crop_border).
struct RotateCrop {
  int x_min = -1, x_max = -1, y_min = -1, y_max = -1;
};
RotateCrop rotate_crop_box(int height, int width, double angle_deg);

// Rotate's apply: the warp at the input size, then the crop_border crop when `crop.x_min >= 0`.
cv::Mat rotate_apply(const cv::Mat& img, const cv::Matx33d& m, const RotateCrop& crop, int interpolation,
                     int border_mode, const std::vector<double>& fill);

// ---- distortions --------------------------------------------------------------------------------

// The maps ElasticTransform warps with: `noise` is the raw field, float32 of (k * H) x W with
// k = 2 (dx's rows then dy's) or 1 (same_dxdy), as drawn (standard normal for "gaussian", which
// is then divided by its largest magnitude, or uniform in [-1, 1)). It is blurred as one tall
// image (sigma, 17x17 kernel when `approximate`, BORDER_REPLICATE), scaled by alpha and added to
// the pixel coordinates.
void elastic_maps(const cv::Mat& noise, int height, bool gaussian, double alpha, double sigma, bool approximate,
                  bool same_dxdy, cv::Mat& map_x, cv::Mat& map_y);

// The maps of GridDistortion from its drawn step factors (num_steps + 1 per axis, each
// 1 + uniform(distort_limit)), normalised so the grid spans the image when `normalized`.
void grid_distortion_maps(int height, int width, int num_steps, std::vector<double> steps_x,
                          std::vector<double> steps_y, bool normalized, cv::Mat& map_x, cv::Mat& map_y);

// cv::remap with float32 maps (map_x, map_y of H x W), as ElasticTransform and GridDistortion apply.
// Unlike the other functions, a single `fill` value fills only the first channel (the others get
// 0): albumentations passes it to OpenCV unexpanded, and parity keeps that.
cv::Mat remap_apply(const cv::Mat& img, const cv::Mat& map_x, const cv::Mat& map_y, int interpolation, int border_mode,
                    const std::vector<double>& fill);

// ---- dropout ------------------------------------------------------------------------------------

// CoarseDropout's holes, {x0, y0, x1, y1} each.
using Hole = std::array<int, 4>;

// Sets every hole to `fill` (one value for all channels or one per channel, truncated to uint8
// as numpy's astype does).
cv::Mat coarse_dropout_apply(const cv::Mat& img, const std::vector<Hole>& holes, const std::vector<double>& fill);

}  // namespace glassbox::data
