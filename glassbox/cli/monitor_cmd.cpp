// glassbox monitor rules | dashboard | compare: flags -> one app:: call -> print or write.
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

  auto c = std::make_shared<app::CompareJob>();
  auto json = std::make_shared<bool>(false);
  CLI::App* compare = cmd->add_subcommand("compare", "Drift between a reference and current data, column by column");
  compare->add_option("--reference", c->reference, "a CSV, or a model version's folder holding profile.json")
      ->required();
  compare->add_option("--current", c->current, "a CSV, or a payload log folder (glassbox serve --payload-log)")
      ->required();
  compare->add_option("--out", c->out, "folder for drift.json and drift.html")->capture_default_str();
  compare->add_option("--threads", c->threads, "threads reading and comparing (0: one per core)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  compare->add_flag("--json", *json, "print drift.json");
  compare->footer(
      "Each column: KS, normed Wasserstein and PSI (numbers) or chi-square and Jensen-Shannon (integers with\n"
      "at most 10 values), and the verdict of Evidently's default test for the reference's size\n"
      "(KS / chi-square p < 0.05 up to 1000 rows, Wasserstein / Jensen-Shannon >= 0.1 beyond).\n"
      "Examples:\n"
      "  glassbox monitor compare --reference train.csv --current today.csv --out drift-today\n"
      "  glassbox monitor compare --reference models/fashion/1 --current payloads/fashion/1");
  compare->callback([c, json] {
    const app::CompareOutcome o = app::run_monitor_compare(*c);
    if (*json) {
      std::cout << o.report.dump(2) << "\n";
      return;
    }
    std::cout << fmt::format("{} of {} columns drifted; data set drift: {} ({:.2f} s)\n",
                             o.report["drifted_columns"].get<int>(), o.report["columns"].size(),
                             o.report["dataset_drift"].get<bool>() ? "yes" : "no",
                             o.report["seconds"]["total"].get<double>());
    for (const auto& col : o.report["columns"])
      if (col["drifted"].get<bool>())
        std::cout << fmt::format("  {:<24} {} {} {:.4g} (threshold {:g})\n", col["name"].get<std::string>(),
                                 col["type"].get<std::string>(), col["stattest"].get<std::string>(),
                                 col["score"].get<double>(), col["threshold"].get<double>());
    std::cout << "report: " << o.html_path.string() << "\n";
  });
}

}  // namespace glassbox::cli
