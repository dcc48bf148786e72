// buffer_pool: CPU tensors whose memory is recycled when the last reference goes.
//
//   at::Tensor batch = pooled_empty({32, 3, 224, 224});   // float32, uninitialised
//
// A batch of images is tens of MB. Fresh memory for every batch costs one page fault per 4 KiB
// page (the kernel zeroes each page on first touch), which for an image loader is as much as a
// fifth of the time it spends; and glibc's heuristics (a dynamic mmap threshold, per-thread arenas
// that grow and shrink) make it vary from run to run. Tensors from here keep their buffer in a
// process-wide pool when released, for the next batch of the same size.
// Bounded: at most kMaxPooledBytes of free buffers are kept; beyond that they are freed.
// Thread safety: pooled_empty may be called, and its tensors released, from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace glassbox::data {

inline constexpr std::size_t kMaxPooledBytes = std::size_t{256} << 20;

at::Tensor pooled_empty(const std::vector<std::int64_t>& sizes, at::ScalarType type = at::kFloat);

// Free bytes the pool holds now (for tests).
std::size_t pooled_free_bytes();

}  // namespace glassbox::data
