// simd: byte kernels of the augmentations with an AVX-512 VBMI path (chosen at run time, with a
// portable fallback), where the OpenCV glassbox links is slower than the one albumentations runs on.
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
// Whether the AVX-512 VBMI path runs on this CPU (for the benchmark's notes and the tests).
bool simd_vbmi_available();
// Test hook: false forces the portable path.
void simd_enable_for_testing(bool enabled);

}  // namespace glassbox::data
