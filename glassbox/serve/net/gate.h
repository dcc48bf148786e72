// Gate: lets callbacks from other threads (the engine's) post into an io_context only while it
// exists. enter() fails once the gate is closed; close() waits for the callers inside to leave.
//
//   if (!gate->enter()) return;          // the server is gone: drop the answer
//   net::post(executor, ...);
//   gate->leave();
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <atomic>
#include <thread>

namespace glassbox::serve {

class Gate {
 public:
  bool enter() {
    users_.fetch_add(1);
    if (open_.load()) return true;
    users_.fetch_sub(1);
    return false;
  }
  void leave() { users_.fetch_sub(1); }
  void close() {
    open_.store(false);
    while (users_.load() != 0) std::this_thread::yield();
  }

 private:
  std::atomic<int> users_{0};
  std::atomic<bool> open_{true};
};

}  // namespace glassbox::serve
