// glassbox monitor rules | dashboard: flags -> one app:: call -> print or write.
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "glassbox/app/monitor.h"
#include "glassbox/base/files.h"
#include "glassbox/cli/commands.h"

namespace glassbox::cli {

namespace {

struct MonitorArgs {
  std::string repository;
  std::string out;
  std::string metric_names = "prometheus";
  std::string for_duration = "1m";
};

void add_common(CLI::App* c, MonitorArgs& a) {
  c->add_option("--model-repository", a.repository, "the repository glassbox serve serves")->required();
  c->add_option("--out", a.out, "file to write (atomically); default: standard output");
  c->add_option("--metric-names", a.metric_names, "the server's --metric-names")
      ->check(CLI::IsMember({"prometheus", "triton"}))
      ->capture_default_str();
}

app::MonitorToolsJob job_of(const MonitorArgs& a) {
  app::MonitorToolsJob j;
  j.repository = a.repository;
  j.triton_names = a.metric_names == "triton";
  j.for_duration = a.for_duration;
  return j;
}

void emit(const std::string& text, const std::string& out, const std::string& what) {
  if (out.empty()) {
    std::cout << text;
    return;
  }
  write_file_atomic(out, text);
  std::cerr << fmt::format("{} -> {}\n", what, out);
}

}  // namespace

void add_monitor(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "monitor", "Prometheus alerting rules and a Grafana dashboard for the models glassbox serve monitors");
  cmd->require_subcommand(1);

  auto r = std::make_shared<MonitorArgs>();
  CLI::App* rules = cmd->add_subcommand("rules", "Prometheus alerting rules (YAML) for a model repository");
  add_common(rules, *r);
  rules
      ->add_option("--for", r->for_duration,
                   "how long a condition Prometheus computes itself (latency SLO, out-of-range share, failures) "
                   "must hold before its alert fires")
      ->capture_default_str();
  rules->footer(
      "One group per model: an alert per monitor alarm (input drift, confidence drift, over-confidence,\n"
      "confidence decay, class mix, out-of-range inputs, window latency), the P99 latency SLO and the\n"
      "out-of-range share from the histograms and counters with the model's own thresholds\n"
      "(config.pbtxt parameters glassbox.monitor.*), failed requests, a monitor that skips requests.\n"
      "Examples:\n"
      "  glassbox monitor rules --model-repository models --out /etc/prometheus/glassbox.yml\n"
      "  promtool check rules /etc/prometheus/glassbox.yml");
  rules->callback([r] { emit(app::monitor_rules(job_of(*r)), r->out, "alerting rules"); });

  auto d = std::make_shared<MonitorArgs>();
  CLI::App* dash = cmd->add_subcommand("dashboard", "A Grafana dashboard (JSON) for a model repository");
  add_common(dash, *d);
  dash->footer(
      "Panels: requests per second, P50/P99 latency, failures, queue, batch size, inputs outside the\n"
      "training range, drift per feature, confidence, predicted class share, alarms; a model variable.\n"
      "Import it in Grafana (Dashboards > Import) and pick the Prometheus that scrapes the server.\n"
      "Example:\n"
      "  glassbox monitor dashboard --model-repository models --out glassbox-dashboard.json");
  dash->callback([d] { emit(app::monitor_dashboard(job_of(*d)).dump(2) + "\n", d->out, "dashboard"); });
}

}  // namespace glassbox::cli
