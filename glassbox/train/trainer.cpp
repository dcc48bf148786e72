#include "glassbox/train/trainer.h"

#include <cmath>

#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/interrupt.h"
#include "glassbox/core/device.h"
#include "glassbox/core/seed.h"
#include "glassbox/data/dataset.h"
#include "glassbox/metrics/classification.h"
#include "glassbox/metrics/running.h"
#include "glassbox/train/freeze.h"

namespace glassbox::train {

Trainer::Trainer(TrainerOptions options, OptimizerOptions optimizer, SchedulerOptions scheduler,
                 std::filesystem::path run_dir, std::shared_ptr<dist::Group> group)
    : options_(std::move(options)),
      optimizer_options_(std::move(optimizer)),
      scheduler_options_(std::move(scheduler)),
      run_dir_(std::move(run_dir)),
      logger_(options_.fast_dev_run == 0 && (!group || group->rank() == 0) ? run_dir_ : std::filesystem::path()),
      group_(std::move(group)) {
  options_.validate();
  optimizer_options_.validate();
  scheduler_options_.validate();
}

Trainer::~Trainer() = default;

void Trainer::add_callback(std::unique_ptr<Callback> callback) {
  // Checkpointing callbacks run after all others (Lightning's rule).
  if (callback->is_checkpoint()) {
    callbacks_.push_back(std::move(callback));
  } else {
    auto it = std::find_if(callbacks_.begin(), callbacks_.end(), [](const auto& c) { return c->is_checkpoint(); });
    callbacks_.insert(it, std::move(callback));
  }
}

template <class F>
void Trainer::each_callback(F&& f) {
  for (auto& c : callbacks_) f(*c);
}

void Trainer::skip_step(const std::string& reason) {
  (void)reason;
  skip_step_ = true;
}

double Trainer::gradient_clip_threshold() const {
  if (options_.gradient_clip_val > 0) return options_.gradient_clip_val;
  return auto_clip_;
}

const char* stop_kind_name(StopKind kind) {
  switch (kind) {
    case StopKind::kNone: return "none";
    case StopKind::kMaxEpochs: return "max_epochs";
    case StopKind::kMaxSteps: return "max_steps";
    case StopKind::kMaxTime: return "max_time";
    case StopKind::kEarlyStopping: return "early_stopping";
    case StopKind::kNonFinite: return "nonfinite";
    case StopKind::kInterrupted: return "interrupted";
    case StopKind::kOther: return "other";
  }
  return "other";
}

void Trainer::request_stop(const std::string& reason, StopKind kind) {
  if (!should_stop_) {
    stop_reason_ = reason;
    stop_kind_ = kind;
  }
  should_stop_ = true;
}

double Trainer::train_seconds() const {
  if (!fitting_) return train_seconds_before_;
  return train_seconds_before_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - fit_started_).count();
}

double Trainer::samples_per_second() const {
  const double s = train_seconds();
  return s > 0 ? static_cast<double>(samples_seen_) / s : 0.0;
}

bool Trainer::time_exceeded() const { return options_.max_time > 0 && train_seconds() >= options_.max_time; }

data::Batch Trainer::to_device(data::Batch batch) const {
  if (!device_.is_cpu()) {
    const bool nb = batch.inputs.is_pinned();
    batch.inputs = batch.inputs.to(device_, /*non_blocking=*/nb);
    batch.targets = batch.targets.to(device_, /*non_blocking=*/nb);
  }
  if (options_.channels_last && batch.inputs.dim() == 4)
    batch.inputs = batch.inputs.contiguous(at::MemoryFormat::ChannelsLast);
  return batch;
}

