// Prometheus text rendering of the engine's statistics and the process figures; see metrics.h.
#include "glassbox/serve/http/metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string_view>

namespace glassbox::serve {
namespace {

void append_value(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else {
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof(buf), v);
    out.append(buf, r.ptr);
  }
}

void append_value(std::string& out, std::uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

// Label values escape backslash, double quote and newline.
void append_label_value(std::string& out, std::string_view v) {
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
}

struct Label {
  std::string_view name;
  std::string_view value;
};

class Writer {
 public:
  // HELP text escapes backslash and newline.
  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    for (char c : help) {
      if (c == '\\')
        out_ += "\\\\";
      else if (c == '\n')
        out_ += "\\n";
      else
        out_ += c;
    }
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }

  template <typename V>
  void sample(std::string_view name, std::string_view suffix, std::initializer_list<Label> labels, V value) {
    out_ += name;
    out_ += suffix;
    if (labels.size() > 0) {
      out_ += '{';
      bool first = true;
      for (const Label& l : labels) {
        if (!first) out_ += ',';
        first = false;
        out_ += l.name;
        out_ += "=\"";
        append_label_value(out_, l.value);
        out_ += '"';
      }
      out_ += '}';
    }
    out_ += ' ';
    append_value(out_, value);
    out_ += '\n';
  }

  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

struct Counter {
  const char* prometheus;
  const char* triton;
  const char* help;
  const DurationStat ModelStats::*duration;  // null: `count` below
  std::uint64_t (*count)(const ModelStats&);
};

constexpr double kNsPerSecond = 1e9;

const Counter kCounters[] = {
    {"nv_inference_request_success_total", "nv_inference_request_success",
     "Number of successful inference requests, all batch sizes", nullptr,
     [](const ModelStats& s) { return s.success.count; }},
    {"nv_inference_count_total", "nv_inference_count",
     "Number of inferences performed (batch elements; does not include cached requests)", nullptr,
     [](const ModelStats& s) { return s.inference_count; }},
    {"nv_inference_exec_total", "nv_inference_exec_count",
     "Number of model executions performed (batches; does not include cached requests)", nullptr,
     [](const ModelStats& s) { return s.execution_count; }},
    {"nv_inference_request_duration_seconds_total", "nv_inference_request_duration_us",
     "Cumulative inference request duration of successful requests", &ModelStats::success, nullptr},
    {"nv_inference_queue_duration_seconds_total", "nv_inference_queue_duration_us",
     "Cumulative inference queuing duration", &ModelStats::queue, nullptr},
    {"nv_inference_compute_input_duration_seconds_total", "nv_inference_compute_input_duration_us",
     "Cumulative compute input duration", &ModelStats::compute_input, nullptr},
    {"nv_inference_compute_infer_duration_seconds_total", "nv_inference_compute_infer_duration_us",
     "Cumulative compute inference duration", &ModelStats::compute_infer, nullptr},
    {"nv_inference_compute_output_duration_seconds_total", "nv_inference_compute_output_duration_us",
     "Cumulative inference compute output duration", &ModelStats::compute_output, nullptr},
};

const char* const kReasons[] = {"REJECTED", "CANCELED", "BACKEND", "OTHER"};

struct HistogramFamily {
  const char* name;
  const char* help;
  const Histogram ModelStats::*histogram;
};
const HistogramFamily kHistograms[] = {
    {"nv_inference_request_seconds", "Inference request duration inside the server (queue and compute), seconds",
     &ModelStats::request_seconds},
    {"nv_inference_queue_seconds", "Time inference requests waited in the queue, seconds", &ModelStats::queue_seconds},
    {"nv_inference_compute_seconds",
     "Compute time of the batches inference requests ran in (input, infer, output), seconds",
     &ModelStats::compute_seconds},
};

void write_histogram(Writer& w, const HistogramFamily& f, const std::vector<ModelStats>& stats) {
  w.family(f.name, "histogram", f.help);
  for (const ModelStats& s : stats) {
    const Histogram& h = s.*(f.histogram);
    char le[32];
    for (std::size_t i = 0; i < h.bounds.size() && i < h.cumulative.size(); ++i) {
      auto r = std::to_chars(le, le + sizeof(le), h.bounds[i]);
      const std::string_view bound(le, static_cast<std::size_t>(r.ptr - le));
      w.sample(f.name, "_bucket", {{"model", s.name}, {"version", s.version}, {"le", bound}}, h.cumulative[i]);
    }
    w.sample(f.name, "_bucket", {{"model", s.name}, {"version", s.version}, {"le", "+Inf"}}, h.count);
    w.sample(f.name, "_sum", {{"model", s.name}, {"version", s.version}}, h.sum);
    w.sample(f.name, "_count", {{"model", s.name}, {"version", s.version}}, h.count);
  }
}

std::string read_file(const char* path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

ProcessFigures process_figures() {
  ProcessFigures p;
  const long page = sysconf(_SC_PAGESIZE);
  {
    std::istringstream statm(read_file("/proc/self/statm"));
    double size = 0, resident = 0;
    if (statm >> size >> resident) p.resident_memory_bytes = resident * static_cast<double>(page);
  }
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) == 0) {
    p.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                    static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  }
  {
    // Field 22 of /proc/self/stat (after the parenthesised command name) is the start time in
    // clock ticks after boot; /proc/stat's btime is the boot time in seconds since the epoch.
    const std::string stat = read_file("/proc/self/stat");
    const auto close = stat.rfind(')');
    double btime = 0;
    std::istringstream proc_stat(read_file("/proc/stat"));
    for (std::string key; proc_stat >> key;) {
      if (key == "btime") {
        proc_stat >> btime;
        break;
      }
    }
    if (close != std::string::npos && btime > 0) {
      std::istringstream fields(stat.substr(close + 2));
      std::string field;
      for (int i = 3; i <= 22 && (fields >> field); ++i) {
        if (i == 22) p.start_time_seconds = btime + std::stod(field) / static_cast<double>(sysconf(_SC_CLK_TCK));
      }
    }
  }
  std::error_code ec;
  std::int64_t fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++fds;
  }
  if (!ec) p.open_fds = fds;
  return p;
}

