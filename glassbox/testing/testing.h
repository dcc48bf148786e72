// Helpers linked only by tests: temporary directories, the source tree, the project's Python.
//
//   fs::path dir = glassbox::testing::temp_dir("loader");   // fresh, empty
//   std::string out = glassbox::testing::run_python("tests/reference/schedulers.py", {"--json"});
//
// Thread safety: none; call from the test thread.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace glassbox::testing {

namespace fs = std::filesystem;

// The repository root (GB_SOURCE_DIR from CTest, or the compile-time source dir).
fs::path source_dir();
// A fresh, empty directory under the system temp dir, unique per process and name.
fs::path temp_dir(const std::string& name);
// Path to the project's Python (.venv/bin/python).
fs::path python();
// Runs `python <source_dir>/<script> args...` and returns its stdout; throws with stderr on failure.
std::string run_python(const std::string& script, const std::vector<std::string>& args = {});
// Runs a shell command; returns {exit status, stdout+stderr}.
std::pair<int, std::string> run_command(const std::string& command);
// An uncompressed little-endian 2x2 TIFF with `bands` 8-bit samples per pixel, written by hand
// (OpenCV's encoder refuses other counts than 1, 3 and 4): a multispectral tile.
std::string tiff_with_bands(int bands);
// Multi-process tests: runs this test binary's GoogleTest `filter` as ranks 0..world-1 (only
// `ranks` when not empty) with torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, a free MASTER_PORT) and GB_DIST_WORKER=1, each under
// a 120 s timeout, and waits for all. `extra_env`: more "NAME=value" words.
struct RankResult {
  int rc = -1;
  std::string output;
};
std::vector<RankResult> spawn_ranks(const std::string& filter, int world, const std::string& extra_env = "",
                                    std::vector<int> ranks = {});
// True in a process started by spawn_ranks.
bool is_rank_worker();

// Path of a built executable (e.g. "glassbox/cli/glassbox") under the build dir.
fs::path build_path(const std::string& relative);

}  // namespace glassbox::testing