void Trainer::setup(TaskModule& task, DataModule& data) {
  task_ = &task;
  data_ = &data;
  if (options_.num_threads > 0) torch::set_num_threads(static_cast<int>(options_.num_threads));
  at::globalContext().setDeterministicAlgorithms(options_.deterministic, /*warn_only=*/false);
  device_ = resolve_device(options_.device);
  if (group_ && device_.is_cuda() && options_.device.find(':') == std::string::npos) {
    // One GPU per rank on a node: cuda:LOCAL_RANK.
    device_ = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(group_->world().local_rank));
  }
  precision_ = std::make_unique<Precision>(options_.precision, device_);
  data.setup();
  task.module().to(device_);
  if (options_.channels_last) {
    // NHWC weights and activations (torch.channels_last): what cuDNN's and oneDNN's fastest
    // convolutions (and tensor cores under bf16) want.
    torch::NoGradGuard ng;
    for (auto& p : task.module().parameters(true))
      if (p.dim() == 4) p.set_data(p.data().contiguous(at::MemoryFormat::ChannelsLast));
  }
  GB_CHECK(!(group_ && options_.find_unused_parameters && options_.gradient_checkpointing), InvalidArgument,
           "trainer.find_unused_parameters and trainer.gradient_checkpointing cannot be combined in data-parallel "
           "training (the recomputed blocks hide their parameters from the search for unused ones)",
           "turn one of them off");
  // SyncBatchNorm: every BatchNorm layer normalises with the statistics of the global batch.
  if (group_ && options_.sync_batchnorm) sync_batchnorm();
  // Freezing: name patterns, a share of the parameters from the input side, the first blocks.
  freeze_ = apply_freeze(task.module(), options_, task.blocks());
  unfrozen_ = false;
  unfrozen_lr_ = 0.0;
  trainable_.clear();
  for (const auto& p : task.module().parameters(true))
    if (p.requires_grad()) trainable_.push_back(p);
  GB_CHECK(!trainable_.empty(), FailedPrecondition, "the model has no trainable parameters",
           "check trainer.freeze, freeze_fraction and freeze_blocks");
  build_data_parallel();

  train_set_ = data.train_dataset();
  val_set_ = data.val_dataset();
  data::LoaderOptions lo = data.train_loader_options();
  lo.seed = lo.seed != 0 ? lo.seed : options_.seed;
  if (device_.is_cuda()) lo.pin_memory = true;
  lo.num_replicas = world_size();
  lo.rank = global_rank();
  if (options_.overfit_batches > 0) {
    // The same first batches, unshuffled, for training and validation.
    const std::int64_t full = (train_set_->size() + lo.batch_size - 1) / lo.batch_size;
    const std::int64_t n = resolve_batches(options_.overfit_batches, full, "overfit_batches");
    const std::int64_t count = std::min<std::int64_t>(train_set_->size(), n * lo.batch_size * world_size());
    train_set_ = std::make_shared<data::SubsetDataset>(train_set_, torch::arange(count, torch::kLong));
    val_set_ = train_set_;
    lo.shuffle = false;
  }
  train_loader_ = std::make_unique<data::Loader>(train_set_, lo, data_->train_batch_transform());
  const std::int64_t full = train_loader_->num_batches();
  num_train_batches_ = options_.fast_dev_run > 0
                           ? std::min(options_.fast_dev_run, full)
                           : resolve_batches(options_.limit_train_batches, full, "limit_train_batches");
  GB_CHECK(num_train_batches_ > 0, InvalidArgument,
           "no training batches: the training set has "
               << train_set_->size() << " samples"
               << (world_size() > 1 ? " (" + std::to_string((train_set_->size() + world_size() - 1) / world_size()) +
                                          " per rank over " + std::to_string(world_size()) + " ranks)"
                                    : std::string())
               << ", batch_size " << lo.batch_size,
           "lower data.loader.batch_size, turn off drop_last, or raise trainer.limit_train_batches");
  if (options_.val_check_interval > 1.0) {
    val_every_batches_ = static_cast<std::int64_t>(options_.val_check_interval);
    GB_CHECK(val_every_batches_ <= num_train_batches_, InvalidArgument,
             "trainer.val_check_interval = " << val_every_batches_ << " batches is more than an epoch ("
                                             << num_train_batches_ << " batches)",
             "use a fraction such as 0.5, or at most " + std::to_string(num_train_batches_));
  } else {
    val_every_batches_ = std::max<std::int64_t>(
        1,
        static_cast<std::int64_t>(std::floor(options_.val_check_interval * static_cast<double>(num_train_batches_))));
  }

  auto groups = task.param_groups(optimizer_options_);
  optimizer_ = std::make_unique<Optimizer>(std::move(groups), optimizer_options_);
  const std::int64_t steps_per_epoch =
      (num_train_batches_ + options_.accumulate_grad_batches - 1) / options_.accumulate_grad_batches;
  std::int64_t epochs_for_schedule = options_.max_epochs;
  if (options_.max_steps > 0 &&
      (options_.max_epochs < 0 || options_.max_steps < options_.max_epochs * steps_per_epoch)) {
    epochs_for_schedule = -1;
  }
  scheduler_ = make_scheduler(
      scheduler_options_, optimizer_->lrs(), steps_per_epoch,
      epochs_for_schedule > 0 ? epochs_for_schedule : (options_.max_steps + steps_per_epoch - 1) / steps_per_epoch);
  apply_schedule();
}

