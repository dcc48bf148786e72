// Seeding and RNG state. Every random choice in glassbox flows from a seed in the options;
// the state of LibTorch's default generators is saved in checkpoints for bit-exact resume.
//
//   seed_everything(42);
//   at::Tensor s = cpu_rng_state();   // uint8 tensor
//   set_cpu_rng_state(s);
//
// Thread safety: touches process-global generators; call from the training thread.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace glassbox {

void seed_everything(std::uint64_t seed);
at::Tensor cpu_rng_state();
void set_cpu_rng_state(const at::Tensor& state);
// One state per visible CUDA device (empty without CUDA).
std::vector<at::Tensor> cuda_rng_states();
void set_cuda_rng_states(const std::vector<at::Tensor>& states);

}  // namespace glassbox
