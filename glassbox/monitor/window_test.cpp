#include "glassbox/monitor/window.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "glassbox/base/error.h"

namespace glassbox::monitor {
namespace {

constexpr std::size_t kFeatures = 5, kClasses = 4;

// A reference of 20 000 predictions: feature f ~ N(f, 1 + f / 10), confidence ~ U(0.6, 1), the
// classes equally often.
Reference make_reference() {
  std::mt19937_64 rng(1);
  Reference ref;
  for (std::size_t f = 0; f < kFeatures; ++f) {
    std::normal_distribution<double> d(static_cast<double>(f), 1.0 + static_cast<double>(f) / 10.0);
    std::vector<double> v(20000);
    for (double& x : v) x = d(rng);
    ref.features.push_back(ReferenceSample::of("f" + std::to_string(f), std::move(v)));
  }
  std::uniform_real_distribution<double> conf(0.6, 1.0);
  std::vector<double> c(20000);
  for (double& x : c) x = conf(rng);
  ref.confidence = ReferenceSample::of("confidence", std::move(c));
  ref.predicted_share.assign(kClasses, 1.0 / kClasses);
  ref.predictions = 20000;
  return ref;
}

struct Traffic {
  double shift = 0, scale = 1, confidence_low = 0.6;
  std::size_t shifted_feature = 2;
  std::vector<double> class_weights = std::vector<double>(kClasses, 1.0);
  bool nan_every_tenth = false;
};

Window window_of(std::mt19937_64& rng, const Traffic& t, int n = 1000) {
  Window w(kFeatures, kClasses);
  std::uniform_real_distribution<double> conf(t.confidence_low, 1.0);
  std::discrete_distribution<std::int64_t> cls(t.class_weights.begin(), t.class_weights.end());
  std::vector<double> x(kFeatures);
  for (int i = 0; i < n; ++i) {
    for (std::size_t f = 0; f < kFeatures; ++f) {
      std::normal_distribution<double> d(static_cast<double>(f), 1.0 + static_cast<double>(f) / 10.0);
      x[f] = d(rng);
      if (f == t.shifted_feature) x[f] = (x[f] + t.shift * (1.0 + static_cast<double>(f) / 10.0)) * t.scale;
    }
    if (t.nan_every_tenth && i % 10 == 0) x[0] = std::numeric_limits<double>::quiet_NaN();
    w.add(x, conf(rng), cls(rng));
  }
  return w;
}

TEST(Window, ReferenceSampleKeepsQuantilesAndMoments) {
  std::vector<double> v(100000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(v.size() - 1 - i);
  const ReferenceSample s = ReferenceSample::of("x", v, 5);
  EXPECT_EQ(s.values, (std::vector<double>{0, 25000, 50000, 74999, 99999}));
  EXPECT_EQ(s.min, 0);
  EXPECT_EQ(s.max, 99999);
  EXPECT_EQ(s.count, 100000);
  EXPECT_DOUBLE_EQ(s.mean, 49999.5);
  EXPECT_NEAR(s.std, std::sqrt((1e10 - 1) / 12.0), 1e-6);  // a discrete uniform's
  EXPECT_THROW(ReferenceSample::of("y", {1.0, std::nan("")}), Error);
}

// Twenty windows of in-distribution traffic: at most two false findings of each kind (each test
// runs at 5 %, the features' family-wise), nothing non-finite and almost nothing out of range.
TEST(Window, InDistributionTrafficStaysQuiet) {
  const Reference ref = make_reference();
  std::mt19937_64 rng(2);
  int input = 0, confidence = 0, classes = 0;
  std::int64_t out_of_range = 0;
  for (int k = 0; k < 20; ++k) {
    const WindowReport r = compare(ref, window_of(rng, {}), {});
    input += r.input_drift;
    confidence += r.confidence_drift;
    classes += r.class_mix_shift;
    EXPECT_EQ(r.non_finite, 0);
    out_of_range += r.out_of_range;
    EXPECT_EQ(r.predictions, 1000);
  }
  EXPECT_LE(input, 2);
  EXPECT_LE(confidence, 2);
  EXPECT_LE(classes, 2);
  // The reference's extremes are those of 20 000 draws: a fresh value falls outside them with
  // probability 2 / 20 001, about 10 of the 100 000 values (hence a rate, not a count, to alarm on).
  EXPECT_LE(out_of_range, 25);
}

TEST(Window, EachShiftRaisesItsOwnFinding) {
  const Reference ref = make_reference();
  std::mt19937_64 rng(3);
  // A third of a standard deviation on one feature: that feature, first, and only it.
  WindowReport r = compare(ref, window_of(rng, {.shift = 0.3}), {});
  EXPECT_TRUE(r.input_drift);
  EXPECT_EQ(r.drifted_features, 1);
  ASSERT_FALSE(r.features.empty());
  EXPECT_EQ(r.features[0].name, "f2");
  EXPECT_GT(r.features[0].wasserstein_normed, 0.2);
  EXPECT_GT(r.features[0].psi, 0.05);
  EXPECT_FALSE(r.class_mix_shift);
  // Values 255 times too large (pixels sent as 0..255): out of the reference's range.
  r = compare(ref, window_of(rng, {.scale = 255.0}), {});
  EXPECT_GT(r.out_of_range, 900);
  EXPECT_TRUE(r.input_drift);
  // Non-finite inputs are counted and left out of the tests.
  r = compare(ref, window_of(rng, {.nan_every_tenth = true}), {});
  EXPECT_EQ(r.non_finite, 100);
  // Lower confidence: confidence drift, not input drift.
  r = compare(ref, window_of(rng, {.confidence_low = 0.3}), {});
  EXPECT_TRUE(r.confidence_drift);
  EXPECT_LT(r.confidence_mean, 0.7);
  EXPECT_FALSE(r.input_drift);
  // Another class mix: one class predicted half the time.
  r = compare(ref, window_of(rng, {.class_weights = {3, 1, 1, 1}}), {});
  EXPECT_TRUE(r.class_mix_shift);
  EXPECT_GT(r.class_js, 0.1);
  EXPECT_NEAR(r.predicted_share[0], 0.5, 0.05);
  const nlohmann::json j = r.to_json();
  EXPECT_EQ(j["classes"]["shift"], true);
  EXPECT_EQ(j["predictions"], 1000);
}

TEST(Window, BadInputIsNamed) {
  Window w(kFeatures, kClasses);
  EXPECT_THROW(w.add(std::vector<double>(3, 0.0), 0.9, 0), Error);
  EXPECT_THROW(w.add(std::vector<double>(kFeatures, 0.0), 0.9, 4), Error);
  Window other(2, kClasses);
  EXPECT_THROW(compare(make_reference(), other, {}), Error);
}

}  // namespace
}  // namespace glassbox::monitor