void Trainer::apply_schedule() {
  const auto& lrs = scheduler_->lrs();
  for (std::size_t i = 0; i < lrs.size(); ++i) optimizer_->set_lr(i, lrs[i]);
  // OneCycle cycles SGD's momentum / Adam's beta1 (PyTorch's cycle_momentum).
  const auto& m = scheduler_->momentums();
  for (std::size_t i = 0; i < m.size() && i < optimizer_->num_groups(); ++i) optimizer_->set_momentum(i, m[i]);
}

void Trainer::fit(TaskModule& task, DataModule& data, const std::filesystem::path& resume_from,
                  const ResumeOptions& resume) {
  seed_everything(static_cast<std::uint64_t>(options_.seed));
  epoch_ = global_step_ = batch_in_epoch_ = resume_batch_ = samples_seen_ = skipped_steps_ = 0;
  auto_clip_norms_.clear();
  auto_clip_ = 0.0;
  skip_step_ = grad_norm_requested_ = false;
  data_wait_seconds_ = 0.0;
  should_stop_ = false;
  stop_reason_.clear();
  stop_kind_ = StopKind::kNone;
  resume_epoch_sums_.reset();
  train_seconds_before_ = 0;
  resumed_world_size_ = 0;
  resumed_mid_epoch_ = false;
  setup(task, data);
  // Data-parallel: dropout and other random draws differ by rank (rank 0 keeps the seed's own
  // stream); a resume with the same world size restores each rank's own state.
  if (group_ && group_->rank() > 0)
    seed_everything(data::splitmix64(static_cast<std::uint64_t>(options_.seed) ^
                                     (0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(group_->rank()))));
  if (!resume_from.empty()) restore(resume_from, resume);
  fitting_ = true;
  fit_started_ = std::chrono::steady_clock::now();
  torch::autograd::AnomalyMode::set_enabled(options_.detect_anomaly);
  try {
    each_callback([&](Callback& c) { c.on_fit_start(*this); });
    const std::int64_t sanity = options_.fast_dev_run > 0 ? 0 : options_.num_sanity_val_steps;
    if (sanity > 0 && val_set_ && val_set_->size() > 0) {
      sanity_checking_ = true;
      each_callback([&](Callback& c) { c.on_sanity_check_start(*this); });
      run_eval("sanity", val_set_, sanity);
      each_callback([&](Callback& c) { c.on_sanity_check_end(*this); });
      sanity_checking_ = false;
    }
    const std::int64_t max_epochs = options_.fast_dev_run > 0 ? 1 : options_.max_epochs;
    while (!should_stop_ && (max_epochs < 0 || epoch_ < max_epochs)) {
      train_epoch();
      if (should_stop_ && batch_in_epoch_ < num_train_batches_) break;  // stopped mid-epoch
      ++epoch_;
      batch_in_epoch_ = 0;
      resume_batch_ = 0;
      resumed_mid_epoch_ = false;
    }
    if (!should_stop_) {
      if (max_epochs >= 0 && epoch_ >= max_epochs)
        request_stop("max_epochs reached", StopKind::kMaxEpochs);
      else
        request_stop("finished");
    }
    each_callback([&](Callback& c) { c.on_train_end(*this); });
    each_callback([&](Callback& c) { c.on_fit_end(*this); });
  } catch (const std::exception& e) {
    each_callback([&](Callback& c) { c.on_exception(*this, e); });
    train_seconds_before_ = train_seconds();
    fitting_ = false;
    torch::autograd::AnomalyMode::set_enabled(false);
    throw;
  }
  train_seconds_before_ = train_seconds();
  fitting_ = false;
  torch::autograd::AnomalyMode::set_enabled(false);
  logger_.flush_csv();
}

