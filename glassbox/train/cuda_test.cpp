// CUDA tests (label "cuda"): skip themselves where no GPU is present. Run on a GPU machine with
// `ctest --test-dir build -L cuda`.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "glassbox/core/device.h"
#include "glassbox/data/loader.h"
#include "glassbox/dist/backends.h"
#include "glassbox/dist/group.h"
#include "glassbox/nn/registry.h"
#include "glassbox/train/trainer.h"

namespace glassbox::train {
namespace {

class CudaToyData final : public DataModule {
 public:
  CudaToyData() {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(123);
    at::Tensor x = torch::randn({512, 1, 8, 8}, gen);
    at::Tensor y = (x.flatten(1).sum(1) > 0).to(torch::kLong);
    set_ = std::make_shared<data::TensorDataset>(x, y, 2);
    opts_.batch_size = 64;
    opts_.shuffle = true;
    opts_.num_workers = 2;
    opts_.pin_memory = true;
  }
  void setup() override {}
  DataInfo info() const override { return {{1, 8, 8}, 2, {}, {}, {}}; }
  std::shared_ptr<const data::Dataset> train_dataset() const override { return set_; }
  std::shared_ptr<const data::Dataset> val_dataset() const override { return set_; }
  std::shared_ptr<const data::Dataset> test_dataset() const override { return set_; }
  data::LoaderOptions train_loader_options() const override { return opts_; }
  data::LoaderOptions eval_loader_options() const override { return opts_; }

 private:
  std::shared_ptr<data::TensorDataset> set_;
  data::LoaderOptions opts_;
};

double train_on_cuda(const std::string& precision) {
  torch::manual_seed(0);
  nn::ModelOptions m;
  m.name = "cnn";
  m.cnn.channels = {8};
  ClassificationTask task(nn::make_model(m, nn::ModelShape{{1, 8, 8}, 2}), nn::Loss(nn::LossOptions{}, 2));
  TrainerOptions t;
  t.max_epochs = 5;
  t.device = "cuda";
  t.precision = enum_of<PrecisionMode>(precision);
  t.enable_progress_bar = false;
  OptimizerOptions o;
  o.name = OptimizerKind::kAdamW;
  o.lr = 3e-3;
  CudaToyData data;
  Trainer trainer(t, o, SchedulerOptions{});
  trainer.fit(task, data);
  EXPECT_TRUE(task.module().parameters()[0].is_cuda());
  return trainer.test(task, data).accuracy;
}

TEST(Cuda, TrainsInEveryPrecision) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (const std::string p : {"32", "bf16-mixed", "16-mixed"}) EXPECT_GT(train_on_cuda(p), 0.8) << p;
}

TEST(Cuda, LoaderPinsBatchesForNonBlockingCopies) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  CudaToyData data;
  data::Loader loader(data.train_dataset(), data.train_loader_options());
  loader.start_epoch(0);
  auto b = loader.next();
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->inputs.is_pinned());
  at::Tensor dev = b->inputs.to(resolve_device("cuda"), /*non_blocking=*/true);
  EXPECT_TRUE(torch::equal(dev.cpu(), b->inputs));
}

// The data-parallel path on NCCL with one rank on one GPU: the Reducer's all-reduce on CUDA, the
// agreements on Gloo (CPU), exact evaluation's gathers on CUDA tensors.
TEST(Cuda, DataParallelOnNccl) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  if (!dist::nccl_built()) GTEST_SKIP() << "this build has no NCCL";
  dist::WorldInfo world;
  world.master_port = dist::free_local_port();
  dist::GroupOptions go;
  go.timeout = std::chrono::seconds(120);
  go.device = c10::Device(c10::kCUDA, 0);
  auto group = dist::Group::connect(world, go);
  EXPECT_STREQ(group->backend_name(), "nccl");
  std::vector<at::Tensor> t{torch::ones({4}, torch::kCUDA)};
  group->all_reduce(t);
  EXPECT_TRUE(t[0].cpu().equal(torch::ones({4})));

  torch::manual_seed(0);
  nn::ModelOptions m;
  m.name = "cnn";
  m.cnn.channels = {8};
  ClassificationTask task(nn::make_model(m, nn::ModelShape{{1, 8, 8}, 2}), nn::Loss(nn::LossOptions{}, 2));
  TrainerOptions o;
  o.max_epochs = 5;
  o.device = "cuda";
  o.enable_progress_bar = false;
  o.sync_batchnorm = true;
  OptimizerOptions opt;
  opt.name = OptimizerKind::kAdamW;
  opt.lr = 3e-3;
  CudaToyData data;
  Trainer trainer(o, opt, SchedulerOptions{}, {}, group);
  trainer.fit(task, data);
  EXPECT_TRUE(task.module().parameters()[0].is_cuda());
  EXPECT_GT(trainer.test(task, data).accuracy, 0.8);
}

}  // namespace
}  // namespace glassbox::train
