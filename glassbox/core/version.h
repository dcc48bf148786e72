// Versions recorded in checkpoints and summaries.
#pragma once

#include <string>

namespace glassbox {

constexpr const char* kGlassboxVersion = "0.1.0";
// LibTorch's version string, e.g. "2.9.1".
std::string torch_version();

}  // namespace glassbox
