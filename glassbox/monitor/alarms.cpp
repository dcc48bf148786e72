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

void AlarmTracker::update(const WindowReport& r, double p99_latency_ms, double now) {
  const double smallest_p = r.features.empty() ? 1.0 : r.features.front().ks_pvalue;
  set("input_drift", r.input_drift, smallest_p, r.feature_alpha, now);
  set("confidence_drift", r.confidence_ks_statistic > options_.confidence_ks, r.confidence_ks_statistic,
      options_.confidence_ks, now);
  set("overconfidence", r.predictions > 1 && r.confidence_std < options_.overconfident_std, r.confidence_std,
      options_.overconfident_std, now);
  // Decay: the mean below its floor for decay_windows windows in a row; since = the first of them.
  if (r.predictions > 0 && r.confidence_mean < options_.decay_mean) {
    if (low_confidence_run_ == 0) low_confidence_since_ = now;
    ++low_confidence_run_;
  } else {
    low_confidence_run_ = 0;
  }
  const bool decayed = low_confidence_run_ >= options_.decay_windows;
  set("confidence_decay", decayed, r.confidence_mean, options_.decay_mean, low_confidence_since_);
  set("class_mix", r.class_mix_shift, r.class_chi2_pvalue, r.alpha, now);
  const double bad_share =
      r.input_values > 0 ? static_cast<double>(r.out_of_range + r.non_finite) / static_cast<double>(r.input_values)
                         : 0.0;
  set("out_of_range", bad_share > options_.out_of_range_share, bad_share, options_.out_of_range_share, now);
  set("latency", p99_latency_ms > options_.latency_p99_ms, p99_latency_ms, options_.latency_p99_ms, now);
}

}  // namespace glassbox::monitor
