// Data-parallel training in one binary: each Ddp.* test starts its ranks as processes running the
// DdpWorker.* test of the same name (testing::spawn_ranks), which checks its rank's side against
// a one-process computation it makes itself.
//   - SyncBatchNorm: 2 ranks x 16 samples equal 1 process x 32 with plain BatchNorm (weights and
//     running statistics), for BatchNorm1d and BatchNorm2d.
//   - Buffer broadcast (DDP's default without SyncBN): equal to one process whose BatchNorm
//     normalises each rank's half on its own and keeps rank 0's running statistics ("ghost
//     batch norm"), the counterpart docs/distributed.md describes.
//   - Exact evaluation through the Trainer, with a rank that gets no batch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/dist/data_parallel.h"
#include "glassbox/dist/group.h"
#include "glassbox/nn/batchnorm.h"
#include "glassbox/testing/testing.h"
#include "glassbox/train/trainer.h"

namespace glassbox::train {
namespace {

#define WORKER_ONLY() \
  if (!testing::is_rank_worker()) GTEST_SKIP() << "runs as a rank of the Ddp test of the same name"

void expect_all_ok(const std::vector<testing::RankResult>& results) {
  for (std::size_t r = 0; r < results.size(); ++r)
    EXPECT_EQ(results[r].rc, 0) << "rank " << r << " output:\n" << results[r].output;
}

std::shared_ptr<dist::Group> join() {
  auto world = dist::WorldInfo::from_env();
  EXPECT_TRUE(world.has_value());
  dist::GroupOptions o;
  o.timeout = std::chrono::seconds(60);
  return dist::Group::connect(*world, o);
}

class Sync final : public nn::BatchStatsSync {
 public:
  explicit Sync(std::shared_ptr<dist::Group> g) : g_(std::move(g)) {}
  void all_reduce_sum(at::Tensor& t) override {
    std::vector<at::Tensor> v{t};
    g_->all_reduce(v);
  }

 private:
  std::shared_ptr<dist::Group> g_;
};

// Linear -> BatchNorm1d -> ReLU -> Linear, or Conv2d -> BatchNorm2d -> ReLU -> mean -> Linear.
struct BnNet : torch::nn::Module {
  bool conv;
  torch::nn::Linear a{nullptr}, head{nullptr};
  torch::nn::Conv2d c{nullptr};
  nn::BatchNorm1d bn1{nullptr};
  nn::BatchNorm2d bn2{nullptr};
  explicit BnNet(bool conv_net) : conv(conv_net) {
    if (conv) {
      c = register_module("c", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 6, 3)));
      bn2 = register_module("bn", nn::BatchNorm2d(torch::nn::BatchNorm2dOptions(6)));
      head = register_module("head", torch::nn::Linear(6, 3));
    } else {
      a = register_module("a", torch::nn::Linear(8, 12));
      bn1 = register_module("bn", nn::BatchNorm1d(torch::nn::BatchNorm1dOptions(12)));
      head = register_module("head", torch::nn::Linear(12, 3));
    }
  }
  at::Tensor forward(const at::Tensor& x) {
    if (conv) return head->forward(torch::relu(bn2->forward(c->forward(x))).mean({2, 3}));
    return head->forward(torch::relu(bn1->forward(a->forward(x))));
  }
  // The "ghost" counterpart of buffer broadcast: each half of the batch normalised on its own,
  // the running statistics updated by half 0 only.
  at::Tensor ghost_forward(const at::Tensor& x, const std::vector<at::Tensor>& halves) {
    at::Tensor h = a->forward(x);
    at::Tensor out = torch::empty_like(h);
    for (std::size_t r = 0; r < halves.size(); ++r) {
      at::Tensor rm = r == 0 ? bn1->running_mean : bn1->running_mean.clone();
      at::Tensor rv = r == 0 ? bn1->running_var : bn1->running_var.clone();
      out.index_copy_(
          0, halves[r],
          torch::batch_norm(h.index_select(0, halves[r]), bn1->weight, bn1->bias, rm, rv, true, 0.1, 1e-5, false));
    }
    {
      torch::NoGradGuard ng;
      bn1->num_batches_tracked.add_(1);
    }
    return head->forward(torch::relu(out));
  }
};

std::pair<std::vector<at::Tensor>, std::vector<std::string>> params_of(torch::nn::Module& m) {
  std::vector<at::Tensor> p;
  std::vector<std::string> n;
  for (const auto& item : m.named_parameters(true)) {
    p.push_back(item.value());
    n.push_back(item.key());
  }
  return {p, n};
}