void Trainer::train_mode() {
  task_->module().train();
  if (options_.frozen_bn_eval) keep_frozen_batchnorm_eval(task_->module());
}

void Trainer::unfreeze_backbone(double lr) {
  ParamGroup g;
  for (const auto& item : task_->module().named_parameters(true)) {
    if (std::find(freeze_.frozen_names.begin(), freeze_.frozen_names.end(), item.key()) == freeze_.frozen_names.end())
      continue;
    item.value().set_requires_grad(true);
    g.params.push_back(item.value());
    g.names.push_back(item.key());
  }
  g.lr = lr;
  g.weight_decay = optimizer_options_.weight_decay;
  g.momentum = optimizer_->groups().front().momentum;
  optimizer_->add_param_group(std::move(g));
  trainable_.clear();
  for (const auto& p : task_->module().parameters(true))
    if (p.requires_grad()) trainable_.push_back(p);
  build_data_parallel();  // the Reducer covers the parameters that train now
  unfrozen_ = true;
  unfrozen_lr_ = lr;
}

void Trainer::finetune_epoch_start() {
  const std::int64_t at = options_.unfreeze_at_epoch;
  if (at < 0 || epoch_ < at || resumed_mid_epoch_) return;  // a resumed epoch has had its start already
  const double head_lr = optimizer_->lr(0);
  if (!unfrozen_) {
    unfreeze_backbone(head_lr * options_.unfreeze_lr_ratio);
    logger_.log({{"epoch", epoch_},
                 {"step", global_step_},
                 {"unfrozen_parameters", freeze_.frozen},
                 {"backbone_lr", unfrozen_lr_}});
    return;
  }
  // Lightning: the previous rate times the multiplier, never above the first group's (align).
  double next = unfrozen_lr_ * options_.unfreeze_lr_multiplier;
  if (options_.unfreeze_align && next > head_lr) next = head_lr;
  unfrozen_lr_ = next;
  optimizer_->set_lr(optimizer_->num_groups() - 1, next);
}

