#include "glassbox/train/trainer.h"

#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/metrics/classification.h"
#include "glassbox/nn/registry.h"
#include "glassbox/testing/testing.h"
#include "glassbox/train/averaging.h"
#include "glassbox/train/callbacks.h"

namespace glassbox::train {
namespace {

namespace fs = std::filesystem;

// Small synthetic classification data: learnable (labels depend on the inputs).
class ToyData final : public DataModule {
 public:
  explicit ToyData(std::int64_t n = 600, std::int64_t workers = 0) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(123);
    at::Tensor x = torch::randn({n, 1, 4, 4}, gen);
    at::Tensor y = (x.flatten(1).sum(1) > 0).to(torch::kLong) + 2 * (x.flatten(1).select(1, 0) > 0).to(torch::kLong);
    train_ = std::make_shared<data::TensorDataset>(x.slice(0, 0, n * 4 / 5), y.slice(0, 0, n * 4 / 5), 4);
    val_ = std::make_shared<data::TensorDataset>(x.slice(0, n * 4 / 5), y.slice(0, n * 4 / 5), 4);
    opts_.batch_size = 32;
    opts_.shuffle = true;
    opts_.num_workers = workers;
    opts_.seed = 7;
  }
  void setup() override {}
  DataInfo info() const override { return {{1, 4, 4}, 4, {}, {}, {}}; }
  std::shared_ptr<const data::Dataset> train_dataset() const override { return train_; }
  std::shared_ptr<const data::Dataset> val_dataset() const override { return val_; }
  std::shared_ptr<const data::Dataset> test_dataset() const override { return val_; }
  data::LoaderOptions train_loader_options() const override { return opts_; }
  data::LoaderOptions eval_loader_options() const override {
    data::LoaderOptions o = opts_;
    o.shuffle = false;
    return o;
  }

 private:
  std::shared_ptr<data::TensorDataset> train_, val_;
  data::LoaderOptions opts_;
};

std::unique_ptr<ClassificationTask> make_task(std::uint64_t seed, const std::string& name = "mlp") {
  torch::manual_seed(seed);
  nn::ModelOptions m;
  m.name = name;
  m.mlp.hidden = {32, 16};
  m.mlp.dropout = 0.3;
  m.mlp.norm = nn::MlpNorm::kBatchNorm;
  return std::make_unique<ClassificationTask>(nn::make_model(m, nn::ModelShape{{1, 4, 4}, 4}),
                                              nn::Loss(nn::LossOptions{}, 4));
}

TrainerOptions quiet(std::int64_t epochs) {
  TrainerOptions t;
  t.max_epochs = epochs;
  t.enable_progress_bar = false;
  t.enable_model_summary = false;
  t.device = "cpu";
  t.log_every_n_steps = 5;
  return t;
}

class StopAtStep final : public Callback {
 public:
  explicit StopAtStep(std::int64_t step) : step_(step) {}
  std::string name() const override { return "StopAtStep"; }
  void on_train_batch_end(Trainer& t, const StepOutput&, const data::Batch&) override {
    if (t.global_step() == step_) t.request_stop("interrupted for the test");
  }

 private:
  std::int64_t step_;
};

class Recorder final : public Callback {
 public:
  std::string name() const override { return "Recorder"; }
  void on_fit_start(Trainer&) override { hooks.push_back("fit_start"); }
  void on_train_epoch_start(Trainer&) override { hooks.push_back("epoch_start"); }
  void on_train_batch_start(Trainer&, const data::Batch&) override { hooks.push_back("batch_start"); }
  void on_before_zero_grad(Trainer&) override { hooks.push_back("before_zero_grad"); }
  void on_before_backward(Trainer&, const at::Tensor&) override { hooks.push_back("before_backward"); }
  void on_after_backward(Trainer&) override { hooks.push_back("after_backward"); }
  void on_before_optimizer_step(Trainer&) override { hooks.push_back("before_optimizer_step"); }
  void on_train_batch_end(Trainer&, const StepOutput&, const data::Batch&) override { hooks.push_back("batch_end"); }
  void on_validation_start(Trainer& t) override { hooks.push_back(t.sanity_checking() ? "sanity_start" : "val_start"); }
  void on_validation_end(Trainer&) override { hooks.push_back("val_end"); }
  void on_train_epoch_end(Trainer&) override { hooks.push_back("epoch_end"); }
  void on_train_end(Trainer&) override { hooks.push_back("train_end"); }
  void on_fit_end(Trainer&) override { hooks.push_back("fit_end"); }
  std::vector<std::string> hooks;
};

SchedulerOptions onecycle() {
  SchedulerOptions s;
  s.name = SchedulerKind::kOnecycle;
  s.interval = SchedulerInterval::kStep;
  return s;
}

OptimizerOptions adamw() {
  OptimizerOptions o;
  o.name = OptimizerKind::kAdamW;
  o.lr = 3e-3;
  o.weight_decay = 0.01;
  return o;
}

void expect_same_weights(torch::nn::Module& a, torch::nn::Module& b) {
  auto pa = a.named_parameters(true);
  auto pb = b.named_parameters(true);
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& item : pa) EXPECT_TRUE(torch::equal(item.value(), pb[item.key()])) << item.key() << " differs";
  auto ba = a.named_buffers(true);
  auto bb = b.named_buffers(true);
  for (const auto& item : ba) EXPECT_TRUE(torch::equal(item.value(), bb[item.key()])) << item.key() << " differs";
}

