// The monitor of one served model version: requests and outputs handed off by the server, tumbling
// windows of N predictions or T seconds compared with the reference profile, alarms, and what the
// metrics endpoint and GET .../monitor show.
//
//   ModelMonitor m("fashion", 1, read_reference(version_dir), options);
//   m.offer(requests);                 // a batch's sampled requests, once answered; never blocks
//   MonitorSnapshot s = m.snapshot();  // windows, alarms, counters
//
// Off the request path: the server hands over each executed batch's sampled requests at once,
// after their answers went out; offer() takes a short lock and writes into a buffer reused from
// batch to batch (no allocation; every request buffer stays with the thread that made it) an FP32
// image's features, computed there while its pixels are in the cache, or any other tensor's
// bytes, or counts a request dropped when the buffer holds `queue_bytes` already. One thread per
// monitor (under SCHED_IDLE) swaps that buffer for its own every 10 ms, turns the requests into
// features, fills the window, and closes it when it holds `window_predictions` predictions or
// `window_seconds` passed since its first one.
// Options come from the server's flags and the model's config.pbtxt parameters
// (`glassbox.monitor.<option>`, MonitorOptions::set).
//
// Torch-free. Thread safety: every member may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/monitor/alarms.h"
#include "glassbox/monitor/window.h"

namespace glassbox::monitor {

struct MonitorOptions {
  bool enabled = true;
  double sample_rate = 1.0;  // the share of requests observed
  std::int64_t window_predictions = 1000;
  double window_seconds = 60;
  std::size_t keep_windows = 60;       // reports kept for GET .../monitor
  std::size_t queue_bytes = 8u << 20;  // tensors waiting for the thread, at most (per buffer)
  // A served model closes a window every minute or so, so each window's tests run at a family-wise
  // level of 0.001 (about one false alarm a day at one window a minute), not the 0.05 of a single
  // comparison; out-of-range values get 0.1 % of the range as slack for float rounding; the KS
  // p-values are Smirnov's limit (scipy's method="asymp"), as accurate as the exact count at a
  // window's size and a hundred times cheaper.
  DriftOptions drift{.alpha = 0.001, .range_tolerance = 0.001, .exact_ks = false};
  AlarmOptions alarms;

  // One option by name (`window_predictions`, `alpha`, `latency_p99_ms`, ...: options()), from its
  // text; InvalidArgument naming the option and the accepted values.
  void set(const std::string& name, const std::string& value);
  static const std::vector<std::string>& options();
  void validate() const;
};

// Element types of the served tensors the monitor reads (KServe's datatypes).
enum class ElementType {
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
  kBf16
};

// A tensor as the server holds it: row-major, little-endian, viewed in `owner`.
struct RawTensor {
  ElementType type = ElementType::kFp32;
  std::vector<std::int64_t> shape;
  std::shared_ptr<const void> owner;
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;  // bytes
};

// The monitor's and the payload logger's threads run under SCHED_IDLE (or, where refused, at this
// nice level): on a saturated server they get the processor time the inference threads leave, and
// what they cannot take in time is dropped and counted rather than taken from inference.
constexpr int kMonitorNice = 10;
void lower_thread_priority();

// Elements [first, first + out.size()) of `t` as doubles (any element type but BYTES).
void read_elements_for_compare(const RawTensor& t, std::size_t first, std::span<double> out);

// A served tensor handed to offer(): read during the call only.
struct TensorBytes {
  ElementType type = ElementType::kFp32;
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;      // bytes
  std::size_t elements = 0;  // values (the product of its shape)
};

// One request as offer() takes it: its monitored input and class scores when the server had them.
struct Offered {
  std::optional<TensorBytes> input, output;
  double latency_ms = -1;  // received -> response; negative: unknown
};

// One request with its tensors (tests, tools).
struct Observation {
  std::optional<RawTensor> input;
  std::optional<RawTensor> output;
  double latency_ms = -1;  // received -> response; negative: unknown
};

struct WindowRecord {
  std::int64_t index = 0;     // 1, 2, ... since the monitor started
  double start = 0, end = 0;  // Unix time (seconds) of its first prediction and of its close
  WindowReport report;
  double latency_p50_ms = -1, latency_p99_ms = -1, latency_max_ms = -1;  // of its requests
  std::int64_t requests = 0;
  nlohmann::json to_json() const;
};

struct MonitorSnapshot {
  std::string model;
  std::int64_t version = 0;
  MonitorOptions options;
  std::vector<std::string> features;  // monitored input features, in order
  std::vector<std::string> classes;
  std::int64_t requests_total = 0, predictions_total = 0, dropped_total = 0, windows_total = 0;
  std::int64_t input_values_total = 0, out_of_range_total = 0, non_finite_total = 0;
  std::int64_t unreadable_total = 0;                  // requests whose tensors did not fit the profile
  std::int64_t current_window = 0;                    // predictions in the open window
  std::vector<WindowRecord> windows;                  // the latest `keep_windows`, oldest first
  std::vector<Alarm> alarms;                          // active now
  std::map<std::string, std::int64_t> alarms_raised;  // kind -> times it became active
  // {"model", "version", "windows": [...], "alarms": [...], "totals": {...}, "features", "classes",
  //  "options"}
  nlohmann::json to_json() const;
};

class ModelMonitor {
 public:
  ModelMonitor(std::string model, std::int64_t version, Reference reference, MonitorOptions options);
  ~ModelMonitor();
  ModelMonitor(const ModelMonitor&) = delete;
  ModelMonitor& operator=(const ModelMonitor&) = delete;

