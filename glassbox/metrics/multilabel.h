// Multi-label classification metrics with scikit-learn's definitions: each sample carries any
// number of the L labels (targets 0/1), each label has a score (a probability, sigmoid of the
// logit), and a label is predicted when its score is at least the threshold (0.5).
//
//   MultiLabelReport r = multilabel_report(targets, scores, n, labels);   // row-major [n, labels]
//   r.per_label[2].f1; r.macro.f1; r.micro.f1; r.samples.f1; r.macro_ap; r.subset_accuracy;
//
// Definitions (sklearn 1.x, zero_division = 0): per label precision/recall/F1 on its column;
// micro pools the counts of all labels, macro is the unweighted mean over the labels, weighted
// the support-weighted mean, samples the mean over samples of each sample's own scores (a
// sample with no true and no predicted label scores 0). subset accuracy: the whole label set
// predicted exactly (accuracy_score); Hamming loss: the share of wrong label decisions. AP and
// ROC AUC per label on its score column (average_precision_score / roc_auc_score with
// average=None); macro AP is their mean (a label that never occurs has AP 0 and counts, as in
// sklearn); micro AP / ROC AUC pool all (sample, label) pairs; a label without positives or
// negatives has no ROC AUC (NaN) and the macro ROC AUC is then undefined (NaN).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/metrics/classification.h"

namespace glassbox::metrics {

struct LabelMetrics {
  std::int64_t support = 0, predicted = 0, tp = 0, fp = 0, fn = 0;
  PrfScores prf;
  double average_precision = 0;
  double roc_auc = 0;  // NaN when undefined
};

struct MultiLabelReport {
  std::int64_t num_samples = 0, num_labels = 0;
  double threshold = 0.5;
  std::vector<LabelMetrics> per_label;
  PrfScores micro, macro, weighted, samples;
  double subset_accuracy = 0, hamming_loss = 0;
  double macro_ap = 0, micro_ap = 0, weighted_ap = 0;
  double macro_roc_auc = 0, micro_roc_auc = 0;  // NaN when undefined
  nlohmann::json to_json(const std::vector<std::string>& label_names = {}) const;
};

// targets: 0/1, scores: per label, both row-major [n, labels].
MultiLabelReport multilabel_report(const std::vector<unsigned char>& targets, const std::vector<double>& scores,
                                   std::int64_t n, std::int64_t labels, double threshold = 0.5);

}  // namespace glassbox::metrics
