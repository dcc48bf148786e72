// Group: rendezvous, collectives and failure diagnosis (group.h). Tested with real ranks in
// dist_test.cpp (collectives, dead, stuck and missing ranks).
#include "glassbox/dist/group.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Logging.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/dist/backends.h"
#include "glassbox/dist/job_store.h"

namespace glassbox::dist {

namespace {

constexpr auto kBeat = std::chrono::milliseconds(200);

// The first line of a c10d/gloo message, without its "[file.cc:123] " prefix.
std::string first_line(const std::string& text) {
  std::string s = text.substr(0, text.find('\n'));
  if (!s.empty() && s.front() == '[') {
    const auto close = s.find("] ");
    if (close != std::string::npos && close < 200) s = s.substr(close + 2);
  }
  if (s.size() > 300) s = s.substr(0, 300) + "...";
  return s;
}

std::string to_string(const std::vector<std::uint8_t>& v) { return std::string(v.begin(), v.end()); }
std::vector<std::uint8_t> to_bytes(const std::string& s) { return std::vector<std::uint8_t>(s.begin(), s.end()); }

bool is_timeout(const std::string& error) {
  std::string e = error;
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return e.find("timed out") != std::string::npos || e.find("timeout") != std::string::npos;
}

std::string list_ranks(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return c10d::ReduceOp::SUM;
    case ReduceOp::kMax: return c10d::ReduceOp::MAX;
    case ReduceOp::kMin: return c10d::ReduceOp::MIN;
  }
  return c10d::ReduceOp::SUM;
}

}  // namespace

struct Group::Native {
  c10::intrusive_ptr<c10d::TCPStore> tcp;  // the TCPStore (served here or elsewhere)
  std::string host;
  // A new client of the store that gives up after a few seconds (connecting included): what the
  // failure paths use, so that a store whose host vanished costs seconds, not the timeout.
  c10::intrusive_ptr<c10d::Store> quick_client(const std::string& prefix) const {
    c10d::TCPStoreOptions o;
    o.port = static_cast<std::uint16_t>(tcp->getPort());
    o.isServer = false;
    o.timeout = std::chrono::seconds(3);
    return c10::make_intrusive<c10d::PrefixStore>(prefix, c10::make_intrusive<c10d::TCPStore>(host, o));
  }
  c10::intrusive_ptr<c10d::Store> store;  // this job's namespace in it
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  std::string prefix;
  bool nccl = false;
  std::mutex mu;
  std::condition_variable cv;
};

std::string local_address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), "9", &hints, &res);
  GB_CHECK(rc == 0 && res != nullptr, InvalidArgument,
           "MASTER_ADDR \"" << host << "\" does not resolve: " << gai_strerror(rc),
           "set --master-addr (MASTER_ADDR) to the address or host name of node 0");
  std::string out;
  for (addrinfo* a = res; a != nullptr && out.empty(); a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      char buf[INET6_ADDRSTRLEN] = {};
      const void* src = local.ss_family == AF_INET
                            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (::inet_ntop(local.ss_family, src, buf, sizeof(buf)) != nullptr) out = buf;
    }
    ::close(fd);
  }
  ::freeaddrinfo(res);
  GB_CHECK(!out.empty(), Unavailable, "no network route from this machine to MASTER_ADDR " << host,
           "check the address, or name the interface to use with GLOO_SOCKET_IFNAME");
  return out;
}

Group::Group(WorldInfo world, GroupOptions options)
    : world_(std::move(world)), options_(options), native_(std::make_unique<Native>()) {}

Group::~Group() {
  {
    std::lock_guard<std::mutex> lock(native_->mu);
    stop_ = true;
  }
  native_->cv.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
}

const c10::intrusive_ptr<c10d::ProcessGroup>& Group::native() const { return native_->pg; }

const char* Group::backend_name() const { return native_->nccl ? "nccl" : "gloo"; }

