// Tested by train_test (Trainer.ValidationMetricsCanBeMonitored: classification) and cli_test
// (Tasks.*: regression and multi-label, recomputed by scikit-learn).
#include "glassbox/train/eval_metrics.h"

#include <cmath>
#include <string_view>

#include <torch/torch.h>

#include "glassbox/metrics/classification.h"
#include "glassbox/metrics/multilabel.h"
#include "glassbox/metrics/regression.h"
#include "glassbox/metrics/running.h"

namespace glassbox::train {
namespace {

constexpr std::size_t kPerOutputLimit = 50;  // per-class / per-target keys up to this many outputs

class ClassificationMetrics final : public EvalMetrics {
 public:
  void update(const at::Tensor& outputs, const at::Tensor& targets) override {
    if (!outputs.defined() || outputs.dim() != 2) return;
    correct_ += metrics::count_topk_correct(outputs, targets, 1);
    seen_ += outputs.size(0);
    if (targets.dim() == 1 && !targets.is_floating_point()) {
      probs_.push_back(torch::softmax(outputs.detach().to(torch::kDouble), 1).cpu());
      labels_.push_back(targets.cpu());
    }
  }
  std::map<std::string, double> compute() const override {
    std::map<std::string, double> r;
    if (seen_ == 0) return r;
    r["acc"] = static_cast<double>(correct_) / static_cast<double>(seen_);
    if (probs_.empty()) return r;
    const metrics::ClassificationReport c =
        metrics::classification_report(metrics::classification_input(torch::cat(labels_), torch::cat(probs_)));
    r["macro_f1"] = c.macro.f1;
    r["weighted_f1"] = c.weighted.f1;
    r["macro_precision"] = c.macro.precision;
    r["macro_recall"] = c.macro.recall;
    r["macro_ap"] = c.average_precision_macro;
    if (std::isfinite(c.roc_auc_macro)) r["roc_auc_macro"] = c.roc_auc_macro;
    if (c.per_class.size() <= kPerOutputLimit) {
      for (std::size_t k = 0; k < c.per_class.size(); ++k) {
        r["precision_" + std::to_string(k)] = c.per_class[k].prf.precision;
        r["recall_" + std::to_string(k)] = c.per_class[k].prf.recall;
        r["f1_" + std::to_string(k)] = c.per_class[k].prf.f1;
      }
    }
    return r;
  }

 private:
  std::int64_t correct_ = 0, seen_ = 0;
  std::vector<at::Tensor> probs_, labels_;
};

// Collects outputs and targets as float64 [N, K] on the CPU.
class Collected : public EvalMetrics {
 public:
  void update(const at::Tensor& outputs, const at::Tensor& targets) override {
    if (!outputs.defined() || outputs.dim() != 2 || !targets.is_floating_point()) return;
    outputs_.push_back(outputs.detach().to(torch::kCPU, torch::kDouble));
    targets_.push_back(targets.detach().reshape(outputs.sizes()).to(torch::kCPU, torch::kDouble));
  }

 protected:
  // False when nothing was collected.
  bool gather(std::vector<double>& out, std::vector<double>& target, std::int64_t& n, std::int64_t& k) const {
    if (outputs_.empty()) return false;
    const at::Tensor o = torch::cat(outputs_).contiguous();
    const at::Tensor t = torch::cat(targets_).contiguous();
    n = o.size(0);
    k = o.size(1);
    if (n == 0) return false;
    out.assign(o.const_data_ptr<double>(), o.const_data_ptr<double>() + o.numel());
    target.assign(t.const_data_ptr<double>(), t.const_data_ptr<double>() + t.numel());
    return true;
  }

 private:
  std::vector<at::Tensor> outputs_, targets_;
};

class RegressionMetrics final : public Collected {
 public:
  std::map<std::string, double> compute() const override {
    std::map<std::string, double> r;
    std::vector<double> pred, truth;
    std::int64_t n = 0, k = 0;
    if (!gather(pred, truth, n, k)) return r;
    const metrics::RegressionReport rep = metrics::regression_report(truth, pred, n, k);
    r["mae"] = rep.mae;
    r["mse"] = rep.mse;
    r["rmse"] = rep.rmse;
    r["r2"] = rep.r2;
    r["explained_variance"] = rep.explained_variance;
    if (k >= 2 && rep.per_output.size() <= kPerOutputLimit) {
      for (std::size_t j = 0; j < rep.per_output.size(); ++j) {
        r["mae_" + std::to_string(j)] = rep.per_output[j].mae;
        r["rmse_" + std::to_string(j)] = rep.per_output[j].rmse;
        r["r2_" + std::to_string(j)] = rep.per_output[j].r2;
      }
    }
    return r;
  }
};

class MultiLabelMetrics final : public Collected {
 public:
  std::map<std::string, double> compute() const override {
    std::map<std::string, double> r;
    std::vector<double> logits, truth;
    std::int64_t n = 0, k = 0;
    if (!gather(logits, truth, n, k)) return r;
    std::vector<double> scores(logits.size());
    std::vector<unsigned char> targets(truth.size());
    for (std::size_t i = 0; i < logits.size(); ++i) {
      scores[i] = 1.0 / (1.0 + std::exp(-logits[i]));
      targets[i] = truth[i] >= 0.5 ? 1 : 0;
    }
    const metrics::MultiLabelReport rep = metrics::multilabel_report(targets, scores, n, k);
    r["subset_acc"] = rep.subset_accuracy;
    r["hamming_loss"] = rep.hamming_loss;
    r["micro_f1"] = rep.micro.f1;
    r["macro_f1"] = rep.macro.f1;
    r["samples_f1"] = rep.samples.f1;
    r["weighted_f1"] = rep.weighted.f1;
    r["micro_ap"] = rep.micro_ap;
    r["macro_ap"] = rep.macro_ap;
    if (std::isfinite(rep.macro_roc_auc)) r["roc_auc_macro"] = rep.macro_roc_auc;
    if (rep.per_label.size() <= kPerOutputLimit) {
      for (std::size_t j = 0; j < rep.per_label.size(); ++j) {
        r["f1_" + std::to_string(j)] = rep.per_label[j].prf.f1;
        r["ap_" + std::to_string(j)] = rep.per_label[j].average_precision;
      }
    }
    return r;
  }
};

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

std::unique_ptr<EvalMetrics> make_eval_metrics(TaskKind kind) {
  switch (kind) {
    case TaskKind::kRegression: return std::make_unique<RegressionMetrics>();
    case TaskKind::kMultilabel: return std::make_unique<MultiLabelMetrics>();
    case TaskKind::kClassification: break;
  }
  return std::make_unique<ClassificationMetrics>();
}

bool higher_is_better(const std::string& metric) {
  std::string_view m = metric;
  for (std::string_view prefix : {"val_", "test_", "train_"})
    if (starts_with(m, prefix)) m.remove_prefix(prefix.size());
  for (std::string_view lower : {"loss", "mae", "mse", "rmse", "hamming_loss"})
    if (m == lower || starts_with(m, std::string(lower) + "_")) return false;
  return true;
}

}  // namespace glassbox::train