static void write_monitors(Writer& w, const std::vector<monitor::MonitorSnapshot>& monitors) {
  if (monitors.empty()) return;
  struct Total {
    const char* name;
    const char* help;
    std::int64_t monitor::MonitorSnapshot::*field;
  };
  static const Total totals[] = {
      {"glassbox_monitor_requests_total", "Requests the monitor observed", &monitor::MonitorSnapshot::requests_total},
      {"glassbox_monitor_predictions_total", "Predictions (batch elements) the monitor observed",
       &monitor::MonitorSnapshot::predictions_total},
      {"glassbox_monitor_dropped_total", "Requests not observed because the monitor was behind (never failed)",
       &monitor::MonitorSnapshot::dropped_total},
      {"glassbox_monitor_unreadable_total", "Observed requests whose tensors did not fit the reference profile",
       &monitor::MonitorSnapshot::unreadable_total},
      {"glassbox_monitor_windows_total", "Monitoring windows closed", &monitor::MonitorSnapshot::windows_total},
      {"glassbox_monitor_input_values_total", "Input values checked against the training range",
       &monitor::MonitorSnapshot::input_values_total},
      {"glassbox_monitor_input_out_of_range_total", "Input values outside the training data's range",
       &monitor::MonitorSnapshot::out_of_range_total},
      {"glassbox_monitor_input_non_finite_total", "Input values that were NaN or infinite",
       &monitor::MonitorSnapshot::non_finite_total},
  };
  for (const Total& t : totals) {
    w.family(t.name, "counter", t.help);
    for (const auto& m : monitors) {
      const std::string v = std::to_string(m.version);
      w.sample(t.name, "", {{"model", m.model}, {"version", v}}, static_cast<std::uint64_t>(m.*(t.field)));
    }
  }
  w.family("glassbox_monitor_alarm", "gauge", "1 while the alarm of this kind is active, else 0");
  for (const auto& m : monitors) {
    const std::string v = std::to_string(m.version);
    for (const std::string& kind : monitor::AlarmTracker::kinds()) {
      const bool on = std::any_of(m.alarms.begin(), m.alarms.end(), [&](const auto& a) { return a.kind == kind; });
      w.sample("glassbox_monitor_alarm", "", {{"model", m.model}, {"version", v}, {"kind", kind}},
               std::uint64_t{on ? 1u : 0u});
    }
  }
  w.family("glassbox_monitor_alarms_raised_total", "counter", "Times the alarm of this kind became active");
  for (const auto& m : monitors) {
    const std::string v = std::to_string(m.version);
    for (const auto& [kind, n] : m.alarms_raised)
      w.sample("glassbox_monitor_alarms_raised_total", "", {{"model", m.model}, {"version", v}, {"kind", kind}},
               static_cast<std::uint64_t>(n));
  }
  // The latest window's figures.
  struct Gauge {
    const char* name;
    const char* help;
    std::function<double(const monitor::WindowRecord&)> value;
  };
  static const Gauge gauges[] = {
      {"glassbox_monitor_window_predictions", "Predictions in the latest window",
       [](const auto& r) { return static_cast<double>(r.report.predictions); }},
      {"glassbox_monitor_drifted_features", "Input features that drifted in the latest window",
       [](const auto& r) { return static_cast<double>(r.report.drifted_features); }},
      {"glassbox_monitor_confidence_mean", "Mean max-softmax confidence in the latest window",
       [](const auto& r) { return r.report.confidence_mean; }},
      {"glassbox_monitor_confidence_std", "Standard deviation of the confidence in the latest window",
       [](const auto& r) { return r.report.confidence_std; }},
      {"glassbox_monitor_reference_confidence_mean", "Mean confidence on the reference (validation) data",
       [](const auto& r) { return r.report.reference_confidence_mean; }},
      {"glassbox_monitor_confidence_ks_statistic", "KS statistic of the window's confidences against the reference",
       [](const auto& r) { return r.report.confidence_ks_statistic; }},
      {"glassbox_monitor_entropy_mean", "Mean softmax entropy (nats) in the latest window",
       [](const auto& r) { return r.report.entropy_mean; }},
      {"glassbox_monitor_class_js", "Jensen-Shannon distance of the predicted classes from the reference's",
       [](const auto& r) { return r.report.class_js; }},
      {"glassbox_monitor_class_chi2_pvalue", "Chi-square p-value of the predicted classes against the reference's",
       [](const auto& r) { return r.report.class_chi2_pvalue; }},
      {"glassbox_monitor_window_latency_p50_seconds", "Median request latency in the latest window",
       [](const auto& r) { return r.latency_p50_ms / 1000.0; }},
      {"glassbox_monitor_window_latency_p99_seconds", "99th percentile request latency in the latest window",
       [](const auto& r) { return r.latency_p99_ms / 1000.0; }},
  };
  for (const Gauge& g : gauges) {
    w.family(g.name, "gauge", g.help);
    for (const auto& m : monitors) {
      if (m.windows.empty()) continue;
      const std::string v = std::to_string(m.version);
      w.sample(g.name, "", {{"model", m.model}, {"version", v}}, g.value(m.windows.back()));
    }
  }
  struct FeatureGauge {
    const char* name;
    const char* help;
    double monitor::FeatureDrift::*field;
  };
  static const FeatureGauge features[] = {
      {"glassbox_monitor_feature_ks_statistic", "KS statistic of the feature in the latest window (most drifted)",
       &monitor::FeatureDrift::ks_statistic},
      {"glassbox_monitor_feature_ks_pvalue", "KS p-value of the feature in the latest window (most drifted)",
       &monitor::FeatureDrift::ks_pvalue},
      {"glassbox_monitor_feature_wasserstein_normed",
       "Wasserstein distance over the reference's standard deviation (most drifted features)",
       &monitor::FeatureDrift::wasserstein_normed},
      {"glassbox_monitor_feature_psi", "Population stability index of the feature (most drifted features)",
       &monitor::FeatureDrift::psi},
  };
  for (const FeatureGauge& g : features) {
    w.family(g.name, "gauge", g.help);
    for (const auto& m : monitors) {
      if (m.windows.empty()) continue;
      const std::string v = std::to_string(m.version);
      for (const monitor::FeatureDrift& f : m.windows.back().report.features)
        w.sample(g.name, "", {{"model", m.model}, {"version", v}, {"feature", f.name}}, f.*(g.field));
    }
  }
  w.family("glassbox_monitor_class_share", "gauge", "Share of each predicted class in the latest window");
  for (const auto& m : monitors) {
    if (m.windows.empty()) continue;
    const std::string v = std::to_string(m.version);
    const std::vector<double>& share = m.windows.back().report.predicted_share;
    for (std::size_t c = 0; c < share.size(); ++c) {
      const std::string cls = c < m.classes.size() ? m.classes[c] : std::to_string(c);
      w.sample("glassbox_monitor_class_share", "", {{"model", m.model}, {"version", v}, {"class", cls}}, share[c]);
    }
  }
}

