#include "glassbox/monitor/runtime.h"

#include <chrono>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "glassbox/base/error.h"
#include "glassbox/monitor/profile.h"

namespace glassbox::monitor {
namespace {

constexpr std::int64_t kFeatures = 4, kClasses = 3;

// A tabular model of 4 standard-normal features, normalised with mean 1 and std 2, whose logits
// favour the class of the largest of the first three features.
struct Synthetic {
  std::mt19937_64 rng{7};
  double shift = 0;         // added to feature 3, which no logit reads (in the data's units)
  double scale_inputs = 1;  // multiplies the normalised inputs
  std::vector<double> class_bias = std::vector<double>(kClasses, 0.0);

  // One request of `n` samples: the normalised input and the logits, as FP32 tensors.
  Observation request(std::int64_t n) {
    std::normal_distribution<double> d(0, 1);
    std::vector<float> x(static_cast<std::size_t>(n * kFeatures)), y(static_cast<std::size_t>(n * kClasses));
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t f = 0; f < kFeatures; ++f) {
        double raw = d(rng) + (f == 3 ? shift : 0.0);
        x[static_cast<std::size_t>(i * kFeatures + f)] = static_cast<float>((raw - 1.0) / 2.0 * scale_inputs);
      }
      for (std::int64_t c = 0; c < kClasses; ++c)
        y[static_cast<std::size_t>(i * kClasses + c)] =
            static_cast<float>(2.0 * x[static_cast<std::size_t>(i * kFeatures + c)] + class_bias[c]);
    }
    Observation o;
    o.input = tensor(std::move(x), {n, kFeatures});
    o.output = tensor(std::move(y), {n, kClasses});
    o.latency_ms = 5.0;
    return o;
  }

  static RawTensor tensor(std::vector<float> v, std::vector<std::int64_t> shape) {
    auto owner = std::make_shared<std::vector<float>>(std::move(v));
    RawTensor t;
    t.type = ElementType::kFp32;
    t.shape = std::move(shape);
    t.data = reinterpret_cast<const std::uint8_t*>(owner->data());
    t.size = owner->size() * sizeof(float);
    t.owner = owner;
    return t;
  }
};

InputSpec spec() {
  InputSpec s;
  s.name = "INPUT__0";
  s.shape = {kFeatures};
  s.mean = {1.0};
  s.std = {2.0};
  return s;
}

Reference reference() {
  ReferenceBuilder b(spec(), "OUTPUT__0", true, {"a", "b", "c"});
  Synthetic gen;
  gen.rng.seed(99);
  const Observation o = gen.request(5000);
  const auto* x = reinterpret_cast<const float*>(o.input->data);
  const auto* y = reinterpret_cast<const float*>(o.output->data);
  for (std::int64_t i = 0; i < 5000; ++i) {
    std::vector<double> xi(x + i * kFeatures, x + (i + 1) * kFeatures), yi(y + i * kClasses, y + (i + 1) * kClasses);
    b.add(xi, yi, -1);
  }
  return b.build();
}

MonitorOptions options(std::int64_t window) {
  MonitorOptions o;
  o.window_predictions = window;
  o.window_seconds = 3600;
  return o;
}

