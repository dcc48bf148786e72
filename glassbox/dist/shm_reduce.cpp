// SharedMemoryReduce (shm_reduce.h). Tested in dist_test.cpp (Dist.SharedMemoryReduce*) and, as
// DataParallel's transport on one machine, by every multi-rank test.
#include "glassbox/dist/shm_reduce.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <c10/util/ParallelGuard.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::dist {

namespace {

constexpr std::size_t kLine = 128;      // per rank: its barrier counter, then what it exchanges (CallInfo)
constexpr std::size_t kNameBytes = 64;  // the segment's name, broadcast from rank 0
constexpr std::size_t kAlign = 4096;

std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

// Layout: N barrier counters (a cache line each), the result chunk, then N slots.
std::size_t header_bytes(int n) { return round_up(static_cast<std::size_t>(n) * kLine, kAlign); }

// A 32-bit counter, so that a futex can wait on it; generations are compared modulo 2^32.
std::atomic<std::uint32_t>* counter(void* base, int r) {
  return reinterpret_cast<std::atomic<std::uint32_t>*>(static_cast<char*>(base) + static_cast<std::size_t>(r) * kLine);
}
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
              std::atomic<std::uint32_t>::is_always_lock_free);

bool reached(std::uint32_t value, std::uint32_t gen) { return static_cast<std::int32_t>(value - gen) >= 0; }

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Shared (not process-private) futexes: the waiters are in other processes.
void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t seen, std::chrono::microseconds limit) {
  timespec ts{static_cast<time_t>(limit.count() / 1000000), static_cast<long>((limit.count() % 1000000) * 1000)};
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<std::uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Whether process `pid` is gone (or a zombie: dead, not yet reaped).
bool process_gone(std::int64_t pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const auto close = stat.rfind(')');  // "pid (comm) S ...": the state follows the command name
  return close != std::string::npos && close + 2 < stat.size() && (stat[close + 2] == 'Z' || stat[close + 2] == 'X');
}

std::string random_name() {
  std::random_device rd;
  const std::uint64_t r = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  char buf[kNameBytes];
  std::snprintf(buf, sizeof buf, "/glassbox-reduce-%d-%016llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(r));
  return buf;
}

}  // namespace

std::unique_ptr<SharedMemoryReduce> SharedMemoryReduce::create(std::shared_ptr<Group> group, std::size_t chunk_bytes) {
  const int n = group->size();
  const WorldInfo& w = group->world();
  // Every rank decides alike (the same environment): one machine, more than one rank.
  if (n < 2 || w.local_world_size != w.world_size) return nullptr;
  chunk_bytes = round_up(std::max<std::size_t>(chunk_bytes, kAlign), kAlign);
  const std::size_t bytes = header_bytes(n) + chunk_bytes * static_cast<std::size_t>(n + 1);

  // Rank 0 creates the segment and sends its name; the others open it. Whatever happens (a
  // collective that throws included), the name is unlinked and a failed mapping released.
  struct Segment {
    std::string name;
    bool created = false;
    void* base = MAP_FAILED;
    std::size_t bytes = 0;
    bool keep = false;
    ~Segment() {
      if (created) ::shm_unlink(name.c_str());
      if (!keep && base != MAP_FAILED) ::munmap(base, bytes);
    }
  } seg;
  seg.bytes = bytes;
  bool ok = true;
  at::Tensor name_bytes = torch::zeros({static_cast<std::int64_t>(kNameBytes)}, torch::kUInt8);
  if (group->rank() == 0) {
    try {
      seg.name = random_name();
      const int fd = ::shm_open(seg.name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
      seg.created = fd >= 0;
      // posix_fallocate reserves the pages now: a full /dev/shm fails here, not as a SIGBUS later.
      ok = fd >= 0 && ::ftruncate(fd, static_cast<off_t>(bytes)) == 0 &&
           ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)) == 0;
      if (ok) seg.base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      ok = ok && seg.base != MAP_FAILED;
      if (fd >= 0) ::close(fd);
      if (ok) std::memcpy(name_bytes.data_ptr(), seg.name.c_str(), seg.name.size());
    } catch (const std::exception&) {
      ok = false;  // the others learn it from the empty name
    }
  }
  std::vector<at::Tensor> v{name_bytes};
  group->broadcast(v, 0, "exchange of the shared-memory segment's name");
  if (group->rank() != 0) {
    const std::string name(static_cast<const char*>(name_bytes.data_ptr()),
                           ::strnlen(static_cast<const char*>(name_bytes.data_ptr()), kNameBytes));
    ok = !name.empty();
    if (ok) {
      const int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
      struct stat st {};
      if (fd >= 0 && ::fstat(fd, &st) == 0 && static_cast<std::size_t>(st.st_size) >= bytes)
        seg.base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (fd >= 0) ::close(fd);
      ok = seg.base != MAP_FAILED;
    }
  }
  const bool all_ok = !group->any(!ok, "agreement on the shared-memory segment");
  at::Tensor pid = torch::full({1, 1}, static_cast<std::int64_t>(::getpid()), torch::kLong);
  const at::Tensor pids = group->all_gather_rows(pid, "exchange of the ranks' process ids");
  if (!all_ok) return nullptr;
  seg.keep = true;
  void* base = seg.base;
  std::vector<std::int64_t> p(pids.data_ptr<std::int64_t>(), pids.data_ptr<std::int64_t>() + pids.numel());
  return std::unique_ptr<SharedMemoryReduce>(
      new SharedMemoryReduce(std::move(group), base, bytes, chunk_bytes, std::move(p)));
}

