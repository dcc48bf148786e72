#include "glassbox/metrics/running.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace glassbox::metrics {
namespace {

TEST(Accuracy, TopKCountsHandWorkedCases) {
  at::Tensor logits = torch::tensor({{0.1, 0.7, 0.2}, {0.5, 0.3, 0.2}, {0.2, 0.3, 0.5}, {0.6, 0.1, 0.3}});
  at::Tensor targets = torch::tensor({1, 2, 2, 2}, torch::kLong);
  EXPECT_EQ(count_topk_correct(logits, targets, 1), 2);  // rows 0 and 2
  EXPECT_EQ(count_topk_correct(logits, targets, 2), 3);  // + row 3 (0.3 is second)
  EXPECT_EQ(count_topk_correct(logits, targets, 5), 4);  // k clipped to K
  AccuracyMetric acc;
  acc.update(logits, targets);
  acc.update(logits.slice(0, 0, 1), targets.slice(0, 0, 1));
  EXPECT_DOUBLE_EQ(acc.compute(), 3.0 / 5.0);
}

TEST(Mean, WeightedMean) {
  MeanMetric m;
  m.update(1.0, 3);
  m.update(3.0, 1);
  EXPECT_DOUBLE_EQ(m.compute(), 1.5);
  m.reset();
  EXPECT_DOUBLE_EQ(m.compute(), 0.0);
}

}  // namespace
}  // namespace glassbox::metrics
