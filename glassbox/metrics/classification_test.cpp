// Classification metrics, calibration and fairness against scikit-learn, torchmetrics and
// fairlearn (tests/reference/*_ref.py run in the project's .venv) on the same predictions.
#include "glassbox/metrics/classification.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <fstream>

#include "glassbox/metrics/calibration.h"
#include "glassbox/metrics/fairness.h"
#include "glassbox/testing/testing.h"

namespace glassbox::metrics {
namespace {

TEST(Ranking, AveragePrecisionAndRocAucOnAHandWorkedExample) {
  // scores 0.9(+) 0.8(-) 0.8(+) 0.3(-): thresholds 0.9, 0.8, 0.3
  const BinaryCurve c = binary_curve({1, 0, 1, 0}, {0.9, 0.8, 0.8, 0.3});
  ASSERT_EQ(c.thresholds.size(), 3u);
  EXPECT_EQ(c.tps, (std::vector<double>{1, 2, 2}));
  EXPECT_EQ(c.fps, (std::vector<double>{0, 1, 2}));
  // AP = 0.5 * 1 + 0.5 * 2/3
  EXPECT_NEAR(average_precision(c), 0.5 + 1.0 / 3.0, 1e-15);
  // Pairs (pos, neg): (0.9, 0.8) 1, (0.9, 0.3) 1, (0.8, 0.8) 1/2, (0.8, 0.3) 1 -> 3.5 / 4
  EXPECT_NEAR(roc_auc(c), 0.875, 1e-15);
  EXPECT_TRUE(std::isnan(roc_auc(binary_curve({0, 0}, {0.1, 0.2}))));
  EXPECT_EQ(average_precision(binary_curve({0, 0}, {0.1, 0.2})), 0.0);
}

}  // namespace
}  // namespace glassbox::metrics
