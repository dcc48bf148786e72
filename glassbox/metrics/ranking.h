// Threshold curves of one binary problem (one class against the rest), as scikit-learn builds
// them: scores sorted in decreasing order, one threshold per distinct score (tied scores form one
// point), cumulative true and false positives at each threshold.
//
//   BinaryCurve c = binary_curve(is_positive, scores);   // is_positive [N] 0/1, scores [N]
//   double ap = average_precision(c);                    // sum (R_n - R_{n-1}) P_n, not interpolated
//   double auc = roc_auc(c);                             // trapezoids under (FPR, TPR); NaN if undefined
//   PrCurve pr = precision_recall_curve(c);              // sklearn's precision_recall_curve arrays
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

namespace glassbox::metrics {

struct BinaryCurve {
  std::vector<double> thresholds;  // distinct scores, decreasing
  std::vector<double> tps, fps;    // positives / negatives with score >= threshold
  double positives = 0, negatives = 0;
};

BinaryCurve binary_curve(const std::vector<unsigned char>& is_positive, const std::vector<double>& scores);

// Step-wise average precision; 0 when there is no positive (sklearn's value with its warning).
double average_precision(const BinaryCurve& c);
// Area under the ROC curve; NaN when positives or negatives are missing (sklearn raises).
double roc_auc(const BinaryCurve& c);

struct PrCurve {
  // sklearn's order: thresholds increasing; precision and recall one longer, ending with 1 and 0.
  std::vector<double> precision, recall, thresholds;
};
PrCurve precision_recall_curve(const BinaryCurve& c);

}  // namespace glassbox::metrics
