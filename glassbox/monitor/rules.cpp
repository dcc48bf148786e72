// Tested by monitor_test (Rules.*) and, with promtool and a real Prometheus, by serve_monitor_prometheus.
#include "glassbox/monitor/rules.h"

#include <fmt/format.h>

#include "glassbox/base/error.h"

namespace glassbox::monitor {

namespace {

struct Names {
  std::string success, failure, count, exec, pending;
};

Names names_of(const RulesOptions& o) {
  if (o.triton_names)
    return {"nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
            "nv_inference_exec_count", "nv_inference_pending_request_count"};
  return {"nv_inference_request_success_total", "nv_inference_request_failure_total", "nv_inference_count_total",
          "nv_inference_exec_total", "nv_inference_pending_requests"};
}

// A YAML single-quoted scalar.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    out += c;
    if (c == '\'') out += '\'';
  }
  return out + "'";
}

struct Rule {
  std::string alert, expr, severity, summary, description;
  bool immediate = false;  // fires on the first evaluation (the server already required its run of windows)
};

struct AlarmRule {
  const char* kind;
  const char* alert;
  const char* severity;
  const char* summary;
};

constexpr AlarmRule kAlarmRules[] = {
    {"input_drift", "GlassboxInputDrift", "warning", "the inputs of {m} drifted from its training data"},
    {"confidence_drift", "GlassboxConfidenceDrift", "warning",
     "the confidence distribution of {m} moved away from validation's (KS statistic above threshold)"},
    {"overconfidence", "GlassboxOverconfidence", "warning",
     "{m} is over-confident: its confidences barely vary (maybe drift)"},
    {"confidence_decay", "GlassboxConfidenceDecay", "warning",
     "the mean confidence of {m} stayed low for several windows (decay: consider retraining)"},
    {"class_mix", "GlassboxClassMixShift", "warning", "the predicted classes of {m} shifted from validation's mix"},
    {"out_of_range", "GlassboxInputsOutOfRange", "critical",
     "inputs of {m} outside the training data's range (broken preprocessing or upstream data)"},
    {"latency", "GlassboxLatencyWindow", "warning", "the P99 latency of {m}'s last window is above its SLO"},
};

}  // namespace

