// Multi-process tests: each Dist.* test starts its ranks as child processes running this binary's
// DistWorker.* test of the same name (skipped unless GB_DIST_WORKER is set), with torchrun's
// environment, and checks their exit codes and output.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/dist/data_parallel.h"
#include "glassbox/dist/group.h"
#include "glassbox/dist/shm_reduce.h"
#include "glassbox/dist/world.h"
#include "glassbox/testing/testing.h"

namespace glassbox::dist {
namespace {

namespace fs = std::filesystem;

using testing::RankResult;

std::vector<RankResult> spawn(const std::string& name, int world, const std::string& extra_env = "",
                              std::vector<int> ranks = {}) {
  return testing::spawn_ranks("DistWorker." + name, world, extra_env, std::move(ranks));
}

bool is_worker() { return testing::is_rank_worker(); }

#define WORKER_ONLY() \
  if (!is_worker()) GTEST_SKIP() << "runs as a rank of the Dist test of the same name"

std::shared_ptr<Group> join(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  auto world = WorldInfo::from_env();
  EXPECT_TRUE(world.has_value());
  GroupOptions o;
  o.timeout = timeout;
  return Group::connect(*world, o);
}

void expect_all_ok(const std::vector<RankResult>& results) {
  for (std::size_t r = 0; r < results.size(); ++r)
    EXPECT_EQ(results[r].rc, 0) << "rank " << r << " output:\n" << results[r].output;
}

// --- collectives ---------------------------------------------------------------------------------

TEST(DistWorker, Collectives) {
  WORKER_ONLY();
  auto g = join();
  const int r = g->rank();
  ASSERT_EQ(g->size(), 2);
  std::vector<at::Tensor> t{torch::full({3}, static_cast<float>(r + 1)), torch::tensor({r * 10}, torch::kLong)};
  g->all_reduce(t);
  EXPECT_TRUE(t[0].equal(torch::full({3}, 3.0f)));
  EXPECT_EQ(t[1].item<std::int64_t>(), 10);
  std::vector<at::Tensor> m{torch::tensor({static_cast<double>(r), -static_cast<double>(r)})};
  g->all_reduce(m, ReduceOp::kMax);
  EXPECT_TRUE(m[0].equal(torch::tensor({1.0, 0.0}, torch::kDouble)));
  std::vector<at::Tensor> b{torch::full({2, 2}, static_cast<float>(r + 5))};
  g->broadcast(b, 1);
  EXPECT_TRUE(b[0].equal(torch::full({2, 2}, 6.0f)));
  // Rows of different counts, in rank order.
  at::Tensor mine = r == 0 ? torch::arange(6, torch::kFloat).reshape({3, 2}) : torch::full({1, 2}, 9.0f);
  at::Tensor all = g->all_gather_rows(mine);
  ASSERT_EQ(all.sizes(), (std::vector<std::int64_t>{4, 2}));
  EXPECT_TRUE(all.narrow(0, 0, 3).equal(torch::arange(6, torch::kFloat).reshape({3, 2})));
  EXPECT_TRUE(all[3].equal(torch::full({2}, 9.0f)));
  at::Tensor empty = g->all_gather_rows(r == 0 ? torch::empty({0}, torch::kLong) : torch::tensor({7}, torch::kLong));
  EXPECT_TRUE(empty.equal(torch::tensor({7}, torch::kLong)));
  EXPECT_TRUE(g->any(r == 1));
  EXPECT_FALSE(g->any(false));
  EXPECT_EQ(g->max(r * 7 + 1), 8);
  g->barrier();
}

TEST(Dist, Collectives) { expect_all_ok(spawn("Collectives", 2)); }

// --- gradients: 2 ranks x half batch == 1 process x full batch ---------------------------------------

struct Net : torch::nn::Module {
  torch::nn::Linear a{nullptr}, b{nullptr}, unused{nullptr};
  explicit Net(bool with_unused) {
    a = register_module("a", torch::nn::Linear(8, 16));
    b = register_module("b", torch::nn::Linear(16, 3));
    if (with_unused) unused = register_module("unused", torch::nn::Linear(3, 3));
  }
  at::Tensor forward(const at::Tensor& x) { return b->forward(torch::tanh(a->forward(x))); }
};

std::pair<std::vector<at::Tensor>, std::vector<std::string>> trainable(torch::nn::Module& m) {
  std::vector<at::Tensor> p;
  std::vector<std::string> n;
  for (const auto& item : m.named_parameters(true)) {
    p.push_back(item.value());
    n.push_back(item.key());
  }
  return {p, n};
}

// 20 SGD steps of two ranks on halves of each batch against one process on the whole batch, with
// the gradients averaged through shared memory and through Gloo.
std::vector<at::Tensor> gradients_match_one_process(const std::shared_ptr<Group>& g, bool shared_memory) {
  const int r = g->rank();
  torch::manual_seed(100 + static_cast<std::uint64_t>(r));  // different initial weights: rank 0's must win
  auto net = std::make_shared<Net>(false);
  torch::manual_seed(0);
  auto ref = std::make_shared<Net>(false);  // the one-process run, from rank 0's initial weights
  {
    torch::NoGradGuard ng;
    // Rank 0 built `net` from seed 100: rebuild that for the reference.
    torch::manual_seed(100);
    auto rank0 = std::make_shared<Net>(false);
    for (std::size_t i = 0; i < ref->parameters().size(); ++i) ref->parameters()[i].copy_(rank0->parameters()[i]);
  }
  auto [params, names] = trainable(*net);
  DataParallelOptions o;
  o.shared_memory = shared_memory;
  DataParallel ddp(g, *net, params, names, o);
  EXPECT_EQ(ddp.transport(), shared_memory ? "shared memory" : "gloo");
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::optim::SGD ref_opt(ref->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::manual_seed(7);
  for (int step = 0; step < 20; ++step) {
    at::Tensor x = torch::randn({32, 8});
    at::Tensor y = torch::randint(0, 3, {32}, torch::kLong);
    // This rank's half: samples r, r+2, r+4, ... (DistributedSampler's interleaving).
    at::Tensor idx = torch::arange(r, 32, 2, torch::kLong);
    for (auto& p : net->parameters()) p.mutable_grad().reset();  // set to none, as the Trainer does
    ddp.before_forward(true);
    at::Tensor loss = torch::cross_entropy_loss(net->forward(x.index_select(0, idx)), y.index_select(0, idx));
    ddp.before_backward({loss});
    loss.backward();
    ddp.after_backward();
    opt.step();
    ref_opt.zero_grad();
    torch::cross_entropy_loss(ref->forward(x), y).backward();
    ref_opt.step();
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    const double diff = (params[i] - ref->parameters()[i]).abs().max().item<double>();
    EXPECT_LT(diff, 1e-6) << names[i] << (shared_memory ? " (shared memory)" : " (gloo)");
    // Bit-identical across ranks.
    at::Tensor both = g->all_gather_rows(params[i].detach().reshape({1, -1}).contiguous());
    EXPECT_TRUE(both[0].equal(both[1])) << names[i];
  }
  return params;
}

TEST(DistWorker, GradientsMatchOneProcess) {
  WORKER_ONLY();
  auto g = join();
  const auto shm = gradients_match_one_process(g, true);
  const auto gloo = gradients_match_one_process(g, false);
  // Two ranks: a/2 + b/2 either way, so the two transports give the same bits.
  for (std::size_t i = 0; i < shm.size(); ++i) EXPECT_TRUE(shm[i].equal(gloo[i])) << i;
}

TEST(Dist, GradientsMatchOneProcess) { expect_all_ok(spawn("GradientsMatchOneProcess", 2)); }

TEST(DistWorker, UnusedParameterIsNamed) {
  WORKER_ONLY();
  auto g = join();
  auto net = std::make_shared<Net>(true);
  auto [params, names] = trainable(*net);
  DataParallel ddp(g, *net, params, names, {});
  ddp.before_forward(true);
  at::Tensor loss = net->forward(torch::randn({4, 8})).sum();
  ddp.before_backward({loss});
  loss.backward();
  try {
    ddp.after_backward();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unused.weight, unused.bias"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("find_unused_parameters"), std::string::npos) << e.what();
  }
}

TEST(Dist, UnusedParameterIsNamed) { expect_all_ok(spawn("UnusedParameterIsNamed", 2)); }

TEST(DistWorker, FindUnusedParameters) {
  WORKER_ONLY();
  auto g = join();
  auto net = std::make_shared<Net>(true);
  auto [params, names] = trainable(*net);
  DataParallelOptions o;
  o.find_unused_parameters = true;
  DataParallel ddp(g, *net, params, names, o);
  torch::manual_seed(static_cast<std::uint64_t>(g->rank()));
  for (int step = 0; step < 3; ++step) {
    ddp.before_forward(true);
    at::Tensor loss = net->forward(torch::randn({4, 8})).sum();
    ddp.before_backward({loss});
    loss.backward();
    ddp.after_backward();
  }
  at::Tensor grads = g->all_gather_rows(net->a->weight.grad().reshape({1, -1}).contiguous());
  EXPECT_TRUE(grads[0].equal(grads[1]));
}

TEST(Dist, FindUnusedParameters) { expect_all_ok(spawn("FindUnusedParameters", 2)); }

// Rank 0's side of a dead-rank test: `exchange` (with rank 1 gone) must fail within 15 s with
// one line naming rank 1 and the collective; the worker then exits with the verdict.
[[noreturn]] void expect_dead_rank_named(const std::function<void()>& exchange) {
  const auto start = std::chrono::steady_clock::now();
  try {
    for (int i = 0; i < 100; ++i) exchange();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable) << m;
    EXPECT_NE(m.find("rank 1 is gone"), std::string::npos) << m;
    EXPECT_NE(m.find("all-reduce of the gradients"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
  std::_Exit(::testing::Test::HasFailure() ? 1 : 0);
}

// --- shared memory ------------------------------------------------------------------------------

// Rank r's tensor: the same on every rank that builds it (each rank builds every rank's).
at::Tensor rank_tensor(int r, std::int64_t n, torch::Dtype dtype) {
  torch::manual_seed(1000 + static_cast<std::uint64_t>(r));
  return torch::randn({n}, torch::kDouble).mul(1000).to(dtype);
}

TEST(DistWorker, SharedMemoryReduce) {
  WORKER_ONLY();
  auto g = join();
  const int n = g->size();
  // 4 KiB chunks: several chunks per tensor, a last one that is partial and not divisible by n.
  auto shm = SharedMemoryReduce::create(g, 4096);
  ASSERT_TRUE(shm != nullptr);
  for (auto [numel, dtype] : {std::pair<std::int64_t, torch::Dtype>{5003, torch::kFloat},
                              {777, torch::kDouble},
                              {1, torch::kFloat},
                              {0, torch::kFloat}}) {
    at::Tensor mine = rank_tensor(g->rank(), numel, dtype);
    shm->all_reduce_mean(mine);
    // The documented arithmetic: each rank's tensor times 1/n, summed in rank order.
    const at::Tensor scale = torch::scalar_tensor(1.0 / n, torch::kDouble);
    at::Tensor expected = rank_tensor(0, numel, dtype).mul(scale);
    for (int r = 1; r < n; ++r) expected.add_(rank_tensor(r, numel, dtype).mul(scale));
    EXPECT_TRUE(mine.equal(expected)) << numel << " elements: largest difference "
                                      << (numel ? (mine - expected).abs().max().item<double>() : 0.0);
  }
  // Asynchronous, two in flight at once (as the Reducer's buckets are): the same bits.
  at::Tensor a = rank_tensor(g->rank(), 3001, torch::kFloat), b = rank_tensor(g->rank() + 10, 2000, torch::kFloat);
  auto fa = shm->all_reduce_mean_async(a);
  auto fb = shm->all_reduce_mean_async(b);
  fb->wait();
  fa->wait();
  ASSERT_FALSE(fa->hasError());
  ASSERT_FALSE(fb->hasError());
  const at::Tensor scale = torch::scalar_tensor(1.0 / n, torch::kDouble);
  at::Tensor ea = rank_tensor(0, 3001, torch::kFloat).mul(scale), eb = rank_tensor(10, 2000, torch::kFloat).mul(scale);
  for (int r = 1; r < n; ++r) {
    ea.add_(rank_tensor(r, 3001, torch::kFloat).mul(scale));
    eb.add_(rank_tensor(r + 10, 2000, torch::kFloat).mul(scale));
  }
  EXPECT_TRUE(fa->value().toTensor().equal(ea));
  EXPECT_TRUE(b.equal(eb));  // in place
}

TEST(Dist, SharedMemoryReduce) { expect_all_ok(spawn("SharedMemoryReduce", 3)); }

TEST(DistWorker, SharedMemoryReduceNamesDeadRank) {
  WORKER_ONLY();
  auto g = join(std::chrono::seconds(20));
  auto shm = SharedMemoryReduce::create(g, 4096);
  ASSERT_TRUE(shm != nullptr);
  at::Tensor t = torch::ones({3000});
  shm->all_reduce_mean(t);
  if (g->rank() == 1) ::raise(SIGKILL);
  // Asynchronously, as the Reducer's hook does: the error arrives through the future.
  expect_dead_rank_named([&] {
    auto done = shm->all_reduce_mean_async(t);
    done->wait();
    done->value();  // rethrows the exchange's error
  });
}

TEST(Dist, SharedMemoryReduceNamesDeadRank) {
  const auto r = spawn("SharedMemoryReduceNamesDeadRank", 2);
  EXPECT_EQ(r[0].rc, 0) << r[0].output;
  EXPECT_NE(r[1].rc, 0);
}

// Ranks that exchange different sizes get an error naming the rank, not a mixed average.
TEST(DistWorker, SharedMemoryReduceRejectsMismatch) {
  WORKER_ONLY();
  auto g = join(std::chrono::seconds(20));
  auto shm = SharedMemoryReduce::create(g, 4096);
  ASSERT_TRUE(shm != nullptr);
  at::Tensor t = torch::ones({g->rank() == 0 ? 100 : 101});
  try {
    shm->all_reduce_mean(t);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(g->rank() == 0 ? "rank 1 exchanged 101 elements" : "rank 0 exchanged 100 elements"),
              std::string::npos)
        << m;
  }
  std::_Exit(::testing::Test::HasFailure() ? 1 : 0);
}

TEST(Dist, SharedMemoryReduceRejectsMismatch) { expect_all_ok(spawn("SharedMemoryReduceRejectsMismatch", 2)); }

// The segment's name is gone from /dev/shm once every rank has mapped it.
TEST(DistWorker, SharedMemoryLeavesNoFile) {
  WORKER_ONLY();
  auto g = join();
  auto shm = SharedMemoryReduce::create(g, 4096);
  ASSERT_TRUE(shm != nullptr);
  g->barrier();
  // The segment is named after rank 0's process.
  const at::Tensor pids = g->all_gather_rows(torch::full({1, 1}, static_cast<std::int64_t>(::getpid()), torch::kLong));
  const std::string prefix = "glassbox-reduce-" + std::to_string(pids[0][0].item<std::int64_t>()) + "-";
  for (const auto& e : fs::directory_iterator("/dev/shm"))
    EXPECT_EQ(e.path().filename().string().rfind(prefix, 0), std::string::npos) << e.path();
  at::Tensor t = torch::ones({10});
  shm->all_reduce_mean(t);  // still works without the name
  EXPECT_TRUE(t.equal(torch::ones({10})));
}

TEST(Dist, SharedMemoryLeavesNoFile) { expect_all_ok(spawn("SharedMemoryLeavesNoFile", 2)); }

// --- faults ----------------------------------------------------------------------------------------

TEST(DistWorker, DeadRankIsNamed) {
  WORKER_ONLY();
  auto g = join(std::chrono::seconds(20));
  std::vector<at::Tensor> t{torch::ones({4})};
  g->all_reduce(t);
  if (g->rank() == 1) ::raise(SIGKILL);
  expect_dead_rank_named([&] { g->all_reduce(t, ReduceOp::kSum, "all-reduce of the gradients"); });
}

TEST(Dist, DeadRankIsNamed) {
  const auto r = spawn("DeadRankIsNamed", 2);
  EXPECT_EQ(r[0].rc, 0) << r[0].output;
  EXPECT_NE(r[1].rc, 0);
}

TEST(DistWorker, StuckRankIsNamed) {
  WORKER_ONLY();
  auto g = join(std::chrono::seconds(3));
  std::vector<at::Tensor> t{torch::ones({4})};
  g->all_reduce(t);
  if (g->rank() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(7));  // alive, heartbeat on, not joining
    std::_Exit(0);
  }
  try {
    g->all_reduce(t, ReduceOp::kSum, "all-reduce of the gradients");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kDeadlineExceeded) << m;
    EXPECT_NE(m.find("rank 1 did not join the all-reduce of the gradients within 3 s"), std::string::npos) << m;
  }
  std::_Exit(::testing::Test::HasFailure() ? 1 : 0);
}

TEST(Dist, StuckRankIsNamed) {
  const auto r = spawn("StuckRankIsNamed", 2);
  EXPECT_EQ(r[0].rc, 0) << r[0].output;
}

TEST(DistWorker, MissingRankAtRendezvous) {
  WORKER_ONLY();
  try {
    join(std::chrono::seconds(2));
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kDeadlineExceeded) << m;
    EXPECT_NE(m.find("rank 1 did not arrive at the rendezvous"), std::string::npos) << m;
  }
  std::_Exit(::testing::Test::HasFailure() ? 1 : 0);
}

TEST(Dist, MissingRankAtRendezvous) {
  const auto r = spawn("MissingRankAtRendezvous", 2, "", {0});
  EXPECT_EQ(r[0].rc, 0) << r[0].output;
}

// --- environment -------------------------------------------------------------------------------------

TEST(World, FromEnvironment) {
  if (is_worker()) GTEST_SKIP();
  ::unsetenv("WORLD_SIZE");
  EXPECT_FALSE(WorldInfo::from_env().has_value());
  ::setenv("WORLD_SIZE", "4", 1);
  ::setenv("RANK", "3", 1);
  ::setenv("LOCAL_WORLD_SIZE", "2", 1);
  ::setenv("LOCAL_RANK", "1", 1);
  ::setenv("MASTER_ADDR", "10.0.0.1", 1);
  ::setenv("MASTER_PORT", "29400", 1);
  auto w = WorldInfo::from_env();
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->rank, 3);
  EXPECT_EQ(w->node_rank, 1);  // no GROUP_RANK: rank / LOCAL_WORLD_SIZE
  EXPECT_EQ(w->master_addr, "10.0.0.1");
  EXPECT_EQ(w->master_port, 29400);
  ::setenv("RANK", "4", 1);
  EXPECT_THROW(WorldInfo::from_env(), Error);
  ::setenv("RANK", "x", 1);
  try {
    WorldInfo::from_env();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("RANK=\"x\""), std::string::npos);
  }
  for (const char* v : {"WORLD_SIZE", "RANK", "LOCAL_WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"})
    ::unsetenv(v);
}

TEST(World, LocalAddress) {
  if (is_worker()) GTEST_SKIP();
  EXPECT_EQ(local_address_towards("127.0.0.1"), "127.0.0.1");
  EXPECT_THROW(local_address_towards("no-such-host.invalid"), Error);
}

// The gloo headers are Debian's, older than the gloo inside LibTorch: the one translation unit
// that includes them must define no gloo code of its own (it would take over the wheel's).
TEST(World, GlooUnitDefinesNoGlooCode) {
  if (is_worker()) GTEST_SKIP();
  const fs::path obj = testing::build_path("glassbox/dist/CMakeFiles/gb_dist.dir/gloo.cpp.o");
  if (!fs::exists(obj)) GTEST_SKIP() << "no " << obj;
  const auto [rc, out] = testing::run_command("nm -C --defined-only " + obj.string() + " | grep -c ' gloo::' || true");
  EXPECT_EQ(std::stoi(out), 0) << "nm: gloo symbols defined in gloo.cpp.o";
}

}  // namespace
}  // namespace glassbox::dist
