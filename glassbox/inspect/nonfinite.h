// NaN / Inf localisation: on the first non-finite loss or gradient, find where it started.
//
//   auto guard = std::make_unique<NonFiniteMonitor>(NonFinitePolicy::Stop, &std::cerr, "runs/x/nonfinite.json");
//   NonFiniteMonitor* g = guard.get();
//   trainer.add_callback(std::move(guard));
//   trainer.fit(task, data);
//   if (g->first_event()) std::cout << g->first_event()->message << "\n";
//   // "non-finite loss at step 12 (epoch 0, batch 12): module "2" (ExpLayer) produced Inf in
//   //  aten::exp from finite inputs (max |input| 3.1); samples 3, 17"
//
// Each step costs one host read of the loss and a copy of the CPU generator's state. When a value is non-finite the
// batch is replayed with the same RNG state and the ForwardRecorder checking every op: the report names the first
// module, in forward order, whose output became non-finite while its inputs were finite — or, when the forward was
// finite, the first parameter (in backward order) whose gradient became non-finite — plus the
// step and the dataset indices of the samples involved. Non-finite inputs are reported as such.
// Policies: Stop (request_stop; the step is not applied), Skip (drop the step, go on),
// Continue (report and apply). Under fp16 with a GradScaler, overflowing gradients are the
// scaler's business (its skips are counted, not reported as faults).
// Thread safety: training thread only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include "glassbox/inspect/layer_map.h"
#include "glassbox/train/callback.h"
#include "glassbox/train/task.h"

namespace glassbox::train {
class Precision;
}

namespace glassbox::inspect {

enum class NonFinitePolicy { Stop, Skip, Continue };

struct NonFiniteEvent {
  std::int64_t step = 0, epoch = 0, batch = 0;
  // input: the batch itself; activation: a module's output; loss: the loss op; parameter: a
  // weight was already non-finite; gradient: backward produced it.
  std::string kind;
  std::string layer;  // module path (or "<module>:<op>"), parameter name for kind "gradient"/"parameter"
  std::string type;   // module type
  std::string op;     // ATen op
  std::vector<std::int64_t> shape;
  std::int64_t nonfinite = 0;             // non-finite values in that output / gradient
  double input_max_abs = 0;               // largest finite |input| of that op
  std::vector<std::int64_t> samples;      // dataset indices of the batch
  std::vector<std::int64_t> bad_samples;  // dataset indices whose rows carry the non-finite values
  std::string parameter;                  // kind gradient: first parameter in backward order
  double loss = 0;
  std::string message;  // one line
  nlohmann::json to_json() const;
};

// The random-number state at the start of a step, so that a replay draws the same dropout masks.
struct RngSnapshot {
  at::Tensor cpu;
  std::vector<at::Tensor> cuda;
  static RngSnapshot take();
  void restore() const;
};

// Localises a non-finite value in one training step of `task` on `batch` (the module in train
// mode, weights as they were for that step), replaying it from `rng` (when given). The RNG
// state, module buffers and .grad of every parameter are as before when it returns.
// `precision` may be null (no autocast). `dataset_index` ([N] int64, may be undefined) maps the
// batch's indices to the indices of the original data set (e.g. a SubsetDataset's indices()).
NonFiniteEvent localise_nonfinite(train::TaskModule& task, const data::Batch& batch, const LayerMap& map,
                                  train::Precision* precision, const RngSnapshot* rng = nullptr,
                                  const at::Tensor& dataset_index = {});

// Gradients are checked through the trainer's total gradient norm: on the steps where it is
// computed anyway (logging, clipping, probes) or, with EveryStep, at every step (one more pass
// over the gradients). A NaN gradient missed on one step shows in the next step's loss, and the
// replay then names the parameter it broke.
enum class GradientCheck { Off, WhenComputed, EveryStep };

class NonFiniteMonitor final : public train::Callback {
 public:
  NonFiniteMonitor(NonFinitePolicy policy, std::ostream* out = nullptr, std::filesystem::path report = {},
                   GradientCheck check_gradients = GradientCheck::WhenComputed);
  ~NonFiniteMonitor() override;
  std::string name() const override { return "NonFiniteMonitor"; }

  void on_fit_start(train::Trainer& t) override;
  void on_train_batch_start(train::Trainer& t, const data::Batch& batch) override;
  void on_before_backward(train::Trainer& t, const at::Tensor& loss) override;
  void on_after_backward(train::Trainer& t) override;
  void on_before_optimizer_step(train::Trainer& t) override;

  const std::optional<NonFiniteEvent>& first_event() const { return first_; }
  std::int64_t events() const { return events_; }
  std::int64_t scaler_skips() const { return scaler_skips_; }

 private:
  void report(train::Trainer& t, const std::string& what);

  NonFinitePolicy policy_;
  std::ostream* out_;
  std::filesystem::path report_path_;
  GradientCheck check_gradients_;
  std::unique_ptr<LayerMap> map_;
  data::Batch batch_;
  RngSnapshot rng_;
  at::Tensor loss_;
  bool bad_in_window_ = false;
  std::optional<NonFiniteEvent> first_;
  std::int64_t events_ = 0;
  std::int64_t scaler_skips_ = 0;
};

}  // namespace glassbox::inspect
