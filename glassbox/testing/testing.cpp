#include "glassbox/testing/testing.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace glassbox::testing {

fs::path source_dir() {
  if (const char* s = std::getenv("GB_SOURCE_DIR")) return s;
  return GB_DEFAULT_SOURCE_DIR;
}

fs::path build_path(const std::string& relative) {
  fs::path build = std::getenv("GB_BUILD_DIR") ? fs::path(std::getenv("GB_BUILD_DIR")) : fs::path(GB_DEFAULT_BUILD_DIR);
  return build / relative;
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("glassbox-test-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

fs::path python() { return source_dir() / ".venv" / "bin" / "python"; }

std::pair<int, std::string> run_command(const std::string& command) {
  std::string full = command + " 2>&1";
  FILE* pipe = ::popen(full.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + command);
  std::string out;
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, out};
}

std::string run_python(const std::string& script, const std::vector<std::string>& args) {
  std::string cmd = "'" + python().string() + "' '" + (source_dir() / script).string() + "'";
  for (const auto& a : args) cmd += " '" + a + "'";
  const fs::path err = temp_dir("python-stderr") / "stderr.txt";
  std::string full = cmd + " 2>'" + err.string() + "'";
  FILE* pipe = ::popen(full.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + cmd);
  std::string out;
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(pipe);
  if (status != 0) {
    std::string e;
    if (FILE* f = std::fopen(err.c_str(), "r")) {
      while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) e.append(buf.data(), n);
      std::fclose(f);
    }
    throw std::runtime_error("python failed (" + cmd + "): " + e);
  }
  return out;
}

}  // namespace glassbox::testing
