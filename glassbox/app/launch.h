// launch_workers: `glassbox train --nproc N` — what torchrun does for one node of a job: serve the
// rendezvous store (node 0), start N workers with torchrun's environment (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID,
// TORCHELASTIC_USE_AGENT_STORE), watch them, and end the job as one.
//
//   LaunchOptions o; o.nproc = 2; o.command = {"/proc/self/exe", "train", "cfg.toml"};
//   int status = launch_workers(o, std::cerr);   // 0, 130 (interrupted) or a failure's status
//
// Faults: when a worker dies (a signal, a non-zero exit) the launcher records it in the store
// (the other ranks' errors then name it), prints one line naming the rank and the cause, gives
// the others `grace` seconds to stop on their own, then SIGTERM, then (5 s later) SIGKILL. A
// worker whose launcher dies is killed too (PR_SET_PDEATHSIG), and launchers of other nodes end
// their workers when a rank reports a failure or node 0's store goes away: no orphans.
// SIGINT/SIGTERM to the launcher are passed on to the workers (they save last.ckpt and stop).
// Thread safety: one launch per process; installs signal handlers while it runs.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace glassbox::app {

struct LaunchOptions {
  int nproc = 1;      // workers on this node
  int nnodes = 1;     // nodes in the job
  int node_rank = 0;  // this node
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port (one node only; several nodes need a known one)
  std::string run_id = "glassbox";
  std::vector<std::string> command;  // each worker's argv (command[0]: the executable)
  double timeout = 1800;             // seconds to reach node 0's store
  double grace = 10;                 // seconds the others get to stop after a worker failed
};

// Checks the options (InvalidArgument naming the flag).
void validate(const LaunchOptions& options);
int launch_workers(const LaunchOptions& options, std::ostream& err);

}  // namespace glassbox::app
