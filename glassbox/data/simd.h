// simd: kernels of the augmentations with AVX-512 paths (chosen at run time, with a portable
// fallback), where the OpenCV glassbox links is slower than the one albumentations runs on.
//
//   lut_bytes(src, dst, n, table);          // dst[i] = table[src[i]], any n, in place allowed
//   cv::Mat f = hflip_bytes(img);           // 8-bit, 1..4 channels: each row reversed by pixel
//
// Both give exactly the bytes of the scalar definition (tests compare them on every path).
// Thread safety: free functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include <opencv2/core/mat.hpp>

namespace glassbox::data {

void lut_bytes(const std::uint8_t* src, std::uint8_t* dst, std::size_t n, const std::uint8_t table[256]);
// An 8-bit image (1, 2, 3 or 4 channels) mirrored left-right; other types go to cv::flip.
cv::Mat hflip_bytes(const cv::Mat& img);
// cv::GaussianBlur(src, dst, {ksize, ksize}, sigma, sigma, BORDER_REPLICATE) of a CV_32FC1 image
// (ksize 0: OpenCV's choice for float images, round(8 sigma + 1) | 1), with OpenCV's kernel, as
// two passes of contiguous multiply-adds compiled for AVX-512, AVX2 and plain x86-64 (picked at
// load time). Equal to OpenCV's within float rounding (the sums run in another order); much
// faster for the wide kernels of ElasticTransform (sigma 50: 401 taps).
cv::Mat gaussian_blur_replicate(const cv::Mat& src, int ksize, double sigma);
// Whether the AVX-512 VBMI path runs on this CPU (for the benchmark's notes and the tests).
bool simd_vbmi_available();
// Test hook: false forces the portable path.
void simd_enable_for_testing(bool enabled);

}  // namespace glassbox::data