TEST(Trainer, LearnsToyProblemAndLogs) {
  const fs::path dir = testing::temp_dir("learns");
  ToyData data;
  auto task = make_task(1);
  Trainer trainer(quiet(8), adamw(), onecycle(), dir);
  trainer.add_callback(std::make_unique<ModelCheckpoint>(CheckpointOptions{}));
  const EvalResult before = trainer.validate(*task, data);
  trainer.fit(*task, data);
  EvalResult r = trainer.test(*task, data);
  // Four balanced classes: chance is ~0.25; the trained model must be far above it.
  EXPECT_LT(before.accuracy, 0.45);
  EXPECT_GT(r.accuracy, 0.65);
  EXPECT_LT(r.loss, 1.0);
  EXPECT_TRUE(fs::exists(dir / "metrics.jsonl"));
  EXPECT_TRUE(fs::exists(dir / "metrics.csv"));
  EXPECT_TRUE(fs::exists(dir / "checkpoints" / "last.ckpt" / "model.safetensors"));
  EXPECT_EQ(trainer.global_step(), 8 * 15);  // 480 samples / 32
  // metrics.csv has the logged columns, one row per log event.
  const std::string csv = read_file(dir / "metrics.csv");
  const std::string header = csv.substr(0, csv.find('\n'));
  for (const char* col :
       {"epoch", "step", "train_loss", "train_acc", "lr", "grad_norm", "val_loss", "val_acc", "test_acc"})
    EXPECT_NE(header.find(col), std::string::npos) << col << " missing from " << header;
  // One row per logged step (every 5 of 120) + one per epoch + the test row.
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 24 + 8 + 1) << csv;
  EXPECT_EQ(trainer.stop_reason(), "max_epochs reached");
}

TEST(Trainer, HookOrderFollowsLightning) {
  ToyData data(100);
  auto task = make_task(1);
  TrainerOptions t = quiet(1);
  t.limit_train_batches = 2;
  t.num_sanity_val_steps = 1;
  Trainer trainer(t, adamw(), SchedulerOptions{});
  auto rec = std::make_unique<Recorder>();
  Recorder* r = rec.get();
  trainer.add_callback(std::move(rec));
  trainer.fit(*task, data);
  const std::vector<std::string> step = {"batch_start",    "before_zero_grad",      "before_backward",
                                         "after_backward", "before_optimizer_step", "batch_end"};
  std::vector<std::string> want = {"fit_start", "epoch_start"};
  for (int i = 0; i < 2; ++i) want.insert(want.end(), step.begin(), step.end());
  want.insert(want.end(), {"val_start", "val_end", "epoch_end", "train_end", "fit_end"});
  EXPECT_EQ(r->hooks, want);
}

TEST(Trainer, AccumulationAndLimits) {
  ToyData data;
  auto task = make_task(1);
  TrainerOptions t = quiet(2);
  t.accumulate_grad_batches = 4;
  t.limit_train_batches = 10;
  Trainer trainer(t, adamw(), SchedulerOptions{});
  trainer.fit(*task, data);
  EXPECT_EQ(trainer.global_step(), 2 * 3);  // 10 batches per epoch -> steps after 4, 8, 10
  TrainerOptions m = quiet(-1);
  m.max_steps = 7;
  Trainer t2(m, adamw(), SchedulerOptions{});
  t2.fit(*task, data);
  EXPECT_EQ(t2.global_step(), 7);
  EXPECT_EQ(t2.stop_reason(), "max_steps reached");
}

