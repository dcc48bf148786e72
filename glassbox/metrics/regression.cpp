// Tested by metrics_test (TaskMetricsReference.RegressionEqualsScikitLearnOnFiveSets).
#include "glassbox/metrics/regression.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "glassbox/base/error.h"

namespace glassbox::metrics {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

// sklearn's force_finite rule for R² and explained variance: numerator / denominator with a
// constant target (denominator 0) giving 1 for a perfect fit and 0 otherwise.
double one_minus_ratio(double numerator, double denominator) {
  if (denominator == 0.0) return numerator == 0.0 ? 1.0 : 0.0;
  return 1.0 - numerator / denominator;
}

}  // namespace

nlohmann::json RegressionReport::to_json() const {
  auto scores = [](const RegressionScores& s) {
    return nlohmann::json{{"mae", s.mae},
                          {"mse", s.mse},
                          {"rmse", s.rmse},
                          {"r2", s.r2},
                          {"explained_variance", s.explained_variance},
                          {"median_absolute_error", s.median_ae},
                          {"mape", s.mape},
                          {"max_error", s.max_error}};
  };
  nlohmann::json j = {{"num_samples", num_samples},
                      {"outputs", outputs},
                      {"mae", mae},
                      {"mse", mse},
                      {"rmse", rmse},
                      {"r2", r2},
                      {"explained_variance", explained_variance},
                      {"median_absolute_error", median_ae},
                      {"mape", mape},
                      {"max_error", max_error}};
  j["per_output"] = nlohmann::json::array();
  for (const auto& s : per_output) j["per_output"].push_back(scores(s));
  return j;
}

RegressionReport regression_report(const std::vector<double>& y_true, const std::vector<double>& y_pred, std::int64_t n,
                                   std::int64_t outputs) {
  GB_CHECK(n > 0 && outputs > 0, InvalidArgument, "regression metrics need samples, got " << n << " x " << outputs,
           "evaluate on a split with samples");
  const auto size = static_cast<std::size_t>(n * outputs);
  GB_CHECK(y_true.size() == size && y_pred.size() == size, InvalidArgument,
           "regression metrics: " << y_true.size() << " targets and " << y_pred.size() << " predictions for " << n
                                  << " samples x " << outputs << " outputs",
           "give one prediction per target");
  RegressionReport r;
  r.num_samples = n;
  r.outputs = outputs;
  const double eps = std::numeric_limits<double>::epsilon();
  const double dn = static_cast<double>(n);
  for (std::int64_t o = 0; o < outputs; ++o) {
    RegressionScores s;
    double mean_y = 0, mean_err = 0;
    std::vector<double> abs_err;
    for (std::int64_t i = 0; i < n; ++i) {
      const double y = y_true[static_cast<std::size_t>(i * outputs + o)];
      const double p = y_pred[static_cast<std::size_t>(i * outputs + o)];
      const double e = y - p;
      s.mae += std::abs(e);
      s.mse += e * e;
      s.mape += std::abs(e) / std::max(std::abs(y), eps);
      s.max_error = std::max(s.max_error, std::abs(e));
      mean_y += y;
      mean_err += e;
      abs_err.push_back(std::abs(e));
    }
    s.mae /= dn;
    s.mse /= dn;
    s.mape /= dn;
    s.rmse = std::sqrt(s.mse);
    s.median_ae = median(abs_err);
    mean_y /= dn;
    mean_err /= dn;
    double ss_tot = 0, var_err = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const double y = y_true[static_cast<std::size_t>(i * outputs + o)];
      const double e = y - y_pred[static_cast<std::size_t>(i * outputs + o)];
      ss_tot += (y - mean_y) * (y - mean_y);
      var_err += (e - mean_err) * (e - mean_err);
    }
    s.r2 = one_minus_ratio(s.mse * dn, ss_tot);
    s.explained_variance = one_minus_ratio(var_err / dn, ss_tot / dn);
    r.per_output.push_back(s);
  }
  const double k = static_cast<double>(outputs);
  for (const auto& s : r.per_output) {
    r.mae += s.mae / k;
    r.mse += s.mse / k;
    r.rmse += s.rmse / k;
    r.r2 += s.r2 / k;
    r.explained_variance += s.explained_variance / k;
    r.median_ae += s.median_ae / k;
    r.mape += s.mape / k;
    r.max_error = std::max(r.max_error, s.max_error);
  }
  return r;
}

}  // namespace glassbox::metrics
