// Label noise by confident learning (Northcutt, Jiang and Chuang, 2021), computed as cleanlab
// computes it, from out-of-sample predicted probabilities:
//
//   ConfidentJoint cj = confident_joint(labels, pred_probs, /*calibrate=*/true);
//   LabelNoiseEstimate e = estimate_label_noise(labels, pred_probs);
//   // e.rate: the estimated share of wrong labels; e.joint[i][j]: the share labelled i whose
//   // true class is j; e.suspects: the samples whose confident guess disagrees with their label.
//
// A class's threshold is the mean predicted probability of that class over the samples
// labelled with it (at least 2e-6). A sample counts as confidently of class j when
// p_j >= threshold_j - 1e-6: with one such class it is the guess, with several the argmax of the
// probabilities; samples with none are left out. The confident joint counts (given label, guess)
// pairs, each diagonal entry at least 1. Calibrated, each row is rescaled to its label's count,
// the whole to the number of samples, and rounded row by row keeping the row totals
// (cleanlab.count.compute_confident_joint / calibrate_confident_joint). The noise rate is
// 1 - trace of the calibrated joint normalised to sum 1 (cleanlab.count.num_label_issues with
// estimation_method = "off_diagonal_calibrated", divided by the number of samples). Between
// equal remainders in a row the order here is a stable sort's; numpy's is unspecified, so a
// calibrated entry may differ from cleanlab's by one where a row has ties.
// Tested against cleanlab in label_noise_test.cpp. Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace glassbox::inspect {

struct ConfidentJoint {
  std::int64_t num_classes = 0;
  std::vector<double> thresholds;                // per class
  std::vector<std::vector<std::int64_t>> joint;  // [given label][confident guess]
  std::vector<std::int64_t> off_diagonal;        // samples whose confident guess differs from the label
};

// labels: [N] integers in 0..K-1; pred_probs: [N, K] rows of probabilities (out of sample).
ConfidentJoint confident_joint(const at::Tensor& labels, const at::Tensor& pred_probs, bool calibrate = true);

struct LabelNoiseEstimate {
  double rate = 0;                         // estimated share of wrong labels
  std::int64_t issues = 0;                 // rate x N, rounded
  std::vector<std::vector<double>> joint;  // calibrated joint / its sum: [given][true]
  std::vector<std::int64_t> suspects;      // the confident joint's off-diagonal samples
};

LabelNoiseEstimate estimate_label_noise(const at::Tensor& labels, const at::Tensor& pred_probs);

}  // namespace glassbox::inspect
