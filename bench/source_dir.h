// The source tree the benchmarks were built from: their Python anchors (bench/*.py), the
// project's .venv and configs/ are found there unless an option names another place.
//
//   std::string root = glassbox::bench::default_source_dir();   // e.g. "/work/main"
#pragma once

#include <string>

namespace glassbox::bench {

std::string default_source_dir();

}  // namespace glassbox::bench
