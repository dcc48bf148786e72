// SharedMemoryReduce: the gradient all-reduce of ranks that share one machine, through a shared
// memory segment instead of Gloo's TCP connections over loopback. Each rank writes its gradients
// (scaled by 1/N) into its own slot, sums its 1/N of the elements over every slot into a common
// result, and copies the whole result back; two barriers per chunk of `chunk_bytes`. Every rank
// ends with the same bits, the mean of the N gradients, summed in rank order.
//
//   auto shm = SharedMemoryReduce::create(group, 4 << 20);  // collective; null: not possible here
//   if (shm) shm->all_reduce_mean(bucket);                  // every rank, the same sizes
//
// create() returns null on every rank when a rank cannot map the segment (no /dev/shm, too
// small) or the ranks are on several machines; the caller stays on Gloo. The segment's name is
// unlinked as soon as every rank has mapped it, so nothing is left behind when a process dies.
// Waiting: a short spin, then a futex on the peer's counter (no core is burnt while a peer is
// still computing). A peer that exits (its pid is gone or a zombie) or a wait beyond the group's
// timeout becomes the group's one-line failure.
//
// all_reduce_mean_async queues the tensor for a helper thread and returns a future (what the
// Reducer's comm hook returns), so that backward goes on while a peer catches up; an error is
// set on the future, and every later exchange fails alike.
// Thread safety: one thread per rank issues the exchanges, in the same order on every rank, and
// does not mix the two forms while an asynchronous one is in flight.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue_inl.h>

#include "glassbox/dist/group.h"

namespace glassbox::dist {

class SharedMemoryReduce {
 public:
  static std::unique_ptr<SharedMemoryReduce> create(std::shared_ptr<Group> group, std::size_t chunk_bytes);
  ~SharedMemoryReduce();
  SharedMemoryReduce(const SharedMemoryReduce&) = delete;
  SharedMemoryReduce& operator=(const SharedMemoryReduce&) = delete;

  // In place: `t` (contiguous, floating point, CPU) becomes the mean over the ranks.
  void all_reduce_mean(at::Tensor& t, const char* what = "all-reduce of the gradients");
  // The same on the helper thread; the future holds `t` when it is done.
  c10::intrusive_ptr<c10::ivalue::Future> all_reduce_mean_async(at::Tensor t,
                                                                const char* what = "all-reduce of the gradients");

 private:
  SharedMemoryReduce(std::shared_ptr<Group> group, void* base, std::size_t bytes, std::size_t chunk_bytes,
                     std::vector<std::int64_t> pids);
  void barrier(const char* what);
  void check_peers(const char* what);
  void work_loop();
  struct Job {
    at::Tensor tensor;
    c10::intrusive_ptr<c10::ivalue::Future> done;
    const char* what = "";
  };

  std::shared_ptr<Group> group_;
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  std::size_t chunk_bytes_ = 0;
  std::vector<std::int64_t> pids_;  // of every rank
  std::uint32_t generation_ = 0;    // barriers passed (modulo 2^32)
  std::uint64_t calls_ = 0;         // exchanges made
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::atomic<bool> stopping_{false};
  std::exception_ptr failed_;  // helper thread only
  std::thread worker_;         // started by the first asynchronous exchange
};

}  // namespace glassbox::dist