TEST(Trainer, FreezeByPatternKeepsWeights) {
  ToyData data;
  auto task = make_task(1);
  const at::Tensor before = task->module().named_parameters()["body.fc0.weight"].clone();
  TrainerOptions t = quiet(1);
  t.freeze = {"body.fc0.*"};
  Trainer trainer(t, adamw(), SchedulerOptions{});
  trainer.fit(*task, data);
  EXPECT_TRUE(torch::equal(before, task->module().named_parameters()["body.fc0.weight"]));
  TrainerOptions bad = quiet(1);
  bad.freeze = {"body.fc9.*"};
  Trainer t2(bad, adamw(), SchedulerOptions{});
  EXPECT_THROW(t2.fit(*make_task(1), data), Error);
}

// freeze_fraction freezes whole layers from the input side; a BatchNorm whose parameters are all
// frozen keeps its running statistics (eval mode), the others learn theirs.
TEST(Trainer, FreezeFractionKeepsTheInputSideAndItsBatchNormStatistics) {
  ToyData data;
  auto task = make_task(1);
  auto named = task->module().named_parameters();
  auto buffers = task->module().named_buffers();
  const at::Tensor fc1 = named["body.fc1.weight"].clone(), head = named["body.head.weight"].clone();
  const at::Tensor bn0_mean = buffers["body.bn0.running_mean"].clone(),
                   bn1_mean = buffers["body.bn1.running_mean"].clone();
  TrainerOptions t = quiet(1);
  t.freeze_fraction = 0.5;  // fc0 + bn0 = 608 of 1236 parameters: not yet half, so fc1 too
  Trainer trainer(t, adamw(), SchedulerOptions{});
  trainer.fit(*task, data);
  EXPECT_EQ(trainer.freeze_report().frozen, 544 + 64 + 528);
  EXPECT_EQ(trainer.freeze_report().total, 1236);
  named = task->module().named_parameters();
  buffers = task->module().named_buffers();
  EXPECT_TRUE(torch::equal(fc1, named["body.fc1.weight"]));
  EXPECT_FALSE(torch::equal(head, named["body.head.weight"]));
  EXPECT_TRUE(torch::equal(bn0_mean, buffers["body.bn0.running_mean"]));
  EXPECT_FALSE(torch::equal(bn1_mean, buffers["body.bn1.running_mean"]));

  // trainer.frozen_bn_eval = false: the frozen BatchNorm follows the batches again.
  task = make_task(1);
  t.frozen_bn_eval = false;
  Trainer again(t, adamw(), SchedulerOptions{});
  again.fit(*task, data);
  EXPECT_FALSE(torch::equal(bn0_mean, task->module().named_buffers()["body.bn0.running_mean"]));
}

// Lightning's BackboneFinetuning (tests/reference/finetune_ref.py runs it): the frozen layers join
// at unfreeze_at_epoch in a group of their own, whose lr grows each epoch; the same sequence of
// group lrs, the frozen weights untouched before, and a resume after the unfreeze is bit-exact.
class LrRecorder final : public Callback {
 public:
  std::string name() const override { return "LrRecorder"; }
  void on_train_epoch_start(Trainer& t) override { lrs.push_back(t.optimizer()->lrs()); }
  std::vector<std::vector<double>> lrs;
};

