#include "glassbox/monitor/alarms.h"

#include <gtest/gtest.h>

namespace glassbox::monitor {
namespace {

// A window where nothing is wrong: 1000 predictions of 5 features, confident enough and varied.
WindowReport quiet() {
  WindowReport r;
  r.predictions = 1000;
  r.input_values = 5000;
  r.confidence_mean = 0.85;
  r.confidence_std = 0.1;
  r.confidence_ks_statistic = 0.02;
  r.feature_alpha = 0.01;
  return r;
}

TEST(Alarms, QuietWindowsRaiseNothing) {
  AlarmTracker t({});
  for (int k = 0; k < 5; ++k) t.update(quiet(), 40.0, k * 60.0);
  EXPECT_TRUE(t.active().empty());
}

TEST(Alarms, EachConditionRaisesItsKindAndClearsWhenItStops) {
  AlarmTracker t({});
  WindowReport r = quiet();
  r.input_drift = true;
  r.features.push_back({.name = "brightness", .ks_pvalue = 1e-6});
  t.update(r, 40.0, 60.0);
  ASSERT_TRUE(t.is_active("input_drift"));
  EXPECT_EQ(t.active()[0].since, 60.0);
  EXPECT_EQ(t.active()[0].value, 1e-6);
  EXPECT_EQ(t.active()[0].threshold, 0.01);
  t.update(r, 40.0, 120.0);
  EXPECT_EQ(t.active()[0].since, 60.0);  // still the first window's time
  t.update(quiet(), 40.0, 180.0);
  EXPECT_FALSE(t.is_active("input_drift"));

  r = quiet();
  r.confidence_ks_statistic = 0.08;
  r.confidence_std = 0.01;
  r.out_of_range = 80;  // 1.6 % of 5000
  r.non_finite = 20;    // together 2 %
  r.class_mix_shift = true;
  t.update(r, 150.0, 240.0);
  for (const char* kind : {"confidence_drift", "overconfidence", "out_of_range", "class_mix", "latency"})
    EXPECT_TRUE(t.is_active(kind)) << kind;
  auto value_of = [&](const std::string& kind) {
    for (const Alarm& a : t.active())
      if (a.kind == kind) return a.value;
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(value_of("out_of_range"), 0.02);
  EXPECT_DOUBLE_EQ(value_of("latency"), 150.0);
  r.out_of_range = 60;  // 1.2 %: still above 1 %
  r.non_finite = 0;
  t.update(r, -1.0, 300.0);  // latency not measured
  EXPECT_TRUE(t.is_active("out_of_range"));
  EXPECT_FALSE(t.is_active("latency"));
  const nlohmann::json j = t.active().front().to_json();
  EXPECT_EQ(j["kind"], "confidence_drift");
  EXPECT_EQ(j["since"], 240.0);
}

// Decay needs the mean below 0.65 for three windows in a row; its since is the first of them.
TEST(Alarms, ConfidenceDecayCountsConsecutiveWindows) {
  AlarmTracker t({});
  WindowReport low = quiet();
  low.confidence_mean = 0.6;
  t.update(low, 40.0, 0.0);
  t.update(quiet(), 40.0, 60.0);  // interrupts the run
  t.update(low, 40.0, 120.0);
  t.update(low, 40.0, 180.0);
  EXPECT_FALSE(t.is_active("confidence_decay"));
  t.update(low, 40.0, 240.0);
  ASSERT_TRUE(t.is_active("confidence_decay"));
  EXPECT_EQ(t.active()[0].since, 120.0);
  EXPECT_EQ(t.active()[0].threshold, 0.65);
  t.update(quiet(), 40.0, 300.0);
  EXPECT_FALSE(t.is_active("confidence_decay"));
}

}  // namespace
}  // namespace glassbox::monitor
