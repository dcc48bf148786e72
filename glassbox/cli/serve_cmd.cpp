// glassbox serve: a KServe v2 / Triton-compatible HTTP and gRPC server over a model repository.
//
// Startup: load the repository (serve/engine), print one line per model and version with its state
// (and reason), bind the HTTP and metrics ports (serve/http) and the gRPC port (serve/grpc), print
// `grpc: ADDR:PORT` (unless --grpc-port -1) and then
// `serving: http://ADDR:PORT (metrics http://ADDR:PORT/metrics)`. A model of the startup set that
// does not load ends the process before it serves, one line per failure on stderr (Triton's
// --exit-on-error, default true; false serves the others); so does a startup set of which nothing
// loads, whatever --exit-on-error says, and, in mode none, a repository without model directories.
// Status 2 when every reason is the repository's (a config error, a missing file), 1 when one is a
// runtime failure. Shutdown on SIGTERM or SIGINT:
// readiness goes false on both front ends (new inference requests get 503 / UNAVAILABLE), queued
// and in-flight requests finish (at most --exit-timeout seconds; what is still queued then gets
// 503), responses are written, both servers stop (gRPC calls still open get a short grace), exit 0. A second signal
// during the drain exits at once (status 1).
//
// Signals are blocked in every thread (the mask is set before any server thread starts, and
// threads inherit it) and taken synchronously by sigwait on the main thread, so no handler runs
// inside LibTorch or Asio.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "glassbox/base/error.h"
#include "glassbox/cli/commands.h"
#include "glassbox/serve/engine/api.h"
#include "glassbox/serve/grpc/server.h"
#include "glassbox/serve/http/server.h"

