// Tested by loader_test.cpp (reuse, the bound, and tensors released on other threads).
#include "glassbox/data/buffer_pool.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>

#include <torch/torch.h>

namespace glassbox::data {

namespace {

constexpr std::size_t kAlign = 64;

struct Pool {
  std::mutex mu;
  std::multimap<std::size_t, void*> free;  // capacity -> buffer
  std::size_t free_bytes = 0;

  void* take(std::size_t bytes) {
    {
      std::lock_guard lock(mu);
      // An exact fit only: batches of one loader all have one size, and a larger buffer handed to a
      // smaller batch would be held longer than needed.
      if (auto it = free.find(bytes); it != free.end()) {
        void* p = it->second;
        free.erase(it);
        free_bytes -= bytes;
        return p;
      }
    }
    void* p = std::aligned_alloc(kAlign, bytes);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }

  void give(void* p, std::size_t bytes) {
    {
      std::lock_guard lock(mu);
      if (free_bytes + bytes <= kMaxPooledBytes) {
        free.emplace(bytes, p);
        free_bytes += bytes;
        return;
      }
    }
    std::free(p);
  }
};

Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: tensors may be released during static destruction
  return *p;
}

}  // namespace

at::Tensor pooled_empty(const std::vector<std::int64_t>& sizes, at::ScalarType type) {
  std::int64_t n = 1;
  for (std::int64_t s : sizes) n *= s;
  const std::size_t used = static_cast<std::size_t>(n) * c10::elementSize(type);
  const std::size_t bytes = std::max(kAlign, (used + kAlign - 1) / kAlign * kAlign);
  void* p = pool().take(bytes);
  return torch::from_blob(
      p, sizes, [bytes](void* q) { pool().give(q, bytes); }, torch::TensorOptions().dtype(type));
}

std::size_t pooled_free_bytes() {
  std::lock_guard lock(pool().mu);
  return pool().free_bytes;
}

}  // namespace glassbox::data
