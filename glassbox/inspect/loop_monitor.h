// LoopMonitor: the doctor's checks for hand-written training loops (no Trainer), where two
// faults only such loops can make live: gradients never zeroed between steps, and evaluating a
// model left in training mode.
//
//   LoopMonitor mon(*model);                    // any torch::nn::Module
//   for (auto& batch : batches) {
//     at::Tensor loss = criterion(model->forward(batch.inputs), batch.targets);
//     mon.before_backward();                    // gradients left over from the last step?
//     loss.backward();
//     optimizer.step();
//     mon.after_step();                         // the optimiser has used the gradients
//   }
//   model->eval();
//   mon.check_eval_mode();                      // BatchNorm / Dropout still in training mode?
//   for (const Finding& f : mon.findings()) std::cout << f.id << ": " << f.evidence << "\n";
//
// Accumulating gradients over several backward passes before one step is fine: only a backward
// that follows after_step() with the gradients still in place is reported.
// Thread safety: the training thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "glassbox/inspect/doctor.h"

namespace glassbox::inspect {

class LoopMonitor {
 public:
  explicit LoopMonitor(torch::nn::Module& module);
  void before_backward();
  void after_step();
  // Call where the loop evaluates: reports the module or any BatchNorm/Dropout inside it still
  // in training mode. `where` names the place in the message.
  void check_eval_mode(const std::string& where = "evaluation");
  const std::vector<Finding>& findings() const { return findings_; }
  std::int64_t steps() const { return steps_; }

 private:
  torch::nn::Module& module_;
  std::int64_t steps_ = 0;
  bool stepped_ = false;
  bool reported_grads_ = false;
  bool reported_mode_ = false;
  std::vector<Finding> findings_;
};

}  // namespace glassbox::inspect