// The largest difference of the parameters (or buffers), |a - b| / (1 + |b|).
double max_diff(torch::nn::Module& a, torch::nn::Module& b, bool buffers) {
  double d = 0;
  const auto pa = buffers ? a.buffers() : a.parameters();
  const auto pb = buffers ? b.buffers() : b.parameters();
  for (std::size_t i = 0; i < pa.size(); ++i)
    // Relative to the magnitude above 1 (running variances reach tens: float32 resolves ~1e-6 there).
    d = std::max(d, ((pa[i].to(torch::kDouble) - pb[i].to(torch::kDouble)).abs() / (1 + pb[i].to(torch::kDouble).abs()))
                        .max()
                        .item<double>());
  return d;
}

// One training step of `net` on this rank's half (samples r, r + 2, ...) through DataParallel.
void ddp_step(dist::DataParallel& ddp, BnNet& net, torch::optim::Optimizer& opt, const at::Tensor& x,
              const at::Tensor& y, const at::Tensor& mine) {
  for (auto& p : net.parameters())  // in place: the gradients are views into DataParallel's buckets
    if (p.grad().defined()) p.grad().zero_();
  ddp.before_forward(true);
  at::Tensor loss = torch::cross_entropy_loss(net.forward(x.index_select(0, mine)), y.index_select(0, mine));
  ddp.before_backward({loss});
  loss.backward();
  ddp.after_backward();
  opt.step();
}

