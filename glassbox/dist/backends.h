// The c10d backends, each built in a translation unit of its own: ProcessGroupGloo.hpp needs the
// gloo headers (Debian's libgloo-dev, headers only: the wheel's libtorch_cpu.so carries the gloo it
// was built with) and ProcessGroupNCCL.hpp the NCCL and CUDA headers of the nvidia-* wheels. No
// other file of glassbox includes them.
//
// Thread safety: reentrant.
#pragma once

#include <chrono>
#include <string>

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

namespace glassbox::dist {

// A Gloo backend whose TCP transport binds to `address` (an interface's IPv4/IPv6 address or a
// host name), or to the interface named by `interface` when that is not empty.
c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    std::chrono::milliseconds timeout, const std::string& address,
                                                    const std::string& interface);

// True when this build has the NCCL backend (a CUDA wheel with NCCL headers at build time).
bool nccl_built();
// An NCCL backend for the current CUDA device. Throws Unimplemented when !nccl_built().
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    std::chrono::milliseconds timeout);

}  // namespace glassbox::dist
