// augment_pixel: albumentations 2.0.8's pixel-level transforms (they leave masks unchanged).
//
//   [[data.train_transforms]]
//   name = "CLAHE"
//   clip_limit = 2.0          # one number v means [1, v], as in albumentations
//   p = 0.5
//
// Configs reach these through make_pipeline (augment.h); add_pixel_transforms registers
// CLAHE, RandomBrightnessContrast, RandomGamma, HueSaturationValue, ColorJitter, Solarize,
// Equalize, ToGray, GaussianBlur, MotionBlur, GaussNoise and Normalize with albumentations'
// parameters, defaults (p included) and parameter distributions.
//
// The functions below are albumentations' apply(img, **params): no randomness, the drawn values
// passed in. Given the same values they return the same pixels as albumentations (exactly; see
// augment_pixel_test.cpp, which checks them against the real library). Inputs are 8-bit HWC
// images in RGB order (CV_8UC1 or CV_8UC3; the LUT-based ones take any channel count); outputs
// keep the input's type, except Normalize (CV_32F) and ToGray (its channel count).
// Thread safety: all functions are reentrant.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include <opencv2/core/mat.hpp>

#include "glassbox/data/augment.h"

namespace glassbox::data {

// Contrast-limited adaptive histogram equalisation of L in Lab (RGB) or of the gray image.
// tile_grid_size is albumentations' (8, 8) tuple: width = [0], height = [1].
cv::Mat clahe_apply(const cv::Mat& img, double clip_limit, cv::Size tile_grid_size);

// out = floor(clamp(i * alpha + beta)) through a float32 table; beta is in grey levels.
cv::Mat brightness_contrast_apply(const cv::Mat& img, double alpha, double beta);

// out = trunc((i * (1/255)) ^ gamma * 255); gamma = 1 is not quite the identity (albumentations').
cv::Mat gamma_apply(const cv::Mat& img, double gamma);

// Shifts in OpenCV's 8-bit HSV (hue in [0, 180)); a gray image gets only the value shift.
cv::Mat hue_saturation_value_apply(const cv::Mat& img, double hue_shift, double sat_shift, double val_shift);

// torchvision-style jitter: the four factors applied in `order` (0 brightness, 1 contrast,
// 2 saturation, 3 hue).
cv::Mat color_jitter_apply(const cv::Mat& img, double brightness, double contrast, double saturation, double hue,
                           const std::array<int, 4>& order);

// Inverts the pixels >= threshold * 255.
cv::Mat solarize_apply(const cv::Mat& img, double threshold);

enum class EqualizeMode { kCv, kPil };
// Histogram equalisation per channel, or of Y in YCrCb when !by_channels.
cv::Mat equalize_apply(const cv::Mat& img, EqualizeMode mode, bool by_channels);

enum class GrayMethod { kWeightedAverage, kFromLab, kDesaturation, kAverage, kMax, kPca };
// A gray image comes back unchanged; num_output_channels = 1 gives CV_8UC1 (HxW).
cv::Mat to_gray_apply(const cv::Mat& img, int num_output_channels, GrayMethod method);

// albumentations' 1-D Gaussian kernel (CV_64F, 1 x n): n = ksize, or int(3.5 sigma) * 2 + 1 when
// ksize = 0, made odd.
cv::Mat gaussian_kernel_1d(double sigma, int ksize);
// Separable filter with `kernel` in both directions, BORDER_REFLECT_101.
cv::Mat gaussian_blur_apply(const cv::Mat& img, const cv::Mat& kernel);

// The normalised CV_32F ksize x ksize line kernel; shift_x/shift_y are in pixels (albumentations
// draws uniform(-1, 1) * (ksize / 2) / 2 for each when allow_shifted).
cv::Mat motion_kernel(int ksize, double angle, double direction, double shift_x, double shift_y);
cv::Mat motion_blur_apply(const cv::Mat& img, const cv::Mat& kernel);

// GaussNoise's noise: OpenCV's RNG seeded with `seed` (albumentations draws it in [0, 65535]),
// normal(mean, std) * 255 as float32, one plane per channel (or one shared when !per_channel),
// generated at noise_scale_factor of the size and resized bilinearly. CV_32FC(channels).
cv::Mat gauss_noise_map(int rows, int cols, int channels, double std, double mean, std::uint64_t seed, bool per_channel,
                        double noise_scale_factor);
// out = clamp(i + trunc(noise)); noise_map has the image's size and channel count.
cv::Mat gauss_noise_apply(const cv::Mat& img, const cv::Mat& noise_map);
// gauss_noise_map + gauss_noise_apply, fused where the map needs no resize: the same pixels.
cv::Mat gauss_noise(const cv::Mat& img, double std, double mean, std::uint64_t seed, bool per_channel,
                    double noise_scale_factor);

enum class Normalization { kStandard, kImage, kImagePerChannel, kMinMax, kMinMaxPerChannel };
// CV_32F. Standard: (i - mean * max) / (std * max) per channel through float32 tables (one
// mean/std used for every channel when the image has one channel or fewer values than
// channels). The per-image modes use the image's own statistics (mean/std unused), in double.
cv::Mat normalize_apply(const cv::Mat& img, const std::vector<double>& mean, const std::vector<double>& std,
                        double max_pixel_value, Normalization mode);
// The per-channel tables normalize_apply maps 0..255 through (the per-image modes read `img`).
using NormalizeTables = std::vector<std::array<float, 256>>;
NormalizeTables normalize_tables(const cv::Mat& img, const std::vector<double>& mean, const std::vector<double>& std,
                                 double max_pixel_value, Normalization mode);
// normalize_apply followed by HWC -> CHW in one pass: C planes of rows x cols floats at `out`.
void normalize_planes(const cv::Mat& img, const NormalizeTables& luts, float* out);

}  // namespace glassbox::data
