// Trainer: the training loop — fit, validate, test — with Lightning's options, hooks and
// checkpoints that resume bit-exactly (weights, optimiser, scheduler, callbacks, RNG, data
// order, step).
//
//   Trainer trainer(options, scheduler_options, optimizer_options, run_dir);
//   trainer.add_callback(std::make_unique<ModelCheckpoint>(ckpt_options));
//   trainer.fit(task, datamodule);                // or fit(task, datamodule, "last.ckpt") to resume
//   EvalResult r = trainer.test(task, datamodule);
//
// run_dir may be empty (nothing is written). With fast_dev_run nothing is written either.
//
// Data-parallel (set_process_group before fit; every rank builds the same Trainer): each rank
// reads its DistributedSampler shard, gradients are averaged by c10d's Reducer, validation and
// test run each batch on one rank and gather the outputs, so their metrics equal one process's;
// stops and skipped steps are agreed by all ranks; only rank 0 logs and writes checkpoints
// (every rank calls save_checkpoint: it is collective).
// Thread safety: one thread drives a Trainer; loader workers run inside.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include "glassbox/dist/data_parallel.h"
#include "glassbox/dist/group.h"
#include "glassbox/train/callback.h"
#include "glassbox/train/checkpoint.h"
#include "glassbox/train/datamodule.h"
#include "glassbox/train/freeze.h"
#include "glassbox/train/logger.h"
#include "glassbox/train/optimizer.h"
#include "glassbox/train/precision.h"
#include "glassbox/train/scheduler.h"
#include "glassbox/train/task.h"
#include "glassbox/train/trainer_options.h"

namespace glassbox::train {

// How fit continues from a checkpoint.
struct ResumeOptions {
  // Callbacks (by name) that start afresh instead of loading their state from the checkpoint: a
  // run forked into another directory keeps its own checkpoint bookkeeping ("ModelCheckpoint").
  std::vector<std::string> fresh_callbacks;
};

// Why fit stopped, for programs (the text of stop_reason() is for people).
enum class StopKind { kNone, kMaxEpochs, kMaxSteps, kMaxTime, kEarlyStopping, kNonFinite, kInterrupted, kOther };
const char* stop_kind_name(StopKind kind);  // "max_epochs", ..., "interrupted"

struct EvalResult {
  double loss = 0.0;
  double accuracy = 0.0;  // classification only (has_accuracy)
  bool has_accuracy = false;
  std::int64_t samples = 0;
  // The task's metrics but the accuracy (eval_metrics.h lists them; the Trainer logs them as
  // val_* / test_*).
  std::map<std::string, double> metrics;
};

class Trainer {
 public:
  // With a process group this Trainer is one rank of a data-parallel job (as set_process_group);
  // only rank 0 opens the run directory's log files.
  Trainer(TrainerOptions options, OptimizerOptions optimizer, SchedulerOptions scheduler,
          std::filesystem::path run_dir = {}, std::shared_ptr<dist::Group> group = nullptr);
  ~Trainer();

  void add_callback(std::unique_ptr<Callback> callback);
  // Makes this Trainer one rank of a data-parallel job (before fit/validate/test). Prefer the
  // constructor's argument: a Trainer made without it has opened its log files already.
  void set_process_group(std::shared_ptr<dist::Group> group);
  const std::shared_ptr<dist::Group>& process_group() const { return group_; }
  int world_size() const { return group_ ? group_->size() : 1; }
  int global_rank() const { return group_ ? group_->rank() : 0; }
  // Rank 0 (or no process group): the rank that logs and writes files.
  bool is_global_zero() const { return global_rank() == 0; }
  // Data-parallel: sends rank 0's buffers (and parameters) to every rank; collective. No-op in
  // one process.
  void broadcast_model_state(bool parameters);
  // Text stored in checkpoints as the run's configuration (e.g. the effective config.toml).
  void set_config_text(std::string text) { config_text_ = std::move(text); }
  // More entries for every checkpoint's state.json (e.g. what inference needs: the data's shape,
  // normalisation and class names, the model's contract).
  void set_checkpoint_extra(nlohmann::json extra) { checkpoint_extra_ = std::move(extra); }