void Trainer::train_epoch() {
  finetune_epoch_start();
  train_mode();
  each_callback([&](Callback& c) { c.on_train_epoch_start(*this); });
  train_loader_->start_epoch(epoch_, resume_batch_);
  batch_in_epoch_ = resume_batch_;
  epoch_loss_sum_ = torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(device_));
  epoch_loss_count_ = epoch_correct_ = epoch_seen_ = 0;
  if (resume_epoch_sums_ && resume_batch_ > 0) {
    // A checkpoint written mid-epoch: the epoch's figures go on from where it stopped.
    const nlohmann::json& e = *resume_epoch_sums_;
    epoch_loss_sum_.fill_(e.value("loss_sum", 0.0));
    epoch_loss_count_ = e.value("loss_count", std::int64_t{0});
    epoch_correct_ = e.value("correct", std::int64_t{0});
    epoch_seen_ = e.value("seen", std::int64_t{0});
  }
  resume_epoch_sums_.reset();
  accumulated_ = 0;
  const std::int64_t accumulate = options_.accumulate_grad_batches;
  const bool validate_this_epoch =
      val_set_ && val_set_->size() > 0 && ((epoch_ + 1) % options_.check_val_every_n_epoch == 0);
  bool end_of_epoch_val = false;
  while (batch_in_epoch_ < num_train_batches_) {
    const auto wait_start = std::chrono::steady_clock::now();
    std::optional<data::Batch> next = train_loader_->next();
    data_wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
    if (!next) break;
    data::Batch batch = to_device(std::move(*next));
    each_callback([&](Callback& c) { c.on_train_batch_start(*this, batch); });
    // Gradients are averaged over the ranks only in the step that closes an accumulation window.
    if (ddp_) ddp_->before_forward(accumulated_ + 1 == accumulate || batch_in_epoch_ + 1 == num_train_batches_);
    StepOutput out;
    {
      auto scope = precision_->autocast();
      out = task_->training_step(batch);
    }
    GB_CHECK(out.loss.defined() && out.loss.numel() == 1, Internal, "training_step must return a scalar loss",
             "return StepOutput{loss, logits}");
    if (accumulated_ == 0) {
      each_callback([&](Callback& c) { c.on_before_zero_grad(*this); });
      zero_grad();
    }
    at::Tensor loss = accumulate > 1 ? out.loss / static_cast<double>(accumulate) : out.loss;
    each_callback([&](Callback& c) { c.on_before_backward(*this, loss); });
    if (ddp_) {
      ddp_->before_backward({loss});
      try {
        precision_->scale(loss).backward();
      } catch (const Error&) {
        throw;
      } catch (const std::exception& e) {
        group_->fail_or_rethrow("all-reduce of the gradients", e);
      }
      ddp_->after_backward();
    } else {
      precision_->scale(loss).backward();
    }
    each_callback([&](Callback& c) { c.on_after_backward(*this); });
    ++accumulated_;
    const std::int64_t bsz = batch.size();
    samples_seen_ += bsz * world_size();  // every rank's batch has this size (the sampler pads)
    epoch_loss_sum_.add_(out.loss.detach(), static_cast<double>(bsz));  // in float64, with no temporaries
    epoch_loss_count_ += bsz;
    ++batch_in_epoch_;
    const bool window_done = accumulated_ == accumulate || batch_in_epoch_ == num_train_batches_;
    if (window_done) {
      optimizer_step();
      accumulated_ = 0;
      if (global_step_ % options_.log_every_n_steps == 0 && options_.fast_dev_run == 0) {
        const bool with_acc = out.logits.defined() && out.logits.dim() == 2 && batch.targets.dim() == 1;
        // [loss, correct, samples], summed over the ranks: the global batch's figures.
        at::Tensor figures = torch::tensor(
            {out.loss.item<double>(),
             with_acc ? static_cast<double>(metrics::count_topk_correct(out.logits.detach(), batch.targets, 1)) : 0.0,
             static_cast<double>(bsz)},
            torch::kDouble);
        if (group_) {
          std::vector<at::Tensor> v{figures};
          group_->all_reduce(v, dist::ReduceOp::kSum, "all-reduce of the logged loss");
        }
        const auto f = figures.accessor<double, 1>();
        nlohmann::json row = {{"epoch", epoch_},
                              {"step", global_step_},
                              {"train_loss", f[0] / static_cast<double>(world_size())},
                              {"lr", optimizer_->lr(0)}};
        if (with_acc) row["train_acc"] = f[1] / f[2];
        if (std::isfinite(last_grad_norm_)) row["grad_norm"] = last_grad_norm_;
        row["samples_per_second"] = samples_per_second();
        logger_.log(row);
        callback_metrics_["train_loss_step"] = row["train_loss"].get<double>();
      }
    }
    if (out.logits.defined() && out.logits.dim() == 2 && batch.targets.dim() == 1 &&
        (batch_in_epoch_ % 10 == 0 || batch_in_epoch_ == num_train_batches_)) {
      // A sampled running accuracy (every 10th batch) keeps per-step overhead negligible.
      epoch_correct_ += metrics::count_topk_correct(out.logits.detach(), batch.targets, 1);
      epoch_seen_ += bsz;
    }
    each_callback([&](Callback& c) { c.on_train_batch_end(*this, out, batch); });
    if (options_.max_steps > 0 && global_step_ >= options_.max_steps)
      request_stop("max_steps reached", StopKind::kMaxSteps);
    if (time_exceeded()) request_stop("max_time reached", StopKind::kMaxTime);
    // An interrupt stops at a step boundary (not inside a gradient-accumulation window), so the
    // checkpoint written next resumes exactly.
    if (accumulated_ == 0 && interrupt_requested()) request_stop("interrupted", StopKind::kInterrupted);
    // Data-parallel: what any rank decided, every rank does (before validation, a collective).
    if (group_ && accumulated_ == 0) agree_on_stop();
    // Lightning's rule: validate after every val_check_batch-th batch of the epoch (the last
    // batch only when it is such a multiple); the end-of-epoch check runs after the loop.
    const bool val_due = validate_this_epoch && window_done && batch_in_epoch_ % val_every_batches_ == 0;
    if (val_due && batch_in_epoch_ == num_train_batches_) {
      end_of_epoch_val = true;
    } else if (val_due && !should_stop_) {
      run_validation();
      train_mode();
    }
    if (should_stop_ && (!group_ || accumulated_ == 0)) break;
  }
  const bool epoch_complete = batch_in_epoch_ >= num_train_batches_;
  if (epoch_loss_count_ > 0 || group_) {
    double loss_sum = epoch_loss_sum_.item<double>();
    double counts[3] = {static_cast<double>(epoch_loss_count_), static_cast<double>(epoch_correct_),
                        static_cast<double>(epoch_seen_)};
    if (group_) {
      // The epoch's figures over every rank's samples.
      at::Tensor t = torch::tensor({loss_sum, counts[0], counts[1], counts[2]}, torch::kDouble);
      std::vector<at::Tensor> v{t};
      group_->all_reduce(v, dist::ReduceOp::kSum, "all-reduce of the epoch's loss");
      loss_sum = t[0].item<double>();
      for (int i = 0; i < 3; ++i) counts[i] = t[i + 1].item<double>();
    }
    if (counts[0] > 0) callback_metrics_["train_loss"] = loss_sum / counts[0];
    if (counts[2] > 0) callback_metrics_["train_acc"] = counts[1] / counts[2];
  }
  if (epoch_complete && end_of_epoch_val) run_validation();
  if (epoch_complete || should_stop_) {
    nlohmann::json row = {{"epoch", epoch_}, {"step", global_step_}};
    for (const auto& [k, v] : callback_metrics_)
      if (k == "train_loss" || k == "train_acc" || k.rfind("val_", 0) == 0) row[k] = v;
    row["lr"] = optimizer_->lr(0);
    row["epoch_end"] = epoch_complete;
    if (options_.fast_dev_run == 0) logger_.log(row);
  }
  // Lightning's order at the end of an epoch: on_train_epoch_end, the "epoch" scheduler step,
  // then checkpointing — so a checkpoint written here resumes after the scheduler has stepped.
  if (epoch_complete || should_stop_) {
    for (auto& c : callbacks_)
      if (!c->is_checkpoint()) c->on_train_epoch_end(*this);
  }
  if (epoch_complete && scheduler_options_.interval == SchedulerInterval::kEpoch) {
    double metric = NAN;
    auto it = callback_metrics_.find(scheduler_options_.monitor);
    if (it != callback_metrics_.end()) metric = it->second;
    GB_CHECK(
        scheduler_options_.name != SchedulerKind::kPlateau || it != callback_metrics_.end(), FailedPrecondition,
        "scheduler.name = \"plateau\" monitors " << scheduler_options_.monitor << ", which was not computed this epoch",
        "set scheduler.monitor to a logged metric such as val_loss");
    scheduler_->step(metric);
    apply_schedule();
  }
  if (epoch_complete || should_stop_) {
    for (auto& c : callbacks_)
      if (c->is_checkpoint()) c->on_train_epoch_end(*this);
  }
}

