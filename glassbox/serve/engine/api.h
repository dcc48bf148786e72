// The serving engine's torch-free interface: what the HTTP front end (glassbox/serve/http, which
// never sees LibTorch) and the CLI use to run a model repository. The implementation lives in
// engine.cpp (LibTorch, TorchScript backends, dynamic batcher); `make_engine` is its factory.
//
//   EngineOptions o;
//   o.repository = "runs/quickstart/export/repository";
//   std::unique_ptr<Engine> engine = make_engine(o);       // loads every model (mode none)
//   InferRequest r;
//   r.model = "quickstart";
//   r.inputs.push_back(Tensor::owning("INPUT__0", DataType::kFp32, {1, 1, 28, 28}, bytes));
//   engine->infer(std::move(r), [](InferOutcome out) {
//     if (out.error) std::cerr << out.error->one_line() << "\n";
//     else use(out.response.outputs);
//   });
//   engine->begin_shutdown();          // readiness false; new requests get 503
//   engine->drain(std::chrono::seconds(30));
//
// Errors are glassbox::Error; the front end maps codes to HTTP statuses once:
//   InvalidArgument -> 400 (bad request, unknown model), NotFound -> 404 (unknown version),
//   FailedPrecondition -> 400 (model not ready / not loaded), ResourceExhausted -> 503 (queue
//   full), Unavailable -> 503 (timeout, shutting down), PermissionDenied-like checks are the front
//   end's, Internal/DataLoss -> 500.
// Thread safety: every Engine member is safe to call from any number of threads at once. Callbacks
// run on an engine thread (or inline, before infer() returns, for requests rejected up front);
// they must not block for long. Each callback runs exactly once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "glassbox/base/error.h"
#include "glassbox/monitor/payload_log.h"
#include "glassbox/monitor/runtime.h"

namespace glassbox::serve {

// KServe v2 datatypes (config enum TYPE_<name>; BYTES is TYPE_STRING).
enum class DataType {
  kBool,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFp16,
  kFp32,
  kFp64,
  kBf16,
  kBytes
};

// "FP32" for kFp32 ...; "BYTES" for kBytes.
const char* datatype_name(DataType type);
// The inverse; nullopt for anything else (case-sensitive, as the protocol).
std::optional<DataType> parse_datatype(std::string_view name);
// Bytes per element; 0 for kBytes (variable length).
std::size_t element_size(DataType type);

// Product of the dimensions (1 for a scalar shape {}); -1 if any dimension is negative.
std::int64_t element_count(std::span<const std::int64_t> shape);
// "[-1,1,28,28]": how shapes appear in messages.
std::string shape_string(std::span<const std::int64_t> shape);

// A tensor as it crosses the wire, on the host. Fixed-size types: `size` = elements x element
// size bytes, little-endian, row-major. BYTES: each element is a 4-byte little-endian length then
// that many bytes (the binary tensor extension's layout), so `size` is the serialized size.
// The bytes are borrowed from `owner` (a request body, a model's output tensor, or an owned
// string): copying a Tensor copies the handle, not the data. Immutable once built.
struct Tensor {
  std::string name;
  DataType datatype = DataType::kFp32;
  std::vector<std::int64_t> shape;
  std::shared_ptr<const void> owner;  // keeps `data` alive
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;

  std::span<const std::uint8_t> bytes() const { return {data, size}; }
  std::int64_t element_count() const { return serve::element_count(shape); }