TEST(Trainer, BackboneFinetuningFollowsLightning) {
  const auto ref = nlohmann::json::parse(testing::run_python("tests/reference/finetune_ref.py"));
  ToyData data;
  OptimizerOptions sgd;
  sgd.name = OptimizerKind::kSgd;
  for (const auto& c : ref["cases"]) {
    sgd.lr = c["lr"].get<double>();
    auto task = make_task(3);
    const at::Tensor fc0 = task->module().named_parameters()["body.fc0.weight"].clone();
    TrainerOptions t = quiet(c["epochs"].get<std::int64_t>());
    t.freeze_fraction = 0.5;
    t.unfreeze_at_epoch = c["unfreeze_at"].get<std::int64_t>();
    t.unfreeze_lr_ratio = c["ratio"].get<double>();
    t.unfreeze_lr_multiplier = c["multiplier"].get<double>();
    t.unfreeze_align = c["align"].get<bool>();
    Trainer trainer(t, sgd, SchedulerOptions{});
    auto rec = std::make_unique<LrRecorder>();
    LrRecorder* seen = rec.get();
    trainer.add_callback(std::move(rec));
    trainer.fit(*task, data);
    const auto want = c["lrs"].get<std::vector<std::vector<double>>>();
    ASSERT_EQ(seen->lrs.size(), want.size()) << c.dump();
    for (std::size_t e = 0; e < want.size(); ++e) {
      ASSERT_EQ(seen->lrs[e].size(), want[e].size()) << "epoch " << e << " " << c.dump();
      for (std::size_t g = 0; g < want[e].size(); ++g)
        EXPECT_NEAR(seen->lrs[e][g], want[e][g], 1e-15) << "epoch " << e << " group " << g << " " << c.dump();
    }
    EXPECT_FALSE(torch::equal(fc0, task->module().named_parameters()["body.fc0.weight"]));  // trained at the end
    EXPECT_GT(trainer.unfrozen_lr(), 0.0);
  }

  // Frozen until the epoch, then training; a resume after the unfreeze ends where an uninterrupted
  // run does (the added group and its lr come back from the checkpoint).
  const fs::path a_dir = testing::temp_dir("finetune_a");
  const fs::path b_dir = testing::temp_dir("finetune_b");
  TrainerOptions t = quiet(4);
  t.freeze_fraction = 0.5;
  t.unfreeze_at_epoch = 2;
  auto a = make_task(5);
  {
    const at::Tensor fc0 = a->module().named_parameters()["body.fc0.weight"].clone();
    TrainerOptions two = t;
    two.max_epochs = 2;
    Trainer first(two, adamw(), SchedulerOptions{}, testing::temp_dir("finetune_frozen"));
    first.fit(*a, data);
    EXPECT_TRUE(torch::equal(fc0, a->module().named_parameters()["body.fc0.weight"]));  // epochs 0, 1: frozen
    EXPECT_EQ(first.unfrozen_lr(), 0.0);
  }
  a = make_task(5);
  {
    Trainer full(t, adamw(), onecycle(), a_dir);
    full.fit(*a, data);
  }
  {
    auto b = make_task(5);
    Trainer part(t, adamw(), onecycle(), b_dir);
    part.add_callback(std::make_unique<ModelCheckpoint>(CheckpointOptions{}));
    part.add_callback(std::make_unique<StopAtStep>(52));  // mid-epoch 3, after the unfreeze at epoch 2
    part.fit(*b, data);
    ASSERT_EQ(part.global_step(), 52);
  }
  auto c = make_task(99);
  Trainer resumed(t, adamw(), onecycle(), b_dir);
  resumed.fit(*c, data, b_dir / "checkpoints" / "last.ckpt");
  EXPECT_EQ(resumed.global_step(), 60);
  expect_same_weights(a->module(), c->module());

  TrainerOptions none = quiet(1);
  none.unfreeze_at_epoch = 1;
  EXPECT_THROW(none.validate(), Error);  // nothing frozen to unfreeze
}

TEST(Trainer, ResumeMidEpochIsBitExact) {
  for (std::int64_t workers : {0, 2}) {
    const fs::path a_dir = testing::temp_dir("resume_a");
    const fs::path b_dir = testing::temp_dir("resume_b");
    ToyData data(600, workers);
    // A: uninterrupted, 3 epochs of 15 batches.
    auto a = make_task(5);
    {
      Trainer t(quiet(3), adamw(), onecycle(), a_dir);
      t.add_callback(std::make_unique<ModelCheckpoint>(CheckpointOptions{}));
      t.fit(*a, data);
    }
    // B: the same run interrupted at step 22 (mid-epoch 2), then resumed from last.ckpt.
    {
      auto b = make_task(5);
      Trainer t(quiet(3), adamw(), onecycle(), b_dir);
      t.add_callback(std::make_unique<ModelCheckpoint>(CheckpointOptions{}));
      t.add_callback(std::make_unique<StopAtStep>(22));
      t.fit(*b, data);
      ASSERT_EQ(t.global_step(), 22);
    }
    auto c = make_task(99);  // different initial weights: everything must come from the checkpoint
    Trainer t(quiet(3), adamw(), onecycle(), b_dir);
    t.add_callback(std::make_unique<ModelCheckpoint>(CheckpointOptions{}));
    t.fit(*c, data, b_dir / "checkpoints" / "last.ckpt");
    EXPECT_EQ(t.global_step(), 45);
    expect_same_weights(a->module(), c->module());
  }
}