static void write_payload_log(Writer& w, const std::optional<monitor::PayloadLogger::Stats>& log) {
  if (!log) return;
  w.family("glassbox_payload_log_records_total", "counter", "Requests written to the payload log");
  w.sample("glassbox_payload_log_records_total", "", {}, static_cast<std::uint64_t>(log->records));
  w.family("glassbox_payload_log_dropped_total", "counter",
           "Requests not written to the payload log (never failed): the writer was behind, or a write failed");
  w.sample("glassbox_payload_log_dropped_total", "", {{"reason", "queue_full"}},
           static_cast<std::uint64_t>(log->dropped_queue));
  w.sample("glassbox_payload_log_dropped_total", "", {{"reason", "write_error"}},
           static_cast<std::uint64_t>(log->dropped_error));
  w.family("glassbox_payload_log_bytes", "gauge", "Bytes the payload log holds on disk");
  w.sample("glassbox_payload_log_bytes", "", {}, static_cast<std::uint64_t>(log->bytes));
}

std::string render_metrics(const std::vector<ModelStats>& stats, const ProcessFigures& process, MetricNames names,
                           const std::vector<monitor::MonitorSnapshot>& monitors,
                           const std::optional<monitor::PayloadLogger::Stats>& payload_log) {
  const bool triton = names == MetricNames::kTriton;
  Writer w;

  const char* failure = triton ? "nv_inference_request_failure" : "nv_inference_request_failure_total";
  w.family(failure, "counter", "Number of failed inference requests, all batch sizes");
  for (const ModelStats& s : stats) {
    for (const char* reason : kReasons) {
      auto it = s.failures.find(reason);
      w.sample(failure, "", {{"model", s.name}, {"version", s.version}, {"reason", reason}},
               it == s.failures.end() ? std::uint64_t{0} : it->second);
    }
    for (const auto& [reason, n] : s.failures) {
      bool standard = false;
      for (const char* r : kReasons) standard = standard || reason == r;
      if (!standard) w.sample(failure, "", {{"model", s.name}, {"version", s.version}, {"reason", reason}}, n);
    }
  }

  for (const Counter& c : kCounters) {
    const char* name = triton ? c.triton : c.prometheus;
    std::string help = c.help;
    if (c.duration) help += triton ? " in microseconds" : " in seconds";
    w.family(name, "counter", help);
    for (const ModelStats& s : stats) {
      const Label model{"model", s.name}, version{"version", s.version};
      if (!c.duration) {
        w.sample(name, "", {model, version}, c.count(s));
      } else if (triton) {
        w.sample(name, "", {model, version}, static_cast<std::uint64_t>((s.*(c.duration)).ns / 1000));
      } else {
        w.sample(name, "", {model, version}, static_cast<double>((s.*(c.duration)).ns) / kNsPerSecond);
      }
    }
  }

  const char* pending = triton ? "nv_inference_pending_request_count" : "nv_inference_pending_requests";
  w.family(pending, "gauge", "Instantaneous number of pending requests (queued or executing) per model");
  for (const ModelStats& s : stats) w.sample(pending, "", {{"model", s.name}, {"version", s.version}}, s.pending);

  for (const HistogramFamily& f : kHistograms) write_histogram(w, f, stats);
  write_monitors(w, monitors);
  write_payload_log(w, payload_log);

  w.family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes");
  w.sample("process_resident_memory_bytes", "", {}, process.resident_memory_bytes);
  w.family("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds");
  w.sample("process_cpu_seconds_total", "", {}, process.cpu_seconds);
  w.family("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds");
  w.sample("process_start_time_seconds", "", {}, process.start_time_seconds);
  if (process.open_fds >= 0) {
    w.family("process_open_fds", "gauge", "Number of open file descriptors");
    w.sample("process_open_fds", "", {}, static_cast<std::uint64_t>(process.open_fds));
  }
  return w.take();
}

HttpResponse metrics_response(const HttpRequest& request, const Engine& engine, MetricNames names) {
  const std::string_view path = request.target.substr(0, request.target.find('?'));
  if (path != "/metrics") return json_error(404, "Not Found");
  if (request.method != Method::kGet) {
    HttpResponse r = json_error(405, "only GET is allowed on /metrics");
    r.allow = "GET";
    return r;
  }
  try {
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = render_metrics(engine.statistics("", 0), process_figures(), names, engine.monitor_snapshots(),
                            engine.payload_log_stats());
    return r;
  } catch (const Error& e) {
    return error_response(e);
  } catch (const std::exception& e) {
    return json_error(500, std::string("internal error: ") + e.what());
  }
}

}  // namespace glassbox::serve