void Trainer::optimizer_step() {
  precision_->unscale(trainable_);
  // Total gradient norm (before clipping), computed with one multi-tensor kernel.
  std::vector<at::Tensor> grads;
  grads.reserve(trainable_.size());
  for (const auto& p : trainable_)
    if (p.grad().defined()) grads.push_back(p.grad());
  last_grad_norm_ = NAN;
  has_grad_norm_ = false;
  const bool choosing_clip = options_.gradient_clip_auto_steps > 0 && auto_clip_ == 0.0;
  const double clip_at = gradient_clip_threshold();
  const bool clip_norm = clip_at > 0 && options_.gradient_clip_algorithm == ClipAlgorithm::kNorm;
  const bool log_step = global_step_ % options_.log_every_n_steps == options_.log_every_n_steps - 1;
  if (!grads.empty() && (clip_norm || choosing_clip || log_step || grad_norm_requested_)) {
    auto norms = at::_foreach_norm(grads, 2);
    at::Tensor total = torch::stack(norms).norm();
    last_grad_norm_ = total.item<double>();
    has_grad_norm_ = true;
    if (clip_norm && std::isfinite(last_grad_norm_)) {
      const double coef = clip_at / (last_grad_norm_ + 1e-6);
      if (coef < 1.0) at::_foreach_mul_(grads, coef);
    }
  }
  grad_norm_requested_ = false;
  if (choosing_clip) {
    if (std::isfinite(last_grad_norm_)) auto_clip_norms_.push_back(last_grad_norm_);
    if (global_step_ + 1 >= options_.gradient_clip_auto_steps && !auto_clip_norms_.empty()) {
      // The 95th percentile with linear interpolation (numpy's default).
      std::vector<double> v = auto_clip_norms_;
      std::sort(v.begin(), v.end());
      const double pos = 0.95 * static_cast<double>(v.size() - 1);
      const auto lo = static_cast<std::size_t>(std::floor(pos));
      const auto hi = std::min(lo + 1, v.size() - 1);
      auto_clip_ = v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
      if (options_.fast_dev_run == 0)
        logger_.log({{"epoch", epoch_}, {"step", global_step_ + 1}, {"gradient_clip_auto", auto_clip_}});
    }
  }
  if (options_.gradient_clip_val > 0 && options_.gradient_clip_algorithm == ClipAlgorithm::kValue) {
    for (auto& g : grads) g.clamp_(-options_.gradient_clip_val, options_.gradient_clip_val);
  }
  each_callback([&](Callback& c) { c.on_before_optimizer_step(*this); });
  if (group_) skip_step_ = group_->any(skip_step_, "agreement on skipping the step");
  if (skip_step_) {
    zero_grad();
    ++skipped_steps_;
  } else if (precision_->step_ok()) {
    optimizer_->step();
  }
  skip_step_ = false;
  precision_->update();
  ++global_step_;
  if (scheduler_options_.interval == SchedulerInterval::kStep) {
    scheduler_->step();
    apply_schedule();
  }
}