// EMA in the Trainer: validation sees the average, the average replaces the weights at the end,
// and a run resumed mid-epoch ends with the same average and weights as one that was not.
TEST(Trainer, EmaResumesExactlyAndEndsWithTheAverage) {
  const fs::path a_dir = testing::temp_dir("ema_a");
  const fs::path b_dir = testing::temp_dir("ema_b");
  ToyData data;
  EmaOptions ema;
  ema.enabled = true;
  ema.decay = 0.9;
  auto a = make_task(5);
  const EmaCallback* a_ema = nullptr;
  {
    Trainer t(quiet(3), adamw(), onecycle(), a_dir);
    auto cb = std::make_unique<EmaCallback>(ema);
    a_ema = cb.get();
    t.add_callback(std::move(cb));
    t.add_callback(std::make_unique<ModelCheckpoint>(CheckpointOptions{}));
    t.fit(*a, data);
    // The model holds the average now.
    for (const auto& [n, v] : a_ema->average()->tensors())
      EXPECT_TRUE(torch::equal(v, a->module().named_parameters().contains(n) ? a->module().named_parameters()[n]
                                                                             : a->module().named_buffers()[n]))
          << n;
  }
  {
    auto b = make_task(5);
    Trainer t(quiet(3), adamw(), onecycle(), b_dir);
    t.add_callback(std::make_unique<EmaCallback>(ema));
    t.add_callback(std::make_unique<ModelCheckpoint>(CheckpointOptions{}));
    t.add_callback(std::make_unique<StopAtStep>(22));
    t.fit(*b, data);
  }
  // The checkpoint's model.safetensors holds the average, extra.safetensors the training weights.
  const Checkpoint ck = read_checkpoint(b_dir / "checkpoints" / "last.ckpt");
  EXPECT_NE(ck.extra.find("ema.raw.body.fc0.weight"), nullptr);
  EXPECT_FALSE(torch::equal(*ck.model.find("body.fc0.weight"), *ck.extra.find("ema.raw.body.fc0.weight")));
  auto c = make_task(99);
  Trainer t(quiet(3), adamw(), onecycle(), b_dir);
  t.add_callback(std::make_unique<EmaCallback>(ema));
  t.add_callback(std::make_unique<ModelCheckpoint>(CheckpointOptions{}));
  t.fit(*c, data, b_dir / "checkpoints" / "last.ckpt");
  EXPECT_EQ(t.global_step(), 45);
  expect_same_weights(a->module(), c->module());
}

// SWA: the rate anneals to swa.lr from the start epoch, the parameters are averaged once per
// epoch from there, and BatchNorm statistics are recomputed over the training set at the end.
TEST(Trainer, SwaAveragesFromItsStartEpochAndRecomputesBatchNorm) {
  ToyData data;
  auto task = make_task(3);
  SwaOptions o;
  o.enabled = true;
  o.epoch_start = 2;  // epochs 2 and 3 of 4
  o.lr = 0.01;
  o.anneal_epochs = 1;
  class LrRecorder final : public Callback {
   public:
    std::string name() const override { return "LrRecorder"; }
    void on_before_optimizer_step(Trainer& t) override { lrs[t.current_epoch()] = t.optimizer()->lr(0); }
    std::map<std::int64_t, double> lrs;
  };
  Trainer t(quiet(4), adamw(), SchedulerOptions{});
  auto swa = std::make_unique<SwaCallback>(o);
  SwaCallback* s = swa.get();
  t.add_callback(std::move(swa));
  auto rec = std::make_unique<LrRecorder>();
  LrRecorder* r = rec.get();
  t.add_callback(std::move(rec));
  t.fit(*task, data);
  EXPECT_EQ(s->averaged(), 2);
  EXPECT_EQ(s->start_epoch(4), 2);
  EXPECT_DOUBLE_EQ(r->lrs[1], 3e-3);  // before: the configured rate
  EXPECT_DOUBLE_EQ(r->lrs[2], 3e-3);  // k = 0: SWALR starts from it
  EXPECT_DOUBLE_EQ(r->lrs[3], 0.01);  // annealed over one epoch
  EXPECT_DOUBLE_EQ(s->swa_lr(0, 0.1), 0.1);
  o.anneal_epochs = 4;
  EXPECT_NEAR(SwaCallback(o).swa_lr(2, 0.1), 0.01 * 0.5 + 0.1 * 0.5, 1e-15);  // cos: alpha(1/2) = 1/2
  // update_bn: the running statistics are the cumulative average of one pass (480 samples, 64 a batch).
  EXPECT_EQ(task->module().named_buffers()["body.bn0.num_batches_tracked"].item<std::int64_t>(), 8);
}