  // A tensor that owns `bytes`.
  static Tensor owning(std::string name, DataType type, std::vector<std::int64_t> shape, std::string bytes);
  // A tensor viewing [data, data + size) inside `owner`.
  static Tensor view(std::string name, DataType type, std::vector<std::int64_t> shape,
                     std::shared_ptr<const void> owner, const std::uint8_t* data, std::size_t size);
};

// What the monitor reads of a tensor (its bytes, valid while the tensor is); none for BYTES.
std::optional<monitor::TensorBytes> monitor_bytes(const Tensor& t);
// The payload logger's view of a tensor (shared, not copied); none for BYTES.
std::optional<monitor::RawTensor> monitor_tensor(const Tensor& t);

// One output the client asked for. An empty InferRequest::outputs means every output.
struct RequestedOutput {
  std::string name;
  bool binary = false;  // the front end's concern (binary_data); carried through untouched
  // The classification extension: > 0 answers this output with its top class_count entries per
  // batch item as BYTES "score:index:label" (classification.h) instead of the scores.
  std::uint32_t class_count = 0;
};

struct InferRequest {
  std::string model;
  std::int64_t version = 0;  // 0: the highest ready version
  std::string id;            // echoed in the response
  std::vector<Tensor> inputs;
  std::vector<RequestedOutput> outputs;
  std::uint32_t priority = 0;    // 0: the model's default level; 1 is the highest
  std::uint64_t timeout_us = 0;  // 0: the queue policy's default (when the policy allows overrides)
  std::chrono::steady_clock::time_point received = std::chrono::steady_clock::now();
};

struct InferResponse {
  std::string model;
  std::int64_t version = 0;
  std::string id;
  std::vector<Tensor> outputs;             // in the order requested (config order when all)
  std::vector<RequestedOutput> requested;  // the request's list, as sent (for binary flags)
};

struct InferOutcome {
  InferResponse response;      // valid when !error
  std::optional<Error> error;  // why the request failed
};
using InferCallback = std::function<void(InferOutcome)>;

// Metadata (GET /v2/models/NAME): shapes carry -1 for the batch axis and variable dimensions.
struct TensorSpec {
  std::string name;
  DataType datatype = DataType::kFp32;
  std::vector<std::int64_t> shape;
};
struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;  // the ready versions, ascending ("1", "2")
  std::string platform;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
};

struct ServerMetadata {
  std::string name = "glassbox";
  std::string version;                  // glassbox's version
  std::vector<std::string> extensions;  // only what is complete
};

// Statistics extension (GET /v2/models/NAME/stats), Triton's field meanings.
struct DurationStat {
  std::uint64_t count = 0;
  std::uint64_t ns = 0;
};
struct BatchStat {
  std::int64_t batch_size = 0;
  DurationStat compute_input, compute_infer, compute_output;
};
// A latency histogram in seconds: counts[i] = observations <= bounds[i] (cumulative, Prometheus
// style); the last bucket (+Inf) is `count`.
struct Histogram {
  std::vector<double> bounds;
  std::vector<std::uint64_t> cumulative;  // same length as bounds
  std::uint64_t count = 0;
  double sum = 0;  // seconds
};
struct ModelStats {
  std::string name;
  std::string version;
  std::uint64_t last_inference_ms = 0;  // ms since the Unix epoch; 0: never
  std::uint64_t inference_count = 0;    // batch elements inferred
  std::uint64_t execution_count = 0;    // model executions (batches)
  DurationStat success, fail, queue, compute_input, compute_infer, compute_output, cache_hit, cache_miss;
  std::vector<BatchStat> batch_stats;  // ascending batch_size
  // For Prometheus (Triton's counters and glassbox's histograms).
  std::map<std::string, std::uint64_t> failures;  // reason (REJECTED, CANCELED, BACKEND, OTHER) -> count
  std::uint64_t pending = 0;                      // requests queued or executing now
  Histogram request_seconds, queue_seconds, compute_seconds;
};

// Repository index (POST /v2/repository/index).
struct IndexEntry {
  std::string name;
  std::string version;  // empty for a model that has no loaded version
  std::string state;    // READY | UNAVAILABLE | LOADING | UNLOADING
  // UNAVAILABLE: why. READY: what of config.pbtxt was skipped (Triton fields glassbox does not
  // implement), empty when nothing was.
  std::string reason;
};

// A model of the startup set, or one version of it, that did not load.
struct LoadFailure {
  std::string model;
  std::string version;  // empty: no version was tried (the config, no version folder)
  Error error;
};

// What make_engine loaded: the startup set (mode none: every model directory; explicit: the
// startup models), which of them serve, and what failed.
struct StartupReport {
  std::vector<std::string> models;    // the startup set, sorted
  std::vector<std::string> serving;   // those with at least one READY version
  std::vector<LoadFailure> failures;  // in model order, then version order
};

enum class ModelControlMode { kNone, kExplicit };

