#include "glassbox/core/device.h"

#include <torch/cuda.h>

#include "glassbox/base/error.h"

namespace glassbox {

bool cuda_available() { return torch::cuda::is_available(); }
int cuda_device_count() { return static_cast<int>(torch::cuda::device_count()); }

c10::Device resolve_device(const std::string& spec) {
  if (spec == "cpu") return c10::Device(c10::kCPU);
  if (spec == "auto") return cuda_available() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  if (spec.rfind("cuda", 0) == 0) {
    int index = 0;
    if (spec.size() > 4) {
      GB_CHECK(spec[4] == ':' && spec.size() > 5, InvalidArgument, "unknown device \"" << spec << "\"",
               "use cpu, cuda, cuda:N or auto");
      try {
        index = std::stoi(spec.substr(5));
      } catch (const std::exception&) {
        GB_THROW(InvalidArgument, "unknown device \"" << spec << "\"", "use cpu, cuda, cuda:N or auto");
      }
    }
    GB_CHECK(cuda_available(), FailedPrecondition,
             "device \"" << spec << "\" requested but no CUDA device is available",
             "use trainer.device=cpu or auto, or install a CUDA build of torch");
    GB_CHECK(index >= 0 && index < cuda_device_count(), InvalidArgument,
             "device \"" << spec << "\": only " << cuda_device_count() << " CUDA device(s)",
             "pick an index below the count");
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
  }
  GB_THROW(InvalidArgument, "unknown device \"" << spec << "\"", "use cpu, cuda, cuda:N or auto");
}

bool wants_pinned_memory(const c10::Device& device) { return device.is_cuda(); }

}  // namespace glassbox