// Validation computes scikit-learn's classification metrics (macro F1, AUPRC, per-class recall)
// for checkpoints and early stopping to monitor; they are those of the validation predictions.
TEST(Trainer, ValidationMetricsCanBeMonitored) {
  const fs::path dir = testing::temp_dir("val_metrics");
  ToyData data;
  auto task = make_task(4);
  CheckpointOptions ck;
  ck.monitor = "val_macro_f1";
  ck.mode = MetricMode::kMax;
  Trainer t(quiet(2), adamw(), SchedulerOptions{}, dir);
  auto cb = std::make_unique<ModelCheckpoint>(ck);
  ModelCheckpoint* ckpt = cb.get();
  t.add_callback(std::move(cb));
  t.fit(*task, data);
  const auto& m = t.callback_metrics();
  for (const char* k :
       {"val_macro_f1", "val_weighted_f1", "val_macro_ap", "val_recall_0", "val_f1_3", "val_precision_2"})
    EXPECT_TRUE(m.contains(k)) << k;
  EXPECT_FALSE(ckpt->best_model_path().empty());
  // The same numbers from the model's validation predictions, through the metrics module.
  task->module().eval();
  torch::NoGradGuard ng;
  std::vector<at::Tensor> probs, labels;
  data::Loader loader(data.val_dataset(), data.eval_loader_options());
  loader.start_epoch(0);
  while (auto b = loader.next()) {
    probs.push_back(torch::softmax(task->training_step(*b).logits.to(torch::kDouble), 1));
    labels.push_back(b->targets);
  }
  const auto r = metrics::classification_report(metrics::classification_input(torch::cat(labels), torch::cat(probs)));
  EXPECT_NEAR(m.at("val_macro_f1"), r.macro.f1, 1e-12);
  EXPECT_NEAR(m.at("val_recall_1"), r.per_class[1].prf.recall, 1e-12);
  EXPECT_NEAR(m.at("val_macro_ap"), r.average_precision_macro, 1e-12);
  // Logged per validation.
  const std::string rows = read_file(dir / "metrics.jsonl");
  EXPECT_NE(rows.find("\"val_macro_f1\""), std::string::npos);
}

// trainer.channels_last: NHWC weights and batches, the same training up to rounding.
TEST(Trainer, ChannelsLastTrainsTheSameUpToRounding) {
  ToyData data;
  auto run = [&](bool channels_last) {
    torch::manual_seed(8);
    nn::ModelOptions m;
    m.name = "cnn";
    m.cnn.channels = {8, 16};
    m.cnn.dropout = 0;
    auto task = std::make_unique<ClassificationTask>(nn::make_model(m, nn::ModelShape{{1, 4, 4}, 4}),
                                                     nn::Loss(nn::LossOptions{}, 4));
    TrainerOptions t = quiet(1);
    t.max_steps = 5;
    t.channels_last = channels_last;
    OptimizerOptions sgd;  // plain SGD: Adam's normalisation would magnify rounding in tiny gradients
    sgd.name = OptimizerKind::kSgd;
    sgd.lr = 0.05;
    Trainer trainer(t, sgd, SchedulerOptions{});
    trainer.fit(*task, data);
    return task;
  };
  auto plain = run(false);
  auto nhwc = run(true);
  const at::Tensor w = nhwc->module().named_parameters()["features.conv0_1.weight"];  // [8, 8, 3, 3]
  EXPECT_TRUE(w.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_FALSE(w.is_contiguous());
  for (const auto& p : plain->module().named_parameters())
    EXPECT_LT((p.value() - nhwc->module().named_parameters()[p.key()]).abs().max().item<double>(), 1e-5) << p.key();
}

TEST(Checkpoint, AnotherArchitectureNamesTensors) {
  const fs::path dir = testing::temp_dir("arch");
  ToyData data;
  auto task = make_task(1);
  Trainer t(quiet(1), adamw(), SchedulerOptions{}, dir);
  t.add_callback(std::make_unique<ModelCheckpoint>(CheckpointOptions{}));
  t.fit(*task, data);
  torch::manual_seed(0);
  nn::ModelOptions m;
  m.mlp.hidden = {64};
  auto other = nn::make_model(m, nn::ModelShape{{1, 4, 4}, 4});
  Checkpoint c = read_checkpoint(dir / "checkpoints" / "last.ckpt");
  try {
    load_module_state(*other->module(), c.model, false);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kFailedPrecondition);
    EXPECT_EQ(e.message().rfind("the checkpoint does not fit this model: shape mismatch: ", 0), 0u) << e.message();
    EXPECT_NE(e.message().find("body.fc0.weight (checkpoint [32, 16], model [64, 16])"), std::string::npos)
        << e.message();
    EXPECT_NE(e.message().find("unexpected: body.bn0."), std::string::npos) << e.message();
  }
}

