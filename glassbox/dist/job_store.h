// JobStore: the launcher's side of the rendezvous store. Node 0's launcher serves the TCPStore the
// workers meet at (as torchrun's agent does: the store outlives any worker, so a lost rank 0
// takes nothing down with it); every launcher reads and writes the job's failure records.
//
//   auto store = JobStore::serve(0, 60s);               // node 0 (port 0: a free port)
//   env MASTER_PORT = store->port(), TORCHELASTIC_USE_AGENT_STORE=True
//   store->report_failure(prefix, 1, "killed by SIGKILL");
//   if (auto f = store->failure(prefix, world)) ...     // {rank, message}
//
// Thread safety: one thread.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <c10/util/intrusive_ptr.h>

#include "glassbox/dist/world.h"

namespace c10d {
class Store;
}

namespace glassbox::dist {

// The key prefix of one job's records in the store ("glassbox/<run id>/<restart>").
std::string job_prefix(const WorldInfo& world);

class JobStore {
 public:
  static std::unique_ptr<JobStore> serve(int port, std::chrono::milliseconds timeout);
  static std::unique_ptr<JobStore> connect(const std::string& host, int port, std::chrono::milliseconds timeout);
  ~JobStore();

  int port() const { return port_; }
  // False once the store cannot be reached (node 0's launcher is gone).
  bool reachable() noexcept;
  void report_failure(const std::string& prefix, int rank, const std::string& message) noexcept;
  std::optional<std::pair<int, std::string>> failure(const std::string& prefix, int world_size) noexcept;

 private:
  JobStore() = default;
  c10::intrusive_ptr<c10d::Store> store_;
  int port_ = 0;
};

}  // namespace glassbox::dist
