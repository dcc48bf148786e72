#include "glassbox/core/version.h"

#include <torch/version.h>

namespace glassbox {

std::string torch_version() { return TORCH_VERSION; }

}  // namespace glassbox
