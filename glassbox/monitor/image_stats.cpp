// Tested through monitor_test (Features.*, Runtime.*).
#include "glassbox/monitor/image_stats.h"

#include <cmath>
#include <limits>

namespace glassbox::monitor {

namespace {

// One channel's sum, sum of squares, values outside [lo, hi] and sum of absolute differences of
// adjacent values: plain loops that the compiler vectorises (this file is built with -O3 and
// reassociation allowed). False when a value is not finite.
template <typename T>
__attribute__((always_inline)) inline bool channel_sums_impl(const T* p, std::size_t h, std::size_t w, T lo, T hi,
                                                             ChannelSums& out) {
  const std::size_t n = h * w;
  T sum = 0, sq = 0, bad = 0, outside = 0, g = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const T v = p[i];
    bad += std::abs(v) <= std::numeric_limits<T>::max() ? T(0) : T(1);  // NaN and infinities
    sum += v;
    sq += v * v;
    outside += (v < lo || v > hi) ? T(1) : T(0);
  }
  // Horizontal pairs: every neighbour in memory order, less the pairs that straddle two rows.
  for (std::size_t i = 0; i + 1 < n; ++i) g += std::abs(p[i + 1] - p[i]);
  for (std::size_t y = 1; y < h; ++y) g -= std::abs(p[y * w] - p[y * w - 1]);
  // Vertical pairs.
  for (std::size_t i = 0; i + w < n; ++i) g += std::abs(p[i + w] - p[i]);
  out.sum += sum;
  out.sq += sq;
  out.grad += g;
  out.outside = static_cast<std::int64_t>(outside);
  return bad == 0;
}

}  // namespace

// The served FP32 images: AVX2 where the processor has it.
__attribute__((target_clones("avx2", "default"))) bool channel_sums(const float* p, std::size_t h, std::size_t w,
                                                                    double lo, double hi, ChannelSums& out) {
  const auto bound = [](double v) {
    return std::isfinite(v) ? static_cast<float>(v) : std::numeric_limits<float>::infinity() * (v > 0 ? 1 : -1);
  };
  return channel_sums_impl<float>(p, h, w, bound(lo), bound(hi), out);
}

bool channel_sums(const double* p, std::size_t h, std::size_t w, double lo, double hi, ChannelSums& out) {
  return channel_sums_impl<double>(p, h, w, lo, hi, out);
}

}  // namespace glassbox::monitor
