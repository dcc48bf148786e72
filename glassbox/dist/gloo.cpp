// The only translation unit that includes gloo (see backends.h). It must emit no gloo code of its
// own: Debian's gloo headers are older than the gloo inside libtorch_cpu.so, so everything here
// calls into the wheel (checked with nm by World.GlooUnitDefinesNoGlooCode in dist_test.cpp;
// the Gloo backend itself is exercised by every Dist.* test).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "glassbox/dist/backends.h"

namespace glassbox::dist {

namespace {

// Gloo prints "[Gloo] Rank r is connected to n peer ranks" on stdout when it connects, whatever
// the log level; stdout belongs to the program (`--json`), so that line goes to /dev/null.
class QuietStdout {
 public:
  QuietStdout() {
    std::cout.flush();
    std::fflush(stdout);
    saved_ = ::dup(STDOUT_FILENO);
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (saved_ >= 0 && null >= 0) ::dup2(null, STDOUT_FILENO);
    if (null >= 0) ::close(null);
  }
  ~QuietStdout() {
    std::cout.flush();
    std::fflush(stdout);
    if (saved_ >= 0) {
      ::dup2(saved_, STDOUT_FILENO);
      ::close(saved_);
    }
  }
  QuietStdout(const QuietStdout&) = delete;
  QuietStdout& operator=(const QuietStdout&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    std::chrono::milliseconds timeout, const std::string& address,
                                                    const std::string& interface) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(interface.empty() ? c10d::ProcessGroupGloo::createDeviceForHostname(address)
                                               : c10d::ProcessGroupGloo::createDeviceForInterface(interface));
  // Two threads run the collectives (as torch.distributed's default for one device).
  options->threads = 2;
  QuietStdout quiet;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

}  // namespace glassbox::dist
