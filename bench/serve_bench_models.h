// The serving benchmark's models and servers (bench-internal): the zoo's quickstart MLP and
// ResNet-18 built and exported to TorchScript, or a model of an existing repository; the
// repositories the benchmark serves them from; glassbox serve and the FastAPI server started as
// child processes.
//
//   TempDir work("glassbox-bench-serve");                    // removed with everything in it
//   BenchModel m = zoo_model("mlp", options, work.path());   // random init, exported
//   write_bench_repository(m, work.path() / "repo", options, /*unbatched=*/true);
//   // repo/mlp (dynamic batching) and repo/mlp_unbatched (none), both 1/model.pt = m.model_file
//   Server s = start_glassbox(work.path() / "repo", options, work.path() / "serve.log");
//   run_load(binary_infer_request(m.spec, 1, 0), LoadOptions{.port = s.port, ...});
//
// Thread safety: none; call from one thread.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/serve_bench.h"
#include "bench/serve_process.h"
#include "glassbox/export/model_config.h"

namespace glassbox::bench {

// A fresh directory under the system temp dir; removed (recursively) by the destructor.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

struct BenchModel {
  std::string name;                      // "mlp", "resnet18" or the repository's model name
  std::string architecture;              // mlp | resnet18 | the contract's architecture | torchscript
  std::string description;               // for the table
  std::filesystem::path model_file;      // the TorchScript file every measurement loads
  std::filesystem::path model_dir;       // its repository directory (labels, contract)
  exporter::triton::ModelConfig config;  // its config.pbtxt
  InferSpec spec;
};

// The options with defaults filled in (source dir, python, server binary, threads, config).
ServeBenchOptions resolve_defaults(const ServeBenchOptions& options);

// "mlp": the quickstart config's model (configs/quickstart.toml, [model]) for 1x28x28 inputs and
// 10 classes; "resnet18": the zoo's ResNet-18 with torchvision's stem (7x7/2 + max-pool) and
// 1000 classes for options.resnet_input. Random weights (throughput does not depend on them),
// exported with glassbox/export into work/export.
BenchModel zoo_model(const std::string& name, const ServeBenchOptions& options, const std::filesystem::path& work);

// options.model of options.repository (its served version's TorchScript file); FP32 input only.
BenchModel existing_model(const ServeBenchOptions& options, const std::filesystem::path& work);

// REPO/NAME: the model's config with max_batch_size, dynamic batching (preferred sizes, queue
// delay) and one CPU instance from the options, version 1 = a copy of model_file; with
// `unbatched` also REPO/NAME_unbatched, the same without dynamic_batching.
// With `monitored` also REPO/NAME_monitored: NAME's copy with a reference profile
// (write_bench_profile), which glassbox serve monitors at every request.
void write_bench_repository(const BenchModel& model, const std::filesystem::path& repo,
                            const ServeBenchOptions& options, bool unbatched, bool monitored = false);

// VERSION_DIR/profile.{json,npy}: the reference profile of `samples` inputs drawn as the load
// generator draws them (standard normal) through the model, so that glassbox serve monitors it.
void write_bench_profile(const BenchModel& model, const std::filesystem::path& version_dir, std::int64_t samples);

// A server child process, ready (it printed `serving: http://ADDR:PORT`).
struct Server {
  std::unique_ptr<ChildProcess> process;
  int port = 0;
  int grpc_port = 0;   // glassbox serve's gRPC port (its `grpc: ADDR:PORT` line); 0: none
  std::string banner;  // the ready line
};

// `<options.server_binary> serve --model-repository REPO --http-port 0 --metrics-port -1
// --intra-op-threads <threads> [--threads <http_threads>]`, on 127.0.0.1; output to `log`.
Server start_glassbox(const std::filesystem::path& repo, const ServeBenchOptions& options,
                      const std::filesystem::path& log);
// `.venv/bin/python bench/<anchor>_server.py` serving model.model_file as model.spec.model, where
// anchor is fastapi, litserve or torchserve (the Python servers a user would pick instead).
Server start_python(const std::string& anchor, const BenchModel& model, const ServeBenchOptions& options,
                    const std::filesystem::path& log);

// {"cores", "cpu", "memory_gib", "torch", "date"} of this machine, today (UTC).
nlohmann::json machine_description();

}  // namespace glassbox::bench
