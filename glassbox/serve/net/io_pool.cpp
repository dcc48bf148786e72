#include "glassbox/serve/net/io_pool.h"

#include <sched.h>

#include <cstdio>
#include <exception>

namespace glassbox::serve {

IoPool::IoPool(int n, std::chrono::microseconds busy_poll) : busy_poll_(busy_poll) {
  for (int i = 0; i < n; ++i) contexts_.push_back(std::make_unique<boost::asio::io_context>(1));
}

void IoPool::run() {
  for (auto& c : contexts_) {
    work_.emplace_back(c->get_executor());
    threads_.emplace_back([ioc = c.get(), spin = busy_poll_] {
      for (;;) {  // nothing escapes an I/O thread: a handler that throws is reported and the loop goes on
        try {
          loop(*ioc, spin);
          return;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "glassbox serve: I/O thread: %s\n", e.what());
        } catch (...) {
          std::fprintf(stderr, "glassbox serve: I/O thread: unknown exception\n");
        }
      }
    });
  }
}

void IoPool::stop() {
  work_.clear();
  for (auto& c : contexts_) c->stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void IoPool::loop(boost::asio::io_context& ioc, std::chrono::microseconds spin) {
  if (spin.count() == 0) {
    ioc.run();
    return;
  }
  using Clock = std::chrono::steady_clock;
  Clock::time_point last = Clock::now();
  while (!ioc.stopped()) {
    if (ioc.poll() > 0) {
      last = Clock::now();
    } else if (Clock::now() - last >= spin) {
      ioc.run_one();  // sleeps until a handler ran, or the context stopped
      last = Clock::now();
    } else {
      sched_yield();  // a model instance or another I/O thread made runnable on this core goes first
    }
  }
}

}  // namespace glassbox::serve