namespace glassbox::cli {
namespace {

struct ServeArgs {
  std::string repository;
  std::string address = "0.0.0.0";
  int http_port = 8000;
  int metrics_port = 8002;
  int grpc_port = 8001;
  serve::GrpcOptions grpc;  // keep-alive flags (Triton's names and defaults)
  std::string control_mode = "none";
  std::vector<std::string> load_models;
  std::string api_key_file;
  bool protect_inference = false;
  double exit_timeout = 30;
  int threads = 0;
  int intra_op_threads = 0;
  std::int64_t busy_poll_us = 200;
  std::size_t max_body_mib = 64;
  double header_timeout_s = 20;
  double body_timeout_s = 20;
  std::size_t min_request_rate = 500;
  std::string metric_names = "prometheus";
  bool strict_config = false;
  bool split_large_requests = false;
  bool exit_on_error = true;
  bool monitor = true;
  std::int64_t monitor_window = 1000;
  double monitor_seconds = 60;
  double monitor_sample_rate = 1.0;
  std::string payload_log;
  double payload_log_sample_rate = 1.0;
  std::uint64_t payload_log_max_mib = 1024;
  std::uint64_t payload_log_segment_mib = 64;
};

// The key is the file's first line without surrounding whitespace.
std::string read_api_key(const std::string& path) {
  std::ifstream in(path);
  GB_CHECK(in.good(), InvalidArgument, "cannot read the API key file '" << path << "'",
           std::string("pass --api-key-file with a readable file holding the key on its first line"));
  std::string key;
  std::getline(in, key);
  const auto first = key.find_first_not_of(" \t\r\n");
  const auto last = key.find_last_not_of(" \t\r\n");
  key = first == std::string::npos ? std::string() : key.substr(first, last - first + 1);
  GB_CHECK(key.size() >= 8, InvalidArgument,
           "the API key in '" << path << "' is " << key.size() << " characters long; at least 8 are required",
           std::string("write a longer random key, e.g. `openssl rand -hex 16 > ") + path + "`");
  return key;
}

std::string url(const std::string& address, int port) {
  const std::string host = address.find(':') != std::string::npos ? "[" + address + "]" : address;
  return fmt::format("http://{}:{}", host, port);
}

// Decides, from what the engine loaded, whether the server goes on (see the top of the file).
void check_startup(const serve::StartupReport& r, const ServeArgs& a, serve::ModelControlMode mode) {
  if (r.models.empty()) {
    GB_CHECK(mode == serve::ModelControlMode::kExplicit, NotFound,
             "model repository '" << a.repository << "' holds no model directories",
             std::string("put each model in its own directory, NAME/config.pbtxt + NAME/1/model.pt (glassbox export "
                         "--format repository --out DIR writes one), or start with --model-control-mode explicit "
                         "to load models later"));
    std::cout << "no model loaded at startup; load models with POST /v2/repository/models/NAME/load\n";
    return;
  }
  if (r.failures.empty()) return;
  std::set<std::string> failed_models;
  bool runtime = false;
  for (const serve::LoadFailure& f : r.failures) {
    const std::string line = f.error.one_line();
    const std::string who = "model '" + f.model + "'" + (f.version.empty() ? "" : " version " + f.version);
    std::cerr << "failed to load: " << (line.rfind(who, 0) == 0 ? "" : who + ": ") << line << "\n";
    failed_models.insert(f.model);
    runtime = runtime || !is_user_error(f.error.code());
  }
  // Status 2 when the repository is at fault, 1 for a runtime failure (main maps the code).
  const ErrorCode code = runtime ? ErrorCode::kUnavailable : ErrorCode::kFailedPrecondition;
  const std::string counts = fmt::format("{} of the {} model{} to load at startup", failed_models.size(),
                                         r.models.size(), r.models.size() == 1 ? "" : "s");
  if (r.serving.empty()) {
    throw Error(code, "no model could be loaded: " + counts + " failed (reasons above)",
                "fix what the reasons name (config.pbtxt, the model files) and start again");
  }
  if (a.exit_on_error) {
    throw Error(code, counts + " failed (reasons above); not serving the others since --exit-on-error is true",
                "fix what the reasons name, or pass --exit-on-error=false to serve the models that loaded");
  }
  std::cerr << fmt::format("warning: {} failed to load; serving the others (--exit-on-error=false)\n", counts);
}

void run_serve(const ServeArgs& a) {
  serve::EngineOptions eo;
  eo.repository = a.repository;
  eo.control_mode = a.control_mode == "explicit" ? serve::ModelControlMode::kExplicit : serve::ModelControlMode::kNone;
  eo.startup_models = a.load_models;
  eo.strict_config = a.strict_config;
  eo.split_large_requests = a.split_large_requests;
  eo.default_intra_op_threads = a.intra_op_threads;
  eo.monitor = a.monitor;
  eo.monitor_options.window_predictions = a.monitor_window;
  eo.monitor_options.window_seconds = a.monitor_seconds;
  eo.monitor_options.sample_rate = a.monitor_sample_rate;
  eo.payload_log.dir = a.payload_log;
  eo.payload_log.sample_rate = a.payload_log_sample_rate;
  eo.payload_log.max_bytes = a.payload_log_max_mib << 20;
  eo.payload_log.segment_bytes = std::min(a.payload_log_segment_mib, a.payload_log_max_mib) << 20;
  eo.validate();
  GB_CHECK(a.exit_timeout >= 0, InvalidArgument, "--exit-timeout must be >= 0 seconds, got " << a.exit_timeout,
           std::string("give the seconds queued and in-flight requests may take to finish at shutdown"));

  serve::HttpOptions ho;
  ho.address = a.address;
  ho.http_port = a.http_port;
  ho.metrics_port = a.metrics_port;
  ho.threads = a.threads;
  ho.busy_poll = std::chrono::microseconds(a.busy_poll_us);
  ho.max_body_bytes = a.max_body_mib << 20;
  ho.header_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(a.header_timeout_s * 1000));
  ho.body_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(a.body_timeout_s * 1000));
  ho.min_request_rate = a.min_request_rate;
  ho.metric_names = a.metric_names == "triton" ? serve::MetricNames::kTriton : serve::MetricNames::kPrometheus;
  if (!a.api_key_file.empty()) ho.api_key = read_api_key(a.api_key_file);
  ho.protect_inference = a.protect_inference;
  GB_CHECK(!ho.protect_inference || !ho.api_key.empty(), InvalidArgument, "--protect-inference needs an API key",
           std::string("add --api-key-file F"));
  ho.validate();

  serve::GrpcOptions go = a.grpc;
  go.address = a.address;
  go.port = a.grpc_port;
  go.busy_poll = ho.busy_poll;
  go.api_key = ho.api_key;
  go.protect_inference = ho.protect_inference;
  go.validate();
  GB_CHECK(go.port <= 0 || (go.port != ho.http_port && go.port != ho.metrics_port), InvalidArgument,
           "--grpc-port " << go.port << " is also the HTTP or the metrics port",
           std::string("give each front end its own port (--grpc-port -1: no gRPC)"));

