// The per-channel sums behind the image features (features.cpp), on every served prediction:
// compiled with -O3 (the lanes become vector instructions) and, for FP32, cloned for AVX2.
// Internal to the monitor module.
#pragma once

#include <cstddef>
#include <cstdint>

namespace glassbox::monitor {

struct ChannelSums {
  double sum = 0, sq = 0, grad = 0;  // of the values, their squares, |adjacent differences|
  std::int64_t outside = 0;          // values outside [lo, hi]
};

// One H x W channel; false when a value is not finite (the sums are then meaningless).
bool channel_sums(const float* p, std::size_t h, std::size_t w, double lo, double hi, ChannelSums& out);
bool channel_sums(const double* p, std::size_t h, std::size_t w, double lo, double hi, ChannelSums& out);

}  // namespace glassbox::monitor
