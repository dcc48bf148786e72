// run_serve_soak: glassbox serve at saturation for a long run (issue 6, acceptance 6). The MLP
// with dynamic batching at soak_concurrency; every soak_interval seconds the server's VmRSS and
// the throughput of the interval; at the end failed requests over the whole run and the RSS
// growth from the end of the warm-up to the end. Then SIGTERM: the exit status shows the drain.
#include <sys/wait.h>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "bench/serve_bench.h"
#include "bench/serve_bench_models.h"
#include "bench/serve_process.h"
#include "glassbox/base/error.h"

namespace glassbox::bench {

namespace fs = std::filesystem;
using nlohmann::json;

json run_serve_soak(const ServeBenchOptions& in) {
  ServeBenchOptions o = resolve_defaults(in);
  GB_CHECK(o.soak_seconds > 0, InvalidArgument, "the soak needs a duration",
           std::string("pass --soak SECONDS, e.g. 600"));
  const TempDir work("glassbox-bench-soak");
  const BenchModel m = o.repository.empty() ? zoo_model("mlp", o, work.path()) : existing_model(o, work.path());
  write_bench_repository(m, work.path() / "repo", o, /*unbatched=*/false);
  // Monitoring on, every request observed: the soak holds the monitor's memory too.
  write_bench_profile(m, work.path() / "repo" / m.spec.model / "1", 2000);
  Server server = start_glassbox(work.path() / "repo", o, work.path() / "serve.log");
  const pid_t pid = server.process->pid();
  const HttpRequestSpec request = binary_infer_request(m.spec, o.request_batch, 1);
  check_infer_reply(http_call("127.0.0.1", server.port, request), m.spec, o.request_batch, "glassbox serve");

  json series = json::array();
  const std::uint64_t rss_start = rss_kib(pid);
  series.push_back({{"t_s", 0.0}, {"rss_kib", rss_start}, {"infer_per_s", 0.0}, {"completed", 0}, {"failed", 0}});
  double last_t = 0;
  std::uint64_t last_completed = 0;
  LoadOptions lo;
  lo.port = server.port;
  lo.connections = o.soak_concurrency;
  lo.threads = o.loadgen_threads;
  lo.warmup_seconds = 0;
  lo.seconds = o.soak_seconds;
  lo.tick_seconds = o.soak_interval;
  lo.on_tick = [&](const LoadProgress& p) {
    const double rate =
        p.elapsed_s > last_t ? static_cast<double>(p.completed - last_completed) / (p.elapsed_s - last_t) : 0.0;
    const std::uint64_t rss = rss_kib(pid);
    series.push_back({{"t_s", p.elapsed_s},
                      {"rss_kib", rss},
                      {"infer_per_s", rate},
                      {"completed", p.completed},
                      {"failed", p.failed}});
    last_t = p.elapsed_s;
    last_completed = p.completed;
    if (o.log) {
      *o.log << fmt::format("  soak t={:>6.0f} s  RSS {:>8.1f} MiB  {:>8.0f} infer/s  failed {}\n", p.elapsed_s,
                            static_cast<double>(rss) / 1024.0, rate, p.failed)
             << std::flush;
    }
  };
  const LoadResult r = run_load(request, lo);
  const std::uint64_t rss_end = rss_kib(pid);
  const bool alive = server.process->running();
  series.push_back({{"t_s", r.seconds},
                    {"rss_kib", rss_end},
                    {"infer_per_s", 0.0},
                    {"completed", r.completed_total},
                    {"failed", r.failed_total}});

  // The warm-up ends at the first sample at or after soak_warmup (at most half the run).
  const double warm_t = std::min(o.soak_warmup, o.soak_seconds / 2);
  json warm = series.back();
  for (const auto& p : series) {
    if (p["t_s"].get<double>() >= warm_t) {
      warm = p;
      break;
    }
  }
  std::uint64_t rss_max = 0;
  for (const auto& p : series)
    if (p["t_s"].get<double>() >= warm["t_s"].get<double>())
      rss_max = std::max(rss_max, p["rss_kib"].get<std::uint64_t>());
  const auto rss_warm = warm["rss_kib"].get<std::uint64_t>();
  const double growth =
      rss_warm ? (static_cast<double>(rss_end) - static_cast<double>(rss_warm)) / static_cast<double>(rss_warm) * 100.0
               : 0.0;
  const int status = server.process->terminate(std::chrono::seconds(30));

  json j{{"bench", "serve-soak"},
         {"machine", machine_description()},
         {"model", m.description},
         {"threads", o.threads},
         {"concurrency", o.soak_concurrency},
         {"monitored", true},
         {"seconds", r.seconds},
         {"requests", r.completed_total},
         {"failed", r.failed_total},
         {"infer_per_s", r.throughput()},
         {"p50_us", r.latency.percentile_us(50)},
         {"p99_us", r.latency.percentile_us(99)},
         {"max_us", r.latency.max_us()},
         {"loadgen_cpu_cores", r.cpu_cores()},
         {"server_alive_at_end", alive},
         {"rss_start_kib", rss_start},
         {"rss_warm_t_s", warm["t_s"]},
         {"rss_warm_kib", rss_warm},
         {"rss_end_kib", rss_end},
         {"rss_max_kib", rss_max},
         {"rss_growth_pct", growth},
         {"series", series}};
  j["server_exit"] = status == -1        ? json("exited during the run")
                     : WIFEXITED(status) ? json(WEXITSTATUS(status))
                                         : json(fmt::format("signal {}", WTERMSIG(status)));
  if (!r.first_failure.empty()) j["first_failure"] = r.first_failure;
  j["goals"] =
      json::array({{{"figure", "failed"}, {"goal", "== 0"}, {"value", r.failed_total}, {"met", r.failed_total == 0}},
                   {{"figure", "rss_growth_pct"}, {"goal", "< 5"}, {"value", growth}, {"met", growth < 5}}});
  return j;
}

}  // namespace glassbox::bench
