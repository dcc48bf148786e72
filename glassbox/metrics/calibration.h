// Calibration: expected calibration error and the reliability diagram's bins.
//
//   Calibration c = calibration(probs, labels, 15);   // probs [N, K] float, labels [N] int64
//   c.ece;                                            // torchmetrics' multiclass_calibration_error (l1)
//   c.bins[3].accuracy, c.bins[3].confidence, c.bins[3].count;
//
// Definition (torchmetrics 1.x): confidence = the largest probability of a row, correct = its
// argmax equals the label; bins [b/15, (b+1)/15) over [0, 1] (left-closed; a confidence of
// exactly 1 falls in a 16th bin [1, 1]); ECE = sum_b (n_b / N) |acc_b - conf_b|. torchmetrics
// casts the confidences to float32 and runs the binning in float32: `ece` is computed with the
// same LibTorch ops, so it agrees with torchmetrics to the last bit; `ece_float64` is the same
// definition in double precision, and `bins` (for plots) are in double precision too, with the
// [1, 1] bin merged into the last one.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace at {
class Tensor;
}

namespace glassbox::metrics {

struct ReliabilityBin {
  double lower = 0, upper = 0;
  std::int64_t count = 0;
  double accuracy = 0, confidence = 0;  // NaN for an empty bin
};

struct Calibration {
  double ece = 0;          // torchmetrics-exact (float32)
  double ece_float64 = 0;  // the same definition in double precision
  double mce = 0;          // maximum calibration error over non-empty bins (double)
  std::int64_t num_bins = 15;
  std::vector<ReliabilityBin> bins;
  nlohmann::json to_json() const;
};

Calibration calibration(const at::Tensor& probs, const at::Tensor& labels, std::int64_t num_bins = 15);

}  // namespace glassbox::metrics
