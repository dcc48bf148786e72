// Tested by monitor_test (Alarms.*).
#include "glassbox/monitor/alarms.h"

#include <algorithm>

namespace glassbox::monitor {

nlohmann::json Alarm::to_json() const {
  return {{"kind", kind}, {"since", since}, {"value", value}, {"threshold", threshold}};
}

bool AlarmTracker::is_active(const std::string& kind) const {
  return std::any_of(active_.begin(), active_.end(), [&](const Alarm& a) { return a.kind == kind; });
}

void AlarmTracker::set(const std::string& kind, bool holds, double value, double threshold, double now) {
  auto it = std::find_if(active_.begin(), active_.end(), [&](const Alarm& a) { return a.kind == kind; });
  if (!holds) {
    if (it != active_.end()) active_.erase(it);
    return;
  }
  if (it == active_.end()) {
    active_.push_back({kind, now, value, threshold});
  } else {
    it->value = value;
    it->threshold = threshold;
  }
}

const std::vector<std::string>& AlarmTracker::kinds() {
  static const std::vector<std::string> k = {"input_drift", "confidence_drift", "overconfidence", "confidence_decay",
                                             "class_mix",   "out_of_range",     "latency"};
  return k;
}

void AlarmTracker::run(const std::string& kind, bool holds, int windows, double value, double threshold, double now) {
  Run& r = runs_[kind];
  if (holds) {
    if (r.length == 0) r.since = now;
    ++r.length;
  } else {
    r.length = 0;
  }
  const bool active = r.length >= std::max(1, windows);
  set(kind, active, value, threshold, r.since);
}

void AlarmTracker::update(const WindowReport& r, double p99_latency_ms, double now) {
  const double smallest_p = r.features.empty() ? 1.0 : r.features.front().ks_pvalue;
  run("input_drift", r.input_drift, 1, smallest_p, r.feature_alpha, now);
  run("confidence_drift", r.confidence_drift && r.confidence_ks_statistic > options_.confidence_ks,
      options_.confidence_windows, r.confidence_ks_statistic, options_.confidence_ks, now);
  const double std_floor = std::min(options_.overconfident_std, 0.5 * r.reference_confidence_std);
  run("overconfidence", r.predictions > 1 && r.confidence_std < std_floor, options_.overconfident_windows,
      r.confidence_std, std_floor, now);
  const double mean_floor = std::min(options_.decay_mean, r.reference_confidence_mean - options_.decay_margin);
  run("confidence_decay", r.predictions > 0 && r.confidence_mean < mean_floor, options_.decay_windows,
      r.confidence_mean, mean_floor, now);
  run("class_mix", r.class_mix_shift, 1, r.class_js, r.alpha, now);
  const double bad_share =
      r.input_values > 0 ? static_cast<double>(r.out_of_range + r.non_finite) / static_cast<double>(r.input_values)
                         : 0.0;
  run("out_of_range", bad_share > options_.out_of_range_share, 1, bad_share, options_.out_of_range_share, now);
  run("latency", p99_latency_ms > options_.latency_p99_ms, 1, p99_latency_ms, options_.latency_p99_ms, now);
}

}  // namespace glassbox::monitor
