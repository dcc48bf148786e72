// The only translation unit that includes gloo (see backends.h). It must emit no gloo code of its
// own: Debian's gloo headers are older than the gloo inside libtorch_cpu.so, so everything here
// calls into the wheel (checked by the dist_gloo_symbols test with nm).
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "glassbox/dist/backends.h"

namespace glassbox::dist {

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    std::chrono::milliseconds timeout, const std::string& address,
                                                    const std::string& interface) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(interface.empty() ? c10d::ProcessGroupGloo::createDeviceForHostname(address)
                                               : c10d::ProcessGroupGloo::createDeviceForInterface(interface));
  // Two threads run the collectives (as torch.distributed's default for one device).
  options->threads = 2;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

}  // namespace glassbox::dist
