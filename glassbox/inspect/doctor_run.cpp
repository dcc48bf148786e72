// The doctor, part 2: the short instrumented run and what it measures.
#include <algorithm>
#include <cmath>
#include <optional>
#include <ostream>

#include <fmt/format.h>
#include <torch/torch.h>

#include "glassbox/inspect/doctor_internal.h"
#include "glassbox/inspect/label_noise.h"
#include "glassbox/inspect/layer_map.h"
#include "glassbox/inspect/recorder.h"
#include "glassbox/metrics/running.h"
#include "glassbox/train/trainer.h"

namespace glassbox::inspect::detail {

namespace {

std::uint64_t batch_hash(const at::Tensor& x) {
  if (!x.defined() || x.numel() == 0) return 0;
  auto h = sample_hashes(x.reshape({1, -1}));
  return h.empty() ? 0 : h[0];
}

// Collects the per-step histories the rules read.
class DoctorCallback final : public train::Callback {
 public:
  explicit DoctorCallback(RunFacts& r, std::ostream* log) : r_(r), log_(log) {}
  std::string name() const override { return "Doctor"; }
  const data::Batch& last_batch() const { return batch_; }

  void on_train_batch_start(train::Trainer&, const data::Batch& b) override {
    batch_ = b;
    r_.batch_hash.push_back(batch_hash(b.inputs));
    r_.batch_size.push_back(b.size());
  }
  void on_after_backward(train::Trainer& t) override { t.request_grad_norm(); }
  void on_train_batch_end(train::Trainer& t, const train::StepOutput& out, const data::Batch& b) override {
    const double loss = out.loss.defined() ? out.loss.detach().to(torch::kDouble).item<double>() : NAN;
    r_.loss.push_back(loss);
    double acc = NAN;
    if (out.logits.defined() && out.logits.dim() == 2 && b.targets.dim() == 1 && b.size() > 0) {
      try {
        acc = static_cast<double>(metrics::count_topk_correct(out.logits.detach(), b.targets, 1)) /
              static_cast<double>(b.size());
      } catch (const std::exception&) {
        // labels out of range for the logits: the data findings cover it
      }
    }
    r_.acc.push_back(acc);
    r_.lr.push_back(t.optimizer() != nullptr ? t.optimizer()->lr(0) : NAN);
    r_.grad_norm.push_back(t.has_grad_norm() ? t.last_grad_norm() : NAN);
    if (std::isfinite(loss)) {
      window_sum_ += loss;
      ++window_n_;
    }
    if (log_ != nullptr && (r_.loss.size() % 50 == 0))
      *log_ << fmt::format("doctor: step {} loss {:.4f}\n", r_.loss.size(), loss) << std::flush;
  }
  void on_validation_end(train::Trainer& t) override {
    if (t.sanity_checking()) return;
    const auto& m = t.callback_metrics();
    Validation v;
    v.step = t.global_step();
    v.val_loss = m.count("val_loss") ? m.at("val_loss") : NAN;
    v.val_acc = m.count("val_acc") ? m.at("val_acc") : NAN;
    v.train_loss = window_n_ > 0 ? window_sum_ / static_cast<double>(window_n_) : NAN;
    window_sum_ = 0;
    window_n_ = 0;
    r_.validations.push_back(v);
  }

