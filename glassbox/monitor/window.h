// A window of served predictions compared with the reference profile of the training data.
//
// The reference (`Reference`) holds, for each monitored input feature and for the model's
// confidence and entropy, a sorted sample of reference values with the whole reference's min,
// max, mean and standard deviation, the range of the raw input values, and the share of each
// predicted class (with the labels' shares and per-class error rates when the data had labels). A `Window` collects the
// same quantities for the predictions of one tumbling window; `compare` tests each feature (two-sample KS with
// Bonferroni's correction over the features, normed Wasserstein, PSI), the confidence (KS, mean and standard deviation)
// and the class mix (chi-square on the counts, Jensen-Shannon), and counts inputs outside the reference's range and
// non-finite ones.
//
// A feature drifts when its KS p-value is below alpha / features (Bonferroni) and its normed
// Wasserstein distance is at least `min_wasserstein` (0.1, Evidently's threshold): on windows of
// a thousand predictions a p-value alone flags differences too small to matter. The class mix
// shifts when the chi-square p-value is below alpha and the Jensen-Shannon distance is at least
// `min_js` (0.1).
//
//   Window w(reference.features.size());
//   for (each prediction) w.add(features, confidence, predicted_class);
//   WindowReport r = compare(reference, w, {});
//   if (r.input_drift) ...
//
// Torch-free. Thread safety: a Window is filled by one thread; compare is a pure function.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/monitor/features.h"

namespace glassbox::monitor {

// One monitored quantity of the reference data.
struct ReferenceSample {
  std::string name;
  std::vector<double> values;  // a sample of the reference, sorted (the KS and PSI reference)
  double min = 0, max = 0;     // over the whole reference
  double mean = 0, std = 0;    // over the whole reference (population standard deviation)
  std::int64_t count = 0;      // reference values seen

  // Summarises `values` (any order; NaN not allowed) keeping at most `keep` of them, evenly
  // spaced in sorted order (the quantiles i / (keep - 1)).
  static ReferenceSample of(std::string name, std::vector<double> values, std::size_t keep = 10000);
};

struct Reference {
  InputSpec input;                 // how a served input becomes the features (name empty: not monitored)
  std::vector<ValueRange> ranges;  // per range group of `input`; empty: each feature's own range
  std::vector<ReferenceSample> features;
  ReferenceSample confidence;           // the max-softmax probability of each reference prediction
  ReferenceSample entropy;              // the softmax's entropy (nats); no values: not profiled
  std::string output;                   // the served output holding the class scores ("" : none)
  bool output_logits = true;            // softmax them (false: they are probabilities already)
  std::vector<std::string> classes;     // class names, index order
  std::vector<double> predicted_share;  // per class, over the reference predictions
  std::vector<double> true_share;       // per class, of the labels (empty: unknown)
  std::vector<double> class_error;      // per true class, the share predicted wrong (empty: unknown)
  std::int64_t predictions = 0;
};

struct DriftOptions {
  double alpha = 0.05;           // family-wise: each feature is tested at alpha / features
  double min_wasserstein = 0.1;  // a drifted feature's normed Wasserstein distance, at least
  double min_js = 0.1;           // a shifted class mix's Jensen-Shannon distance, at least
  double range_tolerance = 0.0;  // a value counts out of range beyond [min - t*span, max + t*span]
  std::size_t top_features = 10;
  bool exact_ks = true;  // scipy's method="auto"; false: "asymp" (Smirnov's limit, cheap on every window)
};

struct FeatureDrift {
  std::string name;
  double ks_statistic = 0, ks_pvalue = 1, wasserstein_normed = 0, psi = 0;
  bool drifted = false;  // ks_pvalue < alpha / features and wasserstein_normed >= min_wasserstein
};

struct WindowReport {
  std::int64_t predictions = 0;
  std::vector<FeatureDrift> features;  // the `top_features` most drifted, smallest p-value first
  std::int64_t drifted_features = 0;
  bool input_drift = false;
  double alpha = 0.05;            // the level of the confidence and class-mix tests
  double feature_alpha = 0.05;    // each feature's: alpha / features (Bonferroni)
  std::int64_t input_values = 0;  // input values seen (predictions x features)
  std::int64_t out_of_range = 0;  // input values outside the reference range
  std::int64_t non_finite = 0;    // NaN and infinite input values
  double confidence_mean = 0, confidence_std = 0;
  double reference_confidence_mean = 0, reference_confidence_std = 0;
  double confidence_ks_statistic = 0, confidence_ks_pvalue = 1;
  bool confidence_drift = false;  // confidence_ks_pvalue < alpha
  double entropy_mean = 0, entropy_ks_statistic = 0, entropy_ks_pvalue = 1;
  std::vector<double> predicted_share;
  double class_chi2 = 0, class_chi2_pvalue = 1, class_js = 0;
  bool class_mix_shift = false;  // class_chi2_pvalue < alpha and class_js >= min_js

  nlohmann::json to_json() const;
};

class Window {
 public:
  Window(std::size_t features, std::size_t classes);
  // One prediction: its input features (as many as the reference has), its confidence and
  // predicted class. Non-finite feature values are counted and left out of the tests.
  void add(std::span<const double> features, double confidence, std::int64_t predicted_class);
  // The same with the softmax's entropy; predicted_class -1 (and NaN confidence and entropy):
  // the prediction's output was not seen.
  void add(std::span<const double> features, double confidence, double entropy, std::int64_t predicted_class);
  // The raw input values of predictions against the reference's ranges (FeatureExtractor); when
  // the reference has ranges, the report's input counts are these.
  void count_inputs(const InputCounts& counts);
  std::int64_t size() const { return predictions_; }
  void clear();

  friend WindowReport compare(const Reference& reference, const Window& window, const DriftOptions& options);

 private:
  std::vector<std::vector<double>> features_;  // per feature, the window's finite values
  std::vector<double> confidence_, entropy_;
  std::vector<std::int64_t> class_counts_;
  std::int64_t predictions_ = 0, non_finite_ = 0, classified_ = 0;
  InputCounts raw_;
};

WindowReport compare(const Reference& reference, const Window& window, const DriftOptions& options);

}  // namespace glassbox::monitor
