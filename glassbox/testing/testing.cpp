#include "glassbox/testing/testing.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
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

namespace {

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

}  // namespace

bool is_rank_worker() { return std::getenv("GB_DIST_WORKER") != nullptr; }

std::vector<RankResult> spawn_ranks(const std::string& filter, int world, const std::string& extra_env,
                                    std::vector<int> ranks) {
  if (ranks.empty())
    for (int r = 0; r < world; ++r) ranks.push_back(r);
  std::string tag = filter;
  for (char& c : tag)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  const fs::path dir = temp_dir("ranks_" + tag);
  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  const int port = free_port();
  std::string cmd;
  for (int r : ranks) {
    const std::string base = (dir / std::to_string(r)).string();
    cmd += "( GB_DIST_WORKER=1 RANK=" + std::to_string(r) + " LOCAL_RANK=" + std::to_string(r) +
           " WORLD_SIZE=" + std::to_string(world) + " LOCAL_WORLD_SIZE=" + std::to_string(world) +
           " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " + extra_env + " timeout 120 '" + exe +
           "' --gtest_filter='" + filter + "' > '" + base + ".out' 2>&1; echo $? > '" + base + ".rc' ) & ";
  }
  cmd += "wait";
  run_command(cmd);
  std::vector<RankResult> out(static_cast<std::size_t>(world));
  for (int r : ranks) {
    std::ifstream rc(dir / (std::to_string(r) + ".rc"));
    rc >> out[static_cast<std::size_t>(r)].rc;
    std::ifstream o(dir / (std::to_string(r) + ".out"));
    std::stringstream ss;
    ss << o.rdbuf();
    out[static_cast<std::size_t>(r)].output = ss.str();
  }
  return out;
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

// An uncompressed little-endian 2x2 TIFF with `bands` 8-bit samples per pixel, written by hand
// (OpenCV's encoder refuses other counts than 1, 3 and 4).
std::string tiff_with_bands(int bands) {
  std::string t("II*\0", 4);
  const auto u16 = [&](int v) { t.push_back(static_cast<char>(v & 0xFF)), t.push_back(static_cast<char>(v >> 8)); };
  const auto u32 = [&](std::uint32_t v) {
    for (int i = 0; i < 4; ++i) t.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  };
  const int entries = 10;
  const std::uint32_t ifd = 8, bits_at = ifd + 2 + 12 * entries + 4, data_at = bits_at + 2 * bands;
  u32(ifd);
  u16(entries);
  const auto entry = [&](int tag, int type, std::uint32_t count, std::uint32_t value) {
    u16(tag), u16(type), u32(count);
    if (type == 3 && count == 1) {
      u16(static_cast<int>(value)), u16(0);
    } else {
      u32(value);
    }
  };
  entry(256, 3, 1, 2);                                        // width
  entry(257, 3, 1, 2);                                        // height
  entry(258, 3, static_cast<std::uint32_t>(bands), bits_at);  // bits per sample (an array)
  entry(259, 3, 1, 1);                                        // no compression
  entry(262, 3, 1, bands >= 3 ? 2 : 1);                       // RGB or min-is-black
  entry(273, 4, 1, data_at);                                  // strip offset
  entry(277, 3, 1, static_cast<std::uint32_t>(bands));        // samples per pixel
  entry(278, 3, 1, 2);                                        // rows per strip
  entry(279, 4, 1, static_cast<std::uint32_t>(4 * bands));    // strip bytes
  entry(284, 3, 1, 1);                                        // interleaved
  u32(0);
  for (int b = 0; b < bands; ++b) u16(8);
  for (int i = 0; i < 4 * bands; ++i) t.push_back(static_cast<char>(10 * i));
  return t;
}

}  // namespace glassbox::testing
