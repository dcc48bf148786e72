// run_serve_bench: models -> limit -> glassbox serve (batched, unbatched) -> FastAPI, per model.
// The model preparation and the child-process plumbing are shared with the soak
// (serve_bench_models.cpp, serve_process.cpp).
#include "bench/serve_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/script.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "bench/grpc_load.h"
#include "bench/serve_bench_models.h"
#include "bench/serve_process.h"
#include "glassbox/base/error.h"

namespace glassbox::bench {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

// ---- the limit: in-process LibTorch on the same file ----------------------------------------

struct Forwards {
  double median_s = 0, mean_s = 0;
};

// Times forward() on a batch of b: warm-up of two calls (the first profiles and optimises the
// graph) and at least a quarter of the window, then at least 3 calls and half the window.
Forwards time_forwards(torch::jit::Module& module, const BenchModel& m, std::int64_t b, double window_s) {
  std::vector<std::int64_t> shape{b};
  shape.insert(shape.end(), m.spec.dims.begin(), m.spec.dims.end());
  torch::manual_seed(0);
  const at::Tensor x = torch::randn(shape);
  std::vector<torch::jit::IValue> in{x};
  auto forward = [&] {
    const auto t0 = Clock::now();
    module.forward(in);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  double spent = forward() + forward();
  while (spent < 0.25 * window_s) spent += forward();
  std::vector<double> times;
  double total = 0;
  while (times.size() < 3 || total < 0.5 * window_s) {
    times.push_back(forward());
    total += times.back();
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], total / static_cast<double>(times.size())};
}

torch::jit::Module load_for_inference(const BenchModel& m) {
  torch::jit::Module module = torch::jit::load(m.model_file.string());
  module.eval();
  return module;
}

json measure_limit(const BenchModel& m, const ServeBenchOptions& o) {
  torch::jit::Module module = load_for_inference(m);
  c10::InferenceMode guard;
  std::vector<std::int64_t> batches;
  for (std::int64_t b : {1, 8, 32, 64, 128, 256})
    if (b <= o.max_batch_size) batches.push_back(b);
  if (std::find(batches.begin(), batches.end(), o.max_batch_size) == batches.end()) batches.push_back(o.max_batch_size);
  json sweep = json::array();
  double best = 0, single_us = 0;
  std::int64_t best_batch = 0;
  for (std::int64_t b : batches) {
    const Forwards f = time_forwards(module, m, b, o.seconds);
    // The ceiling from the median forward: robust to the stalls of a shared machine (an
    // intra-op thread descheduled for a few ms); the mean is kept beside it.
    const double sps = static_cast<double>(b) / f.median_s;
    const double mean_sps = static_cast<double>(b) / f.mean_s;
    sweep.push_back({{"batch_size", b},
                     {"samples_per_s", sps},
                     {"samples_per_s_mean", mean_sps},
                     {"forward_ms", f.median_s * 1e3}});
    if (b == 1) single_us = f.median_s * 1e6;
    if (sps > best) {
      best = sps;
      best_batch = b;
    }
    if (o.log)
      *o.log << fmt::format("  {:<10}{:<15} b={:<4} {:>9.0f} samples/s ({:.2f} ms per forward)\n", "limit", m.name, b,
                            sps, f.median_s * 1e3)
             << std::flush;
  }
  const double max_batch_s = sweep.back()["forward_ms"].get<double>() / 1e3;
  return {{"samples_per_s", best},          {"samples_per_s_before", best},       {"batch_size", best_batch},
          {"single_forward_us", single_us}, {"max_batch_forward_s", max_batch_s}, {"sweep", sweep}};
}

// The limit at its best batch once more, right after the served sweep: the ceiling becomes the
// mean of the two measurements that bracket the served one. On a shared machine the speed of
// one forward drifts by tens of percent over minutes (ResNet-18: 68-104 ms at batch 1 in runs
// a few minutes apart), so a ceiling taken minutes before the served figure measures the
// neighbours as much as the server.
void bracket_limit(json& limit, const BenchModel& m, const ServeBenchOptions& o) {
  torch::jit::Module module = load_for_inference(m);
  c10::InferenceMode guard;
  const std::int64_t b = limit["batch_size"].get<std::int64_t>();
  const Forwards f = time_forwards(module, m, b, o.seconds);
  const double after = static_cast<double>(b) / f.median_s;
  limit["samples_per_s_after"] = after;
  limit["samples_per_s"] = 0.5 * (limit["samples_per_s_before"].get<double>() + after);
  if (o.log)
    *o.log << fmt::format("  {:<10}{:<15} b={:<4} {:>9.0f} samples/s after the served sweep (ceiling: mean {:.0f})\n",
                          "limit", m.name, b, after, limit["samples_per_s"].get<double>())
           << std::flush;
}

// ---- the concurrency sweep -----------------------------------------------------------------

struct Window {
  double warmup = 1, seconds = 3;
};

json measure_point(const Server& server, const InferSpec& spec, const HttpRequestSpec& request, int concurrency,
                   const ServeBenchOptions& o, const Window& w, bool server_stats) {
  LoadOptions lo;
  lo.port = server.port;
  lo.connections = concurrency;
  lo.threads = o.loadgen_threads;
  lo.warmup_seconds = w.warmup;
  lo.seconds = w.seconds;
  // The previous point's closed connections may have left requests queued on the server.
  const pid_t pid = server.process->pid();
  const bool idle = wait_idle(pid, std::chrono::seconds(120));
  ServerStats before;
  if (server_stats) before = fetch_stats(server.port, spec.model);
  const double cpu0 = process_cpu_seconds(pid);
  const auto t0 = Clock::now();
  const LoadResult r = run_load(request, lo);
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const double server_cpu = (process_cpu_seconds(pid) - cpu0) / wall;
  const double samples = static_cast<double>(o.request_batch);
  // Throughput: responses counted in the window, unless the window holds few closed-loop cycles
  // (fewer than 50 responses per connection): a batched slow model answers a whole batch at once,
  // and counting would be off by up to one batch per window (+-16 % for ResNet-18 at c=64 in
  // 20 s). Then Little's law for a closed loop without think time: concurrency / mean latency.
  const double counted = r.throughput();
  const double little = r.latency.count() ? concurrency / (r.latency.mean_us() / 1e6) : 0.0;
  const bool few_cycles = r.ok < 50 * static_cast<std::uint64_t>(concurrency);
  const double rate = few_cycles ? little : counted;
  json p{{"concurrency", concurrency},
         {"infer_per_s", rate},
         {"samples_per_s", rate * samples},
         {"throughput_from", few_cycles ? "little" : "count"},
         {"infer_per_s_counted", counted},
         {"infer_per_s_little", little},
         {"p50_us", r.latency.percentile_us(50)},
         {"p90_us", r.latency.percentile_us(90)},
         {"p99_us", r.latency.percentile_us(99)},
         {"mean_us", r.latency.mean_us()},
         {"requests", r.ok},
         {"failed", r.failed_total},
         {"loadgen_cpu_cores", r.cpu_cores()},
         {"server_cpu_cores", server_cpu}};
  if (!r.first_failure.empty()) p["first_failure"] = r.first_failure;
  if (!idle) p["server_busy_at_start"] = true;
  if (server_stats) {
    // The request in flight when the window closed still finishes on the server: let it land.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const StatsDelta d = stats_delta(before, fetch_stats(server.port, spec.model));
    p["server"] = {{"requests", d.requests},
                   {"request_us", d.request_us},
                   {"queue_us", d.queue_us},
                   {"compute_us", d.compute_us},
                   {"compute_input_us", d.compute_input_us},
                   {"compute_infer_us", d.compute_infer_us},
                   {"compute_output_us", d.compute_output_us},
                   {"overhead_us", d.overhead_us},
                   {"mean_batch", d.mean_batch}};
  }
  return p;
}

// The served model over gRPC at one concurrency (the same figures as measure_point, no server stats).
json measure_grpc_point(const Server& server, const std::string& request, int concurrency, const ServeBenchOptions& o,
                        const Window& w, bool streaming) {
  GrpcLoadOptions lo;
  lo.streaming = streaming;
  lo.port = server.grpc_port;
  lo.concurrency = concurrency;
  lo.threads = o.loadgen_threads;
  lo.warmup_seconds = w.warmup;
  lo.seconds = w.seconds;
  const pid_t pid = server.process->pid();
  const bool idle = wait_idle(pid, std::chrono::seconds(120));
  const double cpu0 = process_cpu_seconds(pid);
  const auto t0 = Clock::now();
  const LoadResult r = run_grpc_load(request, lo);
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const double rate = r.throughput();
  json p{{"concurrency", concurrency},
         {"infer_per_s", rate},
         {"samples_per_s", rate * static_cast<double>(o.request_batch)},
         {"p50_us", r.latency.percentile_us(50)},
         {"p90_us", r.latency.percentile_us(90)},
         {"p99_us", r.latency.percentile_us(99)},
         {"mean_us", r.latency.mean_us()},
         {"requests", r.ok},
         {"failed", r.failed_total},
         {"loadgen_cpu_cores", r.cpu_cores()},
         {"server_cpu_cores", (process_cpu_seconds(pid) - cpu0) / wall}};
  if (!r.first_failure.empty()) p["first_failure"] = r.first_failure;
  if (!idle) p["server_busy_at_start"] = true;
  return p;
}

// Concurrency levels in order until throughput stops rising (two levels less than 3 % above the
// best so far: one level alone may be noise); `measure(c)` takes one point. The best point, with
// the whole sweep under "sweep".
template <typename Measure>
json saturate(const std::string& mode, const std::string& model, const ServeBenchOptions& o, Measure&& measure) {
  json points = json::array();
  json best;
  int flat = 0;
  for (int c : o.concurrency) {
    json p = measure(c);
    if (o.log) {
      *o.log << fmt::format(
                    "  {:<12}{:<15} c={:<4} {:>9.0f} infer/s  p50 {:>8.2f} ms  p99 {:>8.2f} ms  failed {}  (client "
                    "{:.2f} cores, server {:.2f})\n",
                    mode, model, c, p["infer_per_s"].get<double>(), p["p50_us"].get<double>() / 1e3,
                    p["p99_us"].get<double>() / 1e3, p["failed"].get<std::uint64_t>(),
                    p["loadgen_cpu_cores"].get<double>(), p["server_cpu_cores"].get<double>())
             << std::flush;
    }
    points.push_back(p);
    const double t = p["infer_per_s"].get<double>();
    const bool rising = best.is_null() || t > 1.03 * best["infer_per_s"].get<double>();
    if (best.is_null() || t > best["infer_per_s"].get<double>()) best = p;
    flat = rising ? 0 : flat + 1;
    if (flat == 2) break;
  }
  json result = best;
  result.erase("server");
  result["sweep"] = points;
  return result;
}

// An HTTP server's sweep (with the server's statistics at concurrency 1 when asked).
json sweep(const std::string& mode, const Server& server, const InferSpec& spec, const ServeBenchOptions& o,
           const Window& w, bool server_stats) {
  const HttpRequestSpec request = binary_infer_request(spec, o.request_batch, 1);
  check_infer_reply(http_call("127.0.0.1", server.port, request), spec, o.request_batch, mode + " server");
  json result = saturate(mode, spec.model, o,
                         [&](int c) { return measure_point(server, spec, request, c, o, w, server_stats && c == 1); });
  const json& first = result["sweep"][0];
  if (server_stats && first["concurrency"] == 1) result["server_c1"] = first["server"];
  return result;
}

// The same over the server's gRPC port: ModelInfer calls, or ModelStreamInfer streams.
json sweep_grpc(const Server& server, const InferSpec& spec, const ServeBenchOptions& o, const Window& w,
                bool streaming) {
  const std::string request = grpc_infer_request(spec, o.request_batch, 1);
  check_grpc_reply("127.0.0.1", server.grpc_port, request, spec, o.request_batch);
  return saturate(streaming ? "grpc_stream" : "grpc", spec.model, o,
                  [&](int c) { return measure_grpc_point(server, request, c, o, w, streaming); });
}

// The monitored model with its monitor observing every request and paused (sample rate 0, set
// through POST .../monitor/sampling), in alternating windows at the served sweep's best
// concurrency: the same runner and model instance on both sides, so only the monitoring differs.
// Blocks of four short windows in the order ABBA (paused, observing, observing, paused), so that a
// drift of the machine's speed within a block falls on both; the result is the median block, as a
// burst of other work on a shared machine moves one block by 10-20 %.
json monitor_cost(const Server& server, const InferSpec& plain, int concurrency, const ServeBenchOptions& o,
                  const Window& model_window) {
  const Window w{std::min(model_window.warmup, 0.5), std::min(model_window.seconds, 1.5)};
  InferSpec monitored = plain;
  monitored.model += "_monitored";
  const HttpRequestSpec request = binary_infer_request(monitored, o.request_batch, 1);
  check_infer_reply(http_call("127.0.0.1", server.port, request), monitored, o.request_batch, "monitored server");
  const std::string base = "/v2/models/" + monitored.model + "/monitor";
  const auto totals = [&] {
    const HttpReply r = http_call("127.0.0.1", server.port, get_request(base));
    GB_CHECK(r.status == 200, Internal, "GET " << base << " answered " << r.status,
             std::string("the monitored model must have its profile"));
    return json::parse(r.body).at("totals");
  };
  const auto sampling = [&](double rate) {
    HttpRequestSpec post;
    post.target = base + "/sampling";
    post.headers = {{"Content-Type", "application/json"}};
    post.body = json{{"sample_rate", rate}}.dump();
    const HttpReply r = http_call("127.0.0.1", server.port, post);
    GB_CHECK(r.status == 200, Internal, "POST " << post.target << " answered " << r.status << ": " << r.body,
             std::string("the server must accept a sample rate for its monitored model"));
  };
  // The server's processor time per sample (us), summed over each side's windows: less sensitive
  // to a busy neighbour than throughput.
  double cpu_with = 0, cpu_without = 0;
  const auto rate = [&](bool observing) {
    sampling(observing ? 1.0 : 0.0);
    const json p = measure_point(server, monitored, request, concurrency, o, w, false);
    const double sps = p["samples_per_s"].get<double>();
    (observing ? cpu_with : cpu_without) += sps > 0 ? p["server_cpu_cores"].get<double>() / sps * 1e6 : 0.0;
    return sps;
  };
  double with = 0, without = 0;
  json blocks = json::array();  // each block's observing / paused
  double observed = 0, dropped = 0;
  for (int b = 0; b < o.monitor_blocks; ++b) {
    const double p1 = rate(false);
    const json before = totals();
    const double m1 = rate(true);
    const double m2 = rate(true);
    sampling(0.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the monitor takes its queue every 10 ms
    const json after = totals();
    observed += after.at("requests").get<double>() - before.at("requests").get<double>();
    dropped += after.at("dropped").get<double>() - before.at("dropped").get<double>();
    const double p2 = rate(false);
    with += m1 + m2;
    without += p1 + p2;
    blocks.push_back(p1 + p2 > 0 ? (m1 + m2) / (p1 + p2) : 0.0);
  }
  sampling(1.0);
  // Observed: requests the monitor processed, of those it was offered in the observing windows
  // (the rest were dropped because its low-priority thread could not keep up at saturation).
  const int windows = 2 * o.monitor_blocks;
  std::vector<double> sorted = blocks.get<std::vector<double>>();
  std::sort(sorted.begin(), sorted.end());
  const std::size_t mid = sorted.size() / 2;
  const double median = sorted.size() % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  const json result{{"concurrency", concurrency},
                    {"ratio", median},
                    {"window_s", w.seconds},
                    {"samples_per_s", with / windows},
                    {"server_cpu_us_per_sample", cpu_with / windows},
                    {"plain_server_cpu_us_per_sample", cpu_without / windows},
                    {"plain_samples_per_s", without / windows},
                    {"blocks", blocks},
                    {"observed_requests", observed},
                    {"dropped_requests", dropped},
                    {"observed_share", observed + dropped > 0 ? observed / (observed + dropped) : 0.0}};
  if (o.log)
    *o.log << fmt::format(
                  "  {:<10}{:<15} c={:<4} {:>9.0f} samples/s observed, {:.0f} paused; median of {} ABBA blocks "
                  "{:.3f} ({:.3f}); server CPU {:.2f} us per sample observed, {:.2f} paused; {:.1f} % of the "
                  "requests observed\n",
                  "monitored", monitored.model, concurrency, with / windows, without / windows, o.monitor_blocks,
                  median, fmt::join(blocks.get<std::vector<double>>(), " "), cpu_with / windows, cpu_without / windows,
                  100 * result["observed_share"].get<double>())
           << std::flush;
  return result;
}

double ratio(const json& model, const char* a, const char* b) {
  if (!model.contains(a) || !model.contains(b)) return 0;
  const double d = model[b]["samples_per_s"].get<double>();
  return d > 0 ? model[a]["samples_per_s"].get<double>() / d : 0.0;
}

json bench_model(const BenchModel& m, const ServeBenchOptions& o, const fs::path& work) {
  json r{{"name", m.name}, {"architecture", m.architecture}, {"description", m.description}, {"input", m.spec.dims}};
  if (o.log) *o.log << fmt::format("{}: {}\n", m.name, m.description) << std::flush;
  torch::set_num_threads(o.threads);
  r["limit"] = measure_limit(m, o);
  // Slow models get windows of several full batches (a window must hold a few batch cycles), at
  // most 15 s (6 s of warm-up) so that a loaded machine does not stretch the run without end.
  const double batch_s = r["limit"]["max_batch_forward_s"].get<double>();
  const Window w{std::max(o.warmup_seconds, std::min(2 * batch_s, 6.0)),
                 std::max(o.seconds, std::min(6 * batch_s, 15.0))};
  r["window_s"] = w.seconds;
  r["warmup_s"] = w.warmup;

  // The batcher aims at the batch size the model runs best at on this machine (the limit's
  // sweep), as a tuned deployment would: a larger batch is not faster per sample everywhere
  // (ResNet-18 at 224x224 on one thread: 15 samples/s at 8, 11 at 64).
  ServeBenchOptions served = o;
  if (served.preferred_batch_sizes.empty())
    served.preferred_batch_sizes = {static_cast<std::int32_t>(r["limit"]["batch_size"].get<std::int64_t>())};
  r["preferred_batch_sizes"] = served.preferred_batch_sizes;
  const fs::path repo = work / ("repo-" + m.name);
  write_bench_repository(m, repo, served, /*unbatched=*/true, /*monitored=*/true);
  {
    const Server server = start_glassbox(repo, o, work / ("serve-" + m.name + ".log"));
    r["served"] = sweep("served", server, m.spec, o, w, true);
    bracket_limit(r["limit"], m, o);
    InferSpec unbatched = m.spec;
    unbatched.model += "_unbatched";
    r["unbatched"] = sweep("unbatched", server, unbatched, o, w, true);
    r["monitored"] = monitor_cost(server, m.spec, r["served"]["concurrency"].get<int>(), o, w);
    if (!o.skip_grpc) {
      r["grpc"] = sweep_grpc(server, m.spec, o, w, false);
      r["grpc_stream"] = sweep_grpc(server, m.spec, o, w, true);
    }
    server.process->terminate();
  }
  // The Python anchors: "python" is FastAPI's key (as before); the others are named after themselves.
  for (const std::string& anchor : o.skip_python ? std::vector<std::string>{} : o.anchors) {
    const std::string key = anchor == "fastapi" ? "python" : anchor;
    const Server server = start_python(anchor, m, o, work / (anchor + "-" + m.name + ".log"));
    r[key] = sweep(key, server, m.spec, o, w, false);
    r[key + "_server"] =
        server.banner.substr(server.banner.find('(') + 1, server.banner.rfind(')') - server.banner.find('(') - 1);
    server.process->terminate();
    r[key == "python" ? "vs_python" : "vs_" + key] = ratio(r, "served", key.c_str());
  }
  r["served_vs_limit"] = ratio(r, "served", "limit");
  r["batching_gain"] = ratio(r, "served", "unbatched");
  if (r.contains("monitored")) r["monitor_vs_plain"] = r["monitored"]["ratio"];
  if (r.contains("grpc")) {
    r["grpc_sps"] = r["grpc"]["samples_per_s"];
    r["grpc_vs_http"] = ratio(r, "grpc", "served");  // ModelInfer, one call per request
    r["grpc_stream_vs_http"] = ratio(r, "grpc_stream", "served");
  }
  if (r["served"].contains("server_c1")) r["overhead_us"] = r["served"]["server_c1"]["overhead_us"];
  const json& c1 = r["served"]["sweep"][0];
  if (c1["concurrency"] == 1)
    r["overhead_client_us"] = c1["p50_us"].get<double>() - r["limit"]["single_forward_us"].get<double>();
  return r;
}

json goals(const json& models) {
  json g = json::array();
  for (const auto& m : models) {
    const std::string name = m["name"];
    // Appends the goal when the model has the figure; returns the entry (valid until the next add).
    auto add = [&](const char* key, const char* op, double goal) -> json* {
      if (!m.contains(key)) return nullptr;
      const double v = m[key].get<double>();
      const bool met = std::string(op) == ">=" ? v >= goal : v <= goal;
      g.push_back(
          {{"model", name}, {"figure", key}, {"goal", fmt::format("{} {}", op, goal)}, {"value", v}, {"met", met}});
      return &g.back();
    };
    const std::string arch = m["architecture"];
    if (arch == "resnet18") add("served_vs_limit", ">=", 0.9);
    // No server beats the limit, so vs_python cannot exceed limit / python: when the Python
    // server already runs near the limit (a compute-bound model on the CPU, where batching gains
    // nothing), the goal is out of anyone's reach on this machine, and the report says so.
    if (json* vs_python = add("vs_python", ">=", 5); vs_python && m["python"]["samples_per_s"].get<double>() > 0) {
      const double ceiling = m["limit"]["samples_per_s"].get<double>() / m["python"]["samples_per_s"].get<double>();
      (*vs_python)["ceiling"] = ceiling;
      (*vs_python)["reachable"] = ceiling >= 5;
    }
    if (arch == "mlp") {
      add("overhead_us", "<=", 50);
      add("grpc_vs_http", ">=", 1.0);
      add("vs_litserve", ">=", 3);
      add("vs_torchserve", ">=", 3);
    }
    add("monitor_vs_plain", ">=", 0.97);
  }
  return g;
}

}  // namespace

void ServeBenchOptions::validate() const {
  for (const auto& a : anchors)
    GB_CHECK(a == "fastapi" || a == "litserve" || a == "torchserve", InvalidArgument,
             "unknown Python anchor '" << a << "'", std::string("use --anchors fastapi,litserve,torchserve"));
  for (const auto& m : models)
    GB_CHECK(m == "mlp" || m == "resnet18", InvalidArgument, "unknown benchmark model '" << m << "'",
             std::string("use --models mlp,resnet18 (or --repository DIR --model NAME)"));
  GB_CHECK(repository.empty() == model.empty(), InvalidArgument, "--repository and --model go together",
           std::string("pass both: --repository DIR --model NAME"));
  GB_CHECK(!models.empty() || !repository.empty() || soak_seconds > 0, InvalidArgument, "no model to benchmark",
           std::string("pass --models mlp,resnet18 or --repository DIR --model NAME"));
  GB_CHECK(resnet_input.size() == 3 && resnet_input[0] > 0 && resnet_input[1] >= 32 && resnet_input[2] >= 32,
           InvalidArgument, "--resnet-input must be CxHxW with H, W >= 32", std::string("e.g. 3x224x224 or 3x64x64"));
  GB_CHECK(seconds > 0 && warmup_seconds >= 0, InvalidArgument, "--seconds must be > 0 and the warm-up >= 0",
           std::string("e.g. --seconds 3"));
  GB_CHECK(!concurrency.empty() && *std::min_element(concurrency.begin(), concurrency.end()) >= 1, InvalidArgument,
           "--concurrency needs levels >= 1", std::string("e.g. --concurrency 1,4,16,64,128"));
  GB_CHECK(max_batch_size >= 1 && request_batch >= 1 && request_batch <= max_batch_size, InvalidArgument,
           "need 1 <= request batch (" << request_batch << ") <= max_batch_size (" << max_batch_size << ")",
           std::string("lower --request-batch"));
  GB_CHECK(threads >= 0 && http_threads >= 0 && loadgen_threads >= 1 && loadgen_threads <= 4, InvalidArgument,
           "threads must be >= 0 and load generator threads 1-4", std::string("e.g. --threads 2 --loadgen-threads 1"));
  GB_CHECK(soak_seconds >= 0 && soak_interval > 0 && soak_concurrency >= 1, InvalidArgument,
           "--soak needs seconds >= 0, an interval > 0 and a concurrency >= 1", std::string("e.g. --soak 600"));
}

json run_serve_bench(const ServeBenchOptions& in) {
  if (in.soak_seconds > 0) return run_serve_soak(in);
  const ServeBenchOptions o = resolve_defaults(in);
  const TempDir work("glassbox-bench-serve");
  json r{{"bench", "serve"},
         {"machine", machine_description()},
         {"threads", o.threads},
         {"http_threads", o.http_threads},
         {"loadgen_threads", o.loadgen_threads},
         {"request_batch", o.request_batch},
         {"max_batch_size", o.max_batch_size},
         {"preferred_batch_sizes",
          o.preferred_batch_sizes.empty() ? json("auto: the limit's best batch size") : json(o.preferred_batch_sizes)},
         {"max_queue_delay_us", o.max_queue_delay_us},
         {"tensors", "binary"}};
  std::vector<BenchModel> models;
  if (!o.repository.empty()) {
    models.push_back(existing_model(o, work.path()));
  } else {
    for (const auto& name : o.models) models.push_back(zoo_model(name, o, work.path()));
  }
  json results = json::array();
  for (const auto& m : models) results.push_back(bench_model(m, o, work.path()));
  r["goals"] = goals(results);
  r["models"] = results;
  return r;
}

namespace {

std::string goal_note(const json& result, const std::string& model, const std::string& figure) {
  for (const auto& g : result["goals"])
    if (g["model"] == model && g["figure"] == figure) {
      std::string verdict = g["met"].get<bool>() ? "met" : "MISSED";
      if (!g["met"].get<bool>() && !g.value("reachable", true))
        verdict =
            fmt::format("out of reach here: the Python server already runs at {:.2f} of the limit, so at most {:.2f}",
                        1.0 / g["ceiling"].get<double>(), g["ceiling"].get<double>());
      return fmt::format(" (goal {}: {})", g["goal"].get<std::string>(), verdict);
    }
  return "";
}

void print_soak(const json& r, std::ostream& out) {
  out << fmt::format("glassbox bench serve --soak: {} at concurrency {} for {:.0f} s; {} cores ({}), torch {}\n",
                     r["model"].get<std::string>(), r["concurrency"].get<int>(), r["seconds"].get<double>(),
                     r["machine"]["cores"].get<int>(), r["machine"].value("cpu", "?"),
                     r["machine"]["torch"].get<std::string>());
  out << fmt::format("  {:>7}  {:>10}  {:>9}  {:>7}\n", "t s", "RSS MiB", "infer/s", "failed");
  for (const auto& p : r["series"]) {
    out << fmt::format("  {:>7.0f}  {:>10.1f}  {:>9.0f}  {:>7}\n", p["t_s"].get<double>(),
                       p["rss_kib"].get<double>() / 1024.0, p["infer_per_s"].get<double>(),
                       p["failed"].get<std::uint64_t>());
  }
  out << fmt::format("requests {} ({:.0f} infer/s, p50 {:.2f} ms, p99 {:.2f} ms), failed {} (goal 0: {})\n",
                     r["requests"].get<std::uint64_t>(), r["infer_per_s"].get<double>(),
                     r["p50_us"].get<double>() / 1e3, r["p99_us"].get<double>() / 1e3, r["failed"].get<std::uint64_t>(),
                     r["failed"].get<std::uint64_t>() == 0 ? "met" : "MISSED");
  out << fmt::format(
      "RSS {:.1f} MiB at {:.0f} s (after warm-up) -> {:.1f} MiB at the end: {:+.2f} % (goal < 5 %: {}); server exit "
      "status {}\n",
      r["rss_warm_kib"].get<double>() / 1024.0, r["rss_warm_t_s"].get<double>(),
      r["rss_end_kib"].get<double>() / 1024.0, r["rss_growth_pct"].get<double>(),
      r["rss_growth_pct"].get<double>() < 5 ? "met" : "MISSED", r["server_exit"].dump());
}

}  // namespace

void print_serve_bench(const json& r, std::ostream& out) {
  if (r.value("bench", "") == "serve-soak") return print_soak(r, out);
  const json& mc = r["machine"];
  out << fmt::format(
      "glassbox bench serve: {} cores ({}), {} GiB, torch {}, {}; {} intra-op threads, {} sample(s) per request, "
      "binary tensors\n",
      mc["cores"].get<int>(), mc.value("cpu", "?"), mc.value("memory_gib", 0.0), mc["torch"].get<std::string>(),
      mc["date"].get<std::string>(), r["threads"].get<int>(), r["request_batch"].get<std::int64_t>());
  out << fmt::format("served: max_batch_size {}, preferred {}, max_queue_delay {} us, 1 instance\n",
                     r["max_batch_size"].get<int>(),
                     r["preferred_batch_sizes"].is_string() ? r["preferred_batch_sizes"].get<std::string>()
                                                            : r["preferred_batch_sizes"].dump(),
                     r["max_queue_delay_us"].get<std::uint64_t>());
  for (const auto& m : r["models"]) {
    const std::string name = m["name"];
    out << fmt::format("\n{}: {} (windows {:.1f} s after {:.1f} s warm-up; preferred batch {})\n", name,
                       m["description"].get<std::string>(), m["window_s"].get<double>(), m["warmup_s"].get<double>(),
                       m["preferred_batch_sizes"].dump());
    out << fmt::format("  {:<10} {:>5} {:>10} {:>10} {:>9} {:>9} {:>11} {:>11}\n", "", "conc", "infer/s", "samples/s",
                       "p50 ms", "p99 ms", "client CPU", "server CPU");
    const json& l = m["limit"];
    out << fmt::format(
        "  {:<10} {:>5} {:>10} {:>10.0f}   (LibTorch in-process, best batch {}: {:.0f} before and {:.0f} after the "
        "served sweep; single forward {:.1f} us)\n",
        "limit", "-", "-", l["samples_per_s"].get<double>(), l["batch_size"].get<std::int64_t>(),
        l.value("samples_per_s_before", 0.0), l.value("samples_per_s_after", 0.0),
        l["single_forward_us"].get<double>());
    for (const char* mode : {"served", "unbatched", "grpc", "grpc_stream", "python", "litserve", "torchserve"}) {
      if (!m.contains(mode)) continue;
      const json& p = m[mode];
      out << fmt::format(
          "  {:<10} {:>5} {:>10.0f} {:>10.0f} {:>9.2f} {:>9.2f} {:>11.2f} {:>11.2f}{}\n", mode,
          p["concurrency"].get<int>(), p["infer_per_s"].get<double>(), p["samples_per_s"].get<double>(),
          p["p50_us"].get<double>() / 1e3, p["p99_us"].get<double>() / 1e3, p["loadgen_cpu_cores"].get<double>(),
          p["server_cpu_cores"].get<double>(),
          p["failed"].get<std::uint64_t>() ? fmt::format("  FAILED {}", p["failed"].get<std::uint64_t>()) : "");
    }
    out << fmt::format("  served_vs_limit {:.3f}{}, batching_gain {:.2f}", m["served_vs_limit"].get<double>(),
                       goal_note(r, name, "served_vs_limit"), m["batching_gain"].get<double>());
    if (m.contains("monitor_vs_plain"))
      out << fmt::format(", monitor_vs_plain {:.3f}{}", m["monitor_vs_plain"].get<double>(),
                         goal_note(r, name, "monitor_vs_plain"));
    for (const char* k : {"grpc_vs_http", "grpc_stream_vs_http", "vs_python", "vs_litserve", "vs_torchserve"}) {
      if (m.contains(k)) out << fmt::format(", {} {:.2f}{}", k, m[k].get<double>(), goal_note(r, name, k));
    }
    out << "\n";
    if (m.contains("overhead_us")) {
      const json& s = m["served"]["server_c1"];
      out << fmt::format(
          "  at c=1: overhead_us {:.1f}{} (server {:.1f} us per request - compute {:.1f}; queue {:.1f}), "
          "overhead_client_us {:.1f} (p50 {:.1f} - forward {:.1f})\n",
          m["overhead_us"].get<double>(), goal_note(r, name, "overhead_us"), s["request_us"].get<double>(),
          s["compute_us"].get<double>(), s["queue_us"].get<double>(), m["overhead_client_us"].get<double>(),
          m["served"]["sweep"][0]["p50_us"].get<double>(), l["single_forward_us"].get<double>());
    }
    for (const char* k : {"python", "litserve", "torchserve"}) {
      const std::string key = std::string(k) + "_server";
      if (m.contains(key)) out << "  " << k << ": " << m[key].get<std::string>() << "\n";
    }
  }
}

}  // namespace glassbox::bench