  // Block the shutdown signals before any thread exists; every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<serve::Engine> engine = serve::make_engine(eo);
  for (const serve::IndexEntry& e : engine->repository_index(false)) {
    std::cout << fmt::format("model {}{}: {}{}\n", e.name, e.version.empty() ? "" : " version " + e.version, e.state,
                             e.reason.empty() ? "" : " (" + e.reason + ")");
  }
  for (const monitor::MonitorSnapshot& m : engine->monitor_snapshots()) {
    std::cout << fmt::format(
        "monitoring {} version {}: {} features and the predictions against its profile, "
        "windows of {} predictions or {} s, {:g} % of requests\n",
        m.model, m.version, m.features.size(), m.options.window_predictions, m.options.window_seconds,
        100 * m.options.sample_rate);
  }
  if (!a.payload_log.empty())
    std::cout << fmt::format("payload log: {} ({:g} % of requests, at most {} MiB)\n", a.payload_log,
                             100 * a.payload_log_sample_rate, a.payload_log_max_mib);
  std::cout << fmt::format("loaded in {:.2f} s\n",
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count())
            << std::flush;
  check_startup(engine->startup_report(), a, eo.control_mode);

  serve::HttpServer server(*engine, ho);
  server.start();
  std::optional<serve::GrpcServer> grpc;
  if (go.enabled()) {
    grpc.emplace(*engine, go);
    grpc->start();
    const std::string host = a.address.find(':') != std::string::npos ? "[" + a.address + "]" : a.address;
    std::cout << fmt::format("grpc: {}:{}\n", host, grpc->port());
  }
  const std::string metrics =
      server.metrics_port() > 0 ? url(a.address, server.metrics_port()) + "/metrics" : std::string("off");
  std::cout << fmt::format("serving: {} (metrics {})\n", url(a.address, server.http_port()), metrics) << std::flush;

  int sig = 0;
  sigwait(&signals, &sig);
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(a.exit_timeout * 1000));
  std::cout << fmt::format("{}: not ready; finishing queued and in-flight requests (at most {} s)\n",
                           sig == SIGTERM ? "SIGTERM" : "SIGINT", a.exit_timeout)
            << std::flush;

  // A second signal during the drain ends the process at once.
  std::atomic<bool> done{false};
  std::thread second([&] {
    const timespec tick{0, 100'000'000};
    while (!done.load()) {
      if (sigtimedwait(&signals, nullptr, &tick) > 0) {
        std::cerr << "second signal: exiting without waiting\n";
        std::_Exit(1);
      }
    }
  });
  engine->begin_shutdown();
  const bool drained = engine->drain(timeout);
  server.stop();
  if (grpc) grpc->stop();
  done = true;
  second.join();
  std::cout << (drained ? "drained: every accepted request was answered; exiting\n"
                        : "exit timeout: requests still queued were answered with 503; exiting\n")
            << std::flush;
}

}  // namespace

