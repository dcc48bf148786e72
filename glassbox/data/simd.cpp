// Tested by augment_pixel_test.cpp (SimdKernels.*).
#include "glassbox/data/simd.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#if defined(__x86_64__)
#include <immintrin.h>

#include "glassbox/base/error.h"
#endif

namespace glassbox::data {

namespace {

std::atomic<bool> g_enabled{true};

#if defined(__x86_64__)
bool cpu_has_vbmi() {
  static const bool has =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi");
  return has;
}

// 64 bytes per step: two 128-entry lookups (vpermi2b) and a blend on the index's high bit.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void lut_vbmi(const std::uint8_t* src, std::uint8_t* dst,
                                                                     std::size_t n, const std::uint8_t table[256]) {
  const __m512i t0 = _mm512_loadu_si512(table);
  const __m512i t1 = _mm512_loadu_si512(table + 64);
  const __m512i t2 = _mm512_loadu_si512(table + 128);
  const __m512i t3 = _mm512_loadu_si512(table + 192);
  std::size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i x = _mm512_loadu_si512(src + i);
    const __m512i lo = _mm512_permutex2var_epi8(t0, x, t1);
    const __m512i hi = _mm512_permutex2var_epi8(t2, x, t3);
    _mm512_storeu_si512(dst + i, _mm512_mask_blend_epi8(_mm512_movepi8_mask(x), lo, hi));
  }
  if (i < n) {
    const __mmask64 m = (~0ULL) >> (64 - (n - i));
    const __m512i x = _mm512_maskz_loadu_epi8(m, src + i);
    const __m512i lo = _mm512_permutex2var_epi8(t0, x, t1);
    const __m512i hi = _mm512_permutex2var_epi8(t2, x, t3);
    _mm512_mask_storeu_epi8(dst + i, m, _mm512_mask_blend_epi8(_mm512_movepi8_mask(x), lo, hi));
  }
}

// One row mirrored: chunks of P = 64 / c whole pixels (P * c bytes) reversed with one vpermb.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void hflip_row_vbmi(const std::uint8_t* src, std::uint8_t* dst,
                                                                           int width, int c, const __m512i& index) {
  const int per = 64 / c;
  const __mmask64 m = (~0ULL) >> (64 - per * c);
  int j = 0;
  for (; j + per <= width; j += per) {
    // dst pixels [j, j + per) are src pixels [width - j - per, width - j), in reverse.
    const __m512i x = _mm512_maskz_loadu_epi8(m, src + static_cast<std::size_t>(width - j - per) * c);
    _mm512_mask_storeu_epi8(dst + static_cast<std::size_t>(j) * c, m, _mm512_permutex2var_epi8(x, index, x));
  }
  for (; j < width; ++j)
    std::memcpy(dst + static_cast<std::size_t>(j) * c, src + static_cast<std::size_t>(width - 1 - j) * c, c);
}

__attribute__((target("avx512f,avx512bw,avx512vbmi"))) void hflip_vbmi(const cv::Mat& in, cv::Mat& out) {
  const int c = in.channels();
  const int per = 64 / c;
  alignas(64) std::uint8_t idx[64] = {};
  for (int k = 0; k < per; ++k)
    for (int ch = 0; ch < c; ++ch) idx[k * c + ch] = static_cast<std::uint8_t>((per - 1 - k) * c + ch);
  const __m512i index = _mm512_load_si512(idx);
  for (int y = 0; y < in.rows; ++y)
    hflip_row_vbmi(in.ptr<std::uint8_t>(y), out.ptr<std::uint8_t>(y), in.cols, c, index);
}
#endif

}  // namespace

bool simd_vbmi_available() {
#if defined(__x86_64__)
  return cpu_has_vbmi();
#else
  return false;
#endif
}

void simd_enable_for_testing(bool enabled) { g_enabled = enabled; }

void lut_bytes(const std::uint8_t* src, std::uint8_t* dst, std::size_t n, const std::uint8_t table[256]) {
#if defined(__x86_64__)
  if (g_enabled && cpu_has_vbmi()) {
    lut_vbmi(src, dst, n, table);
    return;
  }
#endif
  for (std::size_t i = 0; i < n; ++i) dst[i] = table[src[i]];
}

cv::Mat hflip_bytes(const cv::Mat& img) {
  cv::Mat out;
#if defined(__x86_64__)
  if (g_enabled && cpu_has_vbmi() && img.depth() == CV_8U && img.channels() >= 1 && img.channels() <= 4 &&
      img.dims == 2) {
    out.create(img.rows, img.cols, img.type());
    hflip_vbmi(img, out);
    return out;
  }
#endif
  cv::flip(img, out, 1);
  return out;
}

namespace {

// acc[x] += k * src[x]: the one loop of the blur, cloned per instruction set (and vectorised:
// -O2's cost model would not, for the remainder loop it needs).
__attribute__((target_clones("avx512f", "avx2", "default"), optimize("O3"))) void multiply_add(
    float* __restrict acc, const float* __restrict src, float k, int n) {
  for (int x = 0; x < n; ++x) acc[x] += k * src[x];
}

}  // namespace

cv::Mat gaussian_blur_replicate(const cv::Mat& src, int ksize, double sigma) {
  GB_CHECK(src.type() == CV_32FC1 && !src.empty(), InvalidArgument, "gaussian_blur_replicate takes a CV_32FC1 image",
           "");
  if (ksize <= 0) ksize = cvRound(sigma * 4 * 2 + 1) | 1;
  GB_CHECK(ksize % 2 == 1, InvalidArgument, "the blur kernel size must be odd, got " << ksize, "");
  const cv::Mat kernel = cv::getGaussianKernel(ksize, sigma, CV_32F);
  const float* k = kernel.ptr<float>();
  const int r = ksize / 2, h = src.rows, w = src.cols;
  // Rows: each source row padded by replication, then ksize shifted multiply-adds.
  cv::Mat rows(h, w, CV_32FC1, cv::Scalar(0));
  std::vector<float> padded(static_cast<std::size_t>(w + 2 * r));
  for (int y = 0; y < h; ++y) {
    const float* in = src.ptr<float>(y);
    std::fill(padded.begin(), padded.begin() + r, in[0]);
    std::copy(in, in + w, padded.begin() + r);
    std::fill(padded.begin() + r + w, padded.end(), in[w - 1]);
    float* acc = rows.ptr<float>(y);
    for (int i = 0; i < ksize; ++i) multiply_add(acc, padded.data() + i, k[i], w);
  }
  // Columns: output row y sums rows y - r .. y + r of the row pass, the edge rows replicated.
  cv::Mat out(h, w, CV_32FC1, cv::Scalar(0));
  for (int y = 0; y < h; ++y) {
    float* acc = out.ptr<float>(y);
    for (int i = 0; i < ksize; ++i) multiply_add(acc, rows.ptr<float>(std::clamp(y + i - r, 0, h - 1)), k[i], w);
  }
  return out;
}

}  // namespace glassbox::data
