// `glassbox monitor rules | dashboard | compare` as calls: Prometheus alerting rules and a Grafana dashboard
// for the models of a repository, each model's thresholds read from its config.pbtxt parameters
// (glassbox.monitor.*, as `glassbox serve` reads them).
//
//   MonitorToolsJob j; j.repository = "models";
//   std::string yaml = monitor_rules(j);            // glassbox/monitor/rules.h
//   nlohmann::json d = monitor_dashboard(j);
//
//   CompareJob c; c.reference = "train.csv"; c.current = "today.csv";
//   CompareOutcome o = run_monitor_compare(c);      // OUT/drift.json + OUT/drift.html
//
// compare: the reference is a CSV or a model version's profile folder (profile.json), the current
// data a CSV or a payload log folder (with a profile as the reference: the served inputs become the
// profile's features, the outputs the confidence and entropy). Each shared column gets KS, normed
// Wasserstein and PSI (numeric) or chi-square and Jensen-Shannon (categorical), and the verdict of
// Evidently's default test for its size (glassbox/monitor/columns.h); the data set drifts when half
// the columns do, as Evidently's DataDriftPreset says.
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

struct CompareJob {
  std::filesystem::path reference;
  std::filesystem::path current;
  std::filesystem::path out = "monitor-compare";
  int threads = 0;       // 0: one per core
  bool progress = true;  // bars on standard error
};

struct CompareOutcome {
  nlohmann::json report;  // what drift.json holds
  std::filesystem::path json_path, html_path;
};

CompareOutcome run_monitor_compare(const CompareJob& job);

}  // namespace glassbox::app