TEST(Checkpoint, FailedSaveKeepsPreviousCheckpoint) {
  const fs::path dir = testing::temp_dir("failsave");
  ToyData data;
  auto task = make_task(1);
  CheckpointOptions co;
  co.monitor = "";
  co.save_top_k = 0;
  Trainer t(quiet(1), adamw(), SchedulerOptions{}, dir);
  t.add_callback(std::make_unique<ModelCheckpoint>(co));
  t.fit(*task, data);
  const fs::path last = dir / "checkpoints" / "last.ckpt";
  const std::string before = read_file(last / "model.safetensors");
  const std::string state_before = read_file(last / "state.json");
  // Train further, then make the next write fail mid-file as a full disk would.
  TrainerOptions more = quiet(2);
  Trainer t2(more, adamw(), SchedulerOptions{}, dir);
  t2.add_callback(std::make_unique<ModelCheckpoint>(co));
  inject_write_failure_for_testing(2);
  EXPECT_THROW(t2.fit(*task, data, last), Error);
  inject_write_failure_for_testing(0);
  EXPECT_EQ(read_file(last / "model.safetensors"), before);
  EXPECT_EQ(read_file(last / "state.json"), state_before);
  for (const auto& e : fs::directory_iterator(dir / "checkpoints"))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  EXPECT_NO_THROW(read_checkpoint(last));
}

TEST(Checkpoint, TrainableOnlySkipsFrozenAndLoadsPartially) {
  const fs::path dir = testing::temp_dir("trainable");
  ToyData data;
  auto task = make_task(1);
  TrainerOptions t = quiet(1);
  t.freeze = {"body.fc0.*", "body.bn0.*"};
  CheckpointOptions co;
  co.save_trainable_only = true;
  Trainer tr(t, adamw(), SchedulerOptions{}, dir);
  tr.add_callback(std::make_unique<ModelCheckpoint>(co));
  tr.fit(*task, data);
  Checkpoint c = read_checkpoint(dir / "checkpoints" / "last.ckpt");
  EXPECT_EQ(c.model.find("body.fc0.weight"), nullptr);
  EXPECT_NE(c.model.find("body.fc1.weight"), nullptr);
  auto fresh = make_task(1);
  fresh->module().named_parameters()["body.fc0.weight"].set_requires_grad(false);
  fresh->module().named_parameters()["body.fc0.bias"].set_requires_grad(false);
  fresh->module().named_parameters()["body.bn0.weight"].set_requires_grad(false);
  fresh->module().named_parameters()["body.bn0.bias"].set_requires_grad(false);
  EXPECT_NO_THROW(load_module_state(fresh->module(), c.model, true));
}

TEST(Trainer, EarlyStoppingCountsValidationChecksAndRecordsReason) {
  ToyData data;
  auto task = make_task(1);
  TrainerOptions t = quiet(50);
  t.val_check_interval = 0.5;  // two validation checks per epoch
  OptimizerOptions frozen = adamw();
  frozen.lr = 0.0;  // nothing improves
  frozen.weight_decay = 0.0;
  Trainer trainer(t, frozen, SchedulerOptions{});
  EarlyStoppingOptions es;
  es.enabled = true;
  es.patience = 3;
  trainer.add_callback(std::make_unique<EarlyStopping>(es));
  trainer.fit(*task, data);
  // check 1 sets the best; checks 2, 3, 4 do not improve -> stop at the 4th check (mid-epoch 2).
  EXPECT_EQ(trainer.current_epoch(), 1);
  EXPECT_NE(
      trainer.stop_reason().find("early stopping: val_loss did not improve by more than 0 for 3 validation checks"),
      std::string::npos)
      << trainer.stop_reason();
}

