// The Prometheus endpoint of glassbox serve (text exposition format 0.0.4, GET /metrics on the
// metrics port): Triton's nv_inference_* figures per model and version from Engine::statistics,
// latency histograms in seconds, and the process's memory, CPU time and start time.
//
//   std::string text = render_metrics(engine.statistics("", 0), process_figures(), MetricNames::kPrometheus);
//   HttpResponse r = metrics_response(request, engine, MetricNames::kTriton);   // the listener's handler
//
// Naming: kPrometheus passes `promtool check metrics` without a word: counters end in `_total`,
// durations are seconds (nv_inference_request_success_total, nv_inference_request_failure_total
// {reason}, nv_inference_count_total, nv_inference_exec_total,
// nv_inference_{request,queue,compute_input,compute_infer,compute_output}_duration_seconds_total,
// gauge nv_inference_pending_requests). kTriton: Triton's exact names and microsecond units
// (nv_inference_request_success, nv_inference_request_failure, nv_inference_count,
// nv_inference_exec_count, nv_inference_*_duration_us, nv_inference_pending_request_count). Both
// add the histograms nv_inference_{request,queue,compute}_seconds (_bucket{le}, _sum, _count)
// and process_resident_memory_bytes, process_cpu_seconds_total, process_start_time_seconds,
// process_open_fds. Labels: model, version (and reason); values escaped.
//
// Thread safety: free functions; metrics_response calls the engine (thread-safe by contract).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "glassbox/serve/engine/api.h"
#include "glassbox/serve/http/options.h"
#include "glassbox/serve/http/routes.h"

namespace glassbox::serve {

struct ProcessFigures {
  double resident_memory_bytes = 0;  // /proc/self/statm
  double cpu_seconds = 0;            // user + system (getrusage)
  double start_time_seconds = 0;     // since the Unix epoch (/proc/self/stat + /proc/stat btime)
  std::int64_t open_fds = -1;        // /proc/self/fd entries; -1 unknown (not written)
};
// This process's figures now; a field that cannot be read stays at its default.
ProcessFigures process_figures();

// `monitors` add the glassbox_monitor_* families (docs/monitoring.md): counters of observed,
// dropped and out-of-range inputs, an alarm gauge per kind, and the latest window's figures (the
// most drifted features by name, each class's share).
// `payload_log` adds glassbox_payload_log_{records_total,dropped_total{reason},bytes}.
std::string render_metrics(const std::vector<ModelStats>& stats, const ProcessFigures& process, MetricNames names,
                           const std::vector<monitor::MonitorSnapshot>& monitors = {},
                           const std::optional<monitor::PayloadLogger::Stats>& payload_log = std::nullopt);

// GET /metrics -> 200 text/plain; version=0.0.4; another method on /metrics 405; any other path 404.
HttpResponse metrics_response(const HttpRequest& request, const Engine& engine, MetricNames names);

}  // namespace glassbox::serve