 private:
  RunFacts& r_;
  std::ostream* log_;
  data::Batch batch_;
  double window_sum_ = 0;
  std::int64_t window_n_ = 0;
};

// The smallest running-statistics momentum of the model's BatchNorm layers (1 for a cumulative
// average, which has caught up after one pass).
double smallest_bn_momentum(torch::nn::Module& model) {
  double m = 1.0;
  for (const auto& mod : model.modules(/*include_self=*/true)) {
    std::optional<double> mo;
    if (auto* b1 = mod->as<torch::nn::BatchNorm1d>())
      mo = b1->options.momentum();
    else if (auto* b2 = mod->as<torch::nn::BatchNorm2d>())
      mo = b2->options.momentum();
    else if (auto* b3 = mod->as<torch::nn::BatchNorm3d>())
      mo = b3->options.momentum();
    else
      continue;
    if (mo && *mo > 0) m = std::min(m, *mo);
  }
  return m;
}

// Accuracy on the same training samples with the statistics of large batches (train mode, close
// to the population's) and with the running statistics (eval mode). Early in training the
// weights move faster than the running averages follow (a lag of about 1/momentum steps), a
// gap that closes by itself; so the running statistics first catch up with the final weights
// under the configured momentum and batch size: ceil(3 / momentum) batches (3 to 64, at most
// 4096 samples) in train mode without gradients. What remains is what those settings give.
// Buffers are restored after.
void batchnorm_check(train::TaskModule& task, train::DataModule& data, c10::Device device, std::int64_t batch_size,
                     RunFacts& r) {
  auto ds = data.train_dataset();
  const std::int64_t bs = std::min<std::int64_t>(256, ds->size());
  const std::int64_t n = std::min<std::int64_t>(ds->size(), 1024) / std::max<std::int64_t>(1, bs) * bs;
  if (n < 2) return;
  // The buffers as the run left them, restored on every way out.
  struct Restore {
    std::vector<std::pair<at::Tensor, at::Tensor>> buffers;
    ~Restore() {
      torch::NoGradGuard ng;
      for (auto& [b, s] : buffers) b.copy_(s);
    }
  } original;
  for (auto& b : task.module().buffers(true)) original.buffers.emplace_back(b, b.clone());
  torch::NoGradGuard ng;
  {
    const double momentum = smallest_bn_momentum(task.module());
    const std::int64_t per = std::clamp<std::int64_t>(batch_size, 2, ds->size());
    const std::int64_t batches =
        std::min<std::int64_t>(std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil(3.0 / momentum)), 3, 64),
                               std::max<std::int64_t>(1, 4096 / per));
    auto gen = at::make_generator<at::CPUGeneratorImpl>(4321);
    const at::Tensor order = torch::randperm(ds->size(), gen, torch::kLong);
    task.module().train();
    for (std::int64_t i = 0; i < batches; ++i) {
      const std::int64_t from = (i * per) % std::max<std::int64_t>(1, ds->size() - per + 1);
      data::Batch b = ds->get_batch(order.slice(0, from, from + per));
      if (b.size() < 2) break;
      b.inputs = b.inputs.to(device);
      b.targets = b.targets.to(device);
      task.validation_step(b);
    }
  }
  std::vector<std::pair<at::Tensor, at::Tensor>> saved;
  for (auto& b : task.module().buffers(true)) saved.emplace_back(b, b.clone());
  std::int64_t correct_train = 0, correct_eval = 0, seen = 0;
  double loss_train = 0, loss_eval = 0;
  for (std::int64_t i = 0; i + 1 < n; i += bs) {
    data::Batch b = ds->get_batch(torch::arange(i, std::min(n, i + bs), torch::kLong));
    if (b.size() < 2) break;
    b.inputs = b.inputs.to(device);
    b.targets = b.targets.to(device);
    task.module().train();
    train::StepOutput tr = task.validation_step(b);
    for (auto& [buf, s] : saved) buf.copy_(s);  // the train-mode pass moved the running statistics
    task.module().eval();
    train::StepOutput ev = task.validation_step(b);
    if (!tr.logits.defined() || tr.logits.dim() != 2) return;
    correct_train += metrics::count_topk_correct(tr.logits, b.targets, 1);
    correct_eval += metrics::count_topk_correct(ev.logits, b.targets, 1);
    const at::Tensor right_train = tr.logits.argmax(1) == b.targets;
    const at::Tensor right_eval = ev.logits.argmax(1) == b.targets;
    r.bn_only_train_right += (right_train & right_eval.logical_not()).sum().item<std::int64_t>();
    r.bn_only_eval_right += (right_eval & right_train.logical_not()).sum().item<std::int64_t>();
    if (tr.loss.defined() && ev.loss.defined()) {
      loss_train += tr.loss.item<double>() * static_cast<double>(b.size());
      loss_eval += ev.loss.item<double>() * static_cast<double>(b.size());
    }
    seen += b.size();
  }
  if (seen > 0) {
    r.bn_samples = seen;
    r.bn_train_mode_acc = static_cast<double>(correct_train) / static_cast<double>(seen);
    r.bn_eval_mode_acc = static_cast<double>(correct_eval) / static_cast<double>(seen);
    r.bn_train_mode_loss = loss_train / static_cast<double>(seen);
    r.bn_eval_mode_loss = loss_eval / static_cast<double>(seen);
  }
}

