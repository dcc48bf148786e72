// Tested by monitor_test (Window.*).
#include "glassbox/monitor/window.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "glassbox/base/error.h"
#include "glassbox/monitor/drift_stats.h"

namespace glassbox::monitor {

namespace {

void mean_std(const std::vector<double>& v, double& mean, double& std) {
  mean = std = 0;
  if (v.empty()) return;
  mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  std = std::sqrt(ss / static_cast<double>(v.size()));
}

}  // namespace

ReferenceSample ReferenceSample::of(std::string name, std::vector<double> values, std::size_t keep) {
  GB_CHECK(!values.empty(), InvalidArgument, "reference feature " << name << " has no values",
           "profile at least one sample");
  GB_CHECK(keep >= 2, InvalidArgument, "a reference sample keeps at least 2 values, not " << keep, "keep 2 or more");
  ReferenceSample s;
  s.name = std::move(name);
  for (double v : values)
    GB_CHECK(std::isfinite(v), InvalidArgument, "reference feature " << s.name << " holds " << v,
             "drop the non-finite values of the reference data");
  std::sort(values.begin(), values.end());
  s.count = static_cast<std::int64_t>(values.size());
  s.min = values.front();
  s.max = values.back();
  mean_std(values, s.mean, s.std);
  if (values.size() <= keep) {
    s.values = std::move(values);
  } else {
    s.values.reserve(keep);
    const double last = static_cast<double>(values.size() - 1);
    for (std::size_t i = 0; i < keep; ++i)
      s.values.push_back(values[static_cast<std::size_t>(
          std::llround(static_cast<double>(i) * last / static_cast<double>(keep - 1)))]);
  }
  return s;
}

Window::Window(std::size_t features, std::size_t classes) : features_(features), class_counts_(classes, 0) {}

void Window::add(std::span<const double> features, double confidence, std::int64_t predicted_class) {
  add(features, confidence, std::numeric_limits<double>::quiet_NaN(), predicted_class);
}

void Window::add(std::span<const double> features, double confidence, double entropy, std::int64_t predicted_class) {
  GB_CHECK(features.size() == features_.size(), InvalidArgument,
           "a prediction with " << features.size() << " monitored features; the reference has " << features_.size(),
           "pass one value per reference feature");
  GB_CHECK(predicted_class >= -1 && predicted_class < static_cast<std::int64_t>(class_counts_.size()), InvalidArgument,
           "predicted class " << predicted_class << " of " << class_counts_.size(),
           "pass a class index below the class count, or -1 when the output was not seen");
  for (std::size_t f = 0; f < features.size(); ++f) {
    if (std::isfinite(features[f])) {
      features_[f].push_back(features[f]);
    } else {
      ++non_finite_;
    }
  }
  if (std::isfinite(confidence)) confidence_.push_back(confidence);
  if (std::isfinite(entropy)) entropy_.push_back(entropy);
  if (predicted_class >= 0) {
    ++class_counts_[static_cast<std::size_t>(predicted_class)];
    ++classified_;
  }
  ++predictions_;
}

void Window::count_inputs(const InputCounts& counts) {
  raw_.values += counts.values;
  raw_.out_of_range += counts.out_of_range;
  raw_.non_finite += counts.non_finite;
}

void Window::clear() {
  for (auto& f : features_) f.clear();
  confidence_.clear();
  entropy_.clear();
  std::fill(class_counts_.begin(), class_counts_.end(), 0);
  predictions_ = non_finite_ = classified_ = 0;
  raw_ = {};
}

WindowReport compare(const Reference& reference, const Window& window, const DriftOptions& options) {
  GB_CHECK(
      reference.features.size() == window.features_.size(), InvalidArgument,
      "the window monitors " << window.features_.size() << " features, the reference " << reference.features.size(),
      "build the window from the same reference");
  WindowReport r;
  r.predictions = window.predictions_;
  // Raw input values against the reference's ranges when it has them, else each feature's values
  // against the feature's own range.
  const bool raw_ranges = !reference.ranges.empty();
  r.non_finite = raw_ranges ? window.raw_.non_finite : window.non_finite_;
  r.input_values = raw_ranges ? window.raw_.values : window.non_finite_;
  if (raw_ranges) r.out_of_range = window.raw_.out_of_range;
  const KsMethod ks_method = options.exact_ks ? KsMethod::kAuto : KsMethod::kAsymp;
  const double per_feature_alpha =
      options.alpha / static_cast<double>(std::max<std::size_t>(1, window.features_.size()));
  r.alpha = options.alpha;
  r.feature_alpha = per_feature_alpha;
  std::vector<FeatureDrift> all;
  for (std::size_t f = 0; f < window.features_.size(); ++f) {
    const ReferenceSample& ref = reference.features[f];
    std::vector<double> cur = window.features_[f];
    std::sort(cur.begin(), cur.end());  // once for the three tests below
    if (!raw_ranges) {
      const double slack = options.range_tolerance * (ref.max - ref.min);
      r.input_values += static_cast<std::int64_t>(cur.size());
      for (double v : cur)
        if (v < ref.min - slack || v > ref.max + slack) ++r.out_of_range;
    }
    if (cur.empty()) continue;
    FeatureDrift d;
    d.name = ref.name;
    const KsResult ks = ks_2samp(ref.values, cur, ks_method);
    d.ks_statistic = ks.statistic;
    d.ks_pvalue = ks.pvalue;
    d.wasserstein_normed = wasserstein_normed(ref.values, cur);
    d.psi = psi(ref.values, cur);
    d.drifted = d.ks_pvalue < per_feature_alpha && d.wasserstein_normed >= options.min_wasserstein;
    r.drifted_features += d.drifted ? 1 : 0;
    all.push_back(std::move(d));
  }
  r.input_drift = r.drifted_features > 0;
  std::stable_sort(all.begin(), all.end(), [](const FeatureDrift& a, const FeatureDrift& b) {
    return a.ks_pvalue < b.ks_pvalue || (a.ks_pvalue == b.ks_pvalue && a.ks_statistic > b.ks_statistic);
  });
  if (all.size() > options.top_features) all.resize(options.top_features);
  r.features = std::move(all);

  mean_std(window.confidence_, r.confidence_mean, r.confidence_std);
  r.reference_confidence_mean = reference.confidence.mean;
  r.reference_confidence_std = reference.confidence.std;
  if (!window.entropy_.empty()) {
    double unused = 0;
    mean_std(window.entropy_, r.entropy_mean, unused);
    if (!reference.entropy.values.empty()) {
      const KsResult ks = ks_2samp(reference.entropy.values, window.entropy_, ks_method);
      r.entropy_ks_statistic = ks.statistic;
      r.entropy_ks_pvalue = ks.pvalue;
    }
  }
  if (!window.confidence_.empty() && !reference.confidence.values.empty()) {
    const KsResult ks = ks_2samp(reference.confidence.values, window.confidence_, ks_method);
    r.confidence_ks_statistic = ks.statistic;
    r.confidence_ks_pvalue = ks.pvalue;
    r.confidence_drift = ks.pvalue < options.alpha;
  }

  const std::size_t k = window.class_counts_.size();
  r.predicted_share.assign(k, 0.0);
  if (window.classified_ > 0)
    for (std::size_t c = 0; c < k; ++c)
      r.predicted_share[c] = static_cast<double>(window.class_counts_[c]) / static_cast<double>(window.classified_);
  if (window.classified_ > 0 && reference.predicted_share.size() == k && reference.predictions > 0) {
    // Chi-square on the two rows of counts, over the classes either side predicted.
    std::vector<std::vector<double>> table(2);
    std::vector<double> p, q;
    for (std::size_t c = 0; c < k; ++c) {
      const double ref_count = reference.predicted_share[c] * static_cast<double>(reference.predictions);
      const auto win_count = static_cast<double>(window.class_counts_[c]);
      if (ref_count <= 0 && win_count <= 0) continue;
      table[0].push_back(ref_count);
      table[1].push_back(win_count);
      p.push_back(reference.predicted_share[c]);
      q.push_back(r.predicted_share[c]);
    }
    const Chi2Result chi = chi2_contingency(table);
    r.class_chi2 = chi.statistic;
    r.class_chi2_pvalue = chi.pvalue;
    r.class_js = jensenshannon(p, q);
    r.class_mix_shift = chi.pvalue < options.alpha && r.class_js >= options.min_js;
  }
  return r;
}

nlohmann::json WindowReport::to_json() const {
  nlohmann::json j;
  j["predictions"] = predictions;
  j["input_drift"] = input_drift;
  j["drifted_features"] = drifted_features;
  j["input_values"] = input_values;
  j["out_of_range"] = out_of_range;
  j["non_finite"] = non_finite;
  nlohmann::json fs = nlohmann::json::array();
  for (const FeatureDrift& f : features)
    fs.push_back({{"name", f.name},
                  {"ks_statistic", f.ks_statistic},
                  {"ks_pvalue", f.ks_pvalue},
                  {"wasserstein_normed", f.wasserstein_normed},
                  {"psi", f.psi},
                  {"drifted", f.drifted}});
  j["features"] = fs;
  j["confidence"] = {{"mean", confidence_mean},
                     {"std", confidence_std},
                     {"ks_statistic", confidence_ks_statistic},
                     {"ks_pvalue", confidence_ks_pvalue},
                     {"drift", confidence_drift},
                     {"reference_mean", reference_confidence_mean},
                     {"reference_std", reference_confidence_std}};
  j["entropy"] = {{"mean", entropy_mean}, {"ks_statistic", entropy_ks_statistic}, {"ks_pvalue", entropy_ks_pvalue}};
  j["classes"] = {{"predicted_share", predicted_share},
                  {"chi2", class_chi2},
                  {"chi2_pvalue", class_chi2_pvalue},
                  {"jensen_shannon", class_js},
                  {"shift", class_mix_shift}};
  return j;
}

}  // namespace glassbox::monitor
