// Built-in callbacks with Lightning's semantics.
//
//   ModelCheckpoint      saves "epoch=E-step=S.ckpt" (top-k by a monitored metric) and last.ckpt
//   EarlyStopping        stops when a monitored metric stops improving (patience in validation checks)
//   LearningRateMonitor  logs the learning rate of every parameter group
//   ProgressBarCallback  progress bar on a terminal, plain lines otherwise
//   ModelSummary         parameters, trainable parameters and output shape per layer
//   TimerCallback        wall time per stage; stops at a duration
//
// Thread safety: training thread only.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "glassbox/base/config.h"
#include "glassbox/base/progress.h"
#include "glassbox/train/callback.h"
#include "glassbox/train/metric_mode.h"

namespace glassbox::train {

struct CheckpointOptions {
  std::string monitor = "val_loss";  // "" : no monitoring, keep the latest
  MetricMode mode = MetricMode::kMin;
  std::int64_t save_top_k = 1;  // -1: all, 0: none (only last)
  bool save_last = true;
  bool save_weights_only = false;
  bool save_trainable_only = false;  // frozen parameters and buffers are not stored
  std::int64_t every_n_epochs = 1;
  std::int64_t every_n_train_steps = 0;
  std::string dirpath;  // empty: <run_dir>/checkpoints

  void visit(FieldVisitor& v);
  void validate() const;
};

class ModelCheckpoint final : public Callback {
 public:
  explicit ModelCheckpoint(CheckpointOptions options);
  std::string name() const override { return "ModelCheckpoint"; }
  bool is_checkpoint() const override { return true; }
  void on_validation_end(Trainer& t) override;
  void on_train_epoch_end(Trainer& t) override;
  void on_train_batch_end(Trainer& t, const StepOutput&, const data::Batch&) override;
  void on_train_end(Trainer& t) override;
  nlohmann::json state() const override;
  void load_state(const nlohmann::json& s) override;

  const std::string& best_model_path() const { return best_path_; }
  double best_model_score() const { return best_score_; }
  const std::string& last_model_path() const { return last_path_; }

 private:
  std::filesystem::path dir(const Trainer& t) const;
  void save(Trainer& t, bool monitored);
  void save_last(Trainer& t);
  bool better(double a, double b) const;

  CheckpointOptions options_;
  struct Saved {
    std::string path;
    double score;
  };
  std::vector<Saved> top_;
  std::string best_path_;
  double best_score_;
  std::string last_path_;
  std::int64_t last_saved_step_ = -1;
  bool pending_ = false;  // a monitored save waiting for the end of the epoch
};

struct EarlyStoppingOptions {
  bool enabled = false;
  std::string monitor = "val_loss";
  MetricMode mode = MetricMode::kMin;
  double min_delta = 0.0;
  std::int64_t patience = 3;
  bool check_finite = true;
  double stopping_threshold = 0.0;  // stop once the metric is better than this
  bool use_stopping_threshold = false;
  double divergence_threshold = 0.0;
  bool use_divergence_threshold = false;

  void visit(FieldVisitor& v);
  void validate() const;
};

class EarlyStopping final : public Callback {
 public:
  explicit EarlyStopping(EarlyStoppingOptions options);
  std::string name() const override { return "EarlyStopping"; }
  void on_validation_end(Trainer& t) override;
  nlohmann::json state() const override;
  void load_state(const nlohmann::json& s) override;
  std::int64_t wait_count() const { return wait_; }
  const std::string& reason() const { return reason_; }

 private:
  EarlyStoppingOptions options_;
  double best_;
  std::int64_t wait_ = 0;
  std::int64_t stopped_epoch_ = -1;
  std::string reason_;
};

class LearningRateMonitor final : public Callback {
 public:
  std::string name() const override { return "LearningRateMonitor"; }
  void on_train_batch_end(Trainer& t, const StepOutput&, const data::Batch&) override;
};

class ProgressBarCallback final : public Callback {
 public:
  explicit ProgressBarCallback(std::ostream& out);
  std::string name() const override { return "ProgressBar"; }
  void on_fit_start(Trainer& t) override;
  void on_train_epoch_start(Trainer& t) override;
  void on_train_batch_end(Trainer& t, const StepOutput& out, const data::Batch&) override;
  void on_train_epoch_end(Trainer& t) override;
  ProgressBar& bar() { return bar_; }

 private:
  ProgressBar bar_;
  double last_loss_ = 0;
  std::int64_t batches_ = 0;
  std::chrono::steady_clock::time_point epoch_start_, fit_start_;
  std::int64_t epoch_samples_ = 0;
  std::int64_t fit_batches_ = -1;  // batches trained by this fit (-1 before its first epoch)
};

class ModelSummary final : public Callback {
 public:
  // `forward` (optional) is the model's real forward, used to verify per-layer output shapes.
  explicit ModelSummary(std::ostream& out, std::vector<std::int64_t> sample_shape = {},
                        std::function<at::Tensor(const at::Tensor&)> forward = nullptr);
  std::string name() const override { return "ModelSummary"; }
  void on_fit_start(Trainer& t) override;

 private:
  std::ostream& out_;
  std::vector<std::int64_t> sample_shape_;
  std::function<at::Tensor(const at::Tensor&)> forward_;
};

// The summary as text: one row per module with its parameters and output shape.
std::string summarize_model(torch::nn::Module& module, const std::vector<std::int64_t>& sample_shape,
                            c10::Device device, const std::function<at::Tensor(const at::Tensor&)>& forward = nullptr);

class TimerCallback final : public Callback {
 public:
  explicit TimerCallback(double duration_s = 0);
  std::string name() const override { return "Timer"; }
  void on_fit_start(Trainer& t) override;
  void on_train_epoch_start(Trainer& t) override;
  void on_train_epoch_end(Trainer& t) override;
  void on_validation_start(Trainer& t) override;
  void on_validation_end(Trainer& t) override;
  void on_train_batch_end(Trainer& t, const StepOutput&, const data::Batch&) override;
  nlohmann::json state() const override;
  void load_state(const nlohmann::json& s) override;
  double train_seconds() const { return train_s_; }
  double validate_seconds() const { return val_s_; }

 private:
  double duration_s_;
  double train_s_ = 0, val_s_ = 0;
  std::chrono::steady_clock::time_point mark_;
};

}  // namespace glassbox::train
