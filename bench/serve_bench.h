// `glassbox bench serve`: glassbox serve's throughput and latency against its anchors, all
// measured in one run on the same TorchScript files, thread count and requests:
//   limit      raw in-process LibTorch (torch::jit::load of the same model.pt, InferenceMode,
//              the server's intra-op thread count) at the best batch size of a sweep — the ceiling,
//              taken as the mean of that batch's figure before and after the served sweep
//   served     glassbox serve with dynamic batching (max_batch_size 64, preferred: the limit's
//              best batch size unless given)
//   unbatched  the same server and config without dynamic_batching (each request runs alone)
//   grpc       the served model through the same server's KServe v2 gRPC port (bench/grpc_load.h)
//   python     a FastAPI + uvicorn + PyTorch server (bench/fastapi_server.py, one worker) serving
//              the same model.pt on the same KServe v2 route with binary tensors
//   litserve   LitServe (bench/litserve_server.py) and TorchServe (bench/torchserve_server.py, on
//   torchserve Java) serving the same model.pt, each set up as its documentation recommends
// Servers run as child processes (`<this binary> serve`, `.venv/bin/python`), driven by the
// closed-loop load generators (bench/http_load.h, bench/grpc_load.h) over a concurrency sweep;
// each reports infer/s, samples/s, p50/p99 client latency and the load generator's own CPU.
// Ratios: served_vs_limit, batching_gain, grpc_vs_http, vs_python (FastAPI), vs_litserve,
// vs_torchserve; overhead_us from the server's statistics at concurrency 1 on the MLP.
// Soak mode (options.soak_seconds > 0) drives the MLP at saturation instead and samples the
// server's RSS (see run_serve_soak).
//
//   ServeBenchOptions o; o.models = {"mlp"}; o.seconds = 2;
//   nlohmann::json r = run_serve_bench(o);   // r["models"][0]["served_vs_limit"], ...
//   print_serve_bench(r, std::cout);
//
// Every child process is killed and reaped before the call returns, thrown errors included, and
// dies with the benchmark if it is killed (PR_SET_PDEATHSIG).
// Thread safety: one benchmark at a time per process (it sets LibTorch's thread count).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace glassbox::bench {

struct ServeBenchOptions {
  std::vector<std::string> models{"mlp", "resnet18"};  // zoo models: mlp (quickstart), resnet18
  std::string repository;                              // bench this exported repository's model instead of the zoo's
  std::string model;                                   // its model name (with `repository`)
  std::vector<std::int64_t> resnet_input{3, 224, 224};
  double seconds = 3;                               // measured window per point (longer for slow models, see below)
  double warmup_seconds = 1;                        // per point
  std::vector<int> concurrency{1, 4, 16, 64, 128};  // the sweep; it stops once throughput stops rising
  std::int64_t request_batch = 1;                   // samples per request
  std::int32_t max_batch_size = 64;
  std::vector<std::int32_t> preferred_batch_sizes;  // empty: the limit's best batch (soak: none)
  std::uint64_t max_queue_delay_us = 0;             // 0: a batch leaves as soon as the instance is free
  int threads = 0;                                  // intra-op threads of every measurement; 0: cores - 1 (at least 1)
  int http_threads = 0;                             // glassbox serve --threads; 0: the server's default
  int loadgen_threads = 1;                          // the load generator's io threads
  bool skip_python = false;                         // no Python anchor at all
  // The Python servers measured beside glassbox serve (bench/<name>_server.py), each on the same
  // model file, thread count and requests: fastapi (FastAPI + uvicorn), litserve, torchserve.
  std::vector<std::string> anchors{"fastapi", "litserve", "torchserve"};
  bool skip_grpc = false;       // no gRPC sweep
  int monitor_blocks = 9;       // ABBA blocks behind monitor_vs_plain (the median block; two 1.5 s windows of each)
  std::string server_binary;    // default: this executable (/proc/self/exe), run as `BIN serve ...`
  std::string python;           // default: <source>/.venv/bin/python
  std::string source_dir;       // default: the compile-time source dir
  std::string quickstart_toml;  // the quickstart config (the CLI passes its embedded copy);
                                // empty: <source>/configs/quickstart.toml
  std::ostream* log = nullptr;  // progress lines (one per measured point); null: quiet

  // Soak: > 0 runs run_serve_soak's measurement instead of the comparison.
  double soak_seconds = 0;
  double soak_interval = 5;  // seconds between RSS samples
  double soak_warmup = 60;   // RSS growth is measured from this point (at most half the run)
  int soak_concurrency = 64;

  // InvalidArgument naming the option.
  void validate() const;
};

// The comparison (or, with soak_seconds > 0, the soak). Throws glassbox::Error when a server
// does not start or a measurement fails (the server's log tail in the message).
nlohmann::json run_serve_bench(const ServeBenchOptions& options);

// The soak: the MLP served with dynamic batching at soak_concurrency for soak_seconds; the
// server's VmRSS every soak_interval seconds; failed requests (non-2xx and transport errors over
// the whole run) and RSS growth from the first sample at or after soak_warmup to the last.
nlohmann::json run_serve_soak(const ServeBenchOptions& options);

// A human table of either result.
void print_serve_bench(const nlohmann::json& result, std::ostream& out);

}  // namespace glassbox::bench
