// The NCCL backend (see backends.h): built against nccl.h of the nvidia-nccl wheel when the CMake
// configuration found it (GB_HAVE_NCCL), otherwise a stub that says so. Tested on a GPU by
// train/cuda_test.cpp (Cuda.DataParallelOnNccl, label cuda).
#include "glassbox/base/error.h"
#include "glassbox/dist/backends.h"

#ifdef GB_HAVE_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace glassbox::dist {

#ifdef GB_HAVE_NCCL
bool nccl_built() { return true; }

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
}
#else
bool nccl_built() { return false; }

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>&, int, int,
                                                    std::chrono::milliseconds) {
  GB_THROW(Unimplemented, "this glassbox build has no NCCL backend (LibTorch without CUDA, or no nccl.h at build time)",
           "train on CPU with Gloo (trainer.device = \"cpu\"), or rebuild against a CUDA wheel of torch");
}
#endif

}  // namespace glassbox::dist