// Confident learning on the trained model's probabilities for up to 2000 validation samples.
void label_noise_check(train::TaskModule& task, train::DataModule& data, c10::Device device, RunFacts& r) {
  auto ds = data.val_dataset();
  if (ds == nullptr || ds->size() < 100) return;
  const std::int64_t n = std::min<std::int64_t>(ds->size(), 2000);
  torch::NoGradGuard ng;
  // The module's mode as the run left it, restored on every way out.
  struct Mode {
    torch::nn::Module& m;
    bool training;
    ~Mode() { m.train(training); }
  } mode{task.module(), task.module().is_training()};
  task.module().eval();
  std::vector<at::Tensor> probs, labels;
  for (std::int64_t i = 0; i < n; i += 256) {
    data::Batch b = ds->get_batch(torch::arange(i, std::min(n, i + 256), torch::kLong));
    b.inputs = b.inputs.to(device);
    b.targets = b.targets.to(device);
    train::StepOutput out = task.validation_step(b);
    if (!out.logits.defined() || out.logits.dim() != 2 || b.targets.dim() != 1) break;
    probs.push_back(torch::softmax(out.logits.to(torch::kDouble), 1).cpu());
    labels.push_back(b.targets.to(torch::kCPU, torch::kLong));
  }
  if (probs.empty()) return;
  const at::Tensor p = torch::cat(probs), y = torch::cat(labels);
  if (!torch::isfinite(p).all().item<bool>() || y.min().item<std::int64_t>() < 0 ||
      y.max().item<std::int64_t>() >= p.size(1))
    return;  // a diverged model or labels beyond the head: other findings cover those
  const LabelNoiseEstimate e = estimate_label_noise(y, p);
  r.noise_rate = e.rate;
  r.noise_samples = y.size(0);
  r.noise_suspects = static_cast<std::int64_t>(e.suspects.size());
  r.noise_model_acc = (p.argmax(1) == y).to(torch::kDouble).mean().item<double>();
  const at::Tensor files = data::root_indices(*ds, torch::arange(y.size(0), torch::kLong));
  for (std::size_t i = 0; i < e.suspects.size() && r.noise_examples.size() < 8; ++i)
    r.noise_examples.push_back(files[e.suspects[i]].item<std::int64_t>());
  for (std::size_t g = 0; g < e.joint.size(); ++g)
    for (std::size_t t = 0; t < e.joint[g].size(); ++t)
      if (g != t && e.joint[g][t] > r.noise_pair_share) {
        r.noise_pair_share = e.joint[g][t];
        r.noise_given = static_cast<std::int64_t>(g);
        r.noise_true = static_cast<std::int64_t>(t);
      }
}

}  // namespace

