// WorldInfo (world.h). Tested in dist_test.cpp (World.*).
#include "glassbox/dist/world.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "glassbox/base/error.h"

namespace glassbox::dist {

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

int env_int(const char* name, int fallback, int min) {
  const char* v = env(name);
  if (v == nullptr) return fallback;
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  GB_CHECK(end != v && *end == '\0' && errno == 0 && x >= min && x <= 1'000'000, InvalidArgument,
           "environment variable " << name << "=\"" << v << "\" is not a whole number >= " << min,
           "set it as torchrun does (RANK, WORLD_SIZE, LOCAL_RANK, ...) or unset it");
  return static_cast<int>(x);
}

}  // namespace

std::optional<WorldInfo> WorldInfo::from_env() {
  if (env("WORLD_SIZE") == nullptr) return std::nullopt;
  WorldInfo w;
  w.world_size = env_int("WORLD_SIZE", 1, 1);
  w.rank = env_int("RANK", 0, 0);
  GB_CHECK(w.rank < w.world_size, InvalidArgument, "RANK=" << w.rank << " is not below WORLD_SIZE=" << w.world_size,
           "ranks count from 0 to WORLD_SIZE - 1");
  GB_CHECK(w.world_size == 1 || env("RANK") != nullptr, InvalidArgument,
           "WORLD_SIZE=" << w.world_size << " is set but RANK is not", "set RANK for every worker (0 .. WORLD_SIZE-1)");
  w.local_rank = env_int("LOCAL_RANK", w.rank, 0);
  w.local_world_size = env_int("LOCAL_WORLD_SIZE", w.world_size, 1);
  GB_CHECK(w.local_rank < w.local_world_size, InvalidArgument,
           "LOCAL_RANK=" << w.local_rank << " is not below LOCAL_WORLD_SIZE=" << w.local_world_size,
           "local ranks count from 0 to LOCAL_WORLD_SIZE - 1");
  w.node_rank = env_int("GROUP_RANK", w.rank / w.local_world_size, 0);
  if (const char* a = env("MASTER_ADDR")) w.master_addr = a;
  w.master_port = env_int("MASTER_PORT", 29500, 1);
  GB_CHECK(w.master_port <= 65535, InvalidArgument, "MASTER_PORT=" << w.master_port << " is not a TCP port",
           "use a port between 1 and 65535");
  if (const char* s = env("TORCHELASTIC_USE_AGENT_STORE"))
    w.agent_store = std::string(s) == "True" || std::string(s) == "1";
  if (const char* id = env("TORCHELASTIC_RUN_ID")) w.run_id = id;
  return w;
}

std::string WorldInfo::describe() const {
  return "rank " + std::to_string(rank) + " of " + std::to_string(world_size) + " (node " + std::to_string(node_rank) +
         ", local rank " + std::to_string(local_rank) + ")";
}

int free_local_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  GB_CHECK(fd >= 0, Unavailable, "no socket for a free port", "check the process's file descriptor limit");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  GB_CHECK(ok, Unavailable, "no free TCP port on the loopback interface", "free some ports");
  return ntohs(a.sin_port);
}

}  // namespace glassbox::dist
