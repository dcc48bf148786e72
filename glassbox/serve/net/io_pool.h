// IoPool: the I/O threads of the HTTP and gRPC front ends, one single-threaded io_context each. A
// connection lives on one of them (round-robin), so its handlers never race and no strand or
// cross-thread hand-off is needed on the request path.
//
//   IoPool pool(2, std::chrono::microseconds(200));
//   net::io_context& ioc = pool.next();   // where a new connection goes
//   pool.run();                            // start the threads
//   pool.stop();                           // stop the contexts, join the threads
//
// Busy polling: after its last handler a thread polls for `busy_poll` before it sleeps in
// epoll_wait. While it is outside io_context::run the scheduler counts its reactor as
// interrupted, so a reply an engine thread posts is a queue push: no epoll_ctl and no wake-up of
// a sleeping core, which costs the waker up to ~50 us on some VMs (docs/serving.md, Performance).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

namespace glassbox::serve {

class IoPool {
 public:
  // n threads; busy_poll 0: a thread sleeps as soon as it has nothing to do (plain run()).
  IoPool(int n, std::chrono::microseconds busy_poll);
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  boost::asio::io_context& first() { return *contexts_.front(); }
  boost::asio::io_context& next() {
    return *contexts_[next_.fetch_add(1, std::memory_order_relaxed) % contexts_.size()];
  }

  void run();
  void stop();

 private:
  // run(), with the busy polling described above.
  static void loop(boost::asio::io_context& ioc, std::chrono::microseconds spin);

  std::vector<std::unique_ptr<boost::asio::io_context>> contexts_;
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  std::atomic<std::size_t> next_{0};
  std::chrono::microseconds busy_poll_;
};

}  // namespace glassbox::serve