std::shared_ptr<Group> Group::connect(const WorldInfo& world, const GroupOptions& options) {
  std::shared_ptr<Group> g(new Group(world, options));
  Native& n = *g->native_;
  // Gloo announces every connection at INFO level; glassbox reports the rendezvous itself.
  if (std::getenv("TORCH_CPP_LOG_LEVEL") == nullptr && FLAGS_caffe2_log_level < 1) FLAGS_caffe2_log_level = 1;
  const bool serve = !world.agent_store && world.rank == 0;
  const std::string where = world.master_addr + ":" + std::to_string(world.master_port);
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(world.master_port);
  so.isServer = serve;
  if (serve) so.numWorkers = static_cast<std::size_t>(world.world_size);
  so.waitWorkers = false;
  so.timeout = options.timeout;
  try {
    n.tcp = c10::make_intrusive<c10d::TCPStore>(world.master_addr, so);
    n.host = world.master_addr;
  } catch (const std::exception& e) {
    GB_THROW(Unavailable,
             "rank " << world.rank << " could not " << (serve ? "serve" : "reach") << " the rendezvous store at "
                     << where << ": " << first_line(e.what()),
             serve
                 ? "the port is taken: pick another with --master-port (MASTER_PORT)"
                 : "start node 0 (rank 0) within the timeout, and check --master-addr/--master-port and the firewall");
  }
  n.prefix = job_prefix(world);
  n.store = c10::make_intrusive<c10d::PrefixStore>(n.prefix, n.tcp);
  n.store->set("arrived/" + std::to_string(world.rank), to_bytes("1"));

  n.pg = c10::make_intrusive<c10d::ProcessGroup>(n.store, world.rank, world.world_size);
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  try {
    const std::string address = ifname ? std::string() : local_address_towards(world.master_addr);
    auto backend_store = c10::make_intrusive<c10d::PrefixStore>("gloo", n.store);
    auto gloo = make_gloo_backend(backend_store, world.rank, world.world_size, options.timeout, address,
                                  ifname ? std::string(ifname) : std::string());
    n.pg->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
    n.pg->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
    if (options.device.is_cuda()) {
      // This rank's GPU is the current device before NCCL (and anything else) touches CUDA.
      c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->setDevice(options.device);
      auto nccl_store = c10::make_intrusive<c10d::PrefixStore>("nccl", n.store);
      auto nccl = make_nccl_backend(nccl_store, world.rank, world.world_size, options.timeout);
      n.pg->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL, nccl);
      n.pg->setDefaultBackend(c10d::ProcessGroup::BackendType::NCCL);
      n.nccl = true;
    }
    n.pg->setGroupName("0");
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // Who never arrived at the rendezvous.
    std::vector<int> missing;
    try {
      for (int r = 0; r < world.world_size; ++r)
        if (!n.store->check({"arrived/" + std::to_string(r)})) missing.push_back(r);
    } catch (const std::exception&) {
    }
    if (!missing.empty()) {
      GB_THROW(DeadlineExceeded,
               list_ranks(missing) << " did not arrive at the rendezvous at " << where << " within "
                                   << options.timeout.count() / 1000.0 << " s",
               "start every rank (or node) within trainer.ddp_timeout, with the same --master-addr/--master-port");
    }
    GB_THROW(Unavailable, "rank " << world.rank << " could not connect to its peers: " << first_line(e.what()),
             "check that every node can reach the others (GLOO_SOCKET_IFNAME names the interface to use)");
  }
  g->heartbeat_ = std::thread([raw = g.get()] { raw->heartbeat_loop(); });
  g->barrier("rendezvous");
  return g;
}

void Group::heartbeat_loop() {
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = native_->quick_client(native_->prefix);  // blocks at most seconds: the destructor joins this thread
  } catch (const std::exception&) {
    return;
  }
  const std::string key = "hb/" + std::to_string(world_.rank);
  std::int64_t beat = 0;
  std::unique_lock<std::mutex> lock(native_->mu);
  while (!stop_) {
    lock.unlock();
    try {
      store->set(key, to_bytes(std::to_string(++beat) + " " + std::to_string(entered_.load())));
    } catch (const std::exception&) {
      return;  // the store is gone: the collectives report it
    }
    lock.lock();
    native_->cv.wait_for(lock, kBeat, [this] { return stop_.load(); });
  }
}