void sync_batchnorm_case(bool conv) {
  auto g = join();
  const int r = g->rank();
  torch::manual_seed(3);
  auto net = std::make_shared<BnNet>(conv);
  torch::manual_seed(3);
  auto ref = std::make_shared<BnNet>(conv);
  EXPECT_EQ(nn::set_batchnorm_sync(*net, std::make_shared<Sync>(g)), std::vector<std::string>{"bn"});
  auto [params, names] = params_of(*net);
  dist::DataParallelOptions o;
  o.broadcast_buffers = false;  // SyncBN keeps the statistics equal
  dist::DataParallel ddp(g, *net, params, names, o);
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::SGD ref_opt(ref->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::manual_seed(11);
  const at::Tensor mine = torch::arange(r, 32, 2, torch::kLong);
  for (int step = 0; step < 50; ++step) {
    at::Tensor x = conv ? torch::randn({32, 3, 6, 6}) * 2 + 1 : torch::randn({32, 8}) * 3 - 1;
    at::Tensor y = torch::randint(0, 3, {32}, torch::kLong);
    ddp_step(ddp, *net, opt, x, y, mine);
    ref_opt.zero_grad();
    torch::cross_entropy_loss(ref->forward(x), y).backward();
    ref_opt.step();
  }
  EXPECT_LT(max_diff(*net, *ref, false), 1e-6);
  EXPECT_LT(max_diff(*net, *ref, true), 1e-6);  // running mean and variance, batches tracked
  net->eval();
  ref->eval();
  at::Tensor x = conv ? torch::randn({5, 3, 6, 6}) : torch::randn({5, 8});
  EXPECT_LT((net->forward(x) - ref->forward(x)).abs().max().item<double>(), 1e-5);
}

TEST(DdpWorker, SyncBatchNorm1d) {
  WORKER_ONLY();
  sync_batchnorm_case(false);
}
TEST(Ddp, SyncBatchNorm1d) { expect_all_ok(testing::spawn_ranks("DdpWorker.SyncBatchNorm1d", 2)); }

TEST(DdpWorker, SyncBatchNorm2d) {
  WORKER_ONLY();
  sync_batchnorm_case(true);
}
TEST(Ddp, SyncBatchNorm2d) { expect_all_ok(testing::spawn_ranks("DdpWorker.SyncBatchNorm2d", 2)); }

TEST(DdpWorker, BufferBroadcastIsGhostBatchNorm) {
  WORKER_ONLY();
  auto g = join();
  const int r = g->rank();
  torch::manual_seed(5);
  auto net = std::make_shared<BnNet>(false);
  torch::manual_seed(5);
  auto ref = std::make_shared<BnNet>(false);
  auto [params, names] = params_of(*net);
  dist::DataParallel ddp(g, *net, params, names, {});  // broadcast_buffers = true
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::SGD ref_opt(ref->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::manual_seed(12);
  const std::vector<at::Tensor> halves{torch::arange(0, 32, 2, torch::kLong), torch::arange(1, 32, 2, torch::kLong)};
  for (int step = 0; step < 50; ++step) {
    at::Tensor x = torch::randn({32, 8}) * 3 - 1;
    at::Tensor y = torch::randint(0, 3, {32}, torch::kLong);
    ddp_step(ddp, *net, opt, x, y, halves[static_cast<std::size_t>(r)]);
    ref_opt.zero_grad();
    at::Tensor out = ref->ghost_forward(x, halves);
    // The mean of the two ranks' losses (the average DDP's gradients follow).
    at::Tensor loss = (torch::cross_entropy_loss(out.index_select(0, halves[0]), y.index_select(0, halves[0])) +
                       torch::cross_entropy_loss(out.index_select(0, halves[1]), y.index_select(0, halves[1]))) /
                      2;
    loss.backward();
    ref_opt.step();
  }
  EXPECT_LT(max_diff(*net, *ref, false), 1e-6);
  // Rank 0's running statistics are the ones every rank gets at the next forward.
  if (r == 0) {
    EXPECT_LT(max_diff(*net, *ref, true), 1e-6);
  }
  ddp.before_forward(false);
  ddp.broadcast_state(false, true);
  EXPECT_LT(max_diff(*net, *ref, true), 1e-6);
}
TEST(Ddp, BufferBroadcastIsGhostBatchNorm) {
  expect_all_ok(testing::spawn_ranks("DdpWorker.BufferBroadcastIsGhostBatchNorm", 2));
}

// Validation through the Trainer: 2 ranks equal 1 process exactly, also when one rank has no
// batch to evaluate (limit_val_batches = 1).
class Tiny final : public TaskModule {
 public:
  Tiny() {
    torch::manual_seed(1);
    net_ = std::make_shared<torch::nn::LinearImpl>(4, 3);
  }
  torch::nn::Module& module() override { return *net_; }
  std::shared_ptr<torch::nn::Module> module_ptr() override { return net_; }
  StepOutput training_step(const data::Batch& b) override {
    at::Tensor logits = net_->forward(b.inputs);
    return {torch::cross_entropy_loss(logits, b.targets), logits};
  }

 private:
  std::shared_ptr<torch::nn::LinearImpl> net_;
};

TEST(DdpWorker, ExactValidation) {
  WORKER_ONLY();
  auto g = join();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(4);
  at::Tensor x = torch::randn({75, 4}, gen);
  at::Tensor y = torch::randint(0, 3, {75}, gen, torch::kLong);
  auto train = std::make_shared<data::TensorDataset>(x.slice(0, 0, 40), y.slice(0, 0, 40), 3);
  auto val = std::make_shared<data::TensorDataset>(x.slice(0, 40), y.slice(0, 40), 3);  // 35: 7 batches of 5
  data::LoaderOptions lo;
  lo.batch_size = 5;
  TensorDataModule dm(train, val, val, lo, 3);
  for (const double limit : {1.0, 0.25}) {  // all 7 batches; 1 batch (rank 1 has none)
    TrainerOptions o;
    o.device = "cpu";
    o.enable_progress_bar = false;
    o.enable_model_summary = false;
    o.limit_val_batches = limit;
    Tiny ddp_task, one_task;
    Trainer ddp(o, {}, {}, {}, g);
    Trainer one(o, {}, {}, {});
    const EvalResult a = ddp.validate(ddp_task, dm);
    const EvalResult b = one.validate(one_task, dm);
    EXPECT_EQ(a.samples, limit == 1.0 ? 35 : 5);
    EXPECT_EQ(a.samples, b.samples);
    EXPECT_EQ(a.loss, b.loss);
    EXPECT_EQ(a.accuracy, b.accuracy);
    EXPECT_EQ(a.metrics, b.metrics);
  }
}
TEST(Ddp, ExactValidation) { expect_all_ok(testing::spawn_ranks("DdpWorker.ExactValidation", 2)); }

TEST(SyncBatchNorm, ForeignLayersAreNamed) {
  if (testing::is_rank_worker()) GTEST_SKIP();
  torch::nn::Sequential s(torch::nn::Linear(2, 2), torch::nn::BatchNorm1d(2));
  auto sync = std::make_shared<Sync>(nullptr);
  try {
    nn::set_batchnorm_sync(*s, sync);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("torch::nn BatchNorm layers: 1"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(nn::set_batchnorm_sync(*s, nullptr).empty());
}

}  // namespace
}  // namespace glassbox::train
