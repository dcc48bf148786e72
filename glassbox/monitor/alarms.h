// Alarms over successive windows, with the defaults practitioners use on a served classifier:
//
//   input_drift       a feature drifted (WindowReport::input_drift: KS p-value below alpha / features
//                     and normed Wasserstein >= 0.1)
//   confidence_drift  the KS statistic of the window's confidences against the reference's > 0.05,
//                     significant at alpha, in 2 windows in a row
//   overconfidence    the window's confidence standard deviation < 0.05 (and below half the
//                     reference's: a model that is that sure on its own validation data is not
//                     alarming), in 2 windows in a row
//   confidence_decay  the window's mean confidence < 0.65 (and 0.05 below the reference's) for 3
//                     windows in a row
//   class_mix         the predicted classes shifted (chi-square p-value below alpha and
//                     Jensen-Shannon distance >= 0.1)
//   out_of_range      more than 1 % of the input values outside the reference's range or non-finite
//   latency           the window's P99 latency > 120 ms
//
// The thresholds are the practitioners'; the significance and effect-size gates and the runs of
// windows keep in-distribution traffic quiet: a KS statistic above 0.05 alone happens in about one
// window in 35 when a thousand predictions are compared with a few thousand reference values.
// An alarm is active while its condition holds (for its run of windows) and keeps the time of the
// first window of that run (`since`); a window where it no longer holds clears it.
//
//   AlarmTracker alarms({});
//   for (each window) {
//     alarms.update(compare(reference, window, {}), p99_ms, now_seconds);
//     for (const Alarm& a : alarms.active()) ...
//   }
//
// Torch-free. Thread safety: one thread updates; copy `active()` out for readers.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/monitor/window.h"

namespace glassbox::monitor {

struct AlarmOptions {
  double confidence_ks = 0.05;
  int confidence_windows = 2;
  double overconfident_std = 0.05;
  int overconfident_windows = 2;
  double decay_mean = 0.65;
  double decay_margin = 0.05;  // below the reference's mean by at least this much
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
  // The kinds update() decides, in order.
  static const std::vector<std::string>& kinds();
  // One window's report, its P99 latency in milliseconds (negative: not measured) and its time.
  void update(const WindowReport& report, double p99_latency_ms, double now_seconds);
  const std::vector<Alarm>& active() const { return active_; }
  bool is_active(const std::string& kind) const;

 private:
  // The condition held (or not) in this window; active once it held for `windows` in a row.
  void run(const std::string& kind, bool holds, int windows, double value, double threshold, double now);
  void set(const std::string& kind, bool holds, double value, double threshold, double now);

  struct Run {
    int length = 0;
    double since = 0;
  };
  AlarmOptions options_;
  std::vector<Alarm> active_;
  std::map<std::string, Run> runs_;
};

}  // namespace glassbox::monitor
