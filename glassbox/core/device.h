// Device selection: "cpu", "cuda", "cuda:N" or "auto" (CUDA when available, else CPU).
//
//   torch::Device d = resolve_device("auto");
//   bool pin = wants_pinned_memory(d);  // true for CUDA: host batches go to pinned memory
//
// Thread safety: pure functions.
#pragma once

#include <string>

#include <c10/core/Device.h>

namespace glassbox {

// Throws InvalidArgument for an unknown spec, Unavailable when CUDA is asked for but absent.
c10::Device resolve_device(const std::string& spec);
bool cuda_available();
int cuda_device_count();
// Pinned host memory and non-blocking copies pay off only for CUDA targets.
bool wants_pinned_memory(const c10::Device& device);

}  // namespace glassbox