void Trainer::run_validation() {
  each_callback([&](Callback& c) { c.on_validation_start(*this); });
  const std::int64_t full = data::Loader(val_set_, data_->eval_loader_options()).num_batches();
  const std::int64_t limit = options_.fast_dev_run > 0
                                 ? options_.fast_dev_run
                                 : resolve_batches(options_.limit_val_batches, full, "limit_val_batches");
  EvalResult r = run_eval("val", val_set_, limit);
  callback_metrics_["val_loss"] = r.loss;
  if (r.has_accuracy) callback_metrics_["val_acc"] = r.accuracy;
  for (const auto& [k, v] : r.metrics) callback_metrics_["val_" + k] = v;
  each_callback([&](Callback& c) { c.on_validation_end(*this); });
}

EvalResult Trainer::validate(TaskModule& task, DataModule& data) {
  if (task_ != &task) setup(task, data);
  GB_CHECK(data.val_dataset() != nullptr, FailedPrecondition, "the data module has no validation split",
           "set data.val_size > 0");
  const std::int64_t full = data::Loader(data.val_dataset(), data.eval_loader_options()).num_batches();
  return run_eval("val", data.val_dataset(), resolve_batches(options_.limit_val_batches, full, "limit_val_batches"));
}

EvalResult Trainer::test(TaskModule& task, DataModule& data) {
  if (task_ != &task) setup(task, data);
  auto ds = data.test_dataset();
  GB_CHECK(ds != nullptr, FailedPrecondition, "the data module has no test split", "configure data test files");
  each_callback([&](Callback& c) { c.on_test_start(*this); });
  const std::int64_t full = data::Loader(ds, data.eval_loader_options()).num_batches();
  const std::int64_t limit = options_.fast_dev_run > 0
                                 ? options_.fast_dev_run
                                 : resolve_batches(options_.limit_test_batches, full, "limit_test_batches");
  EvalResult r = run_eval("test", ds, limit);
  callback_metrics_["test_loss"] = r.loss;
  if (options_.fast_dev_run == 0) {
    nlohmann::json row = {{"epoch", epoch_}, {"step", global_step_}, {"test_loss", r.loss}};
    if (r.has_accuracy) {
      callback_metrics_["test_acc"] = r.accuracy;
      row["test_acc"] = r.accuracy;
    } else {
      // Without an accuracy the test row carries the task's metrics (mae, r2, micro_f1, ...), but
      // not the per-target ones.
      for (const auto& [k, v] : r.metrics) {
        callback_metrics_["test_" + k] = v;
        const std::size_t cut = k.rfind('_');
        const bool per_output = cut != std::string::npos && cut + 1 < k.size() &&
                                k.find_first_not_of("0123456789", cut + 1) == std::string::npos;
        if (!per_output) row["test_" + k] = v;
      }
    }
    logger_.log(row);
    logger_.flush_csv();
  }
  each_callback([&](Callback& c) { c.on_test_end(*this); });
  return r;
}

}  // namespace glassbox::train