std::string Group::diagnose(const char* what, const std::string& error, bool* timed_out, bool* peer) {
  *timed_out = is_timeout(error);
  *peer = true;
  const std::string cause = first_line(error);
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = native_->quick_client(native_->prefix);
    store->check({"arrived/0"});
  } catch (const std::exception&) {
    *timed_out = false;
    if (!world_.agent_store && world_.rank != 0)
      return "rank 0 is gone (it also served the rendezvous store); the " + std::string(what) + " failed: " + cause;
    return "the rendezvous store at " + world_.master_addr + ":" + std::to_string(world_.master_port) +
           " is gone (the launcher stopped?); the " + what + " failed: " + cause;
  }
  auto read_beats = [&] {
    std::map<int, std::pair<std::string, std::int64_t>> beats;  // rank -> (beat, completed)
    for (int r = 0; r < size(); ++r) {
      if (r == rank()) continue;
      try {
        const std::string k = "hb/" + std::to_string(r);
        if (!store->check({k})) continue;
        std::istringstream in(to_string(store->get(k)));
        std::string beat;
        std::int64_t done = 0;
        in >> beat >> done;
        beats[r] = {beat, done};
      } catch (const std::exception&) {
      }
    }
    return beats;
  };
  // Ranks that said why they stop.
  std::string reported;
  std::vector<int> failed;
  for (int r = 0; r < size(); ++r) {
    if (r == rank()) continue;
    try {
      const std::string k = "failed/" + std::to_string(r);
      if (store->check({k})) {
        failed.push_back(r);
        if (reported.empty()) reported = to_string(store->get(k));
      }
    } catch (const std::exception&) {
    }
  }
  if (!failed.empty()) {
    *timed_out = false;
    return list_ranks(failed) + " stopped with an error (" + reported + "); the " + what + " could not finish";
  }
  const auto before = read_beats();
  std::this_thread::sleep_for(kBeat * 6);
  const auto after = read_beats();
  std::vector<int> silent;
  for (int r = 0; r < size(); ++r) {
    if (r == rank()) continue;
    auto a = before.find(r), b = after.find(r);
    if (a == before.end() || b == after.end() || a->second.first == b->second.first) silent.push_back(r);
  }
  if (!silent.empty()) {
    *timed_out = false;
    return list_ranks(silent) + (silent.size() == 1 ? " is" : " are") +
           " gone or frozen (no heartbeat for over a second); the " + what + " failed: " + cause;
  }
  if (*timed_out) {
    // Everyone is alive: the ranks that entered fewer collectives than this one are stuck before it.
    std::int64_t least = entered_.load();
    std::vector<int> behind;
    for (const auto& [r, v] : after) {
      if (v.second < least) {
        least = v.second;
        behind = {r};
      } else if (v.second == least && least < entered_.load()) {
        behind.push_back(r);
      }
    }
    const std::string secs = std::to_string(options_.timeout.count() / 1000);
    if (!behind.empty())
      return list_ranks(behind) + " did not join the " + what + " within " + secs +
             " s: alive but stuck (it reached collective " + std::to_string(least) + ", this rank " +
             std::to_string(entered_.load()) + ")";
    return "the " + std::string(what) + " did not finish within " + secs + " s: " + cause;
  }
  *peer = false;
  return "the " + std::string(what) + " failed: " + cause;
}

void Group::fail_or_rethrow(const char* what, const std::exception& e) {
  bool timed_out = false, peer = false;
  const std::string message = diagnose(what, e.what(), &timed_out, &peer);
  if (!peer) throw;
  raise(message, timed_out);
}

void Group::fail(const char* what, const std::exception& e) {
  bool timed_out = false, peer = false;
  const std::string message = diagnose(what, e.what(), &timed_out, &peer);
  raise(message, timed_out);
}

void Group::raise(const std::string& message, bool timed_out) {
  const std::string hint =
      "every rank stops; resume from the last checkpoint with glassbox train --resume RUN/checkpoints/last.ckpt" +
      std::string(timed_out ? " (trainer.ddp_timeout sets how long a rank may lag)" : "");
  if (timed_out) throw Error(ErrorCode::kDeadlineExceeded, "rank " + std::to_string(rank()) + ": " + message, hint);
  throw Error(ErrorCode::kUnavailable, "rank " + std::to_string(rank()) + ": " + message, hint);
}

void Group::report_failure(const std::string& message) noexcept {
  try {
    auto store = native_->quick_client(native_->prefix);
    const std::string key = "failed/" + std::to_string(rank());
    if (!store->check({key})) store->set(key, to_bytes(message));
  } catch (...) {
  }
}

template <class F>
void Group::run(const char* what, F&& start) {
  ++entered_;
  try {
    c10::intrusive_ptr<c10d::Work> work = start(*native_->pg);
    work->wait();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail_or_rethrow(what, e);  // a local error (a bad argument, out of memory) stays itself
  }
}

void Group::wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what) {
  run(what, [&](c10d::ProcessGroup&) { return work; });
}

void Group::all_reduce(std::vector<at::Tensor>& tensors, ReduceOp op, const char* what) {
  if (size() == 1 || tensors.empty()) return;
  c10d::AllreduceOptions o;
  o.reduceOp = to_c10d(op);
  o.timeout = options_.timeout;
  // One collective per dtype and device: the tensors are flattened into one buffer each.
  std::vector<bool> done(tensors.size(), false);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (done[i]) continue;
    std::vector<std::size_t> same;
    for (std::size_t j = i; j < tensors.size(); ++j)
      if (!done[j] && tensors[j].scalar_type() == tensors[i].scalar_type() &&
          tensors[j].device() == tensors[i].device()) {
        same.push_back(j);
        done[j] = true;
      }
    std::vector<at::Tensor> flat;
    for (std::size_t j : same) flat.push_back(tensors[j].reshape({-1}));
    std::vector<at::Tensor> buffer{same.size() == 1 && tensors[i].is_contiguous() ? tensors[i] : torch::cat(flat)};
    run(what, [&](c10d::ProcessGroup& pg) { return pg.allreduce(buffer, o); });
    if (buffer[0].data_ptr() == tensors[i].data_ptr()) continue;
    std::int64_t at = 0;
    for (std::size_t j : same) {
      const std::int64_t n = tensors[j].numel();
      tensors[j].copy_(buffer[0].narrow(0, at, n).view(tensors[j].sizes()));
      at += n;
    }
  }
}

