#include "glassbox/metrics/ranking.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "glassbox/base/error.h"

namespace glassbox::metrics {

BinaryCurve binary_curve(const std::vector<unsigned char>& is_positive, const std::vector<double>& scores) {
  GB_CHECK(is_positive.size() == scores.size(), InvalidArgument,
           "binary_curve: " << is_positive.size() << " labels but " << scores.size() << " scores",
           "pass one score per sample");
  std::vector<std::size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return scores[a] > scores[b]; });
  BinaryCurve c;
  double tp = 0, fp = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::size_t k = order[i];
    GB_CHECK(!std::isnan(scores[k]), InvalidArgument, "binary_curve: score of sample " << k << " is NaN",
             "check the model's outputs");
    if (is_positive[k] != 0) {
      tp += 1;
    } else {
      fp += 1;
    }
    // The last sample of a run of equal scores closes the threshold.
    if (i + 1 == order.size() || scores[order[i + 1]] != scores[k]) {
      c.thresholds.push_back(scores[k]);
      c.tps.push_back(tp);
      c.fps.push_back(fp);
    }
  }
  c.positives = tp;
  c.negatives = fp;
  return c;
}

PrCurve precision_recall_curve(const BinaryCurve& c) {
  const std::size_t n = c.thresholds.size();
  PrCurve pr;
  pr.precision.resize(n + 1);
  pr.recall.resize(n + 1);
  pr.thresholds.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t r = n - 1 - i;  // increasing thresholds
    const double ps = c.tps[r] + c.fps[r];
    pr.precision[i] = ps != 0 ? c.tps[r] / ps : 0.0;
    pr.recall[i] = c.positives != 0 ? c.tps[r] / c.positives : 1.0;
    pr.thresholds[i] = c.thresholds[r];
  }
  pr.precision[n] = 1.0;
  pr.recall[n] = 0.0;
  return pr;
}

double average_precision(const BinaryCurve& c) {
  const PrCurve pr = precision_recall_curve(c);
  // -sum(diff(recall) * precision[:-1]) over sklearn's arrays.
  double ap = 0;
  for (std::size_t i = 0; i + 1 < pr.recall.size(); ++i) ap -= (pr.recall[i + 1] - pr.recall[i]) * pr.precision[i];
  return ap;
}

double roc_auc(const BinaryCurve& c) {
  if (c.positives == 0 || c.negatives == 0) return std::numeric_limits<double>::quiet_NaN();
  // sklearn's roc_curve(drop_intermediate=True): drop points collinear with both neighbours, then
  // prepend (0, 0).
  const std::size_t n = c.tps.size();
  std::vector<double> fps{0.0}, tps{0.0};
  for (std::size_t i = 0; i < n; ++i) {
    const bool keep = i == 0 || i + 1 == n || (c.fps[i + 1] - 2 * c.fps[i] + c.fps[i - 1]) != 0 ||
                      (c.tps[i + 1] - 2 * c.tps[i] + c.tps[i - 1]) != 0;
    if (!keep) continue;
    fps.push_back(c.fps[i]);
    tps.push_back(c.tps[i]);
  }
  double area = 0;
  const double fn = fps.back(), tn = tps.back();
  for (std::size_t i = 0; i + 1 < fps.size(); ++i)
    area += (fps[i + 1] / fn - fps[i] / fn) * (tps[i + 1] / tn + tps[i] / tn) / 2.0;
  return area;
}

}  // namespace glassbox::metrics