struct EngineOptions {
  std::filesystem::path repository;
  ModelControlMode control_mode = ModelControlMode::kNone;
  std::vector<std::string> startup_models;  // explicit mode: loaded at start ("*" = all)
  // Fields of Triton's model configuration that glassbox does not implement: an error that makes
  // the model UNAVAILABLE (true) or skipped with a warning in the index (false). A field in no
  // Triton message, a wrong type or an unknown enum value makes the model UNAVAILABLE either way.
  bool strict_config = false;
  bool split_large_requests = false;  // default for models whose config does not say
  int default_intra_op_threads = 0;   // 0: LibTorch's default; a model's INTRA_OP_THREAD_COUNT wins
  // Monitoring: each version whose folder holds a reference profile (profile.json, written by
  // glassbox export) is watched with these options, which its config.pbtxt parameters
  // `glassbox.monitor.<option>` override (`glassbox.monitor.enabled` "false" turns it off).
  // monitor = false turns it off for every model.
  bool monitor = true;
  monitor::MonitorOptions monitor_options;
  // Payload logging (payload_log.dir non-empty): sampled requests and responses of every model
  // written under the folder (glassbox/monitor/payload_log.h); never fails a request.
  monitor::PayloadLogOptions payload_log;
  // InvalidArgument naming the option.
  void validate() const;
};

class Engine {
 public:
  virtual ~Engine() = default;

  virtual ServerMetadata server_metadata() const = 0;
  virtual bool live() const = 0;
  // Every model that should be up is ready, and no shutdown has begun.
  virtual bool ready() const = 0;

  // version 0: any ready version. Throws Error (InvalidArgument unknown model, NotFound unknown
  // version, FailedPrecondition not ready).
  virtual ModelMetadata model_metadata(const std::string& model, std::int64_t version) const = 0;
  virtual bool model_ready(const std::string& model, std::int64_t version) const = 0;
  virtual std::string model_config_json(const std::string& model, std::int64_t version) const = 0;

  // Validates the request against the model, queues it and calls `done` once with the result.
  // Never throws.
  virtual void infer(InferRequest request, InferCallback done) = 0;

  // model empty: every model; version 0: every loaded version.
  virtual std::vector<ModelStats> statistics(const std::string& model, std::int64_t version) const = 0;

  virtual std::vector<IndexEntry> repository_index(bool ready_only) const = 0;
  // The models make_engine loaded and what failed (fixed at construction).
  virtual StartupReport startup_report() const = 0;
  // Explicit mode only (FailedPrecondition otherwise). Load (or reload) a model from the
  // repository; `config_json`, when non-empty, overrides config.pbtxt (Triton's "config" parameter).
  virtual void load_model(const std::string& model, const std::string& config_json) = 0;
  // Queued and in-flight requests of the model finish first.
  virtual void unload_model(const std::string& model) = 0;

  // Monitoring: the version's windows and alarms (version 0: the highest ready version). Throws as
  // model_metadata does, and FailedPrecondition naming why the version is not monitored.
  virtual monitor::MonitorSnapshot monitor_snapshot(const std::string& model, std::int64_t version) const;
  // Changes the version's monitor sample rate while serving (0 pauses it); returns the snapshot.
  // Throws as monitor_snapshot does, and InvalidArgument outside [0, 1].
  virtual monitor::MonitorSnapshot set_monitor_sample_rate(const std::string& model, std::int64_t version, double rate);
  // Every monitored version's snapshot (the metrics endpoint).
  virtual std::vector<monitor::MonitorSnapshot> monitor_snapshots() const { return {}; }
  // The payload logger's counters; none when payload logging is off.
  virtual std::optional<monitor::PayloadLogger::Stats> payload_log_stats() const { return std::nullopt; }

  // Readiness goes false; new requests get Unavailable ("server is shutting down").
  virtual void begin_shutdown() = 0;
  // Waits until no request is queued or executing, at most `timeout`; true when drained.
  // Requests still queued at the deadline are answered with Unavailable.
  virtual bool drain(std::chrono::milliseconds timeout) = 0;
};

// The engine over a model repository (engine.cpp). Loads the models (mode none: all; explicit:
// options.startup_models) before returning; a model that fails to load is UNAVAILABLE in the index
// with its reason while the others serve (startup_report() lists the failures; whether to go on
// is the caller's choice). Throws InvalidArgument/NotFound for bad options, NotFound for a
// repository that does not exist or is not a directory, FailedPrecondition for one that cannot
// be read.
std::unique_ptr<Engine> make_engine(const EngineOptions& options);

// Versions are numbered from 1; the engine's version 0 means "the highest ready one", which a
// client asks for by naming no version. A client that names version 0 gets Triton's answer:
// InvalidArgument "Request for unknown model: 'm' is not found" when the repository has no model
// `model`, else NotFound "Request for unknown model: 'm' version 0 is not found".
Error explicit_version_zero(const Engine& engine, const std::string& model);

}  // namespace glassbox::serve