void add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd =
      app.add_subcommand("serve", "A KServe v2 / Triton-compatible HTTP and gRPC server over a model repository");
  cmd->add_option("--model-repository", a->repository, "folder of NAME/config.pbtxt and NAME/VERSION/model.pt")
      ->required();
  cmd->add_option("--address", a->address, "address to listen on")->capture_default_str();
  cmd->add_option("--http-port", a->http_port, "KServe v2 HTTP port (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--metrics-port", a->metrics_port, "Prometheus metrics port (0: any free port, -1: off)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 65535));
  cmd->add_option("--grpc-port", a->grpc_port,
                  "KServe v2 gRPC port, Triton's GRPCInferenceService (0: any free port, -1: off)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 65535));
  auto ms = [](std::chrono::milliseconds& d) { return [&d](std::int64_t v) { d = std::chrono::milliseconds(v); }; };
  cmd->add_option_function<std::int64_t>("--grpc-keepalive-time", ms(a->grpc.keepalive_time),
                                         "gRPC: ping an idle connection every this many ms (default 7200000)")
      ->check(CLI::PositiveNumber);
  cmd->add_option_function<std::int64_t>("--grpc-keepalive-timeout", ms(a->grpc.keepalive_timeout),
                                         "gRPC: close a connection whose ping is unanswered after this many ms "
                                         "(default 20000)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--grpc-keepalive-permit-without-calls", a->grpc.keepalive_permit_without_calls,
                  "gRPC: keep-alive pings also on connections without calls")
      ->default_str("false");
  cmd->add_option("--grpc-http2-max-pings-without-data", a->grpc.http2_max_pings_without_data,
                  "gRPC: pings sent without data before a data frame is needed (0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option_function<std::int64_t>(
         "--grpc-http2-min-recv-ping-interval-without-data", ms(a->grpc.http2_min_ping_interval),
         "gRPC: a client's pings closer than this many ms without data are strikes (default 300000)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--grpc-http2-max-ping-strikes", a->grpc.http2_max_ping_strikes,
                  "gRPC: strikes before the connection is closed (0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--model-control-mode", a->control_mode,
                  "none: load every model at start; explicit: load/unload through the repository API")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "explicit"}));
  cmd->add_option("--load-model", a->load_models, "explicit mode: a model to load at start (repeatable; * = all)");
  cmd->add_option("--api-key-file", a->api_key_file,
                  "file whose first line is the key the repository control endpoints require "
                  "(Authorization: Bearer KEY; over gRPC the metadata authorization: Bearer KEY or x-api-key: KEY)");
  cmd->add_flag("--protect-inference", a->protect_inference, "require the API key for inference and metadata too");
  cmd->add_option("--exit-timeout", a->exit_timeout, "seconds to finish queued and in-flight requests at shutdown")
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "HTTP I/O threads (0: one per core, at least 2)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--grpc-threads", a->grpc.threads, "gRPC I/O threads (0: one per core, at least 2)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--busy-poll-us", a->busy_poll_us,
                  "after its last event an HTTP or gRPC I/O thread polls this long before it "
                  "sleeps, so replies find it awake (0: sleep at once)")
      ->capture_default_str()
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1000000}));
  cmd->add_option("--intra-op-threads", a->intra_op_threads,
                  "LibTorch threads per model instance unless its config sets INTRA_OP_THREAD_COUNT (0: default)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-body-mib", a->max_body_mib, "largest request body, after decompression, in MiB")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--request-header-timeout", a->header_timeout_s,
                  "seconds a request's head may take from its first byte, plus 1 s per --min-request-rate bytes "
                  "received (at most double); slower clients get 408 and are disconnected")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 86400.0));
  cmd->add_option("--request-body-timeout", a->body_timeout_s,
                  "seconds a request's body may take after its head, plus 1 s per --min-request-rate bytes received")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 86400.0));
  cmd->add_option("--min-request-rate", a->min_request_rate,
                  "bytes per second a client must keep up to extend those deadlines (0: no extension)")
      ->capture_default_str();
  cmd->add_option("--metric-names", a->metric_names,
                  "prometheus: names that pass promtool (nv_inference_*_total, seconds); triton: Triton's exact names")
      ->capture_default_str()
      ->check(CLI::IsMember({"prometheus", "triton"}));
  cmd->add_flag("--strict-model-config", a->strict_config,
                "a config.pbtxt field of Triton's that glassbox does not implement makes its model UNAVAILABLE "
                "(default: skipped with a warning); fields in no Triton schema always do");
  cmd->add_option("--exit-on-error", a->exit_on_error,
                  "exit (status 2, or 1 for a runtime failure) when a model to load at startup fails to load; "
                  "false: serve the models that loaded")
      ->default_str("true");
  cmd->add_flag("--split-large-requests", a->split_large_requests,
                "run requests larger than max_batch_size as several batches (default: 400)");
  cmd->add_flag("--monitor,!--no-monitor", a->monitor,
                "watch each model version that has a reference profile (glassbox export writes one): drift, "
                "confidence, class mix and latency alarms at GET /v2/models/NAME/monitor and on /metrics "
                "(--monitor=false: off; a model's config.pbtxt parameter glassbox.monitor.enabled overrides)");
  cmd->add_option("--monitor-window", a->monitor_window, "monitoring: predictions per window")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--monitor-seconds", a->monitor_seconds, "monitoring: a window closes after this many seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--monitor-sample-rate", a->monitor_sample_rate, "monitoring: the share of requests observed")
      ->check(CLI::Range(0.000001, 1.0))
      ->capture_default_str();
  cmd->add_option("--payload-log", a->payload_log,
                  "write sampled requests and responses under this folder (MODEL/VERSION/seg-N/records.jsonl + one "
                  ".npy per tensor; send request ids to join labels later); a full disk drops records, never requests");
  cmd->add_option("--payload-log-sample-rate", a->payload_log_sample_rate, "payload log: the share of requests written")
      ->check(CLI::Range(0.000001, 1.0))
      ->capture_default_str();
  cmd->add_option("--payload-log-max-mib", a->payload_log_max_mib,
                  "payload log: MiB kept on disk; the oldest segments are deleted beyond it")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--payload-log-segment-mib", a->payload_log_segment_mib, "payload log: MiB per segment")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->footer(
      "Examples:\n"
      "  glassbox serve --model-repository runs/quickstart/export/repository\n"
      "  glassbox serve --model-repository models --model-control-mode explicit --load-model resnet \\\n"
      "                 --api-key-file key.txt --http-port 8080\n"
      "  curl localhost:8000/v2/health/ready; curl localhost:8002/metrics\n"
      "  perf_analyzer -m resnet -i grpc -u localhost:8001\n"
      "Stop with SIGTERM or Ctrl-C: readiness goes false, in-flight requests finish, then it exits 0.");
  cmd->callback([a] { run_serve(*a); });
}

}  // namespace glassbox::cli
