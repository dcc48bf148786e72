// Stand-ins for the few functions the fuzzed sources reference but no fuzz target reaches, so
// that the fuzz build compiles only what it fuzzes (tests/fuzz/CMakeLists.txt).
#include <cstdio>
#include <cstdlib>

#include "glassbox/monitor/runtime.h"

namespace glassbox::monitor {

// Referenced by EngineOptions::validate (glassbox/serve/engine/api.cpp), which no target calls.
void MonitorOptions::validate() const {
  std::fputs("fuzz_stubs: MonitorOptions::validate is not linked into the fuzz targets\n", stderr);
  std::abort();
}

}  // namespace glassbox::monitor
