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
  r.reference_confidence_mean = 0.85;
  r.reference_confidence_std = 0.15;
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
  r.confidence_drift = true;  // significant
  r.confidence_std = 0.01;
  r.out_of_range = 80;  // 1.6 % of 5000
  r.non_finite = 20;    // together 2 %
  r.class_mix_shift = true;
  r.class_js = 0.3;
  t.update(r, 150.0, 240.0);
  for (const char* kind : {"out_of_range", "class_mix", "latency"}) EXPECT_TRUE(t.is_active(kind)) << kind;
  // Confidence drift and over-confidence need two windows in a row.
  EXPECT_FALSE(t.is_active("confidence_drift"));
  EXPECT_FALSE(t.is_active("overconfidence"));
  t.update(r, 150.0, 270.0);
  for (const char* kind : {"confidence_drift", "overconfidence", "out_of_range", "class_mix", "latency"})
    EXPECT_TRUE(t.is_active(kind)) << kind;
  auto value_of = [&](const std::string& kind) {
    for (const Alarm& a : t.active())
      if (a.kind == kind) return a.value;
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(value_of("out_of_range"), 0.02);
  EXPECT_DOUBLE_EQ(value_of("latency"), 150.0);
  EXPECT_DOUBLE_EQ(value_of("class_mix"), 0.3);
  r.out_of_range = 60;  // 1.2 %: still above 1 %
  r.non_finite = 0;
  t.update(r, -1.0, 300.0);  // latency not measured
  EXPECT_TRUE(t.is_active("out_of_range"));
  EXPECT_FALSE(t.is_active("latency"));
  bool seen = false;
  for (const Alarm& a : t.active()) {
    if (a.kind != "confidence_drift") continue;
    const nlohmann::json j = a.to_json();
    EXPECT_EQ(j["since"], 240.0);  // the first window of the run
    EXPECT_EQ(j["threshold"], 0.05);
    seen = true;
  }
  EXPECT_TRUE(seen);
}

// A large KS statistic that is not significant (a tiny window) raises nothing.
TEST(Alarms, ConfidenceDriftNeedsSignificance) {
  AlarmTracker t({});
  WindowReport r = quiet();
  r.confidence_ks_statistic = 0.3;
  r.confidence_drift = false;
  for (int k = 0; k < 4; ++k) t.update(r, 40.0, k * 60.0);
  EXPECT_FALSE(t.is_active("confidence_drift"));
}

// The confidence floors follow the reference: a model this sure (or this unsure) on its own
// validation data is not alarming when it stays so.
TEST(Alarms, ConfidenceFloorsFollowTheReference) {
  AlarmTracker t({});
  WindowReport sure = quiet();
  sure.reference_confidence_mean = 0.99;
  sure.reference_confidence_std = 0.03;
  sure.confidence_mean = 0.99;
  sure.confidence_std = 0.03;  // below 0.05, but not below half the reference's 0.03
  WindowReport unsure = quiet();
  unsure.reference_confidence_mean = 0.55;
  unsure.confidence_mean = 0.56;  // below 0.65, as it was in validation
  for (int k = 0; k < 4; ++k) {
    t.update(sure, 40.0, k * 60.0);
    t.update(unsure, 40.0, k * 60.0 + 30.0);
  }
  EXPECT_TRUE(t.active().empty());
  sure.confidence_std = 0.01;
  t.update(sure, 40.0, 300.0);
  t.update(sure, 40.0, 360.0);
  ASSERT_TRUE(t.is_active("overconfidence"));
  EXPECT_DOUBLE_EQ(t.active()[0].threshold, 0.015);
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