std::string prometheus_rules(const std::vector<ModelAlarms>& models, const RulesOptions& options) {
  GB_CHECK(!models.empty(), InvalidArgument, "no models to write rules for",
           "point at a model repository that holds at least one model");
  const Names n = names_of(options);
  std::string out =
      "# Prometheus alerting rules for models served by glassbox (glassbox monitor rules).\n"
      "# Load with rule_files: [this file]; check with `promtool check rules FILE`.\n"
      "groups:\n";
  for (const ModelAlarms& m : models) {
    const std::string sel = fmt::format("model=\"{}\"", m.model);
    std::vector<Rule> rules;
    if (m.monitored) {
      for (const AlarmRule& a : kAlarmRules) {
        Rule r;
        r.alert = a.alert;
        r.expr = fmt::format("max by (model, version) (glassbox_monitor_alarm{{{}, kind=\"{}\"}}) == 1", sel, a.kind);
        r.severity = a.severity;
        r.summary = fmt::format(fmt::runtime(a.summary), fmt::arg("m", m.model));
        r.description = "glassbox serve holds the " + std::string(a.kind) +
                        " alarm of {{ $labels.model }} version {{ $labels.version }}: GET "
                        "/v2/models/{{ $labels.model }}/monitor shows its windows and the alarm's value and threshold";
        r.immediate = true;
        rules.push_back(r);
      }
      rules.push_back(
          {"GlassboxOutOfRangeShare",
           fmt::format("sum by (model, version) (rate(glassbox_monitor_input_out_of_range_total{{{0}}}[5m]) "
                       "+ rate(glassbox_monitor_input_non_finite_total{{{0}}}[5m])) / sum by (model, "
                       "version) (rate(glassbox_monitor_input_values_total{{{0}}}[5m])) > {1}",
                       sel, m.alarms.out_of_range_share),
           "critical",
           fmt::format("more than {:g} % of {}'s input values are outside the training range or not "
                       "finite",
                       100 * m.alarms.out_of_range_share, m.model),
           "{{ $value | humanizePercentage }} of the input values of {{ $labels.model }} version {{ "
           "$labels.version }} over 5 minutes"});
      rules.push_back({"GlassboxMonitorDropping",
                       fmt::format("sum by (model, version) (rate(glassbox_monitor_dropped_total{{{}}}[5m])) > 0", sel),
                       "info", fmt::format("the monitor of {} cannot keep up and skips requests", m.model),
                       "requests are served but not all are observed; lower glassbox.monitor.sample_rate"});
    }
    rules.push_back(
        {"GlassboxLatencySLO",
         fmt::format("histogram_quantile(0.99, sum by (model, version, le) "
                     "(rate(nv_inference_request_seconds_bucket{{{}}}[5m]))) > {:g}",
                     sel, m.alarms.latency_p99_ms / 1000.0),
         "warning", fmt::format("the P99 latency of {} is above {:g} ms", m.model, m.alarms.latency_p99_ms),
         "P99 {{ $value | humanizeDuration }} over 5 minutes for {{ $labels.model }} version {{ $labels.version }}"});
    rules.push_back({"GlassboxInferenceFailures",
                     fmt::format("sum by (model, version) (rate({}{{{}}}[5m])) > 0", n.failure, sel), "warning",
                     fmt::format("requests to {} fail", m.model),
                     "{{ $value }} failed requests a second to {{ $labels.model }} version {{ $labels.version }} "
                     "(the reason label of the failure counter says why)"});
    out += "  - name: " + quoted("glassbox-" + m.model) + "\n    rules:\n";
    for (const Rule& r : rules) {
      out += "      - alert: " + r.alert + "\n";
      out += "        expr: " + quoted(r.expr) + "\n";
      out += "        for: " + (r.immediate ? std::string("0s") : options.for_duration) + "\n";
      out += "        labels:\n          severity: " + r.severity + "\n          model: " + quoted(m.model) + "\n";
      out += "        annotations:\n          summary: " + quoted(r.summary) + "\n";
      out += "          description: " + quoted(r.description) + "\n";
    }
  }
  return out;
}

