// Alarms over successive windows, with the defaults practitioners use on a served classifier:
//
//   input_drift       a feature's KS p-value below alpha / features (WindowReport::input_drift)
//   confidence_drift  the KS statistic of the window's confidences against the reference's > 0.05
//   overconfidence    the window's confidence standard deviation < 0.05
//   confidence_decay  the window's mean confidence < 0.65 for 3 windows in a row
//   class_mix         the chi-square test of the predicted classes, p-value below alpha
//   out_of_range      more than 1 % of the input values outside the reference's range or non-finite
//   latency           the window's P99 latency > 120 ms
//
// An alarm is active while its condition holds and keeps the time it first held (`since`); a
// window where it no longer holds clears it.
//
//   AlarmTracker alarms({});
//   for (each window) {
//     alarms.update(compare(reference, window, {}), p99_ms, now_seconds);
//     for (const Alarm& a : alarms.active()) ...
//   }
//
// Torch-free. Thread safety: one thread updates; copy `active()` out for readers.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/monitor/window.h"

namespace glassbox::monitor {

struct AlarmOptions {
  double confidence_ks = 0.05;
  double overconfident_std = 0.05;
  double decay_mean = 0.65;
  int decay_windows = 3;
  double out_of_range_share = 0.01;
  double latency_p99_ms = 120.0;
};

struct Alarm {
  std::string kind;  // input_drift, confidence_drift, overconfidence, confidence_decay, class_mix, ...
  double since = 0;  // the time (seconds) of the first window where it held
  double value = 0;  // its measure in the latest window (a p-value for the tests)
  double threshold = 0;

  nlohmann::json to_json() const;
};

class AlarmTracker {
 public:
  explicit AlarmTracker(AlarmOptions options) : options_(options) {}
  // One window's report, its P99 latency in milliseconds (negative: not measured) and its time.
  void update(const WindowReport& report, double p99_latency_ms, double now_seconds);
  const std::vector<Alarm>& active() const { return active_; }
  bool is_active(const std::string& kind) const;

 private:
  void set(const std::string& kind, bool holds, double value, double threshold, double now);

  AlarmOptions options_;
  std::vector<Alarm> active_;
  int low_confidence_run_ = 0;
  double low_confidence_since_ = 0;
};

}  // namespace glassbox::monitor
