// Group: a process group of a data-parallel job on c10d — the TCPStore rendezvous, a Gloo (CPU)
// or NCCL (CUDA) backend, and the collectives glassbox needs, with failures turned into one line
// that names the rank at fault.
//
//   auto world = WorldInfo::from_env();                     // torchrun's variables
//   auto group = Group::connect(*world, {.timeout = 60s});   // every rank calls it
//   group->all_reduce(tensors);                               // sum, in place
//   at::Tensor all = group->all_gather_rows(mine);            // rows of every rank, in rank order
//
// Rendezvous: the store at MASTER_ADDR:MASTER_PORT is served by the launcher (agent_store) or by
// rank 0; everyone waits there at most `timeout`. Gloo binds to the interface that routes to
// MASTER_ADDR (GLOO_SOCKET_IFNAME overrides it).
//
// Failures: every rank publishes a heartbeat in the store. When a collective fails (a peer's
// connection closed) or times out (`timeout`, the process group's), the error names the ranks
// whose heartbeat stopped, the ranks that reported an error of their own (report_failure), or the
// ranks that are alive but behind — kUnavailable for a lost rank, kDeadlineExceeded for a hang.
//
// Thread safety: one thread issues the collectives (the Reducer's autograd hooks run in
// backward, on that thread's behalf); rank()/size() from anywhere.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/intrusive_ptr.h>

#include "glassbox/dist/world.h"

namespace c10d {
class ProcessGroup;
class Store;
class Work;
}  // namespace c10d

namespace glassbox::dist {

enum class ReduceOp { kSum, kMax, kMin };

struct GroupOptions {
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};  // rendezvous and every collective
  c10::Device device{c10::kCPU};                                // CPU: Gloo; CUDA: NCCL (and Gloo for CPU tensors)
};

class Group {
 public:
  static std::shared_ptr<Group> connect(const WorldInfo& world, const GroupOptions& options);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const { return world_.rank; }
  int size() const { return world_.world_size; }
  const WorldInfo& world() const { return world_; }
  // Where the backend's collectives want their tensors (the training device).
  c10::Device device() const { return options_.device; }
  std::chrono::milliseconds timeout() const { return options_.timeout; }
  const char* backend_name() const;  // "gloo" or "nccl"

  // In place on every rank. `what` names the collective in errors ("all-reduce of the loss").
  void all_reduce(std::vector<at::Tensor>& tensors, ReduceOp op = ReduceOp::kSum, const char* what = "all-reduce");
  void broadcast(std::vector<at::Tensor>& tensors, int root = 0, const char* what = "broadcast");
  // The rows (dim 0) of `local` from every rank, concatenated in rank order; ranks may hold
  // different numbers of rows (the rest of the shape and the dtype must agree; a rank with no
  // rows may pass any empty tensor).
  at::Tensor all_gather_rows(const at::Tensor& local, const char* what = "all-gather");
  void barrier(const char* what = "barrier");
  // Any rank's flag / the largest value, on every rank (a CPU round of the default backend).
  bool any(bool local, const char* what = "agreement");
  std::int64_t max(std::int64_t local, const char* what = "agreement");

  // Waits for a collective started on the native group (the Reducer's), converting failures.
  void wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what);
  // Converts a failure that escaped from c10d (e.g. out of the Reducer) into the one-line error.
  [[noreturn]] void fail(const char* what, const std::exception& e);
  // Inside a catch handler: fail() when a peer is at fault (gone, stuck, or reported an error) or
  // the error is a timeout, otherwise rethrows the exception being handled (a local error).
  [[noreturn]] void fail_or_rethrow(const char* what, const std::exception& e);
  // Tells the other ranks why this rank stops (they name it in their error).
  void report_failure(const std::string& message) noexcept;

  const c10::intrusive_ptr<c10d::ProcessGroup>& native() const;

 private:
  Group(WorldInfo world, GroupOptions options);
  void heartbeat_loop();
  [[noreturn]] void raise(const std::string& message, bool timed_out);
  // The one-line description of a failure; *peer says whether another rank (or the store) is at
  // fault or the collective timed out.
  std::string diagnose(const char* what, const std::string& error, bool* timed_out, bool* peer);
  template <class F>
  void run(const char* what, F&& start);

  WorldInfo world_;
  GroupOptions options_;
  struct Native;
  std::unique_ptr<Native> native_;
  std::atomic<std::int64_t> entered_{0};  // collectives this rank has started
  std::atomic<bool> stop_{false};
  std::thread heartbeat_;
};

// The local address this machine uses to reach `host` (the source address of a route to it):
// what Gloo binds to so that peers on other nodes can connect. "127.0.0.1" for a loopback host.
std::string local_address_towards(const std::string& host);

}  // namespace glassbox::dist