SharedMemoryReduce::SharedMemoryReduce(std::shared_ptr<Group> group, void* base, std::size_t bytes,
                                       std::size_t chunk_bytes, std::vector<std::int64_t> pids)
    : group_(std::move(group)), base_(base), bytes_(bytes), chunk_bytes_(chunk_bytes), pids_(std::move(pids)) {}

SharedMemoryReduce::~SharedMemoryReduce() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

void SharedMemoryReduce::check_peers(const char* what) {
  for (int r = 0; r < group_->size(); ++r) {
    if (r == group_->rank() || !process_gone(pids_[static_cast<std::size_t>(r)])) continue;
    group_->fail(what, std::runtime_error("rank " + std::to_string(r) + " (process " +
                                          std::to_string(pids_[static_cast<std::size_t>(r)]) + ") exited"));
  }
}

void SharedMemoryReduce::barrier(const char* what) {
  using Clock = std::chrono::steady_clock;
  const std::uint32_t gen = ++generation_;
  counter(base_, group_->rank())->store(gen, std::memory_order_release);
  futex_wake_all(counter(base_, group_->rank()));
  const auto start = Clock::now();
  for (int r = 0; r < group_->size(); ++r) {
    std::atomic<std::uint32_t>* c = counter(base_, r);
    // A short spin for a peer that is microseconds away; otherwise sleep on the peer's counter
    // (it wakes us when it arrives), checking every 0.1 s that it still exists.
    for (int i = 0; i < 200 && !reached(c->load(std::memory_order_acquire), gen); ++i) cpu_relax();
    for (std::uint32_t seen = c->load(std::memory_order_acquire); !reached(seen, gen);
         seen = c->load(std::memory_order_acquire)) {
      futex_wait(c, seen, std::chrono::milliseconds(100));
      if (reached(c->load(std::memory_order_acquire), gen)) break;
      GB_CHECK(!stopping_.load(), Unavailable, "the shared-memory all-reduce was abandoned: training stopped", "");
      check_peers(what);
      if (Clock::now() - start > group_->timeout())
        group_->fail(what, std::runtime_error("timed out after " + std::to_string(group_->timeout().count() / 1000) +
                                              " s waiting for rank " + std::to_string(r)));
    }
  }
}

c10::intrusive_ptr<c10::ivalue::Future> SharedMemoryReduce::all_reduce_mean_async(at::Tensor t, const char* what) {
  auto done = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!worker_.joinable()) worker_ = std::thread([this] { work_loop(); });
    queue_.push_back({std::move(t), done, what});
  }
  cv_.notify_one();
  return done;
}

void SharedMemoryReduce::work_loop() {
  // The sums run serially here: the training thread's ops own the intra-op threads meanwhile.
  const c10::ParallelGuard serial(true);
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_.load() || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      if (failed_) std::rethrow_exception(failed_);  // the exchange is out of step: every later one fails alike
      all_reduce_mean(job.tensor, job.what);
    } catch (...) {
      failed_ = std::current_exception();
      job.done->setErrorIfNeeded(failed_);
      continue;
    }
    job.done->markCompleted(c10::IValue(job.tensor));
  }
}

namespace {

// What a rank is about to exchange, beside its barrier counter: the ranks must agree.
struct CallInfo {
  std::uint64_t call;
  std::int64_t numel;
  std::int64_t dtype;
};

CallInfo* call_info(void* base, int r) {
  return reinterpret_cast<CallInfo*>(static_cast<char*>(base) + static_cast<std::size_t>(r) * kLine + 8);
}

// Plain loops for the common types (no intra-op threads: this may run beside backward). The
// arithmetic is ATen's: x * float(1/N), then a sum in rank order.
template <class T>
void scale_into(T* out, const T* in, std::int64_t n, T s) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = in[i] * s;
}

