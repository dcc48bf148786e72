#include "glassbox/inspect/label_noise.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::inspect {

namespace {

// Rounds to integers keeping the (rounded) total: the entries whose rounding lost the most are
// moved by one, as cleanlab's round_preserving_sum does.
std::vector<std::int64_t> round_preserving_sum(const std::vector<double>& v) {
  std::vector<double> ints(v.size());
  double orig = 0, sum = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    ints[i] = std::nearbyint(v[i]);
    orig += v[i];
  }
  orig = std::nearbyint(orig);
  for (double x : ints) sum += x;
  sum = std::nearbyint(sum);
  while (std::abs(sum - orig) > 1e-6) {
    const double diff = std::nearbyint(orig - sum);
    const int increment = diff < 0 ? -1 : 1;
    const std::size_t changes = std::min(static_cast<std::size_t>(std::abs(diff)), v.size());
    std::vector<std::size_t> order(v.size());
    std::iota(order.begin(), order.end(), 0);
    // Ascending by remainder; raising takes the largest remainders, lowering the smallest.
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return v[a] - ints[a] < v[b] - ints[b]; });
    if (increment > 0) std::reverse(order.begin(), order.end());
    for (std::size_t k = 0; k < changes; ++k) ints[order[k]] += increment;
    sum = 0;
    for (double x : ints) sum += x;
    sum = std::nearbyint(sum);
  }
  std::vector<std::int64_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = static_cast<std::int64_t>(ints[i]);
  return out;
}

}  // namespace

ConfidentJoint confident_joint(const at::Tensor& labels_in, const at::Tensor& probs_in, bool calibrate) {
  GB_CHECK(probs_in.dim() == 2 && labels_in.dim() == 1 && labels_in.size(0) == probs_in.size(0), InvalidArgument,
           "confident_joint: labels must be [N] and pred_probs [N, K], got " << labels_in.sizes() << " and "
                                                                             << probs_in.sizes(),
           "pass one probability row per label");
  const at::Tensor labels = labels_in.to(torch::kCPU, torch::kLong).contiguous();
  const at::Tensor probs = probs_in.to(torch::kCPU, torch::kDouble).contiguous();
  const std::int64_t n = probs.size(0), k = probs.size(1);
  const std::int64_t* y = labels.data_ptr<std::int64_t>();
  const double* p = probs.data_ptr<double>();
  for (std::int64_t i = 0; i < n; ++i)
    GB_CHECK(y[i] >= 0 && y[i] < k, InvalidArgument,
             "confident_joint: label " << y[i] << " of sample " << i << " is outside 0.." << k - 1,
             "labels must index the columns of pred_probs");
  ConfidentJoint cj;
  cj.num_classes = k;
  // Thresholds: each class's mean self-confidence (2 for a class no sample carries).
  std::vector<double> sum(static_cast<std::size_t>(k), 0.0);
  std::vector<std::int64_t> count(static_cast<std::size_t>(k), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    sum[static_cast<std::size_t>(y[i])] += p[i * k + y[i]];
    ++count[static_cast<std::size_t>(y[i])];
  }
  for (std::int64_t c = 0; c < k; ++c) {
    const auto cu = static_cast<std::size_t>(c);
    cj.thresholds.push_back(std::max(count[cu] > 0 ? sum[cu] / static_cast<double>(count[cu]) : 2.0, 2e-6));
  }
  cj.joint.assign(static_cast<std::size_t>(k), std::vector<std::int64_t>(static_cast<std::size_t>(k), 0));
  for (std::int64_t i = 0; i < n; ++i) {
    const double* row = p + i * k;
    std::int64_t confident = 0, first = -1;
    for (std::int64_t c = 0; c < k; ++c)
      if (row[c] >= cj.thresholds[static_cast<std::size_t>(c)] - 1e-6) {
        ++confident;
        if (first < 0) first = c;
      }
    if (confident == 0) continue;
    const std::int64_t guess = confident > 1 ? std::max_element(row, row + k) - row : first;
    ++cj.joint[static_cast<std::size_t>(y[i])][static_cast<std::size_t>(guess)];
    if (guess != y[i]) cj.off_diagonal.push_back(i);
  }
  for (std::int64_t c = 0; c < k; ++c) {
    auto& d = cj.joint[static_cast<std::size_t>(c)][static_cast<std::size_t>(c)];
    d = std::max<std::int64_t>(d, 1);
  }
  if (calibrate) {
    // Each row to its label's count, then the whole to N; rounded row by row.
    std::vector<std::vector<double>> cal(static_cast<std::size_t>(k), std::vector<double>(static_cast<std::size_t>(k)));
    double total = 0;
    for (std::int64_t r = 0; r < k; ++r) {
      const auto ru = static_cast<std::size_t>(r);
      double row_sum = 0;
      for (std::int64_t c = 0; c < k; ++c) row_sum += static_cast<double>(cj.joint[ru][static_cast<std::size_t>(c)]);
      row_sum = std::max(row_sum, 1e-100);
      for (std::int64_t c = 0; c < k; ++c) {
        const auto cu = static_cast<std::size_t>(c);
        cal[ru][cu] = static_cast<double>(cj.joint[ru][cu]) / row_sum * static_cast<double>(count[ru]);
        total += cal[ru][cu];
      }
    }
    total = std::max(total, 1e-100);
    for (std::int64_t r = 0; r < k; ++r) {
      auto& row = cal[static_cast<std::size_t>(r)];
      for (double& x : row) x = x / total * static_cast<double>(n);
      cj.joint[static_cast<std::size_t>(r)] = round_preserving_sum(row);
    }
  }
  return cj;
}

LabelNoiseEstimate estimate_label_noise(const at::Tensor& labels, const at::Tensor& pred_probs) {
  const ConfidentJoint cj = confident_joint(labels, pred_probs, /*calibrate=*/true);
  LabelNoiseEstimate e;
  double total = 0, trace = 0;
  for (const auto& row : cj.joint)
    for (std::int64_t x : row) total += static_cast<double>(x);
  total = std::max(total, 1e-100);
  e.joint.resize(cj.joint.size());
  for (std::size_t r = 0; r < cj.joint.size(); ++r) {
    for (std::size_t c = 0; c < cj.joint[r].size(); ++c)
      e.joint[r].push_back(static_cast<double>(cj.joint[r][c]) / total);
    trace += e.joint[r][r];
  }
  e.rate = 1.0 - trace;
  e.issues = static_cast<std::int64_t>(std::nearbyint(e.rate * static_cast<double>(labels.size(0))));
  e.suspects = cj.off_diagonal;
  return e;
}

}  // namespace glassbox::inspect
