// A window of served predictions compared with the reference profile of the training data.
//
// The reference (`Reference`) holds, for each monitored input feature and for the model's
// confidence, a sorted sample of reference values with the whole reference's min, max, mean
// and standard deviation, and the share of each predicted class. A `Window` collects the same
// quantities for the predictions of one tumbling window; `compare` tests each feature (two-sample
// KS with Bonferroni's correction over the features, normed Wasserstein, PSI), the confidence
// (KS, mean and standard deviation) and the class mix (chi-square on the counts, Jensen-Shannon),
// and counts inputs outside the reference's range and non-finite ones.
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
  std::vector<ReferenceSample> features;
  ReferenceSample confidence;           // the max-softmax probability of each reference prediction
  std::vector<double> predicted_share;  // per class, over the reference predictions
  std::int64_t predictions = 0;
};

struct DriftOptions {
  double alpha = 0.05;           // family-wise: each feature is tested at alpha / features
  double range_tolerance = 0.0;  // a value counts out of range beyond [min - t*span, max + t*span]
  std::size_t top_features = 10;
};

struct FeatureDrift {
  std::string name;
  double ks_statistic = 0, ks_pvalue = 1, wasserstein_normed = 0, psi = 0;
  bool drifted = false;  // ks_pvalue < alpha / features
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
  double confidence_ks_statistic = 0, confidence_ks_pvalue = 1;
  bool confidence_drift = false;  // confidence_ks_pvalue < alpha
  std::vector<double> predicted_share;
  double class_chi2 = 0, class_chi2_pvalue = 1, class_js = 0;
  bool class_mix_shift = false;  // class_chi2_pvalue < alpha

  nlohmann::json to_json() const;
};

class Window {
 public:
  Window(std::size_t features, std::size_t classes);
  // One prediction: its input features (as many as the reference has), its confidence and
  // predicted class. Non-finite feature values are counted and left out of the tests.
  void add(std::span<const double> features, double confidence, std::int64_t predicted_class);
  std::int64_t size() const { return predictions_; }
  void clear();

  friend WindowReport compare(const Reference& reference, const Window& window, const DriftOptions& options);

 private:
  std::vector<std::vector<double>> features_;  // per feature, the window's finite values
  std::vector<double> confidence_;
  std::vector<std::int64_t> class_counts_;
  std::int64_t predictions_ = 0, non_finite_ = 0;
};

WindowReport compare(const Reference& reference, const Window& window, const DriftOptions& options);

}  // namespace glassbox::monitor