  const Reference& reference() const { return reference_; }
  // Whether to observe the next request (the sample rate, spread evenly).
  bool sample();
  // Changes the sample rate while serving: 0 pauses the monitor, 1 observes every request.
  // InvalidArgument outside [0, 1].
  void set_sample_rate(double rate);
  // Queues a copy of each request's monitored input and class scores, or counts it dropped. Never
  // blocks on the monitor's work, never throws.
  void offer(std::span<const Offered> requests) noexcept;
  void offer(const Observation& observation) noexcept;
  // Processes everything queued, then closes the open window if it holds predictions.
  void flush();
  MonitorSnapshot snapshot() const;

 private:
  // A queued tensor: `size` bytes at `offset` in its batch's bytes; for an input whose features
  // offer() extracted (`extracted`), per sample its InputCounts and then its features (doubles).
  struct Slot {
    bool present = false;
    bool extracted = false;
    ElementType type = ElementType::kFp32;
    std::size_t elements = 0, offset = 0, size = 0;
  };
  struct Queued {
    Slot input, output;
    double latency_ms = -1;
  };
  // The requests queued between two looks of the thread; its storage is kept from batch to batch.
  struct Batch {
    std::unique_ptr<std::uint8_t[]> bytes;
    std::size_t capacity = 0, used = 0;
    std::vector<Queued> requests;
  };
  void loop();
  // Room for `bytes` more in queue_ (grown towards queue_bytes, or to one request's size).
  void reserve_queue(std::size_t bytes);
  // The features of an FP32 image input, extracted into queue_ where the fast path applies.
  bool queue_features(const TensorBytes& input, Slot& slot);
  void process(const Queued& q, const std::uint8_t* bytes);
  void close_window();

  const std::string model_;
  const std::int64_t version_;
  const Reference reference_;
  const MonitorOptions options_;
  const std::optional<FeatureExtractor> extractor_;  // none: the inputs are not monitored

  std::atomic<std::uint64_t> offered_{0};
  std::atomic<double> sample_rate_;
  mutable std::mutex queue_mu_;
  std::condition_variable queue_cv_, flushed_cv_;
  Batch queue_;  // filled by offer(), swapped by the thread for its own
  std::uint64_t flush_requested_ = 0, flush_done_ = 0;
  bool stop_ = false;
  std::atomic<std::int64_t> dropped_{0};

  // The monitor thread's own state.
  Window window_;
  std::vector<double> latencies_, sample_, features_, probs_;
  double window_start_ = 0;
  std::chrono::steady_clock::time_point window_started_;
  AlarmTracker alarms_;

  mutable std::mutex state_mu_;  // what snapshot() reads
  MonitorSnapshot state_;

  std::thread thread_;
};

}  // namespace glassbox::monitor
