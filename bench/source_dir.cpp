// The only object of gb_bench that sees the source tree's absolute path: a define on the whole
// library would make every object's ccache key depend on where the clone lives, and each fresh
// clone (CI) would recompile all of them.
#include "bench/source_dir.h"

namespace glassbox::bench {

std::string default_source_dir() { return GB_BENCH_SOURCE_DIR; }

}  // namespace glassbox::bench
