// Regression metrics with scikit-learn's definitions, for one or several outputs.
//
//   RegressionReport r = regression_report(y_true, y_pred, n, outputs);   // row-major [n, outputs]
//   r.mae; r.rmse; r.r2; r.per_output[1].r2;   // uniform averages over the outputs, and each
//
// Definitions (sklearn 1.x): MAE mean |y - ŷ|; MSE mean (y - ŷ)²; RMSE sqrt(MSE) per output,
// averaged over outputs (root_mean_squared_error); R² 1 - SS_res / SS_tot with SS_tot about the
// mean (a constant target: 1 when predicted exactly, else 0, sklearn's force_finite); explained
// variance 1 - Var(y - ŷ) / Var(y) (the same constant-target rule); max error (single output);
// median absolute error; MAPE mean |y - ŷ| / max(|y|, eps) with eps the float64 machine epsilon.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace glassbox::metrics {

struct RegressionScores {
  double mae = 0, mse = 0, rmse = 0, r2 = 0, explained_variance = 0, median_ae = 0, mape = 0, max_error = 0;
};

struct RegressionReport {
  std::int64_t num_samples = 0;
  std::int64_t outputs = 1;
  // Uniform averages over the outputs (max_error: the largest over all outputs).
  double mae = 0, mse = 0, rmse = 0, r2 = 0, explained_variance = 0, median_ae = 0, mape = 0, max_error = 0;
  std::vector<RegressionScores> per_output;
  nlohmann::json to_json() const;
};

// y_true, y_pred: row-major [n, outputs]. InvalidArgument for sizes that do not match or n = 0.
RegressionReport regression_report(const std::vector<double>& y_true, const std::vector<double>& y_pred, std::int64_t n,
                                   std::int64_t outputs);

}  // namespace glassbox::metrics