  // Trains. With resume_from, first restores everything from that checkpoint (it must be able to
  // resume exactly: FailedPrecondition naming what is missing otherwise). SIGINT/SIGTERM under a
  // glassbox::InterruptScope stop it after the current optimiser step (stop_kind() kInterrupted).
  void fit(TaskModule& task, DataModule& data, const std::filesystem::path& resume_from = {},
           const ResumeOptions& resume = {});
  EvalResult validate(TaskModule& task, DataModule& data);
  EvalResult test(TaskModule& task, DataModule& data);

  // --- state visible to callbacks ---
  const TrainerOptions& options() const { return options_; }
  std::int64_t current_epoch() const { return epoch_; }
  std::int64_t global_step() const { return global_step_; }
  std::int64_t batch_in_epoch() const { return batch_in_epoch_; }
  std::int64_t num_training_batches() const { return num_train_batches_; }
  bool sanity_checking() const { return sanity_checking_; }
  const std::map<std::string, double>& callback_metrics() const { return callback_metrics_; }
  void request_stop(const std::string& reason, StopKind kind = StopKind::kOther);
  bool should_stop() const { return should_stop_; }
  const std::string& stop_reason() const { return stop_reason_; }
  // What trainer.freeze / freeze_fraction / freeze_blocks froze (after setup).
  const FreezeReport& freeze_report() const { return freeze_; }
  // The learning rate of the layers BackboneFinetuning unfroze (0 while they are frozen).
  double unfrozen_lr() const { return unfrozen_ ? unfrozen_lr_ : 0.0; }
  StopKind stop_kind() const { return stop_kind_; }
  // The world size of the checkpoint fit resumed from (0: not resumed).
  std::int64_t resumed_world_size() const { return resumed_world_size_; }
  const std::filesystem::path& run_dir() const { return run_dir_; }
  bool writes_files() const { return !run_dir_.empty() && options_.fast_dev_run == 0; }
  Optimizer* optimizer() { return optimizer_.get(); }
  LrScheduler* scheduler() { return scheduler_.get(); }
  TaskModule* task() { return task_; }
  MetricsLogger& logger() { return logger_; }
  c10::Device device() const { return device_; }
  double train_seconds() const;
  double samples_per_second() const;
  // Seconds this fit spent waiting for the training loader's next batch (data loading not
  // hidden behind compute by workers and prefetching).
  double data_wait_seconds() const { return data_wait_seconds_; }
  std::int64_t samples_seen() const { return samples_seen_; }
  // Total gradient norm (before clipping) of the current step, NaN when not computed. It is
  // computed on logging steps, when clipping by norm, and when a callback asked for it.
  double last_grad_norm() const { return last_grad_norm_; }
  bool has_grad_norm() const { return has_grad_norm_; }  // last_grad_norm() was computed this step
  // Asks for last_grad_norm() of the current step (call before on_before_optimizer_step).
  void request_grad_norm() { grad_norm_requested_ = true; }
  // Drops the current optimiser step (from a hook before the step runs): gradients are cleared,
  // the weights stay as they are; the step counter and the schedule advance as after a
  // GradScaler skip. skipped_steps() counts them.
  void skip_step(const std::string& reason);
  std::int64_t skipped_steps() const { return skipped_steps_; }
  // The clipping threshold in force (gradient_clip_val, or the automatic one once chosen; 0: none).
  double gradient_clip_threshold() const;
  Precision& precision() { return *precision_; }
  // Samples of the whole (global) batch: the loader's batch size times the world size.
  std::int64_t global_batch_size() const;
  // The data set the training loader reads (a subset of the configured one with overfit_batches).
  const std::shared_ptr<const data::Dataset>& train_dataset() const { return train_set_; }

  // Writes a checkpoint of the current state (used by ModelCheckpoint).
  void save_checkpoint(const std::filesystem::path& dir, bool weights_only, bool trainable_only);

