// Callback: hooks into the Trainer's loop with Lightning's names and order.
//
// fit: on_fit_start -> sanity validation -> per epoch { on_train_epoch_start -> per batch {
//   on_train_batch_start -> training_step -> on_before_zero_grad -> zero_grad ->
//   on_before_backward -> backward -> on_after_backward -> on_before_optimizer_step -> clip ->
//   optimiser step -> scheduler step ("step") -> on_train_batch_end } -> validation
//   (on_validation_start / on_validation_end) -> on_train_epoch_end -> scheduler step ("epoch") }
//   -> on_train_end -> on_fit_end.
// Checkpointing callbacks (is_checkpoint() == true) run after all others at every hook.
//
//   class PrintLoss : public Callback {
//     std::string name() const override { return "PrintLoss"; }
//     void on_train_batch_end(Trainer& t, const StepOutput& out, const data::Batch&) override { ... }
//   };
//
// State returned by state() is stored in checkpoints and handed back through load_state().
// Thread safety: hooks are called from the training thread.
#pragma once

#include <string>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include "glassbox/data/dataset.h"
#include "glassbox/train/task.h"

namespace glassbox::train {

class Trainer;
struct Checkpoint;

class Callback {
 public:
  virtual ~Callback() = default;
  virtual std::string name() const = 0;
  virtual bool is_checkpoint() const { return false; }

  virtual void on_fit_start(Trainer&) {}
  virtual void on_sanity_check_start(Trainer&) {}
  virtual void on_sanity_check_end(Trainer&) {}
  virtual void on_train_epoch_start(Trainer&) {}
  virtual void on_train_batch_start(Trainer&, const data::Batch&) {}
  virtual void on_before_zero_grad(Trainer&) {}
  virtual void on_before_backward(Trainer&, const at::Tensor& /*loss*/) {}
  virtual void on_after_backward(Trainer&) {}
  virtual void on_before_optimizer_step(Trainer&) {}
  virtual void on_train_batch_end(Trainer&, const StepOutput&, const data::Batch&) {}
  virtual void on_validation_start(Trainer&) {}
  virtual void on_validation_end(Trainer&) {}
  virtual void on_train_epoch_end(Trainer&) {}
  virtual void on_train_end(Trainer&) {}
  virtual void on_fit_end(Trainer&) {}
  virtual void on_test_start(Trainer&) {}
  virtual void on_test_end(Trainer&) {}
  // Called on an exception escaping the loop (before it propagates).
  virtual void on_exception(Trainer&, const std::exception&) {}

  // Before a checkpoint is written / after one was read for a resume (the model and the
  // trainer's state already restored): a callback may change or add tensors (Lightning's hooks).
  virtual void on_save_checkpoint(Trainer&, Checkpoint&) {}
  virtual void on_load_checkpoint(Trainer&, const Checkpoint&) {}

  virtual nlohmann::json state() const { return nlohmann::json::object(); }
  virtual void load_state(const nlohmann::json&) {}
};

}  // namespace glassbox::train