void Group::broadcast(std::vector<at::Tensor>& tensors, int root, const char* what) {
  if (size() == 1 || tensors.empty()) return;
  c10d::BroadcastOptions o;
  o.rootRank = root;
  o.timeout = options_.timeout;
  run(what, [&](c10d::ProcessGroup& pg) { return pg.broadcast(tensors, o); });
}

at::Tensor Group::all_gather_rows(const at::Tensor& local, const char* what) {
  if (size() == 1) return local;
  // Gloo's all-gather wants equal shapes: gather each rank's shape and dtype, pad to the most
  // rows, trim. A rank without rows takes the others' row shape.
  constexpr int kMaxDims = 8;
  GB_CHECK(local.dim() >= 1 && local.dim() <= kMaxDims, InvalidArgument,
           "all_gather_rows: a tensor of " << local.dim() << " dimensions", "pass 1 to 8 dimensions");
  at::Tensor header = torch::full({kMaxDims + 2}, -1, torch::kLong);
  header[0] = local.size(0);
  header[1] = static_cast<std::int64_t>(local.scalar_type());
  for (std::int64_t d = 1; d < local.dim(); ++d) header[d + 1] = local.size(d);
  std::vector<at::Tensor> headers_in{header};
  std::vector<std::vector<at::Tensor>> headers_out(1);
  for (int r = 0; r < size(); ++r) headers_out[0].push_back(torch::empty({kMaxDims + 2}, torch::kLong));
  run(what,
      [&](c10d::ProcessGroup& pg) { return pg.getBackend(c10::DeviceType::CPU)->allgather(headers_out, headers_in); });
  std::int64_t most = 0;
  std::vector<std::int64_t> rows;
  at::Tensor model;  // the header of a rank with rows
  for (const auto& h : headers_out[0]) {
    rows.push_back(h[0].item<std::int64_t>());
    most = std::max(most, rows.back());
    if (rows.back() > 0 && !model.defined()) model = h;
  }
  if (most == 0) return local;
  std::vector<std::int64_t> shape{most};
  for (int d = 2; d < kMaxDims + 2 && model[d].item<std::int64_t>() >= 0; ++d)
    shape.push_back(model[d].item<std::int64_t>());
  const auto dtype = static_cast<c10::ScalarType>(model[1].item<std::int64_t>());
  if (local.size(0) > 0) {
    GB_CHECK(local.scalar_type() == dtype && local.sizes().slice(1) == c10::IntArrayRef(shape).slice(1),
             InvalidArgument,
             "all_gather_rows: rank " << rank() << " holds rows of another shape or dtype than the others",
             "every rank must gather the same kind of rows");
  }
  at::Tensor padded = torch::zeros(shape, local.options().dtype(dtype));
  if (local.size(0) > 0) padded.narrow(0, 0, local.size(0)).copy_(local);
  std::vector<at::Tensor> in{padded};
  std::vector<std::vector<at::Tensor>> out(1);
  for (int r = 0; r < size(); ++r) out[0].push_back(torch::empty(shape, padded.options()));
  run(what, [&](c10d::ProcessGroup& pg) { return pg.allgather(out, in); });
  std::vector<at::Tensor> parts;
  for (int r = 0; r < size(); ++r)
    parts.push_back(out[0][static_cast<std::size_t>(r)].narrow(0, 0, rows[static_cast<std::size_t>(r)]));
  return torch::cat(parts, 0);
}

void Group::barrier(const char* what) {
  if (size() == 1) return;
  // An all-reduce of one number on the CPU backend: c10d's barrier on NCCL needs a device guess.
  at::Tensor t = torch::zeros({1}, torch::kInt);
  std::vector<at::Tensor> v{t};
  c10d::AllreduceOptions o;
  o.timeout = options_.timeout;
  run(what, [&](c10d::ProcessGroup& pg) { return pg.getBackend(c10::DeviceType::CPU)->allreduce(v, o); });
}

bool Group::any(bool local, const char* what) { return max(local ? 1 : 0, what) != 0; }

std::int64_t Group::max(std::int64_t local, const char* what) {
  if (size() == 1) return local;
  at::Tensor t = torch::tensor({local}, torch::kLong);
  std::vector<at::Tensor> v{t};
  c10d::AllreduceOptions o;
  o.reduceOp = c10d::ReduceOp::MAX;
  o.timeout = options_.timeout;
  run(what, [&](c10d::ProcessGroup& pg) { return pg.getBackend(c10::DeviceType::CPU)->allreduce(v, o); });
  return t.item<std::int64_t>();
}

}  // namespace glassbox::dist
