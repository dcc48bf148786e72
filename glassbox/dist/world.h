// WorldInfo: where this process stands in a data-parallel job, read from the environment that
// torchrun (and `glassbox train --nproc`) gives every worker:
//
//   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK (the node), MASTER_ADDR,
//   MASTER_PORT (default 29500), TORCHELASTIC_RUN_ID, TORCHELASTIC_USE_AGENT_STORE
//
//   std::optional<WorldInfo> w = WorldInfo::from_env();   // nullopt: not launched as a worker
//   if (w && w->world_size > 1) ...
//
// A variable that is set but malformed (RANK=abc, RANK >= WORLD_SIZE) is an InvalidArgument naming
// it. Thread safety: plain data; from_env reads the process environment.
#pragma once

#include <optional>
#include <string>

namespace glassbox::dist {

struct WorldInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // The launcher (torchrun's agent, or glassbox's) serves the rendezvous store; otherwise rank 0
  // serves it.
  bool agent_store = false;
  std::string run_id = "none";

  // nullopt when WORLD_SIZE is not set (a plain process).
  static std::optional<WorldInfo> from_env();
  // The variables a launcher sets for this worker (names and values).
  std::string describe() const;  // "rank 1 of 2 (node 0, local rank 1)"
};

// A TCP port on the loopback interface that was free a moment ago (for a world of one, or tests
// and benchmarks that start their own ranks).
int free_local_port();

}  // namespace glassbox::dist
