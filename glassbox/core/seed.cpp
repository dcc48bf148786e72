#include "glassbox/core/seed.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/utils.h>

namespace glassbox {

void seed_everything(std::uint64_t seed) {
  torch::manual_seed(seed);
  if (torch::cuda::is_available()) torch::cuda::manual_seed_all(seed);
}

at::Tensor cpu_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_cpu_rng_state(const at::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

std::vector<at::Tensor> cuda_rng_states() {
  std::vector<at::Tensor> out;
  if (!torch::cuda::is_available()) return out;
  const std::size_t n = torch::cuda::device_count();
  for (std::size_t i = 0; i < n; ++i) {
    auto gen = at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(i)));
    std::lock_guard<std::mutex> lock(gen.mutex());
    out.push_back(gen.get_state());
  }
  return out;
}

void set_cuda_rng_states(const std::vector<at::Tensor>& states) {
  if (!torch::cuda::is_available()) return;
  const auto n = std::min<std::size_t>(states.size(), torch::cuda::device_count());
  for (std::size_t i = 0; i < n; ++i) {
    auto gen = at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(i)));
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(states[i]);
  }
}

}  // namespace glassbox