// After an early stop mid-epoch the bar ends where the run stopped, with the reason (it said
// "N/N", a whole epoch, before); a non-finite loss reads as such, not "-nan".
TEST(ProgressBar, EndsWhereAnEarlyStopLeftTheEpochAndNamesTheReason) {
  ToyData data;
  auto task = make_task(1);
  TrainerOptions t = quiet(50);
  t.val_check_interval = 0.5;
  OptimizerOptions frozen = adamw();
  frozen.lr = 0.0;
  frozen.weight_decay = 0.0;
  Trainer trainer(t, frozen, SchedulerOptions{});
  EarlyStoppingOptions es;
  es.enabled = true;
  es.patience = 3;
  trainer.add_callback(std::make_unique<EarlyStopping>(es));
  std::ostringstream out;
  auto bar = std::make_unique<ProgressBarCallback>(out);
  bar->bar().set_terminal(false);
  trainer.add_callback(std::move(bar));
  trainer.fit(*task, data);
  ASSERT_EQ(trainer.stop_kind(), StopKind::kEarlyStopping);
  const std::int64_t n = trainer.num_training_batches();
  const std::string last = out.str().substr(out.str().rfind("epoch 2/50"));
  EXPECT_NE(last.find("epoch 2/50 " + std::to_string(trainer.batch_in_epoch()) + "/" + std::to_string(n)),
            std::string::npos)
      << out.str();
  EXPECT_LT(trainer.batch_in_epoch(), n);
  EXPECT_NE(last.find("(stopped: early stopping: val_loss did not improve"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("nan"), std::string::npos) << out.str();
}

TEST(Trainer, Bf16AutocastOnCpuTrains) {
  ToyData data;
  auto task = make_task(1);
  TrainerOptions t = quiet(8);
  t.precision = PrecisionMode::kBf16Mixed;
  Trainer trainer(t, adamw(), onecycle());
  trainer.fit(*task, data);
  EXPECT_GT(trainer.test(*task, data).accuracy, 0.6);
  TrainerOptions fp16 = quiet(1);
  fp16.precision = PrecisionMode::k16Mixed;
  fp16.device = "cpu";
  Trainer bad(fp16, adamw(), SchedulerOptions{});
  EXPECT_THROW(bad.fit(*task, data), Error);  // fp16 needs CUDA; bf16 is the CPU choice
}

TEST(Trainer, GradientClippingByNormBoundsTheStep) {
  ToyData data;
  auto task = make_task(1);
  TrainerOptions t = quiet(1);
  t.gradient_clip_val = 1e-3;
  t.log_every_n_steps = 1;
  class NormCheck final : public Callback {
   public:
    std::string name() const override { return "NormCheck"; }
    void on_before_optimizer_step(Trainer& tr) override {
      std::vector<at::Tensor> norms;
      for (const auto& p : tr.task()->module().parameters())
        if (p.grad().defined()) norms.push_back(p.grad().norm());
      max_norm = std::max(max_norm, torch::stack(norms).norm().item<double>());
      unclipped = std::max(unclipped, tr.last_grad_norm());
    }
    double max_norm = 0, unclipped = 0;
  };
  auto check = std::make_unique<NormCheck>();
  NormCheck* c = check.get();
  Trainer trainer(t, adamw(), SchedulerOptions{});
  trainer.add_callback(std::move(check));
  trainer.fit(*task, data);
  EXPECT_LE(c->max_norm, 1.0001e-3);
  EXPECT_GT(c->unclipped, 1e-2);  // the raw norms were far above the threshold
}

TEST(Checkpoint, PythonSafetensorsReadsTheWeights) {
  const fs::path dir = testing::temp_dir("pyread");
  ToyData data;
  auto task = make_task(1);
  Trainer t(quiet(1), adamw(), SchedulerOptions{}, dir);
  t.add_callback(std::make_unique<ModelCheckpoint>(CheckpointOptions{}));
  t.fit(*task, data);
  const fs::path weights = dir / "checkpoints" / "last.ckpt" / "model.safetensors";
  const std::string script =
      "import json,sys; from safetensors.torch import load_file; d=load_file(sys.argv[1]); "
      "print(json.dumps({k: [list(v.shape), float(v.double().sum())] for k, v in d.items()}))";
  auto [rc, out] =
      testing::run_command("'" + testing::python().string() + "' -c \"" + script + "\" '" + weights.string() + "'");
  ASSERT_EQ(rc, 0) << out;
  const auto j = nlohmann::json::parse(out.substr(out.find('{')));
  int n = 0;
  for (const auto& p : task->module().named_parameters(true)) {
    ASSERT_TRUE(j.contains(p.key())) << p.key();
    EXPECT_EQ(j[p.key()][0].get<std::vector<std::int64_t>>(), p.value().sizes().vec());
    EXPECT_NEAR(j[p.key()][1].get<double>(), p.value().to(torch::kDouble).sum().item<double>(), 1e-9);
    ++n;
  }
  EXPECT_TRUE(j.contains("body.bn0.running_mean"));
  EXPECT_EQ(n, 10);
}

}  // namespace
}  // namespace glassbox::train