template <class T>
void sum_into(T* out, const std::vector<const T*>& in, std::int64_t n) {
  if (in.size() == 2) {
    const T* a = in[0];
    const T* b = in[1];
    for (std::int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    T acc = in[0][i] + in[1][i];
    for (std::size_t r = 2; r < in.size(); ++r) acc += in[r][i];
    out[i] = acc;
  }
}

}  // namespace

void SharedMemoryReduce::all_reduce_mean(at::Tensor& t, const char* what) {
  GB_CHECK(t.is_contiguous() && t.device().is_cpu() && at::isFloatingType(t.scalar_type()), Internal,
           "the shared-memory all-reduce takes contiguous floating-point CPU tensors", "use the Gloo backend");
  torch::NoGradGuard no_grad;
  const int n = group_->size();
  const int me = group_->rank();
  const auto dtype = t.scalar_type();
  const auto options = torch::TensorOptions().dtype(dtype);
  const auto esz = static_cast<std::int64_t>(t.element_size());
  const std::int64_t per_chunk = static_cast<std::int64_t>(chunk_bytes_) / esz;
  char* result = static_cast<char*>(base_) + header_bytes(n);
  auto slot = [&](int r) { return result + chunk_bytes_ * static_cast<std::size_t>(r + 1); };
  const double inv = 1.0 / static_cast<double>(n);
  const at::Tensor scale = torch::scalar_tensor(inv, torch::kDouble);
  at::Tensor flat = t.view({-1});
  const std::int64_t total = flat.numel();
  const CallInfo info{++calls_, total, static_cast<std::int64_t>(dtype)};
  if (total > 0) *call_info(base_, me) = info;  // read by the others after the first barrier
  for (std::int64_t off = 0; off < total; off += per_chunk) {
    const std::int64_t len = std::min(per_chunk, total - off);
    at::Tensor mine = flat.narrow(0, off, len);
    // 1. This rank's share of the mean into its slot.
    if (dtype == at::kFloat) {
      scale_into(reinterpret_cast<float*>(slot(me)), mine.data_ptr<float>(), len, static_cast<float>(inv));
    } else if (dtype == at::kDouble) {
      scale_into(reinterpret_cast<double*>(slot(me)), mine.data_ptr<double>(), len, inv);
    } else {
      at::Tensor my_slot = torch::from_blob(slot(me), {len}, options);
      at::mul_out(my_slot, mine, scale);
    }
    barrier(what);
    if (off == 0) {
      // Every rank must be exchanging the same thing; otherwise chunks of different tensors
      // would be averaged together.
      for (int r = 0; r < n; ++r) {
        const CallInfo& o = *call_info(base_, r);
        if (o.call != info.call || o.numel != info.numel || o.dtype != info.dtype)
          group_->fail(
              what, std::runtime_error("rank " + std::to_string(r) + " exchanged " + std::to_string(o.numel) +
                                       " elements in its exchange " + std::to_string(o.call) + ", this rank " +
                                       std::to_string(info.numel) + " in its exchange " + std::to_string(info.call)));
      }
    }
    // 2. This rank's 1/N of the elements, summed over the slots in rank order.
    const std::int64_t lo = len * me / n, hi = len * (me + 1) / n;
    if (hi > lo) {
      if (dtype == at::kFloat || dtype == at::kDouble) {
        auto run = [&](auto tag) {
          using T = decltype(tag);
          std::vector<const T*> in;
          for (int r = 0; r < n; ++r) in.push_back(reinterpret_cast<const T*>(slot(r)) + lo);
          sum_into(reinterpret_cast<T*>(result) + lo, in, hi - lo);
        };
        if (dtype == at::kFloat)
          run(float{});
        else
          run(double{});
      } else {
        auto part = [&](char* p) { return torch::from_blob(p + lo * esz, {hi - lo}, options); };
        at::Tensor out = part(result);
        at::add_out(out, part(slot(0)), part(slot(1)));
        for (int r = 2; r < n; ++r) out.add_(part(slot(r)));
      }
    }
    barrier(what);
    // 3. The whole result back. The next chunk's first barrier keeps the result and the slots
    // from being overwritten before every rank is done with them.
    std::memcpy(mine.data_ptr(), result, static_cast<std::size_t>(len * esz));
  }
}

}  // namespace glassbox::dist