nlohmann::json grafana_dashboard(const std::vector<ModelAlarms>& models, const RulesOptions& options) {
  GB_CHECK(!models.empty(), InvalidArgument, "no models to draw a dashboard for",
           "point at a model repository that holds at least one model");
  const Names n = names_of(options);
  using nlohmann::json;
  json panels = json::array();
  int id = 0;
  const auto panel = [&](const std::string& title, const std::string& unit,
                         std::vector<std::pair<std::string, std::string>> targets, int x, int y, int w = 12, int h = 8,
                         const std::string& type = "timeseries") {
    json t = json::array();
    char ref = 'A';
    for (const auto& [expr, legend] : targets)
      t.push_back({{"refId", std::string(1, ref++)},
                   {"expr", expr},
                   {"legendFormat", legend},
                   {"datasource", {{"type", "prometheus"}, {"uid", "${datasource}"}}}});
    panels.push_back({{"id", ++id},
                      {"type", type},
                      {"title", title},
                      {"datasource", {{"type", "prometheus"}, {"uid", "${datasource}"}}},
                      {"gridPos", {{"x", x}, {"y", y}, {"w", w}, {"h", h}}},
                      {"fieldConfig", {{"defaults", {{"unit", unit}}}, {"overrides", json::array()}}},
                      {"targets", t}});
  };
  const std::string m = "model=~\"$model\"";
  panel("Requests per second", "reqps",
        {{fmt::format("sum by (model, version) (rate({}{{{}}}[1m]))", n.success, m), "{{model}} v{{version}}"}}, 0, 0);
  panel(
      "Latency P50 / P99", "s",
      {{fmt::format(
            "histogram_quantile(0.5, sum by (model, version, le) (rate(nv_inference_request_seconds_bucket{{{}}}"
            "[5m])))",
            m),
        "P50 {{model}} v{{version}}"},
       {fmt::format("histogram_quantile(0.99, sum by (model, version, le) (rate(nv_inference_request_seconds_bucket{{{}"
                    "}}[5m])))",
                    m),
        "P99 {{model}} v{{version}}"}},
      12, 0);
  panel("Failed requests per second", "reqps",
        {{fmt::format("sum by (model, reason) (rate({}{{{}}}[5m]))", n.failure, m), "{{model}} {{reason}}"}}, 0, 8);
  panel(
      "Queue", "short",
      {{fmt::format("sum by (model) ({}{{{}}})", n.pending, m), "pending {{model}}"},
       {fmt::format("histogram_quantile(0.99, sum by (model, le) (rate(nv_inference_queue_seconds_bucket{{{}}}[5m]))) "
                    "* 1000",
                    m),
        "queue P99 ms {{model}}"}},
      12, 8);
  panel("Batch size", "short",
        {{fmt::format("sum by (model) (rate({0}{{{1}}}[1m])) / sum by (model) (rate({2}{{{1}}}[1m]))", n.count, m,
                      n.exec),
          "{{model}}"}},
        0, 16);
  panel("Inputs outside the training range", "percentunit",
        {{fmt::format("sum by (model) (rate(glassbox_monitor_input_out_of_range_total{{{0}}}[5m]) + "
                      "rate(glassbox_monitor_input_non_finite_total{{{0}}}[5m])) / sum by (model) "
                      "(rate(glassbox_monitor_input_values_total{{{0}}}[5m]))",
                      m),
          "{{model}}"}},
        12, 16);
  panel("Drift per feature (Wasserstein / reference std, latest window)", "short",
        {{fmt::format("glassbox_monitor_feature_wasserstein_normed{{{}}}", m), "{{model}} {{feature}}"}}, 0, 24);
  panel("Drift per feature (KS statistic, latest window)", "short",
        {{fmt::format("glassbox_monitor_feature_ks_statistic{{{}}}", m), "{{model}} {{feature}}"}}, 12, 24);
  panel("Confidence", "percentunit",
        {{fmt::format("glassbox_monitor_confidence_mean{{{}}}", m), "mean {{model}}"},
         {fmt::format("glassbox_monitor_confidence_std{{{}}}", m), "std {{model}}"},
         {fmt::format("glassbox_monitor_reference_confidence_mean{{{}}}", m), "validation mean {{model}}"}},
        0, 32);
  panel("Predicted class share (latest window)", "percentunit",
        {{fmt::format("glassbox_monitor_class_share{{{}}}", m), "{{model}} {{class}}"}}, 12, 32);
  panel("Alarms", "short", {{fmt::format("glassbox_monitor_alarm{{{}}} == 1", m), "{{model}} {{kind}}"}}, 0, 40, 24, 6,
        "state-timeline");
  std::string first = models.front().model;
  return {{"title", "glassbox: served models"},
          {"uid", "glassbox-serve"},
          {"tags", {"glassbox", "serving", "monitoring"}},
          {"schemaVersion", 39},
          {"refresh", "10s"},
          {"time", {{"from", "now-1h"}, {"to", "now"}}},
          {"editable", true},
          {"templating",
           {{"list",
             {{{"name", "datasource"}, {"type", "datasource"}, {"query", "prometheus"}, {"label", "Prometheus"}},
              {{"name", "model"},
               {"type", "query"},
               {"datasource", {{"type", "prometheus"}, {"uid", "${datasource}"}}},
               {"query", fmt::format("label_values({}, model)", n.success)},
               {"includeAll", true},
               {"multi", true},
               {"current", {{"text", "All"}, {"value", "$__all"}}}}}}}},
          {"panels", panels}};
}

}  // namespace glassbox::monitor