TEST(Runtime, InDistributionWindowsAreQuietAndShiftsRaiseTheirAlarms) {
  ModelMonitor m("tab", 1, reference(), options(500));
  Synthetic gen;
  for (int r = 0; r < 100; ++r) m.offer(gen.request(50));  // 5000 predictions: 10 windows
  m.flush();
  MonitorSnapshot s = m.snapshot();
  EXPECT_EQ(s.windows_total, 10);
  EXPECT_EQ(s.predictions_total, 5000);
  EXPECT_EQ(s.requests_total, 100);
  EXPECT_TRUE(s.alarms.empty()) << s.to_json().dump();
  EXPECT_EQ(s.features, (std::vector<std::string>{"f0", "f1", "f2", "f3"}));
  ASSERT_FALSE(s.windows.empty());
  EXPECT_DOUBLE_EQ(s.windows.back().latency_p99_ms, 5.0);
  EXPECT_EQ(s.windows.back().report.out_of_range, 0);

  // Feature 3 moves by half a standard deviation: input drift within the next window.
  gen.shift = 0.5;
  for (int r = 0; r < 10; ++r) m.offer(gen.request(50));
  m.flush();
  s = m.snapshot();
  ASSERT_EQ(s.alarms.size(), 1u) << s.to_json().dump();
  EXPECT_EQ(s.alarms[0].kind, "input_drift");
  EXPECT_EQ(s.windows.back().report.features.front().name, "f3");
  EXPECT_EQ(s.alarms_raised["input_drift"], 1);

  // Inputs sent unnormalised (x 255): out of range, and the confidence collapses onto one value.
  gen.shift = 0;
  gen.scale_inputs = 255;
  for (int r = 0; r < 10; ++r) m.offer(gen.request(50));
  m.flush();
  s = m.snapshot();
  bool out_of_range = false;
  for (const Alarm& a : s.alarms) out_of_range |= a.kind == "out_of_range";
  EXPECT_TRUE(out_of_range) << s.to_json().dump();
  EXPECT_GT(s.out_of_range_total, 1000);

  // A class mix the reference never saw: class 2 nearly always.
  gen.scale_inputs = 1;
  gen.class_bias = {0, 0, 4};
  for (int r = 0; r < 10; ++r) m.offer(gen.request(50));
  m.flush();
  s = m.snapshot();
  bool class_mix = false, input = false;
  for (const Alarm& a : s.alarms) {
    class_mix |= a.kind == "class_mix";
    input |= a.kind == "input_drift";
  }
  EXPECT_TRUE(class_mix) << s.to_json().dump();
  EXPECT_FALSE(input);  // the inputs are back in distribution
  const nlohmann::json j = s.to_json();
  EXPECT_EQ(j["windows"].size(), 13u);
  EXPECT_EQ(j["totals"]["windows"], 13);
  EXPECT_TRUE(j["alarms"].is_array());
}

TEST(Runtime, AFullQueueDropsAndCounts) {
  MonitorOptions o = options(100);
  o.queue_bytes = 1;  // one observation at a time
  ModelMonitor m("tab", 1, reference(), o);
  Synthetic gen;
  std::vector<Observation> many;
  for (int r = 0; r < 200; ++r) many.push_back(gen.request(10));
  for (auto& x : many) m.offer(std::move(x));  // faster than the thread takes them
  m.flush();
  const MonitorSnapshot s = m.snapshot();
  EXPECT_EQ(s.requests_total + s.dropped_total, 200);
  EXPECT_GT(s.requests_total, 0);
}

TEST(Runtime, UnreadableRequestsAreCountedNotFatal) {
  ModelMonitor m("tab", 1, reference(), options(100));
  Synthetic gen;
  Observation bad = gen.request(3);
  bad.input->shape = {3, kFeatures + 1};  // does not fit the profile's samples
  m.offer(bad);
  m.offer(gen.request(3));
  m.flush();
  const MonitorSnapshot s = m.snapshot();
  EXPECT_EQ(s.unreadable_total, 1);
  EXPECT_EQ(s.predictions_total, 3);
}

TEST(Runtime, AWindowClosesAfterItsSeconds) {
  MonitorOptions o = options(1000000);
  o.window_seconds = 0.05;
  ModelMonitor m("tab", 1, reference(), o);
  Synthetic gen;
  m.offer(gen.request(20));
  MonitorSnapshot s;
  for (int i = 0; i < 400 && s.windows_total == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    s = m.snapshot();
  }
  EXPECT_EQ(s.windows_total, 1);
  EXPECT_EQ(s.windows.at(0).report.predictions, 20);
}

TEST(Runtime, SamplingObservesTheGivenShareEvenly) {
  MonitorOptions o = options(100);
  o.sample_rate = 0.25;
  ModelMonitor m("tab", 1, reference(), o);
  int taken = 0;
  for (int i = 0; i < 1000; ++i) taken += m.sample() ? 1 : 0;
  EXPECT_EQ(taken, 250);
}

TEST(Runtime, OptionsByNameAreCheckedAndNamed) {
  MonitorOptions o;
  o.set("window_predictions", "250");
  o.set("latency_p99_ms", "80");
  o.set("enabled", "false");
  EXPECT_EQ(o.window_predictions, 250);
  EXPECT_EQ(o.alarms.latency_p99_ms, 80);
  EXPECT_FALSE(o.enabled);
  try {
    o.set("window_size", "10");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.one_line().find("window_predictions"), std::string::npos) << e.one_line();
  }
  EXPECT_THROW(o.set("sample_rate", "1.5"), Error);
  EXPECT_THROW(o.set("window_predictions", "2.5"), Error);
  EXPECT_THROW(o.set("alpha", "abc"), Error);
}

}  // namespace
}  // namespace glassbox::monitor
