#include "glassbox/monitor/features.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "glassbox/base/error.h"

namespace glassbox::monitor {
namespace {

// Tabular: each value is a feature, read in the data's units (x * std + mean), and checked
// against its own range.
TEST(Features, TabularUndoesTheNormalisationAndCountsRanges) {
  InputSpec s;
  s.name = "input";
  s.shape = {3};
  s.mean = {10, 20, 30};
  s.std = {2, 4, 5};
  s.feature_names = {"age", "income", "height"};
  const FeatureExtractor fx(s);
  EXPECT_EQ(fx.names(), (std::vector<std::string>{"age", "income", "height"}));
  EXPECT_EQ(fx.range_names(), fx.names());
  const std::vector<ValueRange> ranges = {{"age", 0, 15}, {"income", 0, 25}, {"height", 0, 100}};
  std::vector<double> f(3);
  InputCounts c;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  fx.extract(std::vector<double>{1.0, 2.0, nan}, f, ranges, 0.0, c);
  EXPECT_DOUBLE_EQ(f[0], 12.0);
  EXPECT_DOUBLE_EQ(f[1], 28.0);  // beyond income's 25
  EXPECT_TRUE(std::isnan(f[2]));
  EXPECT_EQ(c.values, 3);
  EXPECT_EQ(c.out_of_range, 1);
  EXPECT_EQ(c.non_finite, 1);
  // A tolerance of 20 % of the span (5) admits 28.
  InputCounts c2;
  fx.extract(std::vector<double>{1.0, 2.0, 0.0}, f, ranges, 0.2, c2);
  EXPECT_EQ(c2.out_of_range, 0);

  std::vector<ValueRange> seen = fx.observe_start();
  fx.observe_ranges(std::vector<double>{1.0, -1.0, nan}, seen);
  fx.observe_ranges(std::vector<double>{-2.0, 0.5, 0.0}, seen);
  EXPECT_DOUBLE_EQ(seen[0].min, 6.0);
  EXPECT_DOUBLE_EQ(seen[0].max, 12.0);
  EXPECT_DOUBLE_EQ(seen[1].min, 16.0);
  EXPECT_DOUBLE_EQ(seen[1].max, 22.0);
  EXPECT_DOUBLE_EQ(seen[2].min, 30.0);
  EXPECT_DOUBLE_EQ(seen[2].max, 30.0);
}

// Images: per channel mean and standard deviation (population), brightness and RMS contrast over
// every value, a range per channel. Worked by hand on a 2-channel 1x2 image.
TEST(Features, ImageStatisticsPerChannelAndOverall) {
  InputSpec s;
  s.name = "INPUT__0";
  s.kind = InputKind::kImage;
  s.shape = {2, 1, 2};
  s.mean = {0.5};
  s.std = {0.25};
  const FeatureExtractor fx(s);
  ASSERT_EQ(fx.names(), (std::vector<std::string>{"channel0_mean", "channel0_std", "channel1_mean", "channel1_std",
                                                  "brightness", "contrast", "gradient"}));
  EXPECT_EQ(fx.range_names(), (std::vector<std::string>{"channel0", "channel1"}));
  // Normalised (-2, 2), (0, 4) -> pixels (0, 1), (0.5, 1.5).
  std::vector<double> f(7);
  InputCounts c;
  const std::vector<ValueRange> ranges = {{"channel0", 0, 1}, {"channel1", 0, 1}};
  fx.extract(std::vector<double>{-2, 2, 0, 4}, f, ranges, 0.0, c);
  EXPECT_DOUBLE_EQ(f[0], 0.5);
  EXPECT_DOUBLE_EQ(f[1], 0.5);
  EXPECT_DOUBLE_EQ(f[2], 1.0);
  EXPECT_DOUBLE_EQ(f[3], 0.5);
  EXPECT_DOUBLE_EQ(f[4], 0.75);
  // values 0, 1, 0.5, 1.5: mean 0.75, squared deviations 0.5625, 0.0625, 0.0625, 0.5625 -> var 0.3125
  EXPECT_NEAR(f[5], std::sqrt(0.3125), 1e-12);
  EXPECT_DOUBLE_EQ(f[6], 0.5 * (1.0 + 1.0));  // |1 - 0| in channel 0, |1.5 - 0.5| in channel 1
  EXPECT_EQ(c.values, 4);
  EXPECT_EQ(c.out_of_range, 1);  // 1.5 in channel 1

  // A gray image has no per-channel features: its channel is the whole image.
  s.shape = {1, 2, 2};
  s.mean.clear();
  s.std.clear();
  const FeatureExtractor gray(s);
  EXPECT_EQ(gray.names(), (std::vector<std::string>{"brightness", "contrast", "gradient"}));
  // 2x2: pixels 0 1 / 1 1 -> pairs (0,1), (0,1) differ by 1, (1,1), (1,1) by 0.
  std::vector<double> g(3);
  InputCounts gc;
  gray.extract(std::vector<double>{0, 1, 1, 1}, g, {}, 0.0, gc);
  EXPECT_DOUBLE_EQ(g[0], 0.75);
  EXPECT_DOUBLE_EQ(g[2], 0.5);
}

// A non-finite pixel: counted, left out of the statistics (the general path), and the served FP32
// path gives the same features as the double path on a finite image.
TEST(Features, NonFinitePixelsAndTheFp32Path) {
  InputSpec s;
  s.name = "x";
  s.kind = InputKind::kImage;
  s.shape = {1, 2, 2};
  s.mean = {0.5};
  s.std = {0.5};
  const FeatureExtractor fx(s);
  std::vector<double> f(3);
  InputCounts c;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  fx.extract(std::vector<double>{-1, 1, nan, 1}, f, {}, 0.0, c);  // pixels 0, 1, -, 1
  EXPECT_EQ(c.non_finite, 1);
  EXPECT_NEAR(f[0], 2.0 / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(f[2], 0.5);  // pairs (0,1) -> 1, (0,-) skipped, (1,1) -> 0, (-,1) skipped
  std::vector<float> px = {-1.0f, 0.5f, 0.25f, 1.0f};
  std::vector<double> pd(px.begin(), px.end()), f32(3), f64(3);
  InputCounts c32, c64;
  const std::vector<ValueRange> ranges = {{"channel0", 0.2, 0.9}};
  ASSERT_TRUE(fx.extract_fp32(px, f32, ranges, 0.0, c32));
  fx.extract(pd, f64, ranges, 0.0, c64);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(f32[i], f64[i], 1e-6) << i;
  EXPECT_EQ(c32.out_of_range, c64.out_of_range);
  EXPECT_EQ(c32.out_of_range, 2);  // pixels 0 and 1 against [0.2, 0.9]
}

TEST(Features, BadSpecsAreNamed) {
  InputSpec s;
  s.name = "x";
  s.kind = InputKind::kImage;
  s.shape = {3};
  EXPECT_THROW(FeatureExtractor{s}, Error);
  s.shape = {3, 4, 4};
  s.mean = {0.1, 0.2};
  EXPECT_THROW(FeatureExtractor{s}, Error);
  s.mean = {};
  s.std = {0.0};
  EXPECT_THROW(FeatureExtractor{s}, Error);
  s.std = {};
  const FeatureExtractor fx(s);
  std::vector<double> f(fx.names().size());
  InputCounts c;
  EXPECT_THROW(fx.extract(std::vector<double>(10, 0.0), f, {}, 0.0, c), Error);
  const nlohmann::json j = s.to_json();
  const InputSpec back = InputSpec::from_json(j);
  EXPECT_EQ(back.shape, s.shape);
  EXPECT_EQ(back.kind, InputKind::kImage);
}

}  // namespace
}  // namespace glassbox::monitor