 private:
  void setup(TaskModule& task, DataModule& data);
  void restore(const std::filesystem::path& path, const ResumeOptions& resume);
  void train_epoch();
  void train_mode();  // module.train(), frozen BatchNorm kept in eval (trainer.frozen_bn_eval)
  void optimizer_step();
  void apply_schedule();  // scheduler lrs (and momentums) -> optimiser
  // BackboneFinetuning at the start of an epoch: the frozen layers join at unfreeze_at_epoch, and
  // their learning rate grows each epoch after.
  void finetune_epoch_start();
  void unfreeze_backbone(double lr);
  EvalResult run_eval(const char* stage, const std::shared_ptr<const data::Dataset>& ds, std::int64_t limit_batches);
  void run_validation();
  data::Batch to_device(data::Batch batch) const;
  bool time_exceeded() const;
  // Data-parallel: every rank adopts a stop any rank requested (at optimiser-step boundaries).
  void agree_on_stop();
  void build_data_parallel();
  void sync_batchnorm();  // trainer.sync_batchnorm: the BatchNorm layers sum over the ranks
  void zero_grad();
  template <class F>
  void each_callback(F&& f);

  TrainerOptions options_;
  OptimizerOptions optimizer_options_;
  SchedulerOptions scheduler_options_;
  std::filesystem::path run_dir_;
  std::string config_text_;
  nlohmann::json checkpoint_extra_ = nlohmann::json::object();
  std::vector<std::unique_ptr<Callback>> callbacks_;
  MetricsLogger logger_;

  TaskModule* task_ = nullptr;  // non-owning, valid during fit/test
  DataModule* data_ = nullptr;  // non-owning
  c10::Device device_{c10::kCPU};
  std::unique_ptr<Precision> precision_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<LrScheduler> scheduler_;
  std::shared_ptr<dist::Group> group_;
  std::unique_ptr<dist::DataParallel> ddp_;
  std::unique_ptr<data::Loader> train_loader_;
  std::shared_ptr<const data::Dataset> train_set_, val_set_;

  std::int64_t epoch_ = 0;
  std::int64_t global_step_ = 0;
  std::int64_t batch_in_epoch_ = 0;
  std::int64_t resume_batch_ = 0;
  std::int64_t num_train_batches_ = 0;
  std::int64_t val_every_batches_ = 0;
  std::int64_t accumulated_ = 0;
  std::int64_t samples_seen_ = 0;
  bool sanity_checking_ = false;
  bool should_stop_ = false;
  std::string stop_reason_;
  StopKind stop_kind_ = StopKind::kNone;
  // The epoch's running sums at a mid-epoch checkpoint, restored when its epoch resumes.
  std::optional<nlohmann::json> resume_epoch_sums_;
  std::map<std::string, double> callback_metrics_;
  double last_grad_norm_ = NAN;
  bool grad_norm_requested_ = false;
  bool has_grad_norm_ = false;
  double data_wait_seconds_ = 0.0;
  bool skip_step_ = false;
  std::int64_t skipped_steps_ = 0;
  std::int64_t resumed_world_size_ = 0;
  bool resumed_mid_epoch_ = false;       // fit resumed inside an epoch (its start has happened)
  std::vector<double> auto_clip_norms_;  // unclipped norms of the first gradient_clip_auto_steps steps
  double auto_clip_ = 0.0;               // the automatic threshold once chosen
  double train_seconds_before_ = 0.0;    // from a resumed checkpoint
  std::chrono::steady_clock::time_point fit_started_;
  bool fitting_ = false;
  std::vector<at::Tensor> trainable_;
  FreezeReport freeze_;
  bool unfrozen_ = false;     // BackboneFinetuning: the frozen layers are training (the last group)
  double unfrozen_lr_ = 0.0;  // their learning rate
  at::Tensor epoch_loss_sum_;
  std::int64_t epoch_loss_count_ = 0;
  std::int64_t epoch_correct_ = 0;
  std::int64_t epoch_seen_ = 0;
};

}  // namespace glassbox::train
