// EvalMetrics: a task's validation / test metrics, accumulated batch by batch over a split.
//
//   auto m = make_eval_metrics(TaskKind::kRegression);
//   for (each batch) m->update(outputs, targets);    // outputs [B, K], on any device
//   std::map<std::string, double> r = m->compute();  // "mae", "rmse", "r2", ...
//
// The names, each logged by the Trainer as val_<name> / test_<name> (scikit-learn's definitions,
// see metrics/):
//   classification  acc; macro_f1, weighted_f1, macro_precision, macro_recall, macro_ap,
//                   roc_auc_macro (when defined); precision_<k>, recall_<k>, f1_<k> for K <= 50
//   regression      mae, mse, rmse, r2, explained_variance (uniform averages over the targets);
//                   mae_<k>, rmse_<k>, r2_<k> per target when there are 2..50 of them
//   multilabel      subset_acc, hamming_loss, micro_f1, macro_f1, samples_f1, weighted_f1,
//                   micro_ap, macro_ap, roc_auc_macro (when defined); f1_<k>, ap_<k> for L <= 50
// Classification accuracy counts every batch; the other metrics need the whole split (they are
// computed at the end on the collected outputs, in float64).
// Thread safety: one instance per evaluation loop.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "glassbox/core/task_kind.h"

namespace glassbox::train {

class EvalMetrics {
 public:
  virtual ~EvalMetrics() = default;
  virtual void update(const at::Tensor& outputs, const at::Tensor& targets) = 0;
  virtual std::map<std::string, double> compute() const = 0;
};

std::unique_ptr<EvalMetrics> make_eval_metrics(TaskKind kind);

// The higher-is-better metrics of every task's names above (false for loss, mae, mse, rmse,
// hamming_loss and their per-target forms): what a monitor's mode defaults to.
bool higher_is_better(const std::string& metric);

}  // namespace glassbox::train
