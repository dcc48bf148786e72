// `glassbox monitor rules | dashboard` as calls: Prometheus alerting rules and a Grafana dashboard
// for the models of a repository, each model's thresholds read from its config.pbtxt parameters
// (glassbox.monitor.*, as `glassbox serve` reads them).
//
//   MonitorToolsJob j; j.repository = "models";
//   std::string yaml = monitor_rules(j);            // glassbox/monitor/rules.h
//   nlohmann::json d = monitor_dashboard(j);
//
// Errors: NotFound for a repository that is not there or holds no model, InvalidArgument for a
// model whose glassbox.monitor.* parameters do not parse (naming the model and the option).
// Thread safety: free functions.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/monitor/rules.h"

namespace glassbox::app {

struct MonitorToolsJob {
  std::filesystem::path repository;
  bool triton_names = false;        // the server runs with --metric-names triton
  std::string for_duration = "1m";  // Prometheus `for:` of the rules computed from raw series
};

// Each model of the repository with its alarm thresholds; monitored when a served version holds a
// profile and its config does not turn monitoring off.
std::vector<monitor::ModelAlarms> repository_alarms(const std::filesystem::path& repository);
std::string monitor_rules(const MonitorToolsJob& job);
nlohmann::json monitor_dashboard(const MonitorToolsJob& job);

}  // namespace glassbox::app
