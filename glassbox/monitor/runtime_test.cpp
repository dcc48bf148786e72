#include "glassbox/monitor/runtime.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
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

// Images: the runner's thread extracts an aligned FP32 image's features while offering it; any
// other image (misaligned here, or with a value that is not finite) is copied and read by the
// monitor's thread. Both paths must give the same windows.
struct Images {
  static InputSpec spec() {
    InputSpec s;
    s.name = "INPUT__0";
    s.kind = InputKind::kImage;
    s.shape = {2, 6, 5};
    s.mean = {0.5, 0.4};
    s.std = {0.25, 0.2};
    return s;
  }
  std::mt19937_64 rng{11};
  // `n` normalised images (FP32), and a buffer one byte longer for a misaligned copy.
  std::pair<std::shared_ptr<std::vector<std::uint8_t>>, std::vector<float>> batch(std::int64_t n, double shift) {
    std::normal_distribution<float> d(0, 1);
    std::vector<float> x(static_cast<std::size_t>(n * 60));
    for (auto& v : x) v = d(rng) + static_cast<float>(shift);
    return {std::make_shared<std::vector<std::uint8_t>>(x.size() * sizeof(float) + 1), std::move(x)};
  }
};

TEST(Runtime, ImageFeaturesExtractedAtTheHandOffEqualThoseOfTheMonitorsThread) {
  ReferenceBuilder b(Images::spec(), "OUTPUT__0", true, {"a", "b", "c"});
  Images gen;
  for (int i = 0; i < 400; ++i) {
    auto [unused, x] = gen.batch(1, 0.0);
    std::vector<double> xi(x.begin(), x.end()), yi(xi.begin(), xi.begin() + kClasses);
    b.add(xi, yi, -1);
  }
  const Reference ref = b.build();
  ModelMonitor aligned("img", 1, ref, options(100)), misaligned("img", 1, ref, options(100));
  for (int r = 0; r < 30; ++r) {
    auto [buffer, x] = gen.batch(10, r < 20 ? 0.0 : 0.8);
    if (r == 25) x[7] = std::numeric_limits<float>::quiet_NaN();  // the general path, on both
    std::vector<float> y(10 * kClasses);
    for (int i = 0; i < 10; ++i)
      for (int c = 0; c < kClasses; ++c) y[static_cast<std::size_t>(i * kClasses + c)] = x[i * 60 + c];
    const auto y_bytes = reinterpret_cast<const std::uint8_t*>(y.data());
    std::memcpy(buffer->data() + 1, x.data(), x.size() * sizeof(float));
    const TensorBytes out{ElementType::kFp32, y_bytes, y.size() * sizeof(float), y.size()};
    Offered a{TensorBytes{ElementType::kFp32, reinterpret_cast<const std::uint8_t*>(x.data()), x.size() * sizeof(float),
                          x.size()},
              out, 2.0};
    Offered m{TensorBytes{ElementType::kFp32, buffer->data() + 1, x.size() * sizeof(float), x.size()}, out, 2.0};
    aligned.offer(std::span(&a, 1));
    misaligned.offer(std::span(&m, 1));
  }
  aligned.flush();
  misaligned.flush();
  nlohmann::json ja = aligned.snapshot().to_json(), jm = misaligned.snapshot().to_json();
  for (nlohmann::json* j : {&ja, &jm}) {  // the clock's readings differ
    for (auto& w : (*j)["windows"]) w.erase("start"), w.erase("end");
    for (auto& a : (*j)["alarms"]) a.erase("since");
  }
  EXPECT_EQ(ja["totals"]["predictions"], 300);
  EXPECT_EQ(ja["totals"]["non_finite"], 1);
  EXPECT_GT(ja["totals"]["out_of_range"].get<std::int64_t>(), 0);  // the shifted windows
  EXPECT_EQ(ja["windows"].size(), 3u);
  EXPECT_EQ(ja["totals"], jm["totals"]);
  EXPECT_EQ(ja["windows"].dump(), jm["windows"].dump());  // every statistic, to the last bit
  EXPECT_EQ(ja["alarms"].dump(), jm["alarms"].dump());
}

}  // namespace
}  // namespace glassbox::monitor
