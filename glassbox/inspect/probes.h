// ProbeCallback: per-layer statistics while training, without touching the model's code —
// the C++ equivalent of wandb.watch(model, log="all") plus the usual readings of them.
//
//   ProbeOptions po;                       // from [diagnostics]
//   po.every_n_steps = 50;
//   auto probes = std::make_unique<ProbeCallback>(po, tensorboard_writer /* or nullptr */);
//   ProbeCallback* p = probes.get();
//   trainer.add_callback(std::move(probes));
//   trainer.fit(task, data);
//   for (const ProbeRecord& r : p->history()) ...; for (const Alert& a : p->alerts()) ...
//
// Every N optimiser steps (steps 0, N, 2N, ...), the first micro-batch of the step is probed:
//  - activations: every module's output (ForwardRecorder) — mean, std, min, max, zero share,
//    dead-unit share, non-finite count;
//  - weights and gradients of every parameter — norm, std, max |.|, and the update-to-weight
//    ratio ||w_after - w_before|| / ||w_before|| of the step;
// and at every step (grad_norm_every_step) the total gradient norm. Readings (common practice):
// norm above grad_norm_high → explosion is near; median norm below grad_norm_low → learning rate
// too small or vanishing gradients; a parameter whose gradient std stays 0 for dead_after_probes
// probes → a dead layer. suggested_clip() is the 95th percentile of the first K unclipped norms.
// Off-probe steps cost one gradient-norm reduction (or nothing when grad_norm_every_step is off).
// Thread safety: training thread only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/inspect/layer_map.h"
#include "glassbox/inspect/recorder.h"
#include "glassbox/inspect/stats.h"
#include "glassbox/train/callback.h"
#include "glassbox/train/diagnostics_options.h"

namespace glassbox::inspect {

class EventWriter;

struct ProbeOptions {
  std::int64_t every_n_steps = 50;  // 0: only the gradient-norm history
  bool activations = true;
  bool histograms = true;                       // (with a writer) histograms of weights, gradients, activations
  std::int64_t histogram_every_n_steps = 1000;  // on probe steps that are multiples of this
  bool grad_norm_every_step = false;
  std::int64_t dead_after_probes = 5;
  double grad_norm_low = 1e-2;
  double grad_norm_high = 100.0;
  std::int64_t clip_steps = 100;   // K for suggested_clip()
  std::int64_t images = 16;        // (with a writer) first training inputs as an image grid
  std::size_t max_history = 2000;  // probe records kept in memory (oldest dropped)

  static ProbeOptions from(const train::DiagnosticsOptions& d);
};

struct LayerActivation {
  std::string layer;  // attributed name (see recorder.h)
  std::string op;
  std::string type;  // module type, or "" for a function between modules
  std::vector<std::int64_t> shape;
  ActivationStats stats;
};

struct ProbeRecord {
  std::int64_t step = 0;
  std::int64_t epoch = 0;
  std::int64_t batch_size = 0;
  double loss = 0;
  double grad_norm = 0;                      // NaN when not computed
  std::vector<LayerActivation> activations;  // forward order
  std::vector<ParameterStats> parameters;    // registration order (trainable ones)
  std::vector<double> update_ratio;          // per parameter; NaN when the step was skipped
  nlohmann::json to_json() const;
};

struct Alert {
  std::string id;  // "exploding-gradients", "vanishing-gradients", "dead-layer"
  std::int64_t step = 0;
  std::string where;    // a layer / parameter name, or ""
  std::string message;  // one line with the numbers
};

class ProbeCallback final : public train::Callback {
 public:
  // writer may be null (no TensorBoard); jsonl (may be empty) receives one ProbeRecord per line;
  // alerts (may be null) receives one line per alert as it is raised.
  ProbeCallback(ProbeOptions options, EventWriter* writer = nullptr, std::filesystem::path jsonl = {},
                std::ostream* alerts = nullptr);
  ~ProbeCallback() override;
  std::string name() const override { return "ProbeCallback"; }

  void on_fit_start(train::Trainer& t) override;
  void on_train_batch_start(train::Trainer& t, const data::Batch& batch) override;
  void on_before_backward(train::Trainer& t, const at::Tensor& loss) override;
  void on_after_backward(train::Trainer& t) override;
  void on_before_optimizer_step(train::Trainer& t) override;
  void on_train_batch_end(train::Trainer& t, const train::StepOutput& out, const data::Batch& batch) override;
  void on_train_end(train::Trainer& t) override;
  void on_exception(train::Trainer& t, const std::exception& e) override;

  const std::vector<ProbeRecord>& history() const { return history_; }
  // (step, total gradient norm before clipping) for every step where it was computed.
  const std::vector<std::pair<std::int64_t, double>>& grad_norms() const { return grad_norms_; }
  const std::vector<Alert>& alerts() const { return alerts_; }
  // The 95th percentile of the first clip_steps finite gradient norms (NaN before any).
  double suggested_clip() const;
  const LayerMap* layer_map() const { return map_.get(); }

 private:
  bool probe_due(const train::Trainer& t) const;
  void finish_record(train::Trainer& t);
  void raise(Alert a);
  void write_tensorboard(const ProbeRecord& r);

  ProbeOptions options_;
  EventWriter* writer_;
  std::filesystem::path jsonl_path_;
  std::ofstream jsonl_;
  std::ostream* alert_out_;
  std::unique_ptr<LayerMap> map_;
  std::unique_ptr<ForwardRecorder> recorder_;
  bool probing_ = false;           // the current step is a probe step
  bool histogram_step_ = false;    // ... and one with histograms
  std::int64_t probed_step_ = -1;  // global step being probed
  ProbeRecord current_;
  std::vector<at::Tensor> before_;  // weights before the step (probe steps)
  std::vector<NamedTensor> trainable_;
  at::Tensor loss_;
  std::vector<ProbeRecord> history_;
  std::vector<std::pair<std::int64_t, double>> grad_norms_;
  std::vector<Alert> alerts_;
  std::vector<std::int64_t> zero_grad_streak_;  // per trainable parameter
  bool exploding_raised_ = false, vanishing_raised_ = false;
  std::vector<bool> dead_raised_;
  bool images_written_ = false;
};

}  // namespace glassbox::inspect
