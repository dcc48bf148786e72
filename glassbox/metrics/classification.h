// Classification metrics with scikit-learn's semantics, computed from labels and per-class
// scores of a whole split (the figures `glassbox eval` writes into metrics.json).
//
//   ClassificationInput in{labels, probs, 10};                  // labels [N] int64, probs [N, K] float64
//   ClassificationReport r = classification_report(in);
//   r.accuracy; r.per_class[3].f1; r.macro.precision; r.roc_auc_macro;  // sklearn's numbers
//   nlohmann::json j = r.to_json(class_names);
//
// Definitions (sklearn 1.x, zero_division = 0): precision TP/(TP+FP), recall TP/(TP+FN), F1
// 2TP/(2TP+FP+FN); a 0/0 ratio is 0 and the class is listed under `undefined`. micro pools the
// counts, macro is the unweighted mean over all K classes, weighted the support-weighted mean.
// predicted = the first class of highest score (numpy's argmax). Top-k follows sklearn's
// top_k_accuracy_score: scores sorted by a stable sort and read from the end, so among tied
// scores the higher class index ranks first. Average precision and ROC AUC are one-vs-rest per
// class on the class's score column (tied scores form one threshold); AP of a class that never
// occurs is 0 and counts in the macro AP (sklearn's values, with its warning); its ROC AUC is
// undefined (null), which makes the macro ROC AUC undefined as in sklearn — the mean over the
// classes where it is defined is given beside it (`notes` says so). Two classes are sklearn's
// binary case: top-1 = accuracy, ROC AUC = the class-1 score's.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/metrics/ranking.h"

namespace at {
class Tensor;
}

namespace glassbox::metrics {

struct ClassificationInput {
  std::vector<std::int64_t> labels;  // [N], each in [0, num_classes)
  std::vector<double> scores;        // [N * K] row-major: probabilities (or any per-class scores)
  std::int64_t num_classes = 0;
};
// From tensors: labels [N] integer, probs [N, K] floating (copied to the host as float64).
ClassificationInput classification_input(const at::Tensor& labels, const at::Tensor& probs);

struct PrfScores {
  double precision = 0, recall = 0, f1 = 0;
};

struct ClassMetrics {
  std::int64_t support = 0;    // true samples of the class
  std::int64_t predicted = 0;  // samples predicted as the class
  std::int64_t tp = 0, fp = 0, fn = 0;
  PrfScores prf;
  double average_precision = 0;
  double roc_auc = 0;  // NaN when the class never occurs, or occurs in every sample
  bool precision_undefined = false, recall_undefined = false, f1_undefined = false;
};

struct ClassificationReport {
  std::int64_t num_samples = 0;
  std::int64_t num_classes = 0;
  std::vector<std::int64_t> predicted;               // [N] argmax
  std::vector<std::vector<std::int64_t>> confusion;  // [K][K], rows true, columns predicted
  std::vector<ClassMetrics> per_class;               // [K]
  PrfScores micro, macro, weighted;
  double accuracy = 0;
  std::vector<std::pair<std::int64_t, double>> top_k;  // (k, accuracy) for k = 1 .. min(5, K - 1)
  double average_precision_macro = 0;
  double roc_auc_macro = 0;          // sklearn's macro OvR: NaN when any class's is undefined
  double roc_auc_macro_defined = 0;  // the mean over the classes where it is defined
  std::int64_t roc_auc_defined = 0;  // classes in that mean
  std::int64_t majority_class = 0;   // most frequent true class (lowest index on ties)
  double majority_accuracy = 0;      // accuracy of always predicting it
  double imbalance_ratio = 0;        // largest / smallest non-zero class support
  std::vector<std::string> notes;

  nlohmann::json to_json(const std::vector<std::string>& class_names) const;
};

ClassificationReport classification_report(const ClassificationInput& in);

// sklearn's top_k_accuracy_score(y, scores, k=k, labels=range(K)).
double top_k_accuracy(const ClassificationInput& in, std::int64_t k);

// compute_class_weight("balanced"): n_samples / (n_present_classes * count_c) for the classes that
// occur; a class that never occurs gets 0 (sklearn refuses such a class; 0 keeps the vector
// aligned with the model's outputs) and is named in notes when given.
std::vector<double> balanced_class_weights(const std::vector<std::int64_t>& labels, std::int64_t num_classes,
                                           std::vector<std::string>* notes = nullptr);

// One-vs-rest precision-recall curves of every class for plots: sklearn's precision_recall_curve
// arrays thinned to at most max_points evenly spaced points (both ends kept; "points" gives the
// full length). [{"class", "precision": [...], "recall": [...], "points"}]
nlohmann::json pr_curves_json(const ClassificationInput& in, std::size_t max_points = 256);

// The sentence `glassbox eval` prints when accuracy is within reach of the majority baseline on
// imbalanced data; empty when no warning is due.
std::string imbalance_warning(const ClassificationReport& r, const std::vector<std::string>& class_names);

}  // namespace glassbox::metrics