void run_instrumented(train::TaskModule& task, train::DataModule& data, const train::RunConfig& cfg,
                      const DoctorOptions& options, const DataFacts& d, RunFacts& r, std::ostream* log) {
  train::TrainerOptions to = cfg.trainer;
  to.max_steps = options.max_steps;
  to.max_epochs = -1;
  to.max_time = options.max_seconds;
  to.fast_dev_run = 0;
  to.num_sanity_val_steps = 0;
  to.enable_progress_bar = false;
  to.enable_model_summary = false;
  to.limit_val_batches = static_cast<double>(options.val_batches);
  to.check_val_every_n_epoch = 1;
  // Validate every val_every batches (or once per epoch when epochs are shorter).
  const std::int64_t per_epoch = d.drop_last
                                     ? d.train.size / std::max<std::int64_t>(1, d.batch_size)
                                     : (d.train.size + d.batch_size - 1) / std::max<std::int64_t>(1, d.batch_size);
  // What the trainer will use of it (train::resolve_batches: a fraction of an epoch or a count).
  const std::int64_t full = (d.train.size + d.batch_size - 1) / std::max<std::int64_t>(1, d.batch_size);
  const std::int64_t limited =
      cfg.trainer.overfit_batches > 0
          ? std::min(per_epoch, train::resolve_batches(cfg.trainer.overfit_batches, full, "overfit_batches"))
          : std::min(per_epoch,
                     train::resolve_batches(cfg.trainer.limit_train_batches, per_epoch, "limit_train_batches"));
  r.full_batches_per_epoch = per_epoch;
  r.batches_per_epoch = std::max<std::int64_t>(1, limited);
  if (auto v = data.val_dataset())
    r.val_samples = std::min<std::int64_t>(v->size(), options.val_batches * data.eval_loader_options().batch_size);
  to.val_check_interval = limited > options.val_every ? static_cast<double>(options.val_every) : 1.0;
  train::SchedulerOptions so = cfg.scheduler;
  train::Trainer trainer(to, cfg.optim, so);
  ProbeOptions po;
  po.every_n_steps = options.probe_every;
  po.histograms = false;
  po.images = 0;
  po.grad_norm_high = cfg.diagnostics.grad_norm_high;
  po.grad_norm_low = cfg.diagnostics.grad_norm_low;
  auto probes = std::make_unique<ProbeCallback>(po);
  ProbeCallback* probes_ptr = probes.get();
  trainer.add_callback(std::move(probes));
  auto monitor = std::make_unique<NonFiniteMonitor>(NonFinitePolicy::Stop, nullptr, std::filesystem::path(),
                                                    GradientCheck::EveryStep);
  NonFiniteMonitor* monitor_ptr = monitor.get();
  trainer.add_callback(std::move(monitor));
  auto doc = std::make_unique<DoctorCallback>(r, log);
  DoctorCallback* doc_ptr = doc.get();
  trainer.add_callback(std::move(doc));
  r.chance_classes = d.outputs;
  const auto started = std::chrono::steady_clock::now();
  try {
    trainer.fit(task, data);
    r.ran = true;
  } catch (const std::exception& e) {
    r.error = e.what();
    r.failing_step = trainer.global_step();
    // Replay the failing batch with the op in flight tracked, to name the module that threw.
    try {
      LayerMap map(task.module());
      RecorderOptions ro;
      ro.stats = false;
      ro.track_in_flight = true;
      ForwardRecorder rec(map, ro);
      data::Batch b = doc_ptr->last_batch();
      if (b.inputs.defined()) {
        try {
          task.module().train();
          task.training_step(b);
        } catch (const std::exception&) {
          // Expected: the replay fails where the run failed; the recorder saw the op in flight.
        }
      }
      rec.stop();
      if (const InFlightOp* op = rec.in_flight()) {
        r.failing_op = op->op;
        r.failing_layer = op->layer;
        r.failing_type = op->type;
        r.failing_inputs = op->inputs;
      }
    } catch (const std::exception& e) {
      r.skipped.push_back({"failing-layer", first_line_of(e.what())});
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  r.steps = trainer.global_step();
  r.data_wait = trainer.data_wait_seconds();
  r.probes = probes_ptr->history();
  r.alerts = probes_ptr->alerts();
  r.nonfinite = monitor_ptr->first_event();
  r.scaler_skips = monitor_ptr->scaler_skips();
  // Parameters that never received a gradient although they require one; frozen ones.
  LayerMap map(task.module());
  for (const auto& p : map.parameters()) {
    r.total_numel += p.tensor.numel();
    if (!p.tensor.requires_grad()) {
      r.frozen.push_back(p.name);
      r.frozen_numel += p.tensor.numel();
    }
  }
  if (!r.probes.empty()) {
    const auto& params = r.probes.front().parameters;
    for (std::size_t i = 0; i < params.size(); ++i) {
      bool ever = false;
      for (const auto& pr : r.probes) ever |= i < pr.parameters.size() && pr.parameters[i].has_grad;
      if (!ever) r.no_grad_params.push_back(params[i].name);
    }
  }
  if (r.error.empty()) {
    try {
      label_noise_check(task, data, trainer.device(), r);
    } catch (const std::exception& e) {
      r.skipped.push_back({"label-noise", first_line_of(e.what())});
    }
  }
  // A model a few steps old predicts near chance, and its accuracy flips with any change of
  // normalisation: the comparison needs a model that has trained a little.
  if (!d.batchnorm_layers.empty() && r.error.empty() && r.steps < 50) {
    r.skipped.push_back({"batchnorm-statistics",
                         fmt::format("the run made {} steps; the comparison needs at least 50 (raise --steps or "
                                     "--seconds)",
                                     r.steps)});
  } else if (!d.batchnorm_layers.empty() && r.error.empty()) {
    try {
      batchnorm_check(task, data, trainer.device(), d.batch_size, r);
    } catch (const std::exception& e) {
      r.skipped.push_back({"batchnorm-statistics", first_line_of(e.what())});
    }
  }
}

}  // namespace glassbox::inspect::detail
