// What Prometheus and Grafana need to watch a model repository served by glassbox: alerting rules
// (a YAML file for Prometheus's rule_files) and a Grafana dashboard (JSON to import), both over the
// metrics `glassbox serve` exports (the nv_inference_* figures and histograms, glassbox_monitor_*).
//
//   std::vector<ModelAlarms> models = {{"fashion", options.alarms, true}};
//   write_file("glassbox-rules.yml", prometheus_rules(models, {}));
//   write_file("glassbox-dashboard.json", grafana_dashboard(models, {}).dump(2));
//
// Rules per model (group glassbox-<model>): one alert per monitor alarm kind, firing while the
// server holds the alarm (glassbox_monitor_alarm == 1), so the server's windows, tests and
// thresholds decide; the latency SLO and the out-of-range share computed by Prometheus itself from
// the histograms and counters with the model's own thresholds; failed requests; a monitor that
// drops observations. Dashboard panels: QPS, P50/P99 latency, failures, queue (pending requests and
// queue-time P99), batch size, out-of-range share, drift per feature, confidence, class mix,
// alarms. Each panel's queries read only series the server exports.
// Torch-free. Thread safety: free functions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/monitor/alarms.h"

namespace glassbox::monitor {

struct ModelAlarms {
  std::string model;
  AlarmOptions alarms;
  bool monitored = true;  // false: only the serving rules (latency, failures), no monitor alerts
};

struct RulesOptions {
  bool triton_names = false;        // the server runs with --metric-names triton
  std::string for_duration = "1m";  // how long a condition holds before the alert fires
};

// The rules file's text (YAML). InvalidArgument for no models.
std::string prometheus_rules(const std::vector<ModelAlarms>& models, const RulesOptions& options);

// The Grafana dashboard (schema 39): a `model` variable over the models served, a Prometheus data
// source variable, the panels above.
nlohmann::json grafana_dashboard(const std::vector<ModelAlarms>& models, const RulesOptions& options);

}  // namespace glassbox::monitor
