// Per model-version statistics: Triton's counters (the statistics extension and the nv_inference_*
// metrics) and glassbox's latency histograms, accumulated by ModelRunner and read as ModelStats.
//
//   StatsRecorder s("m", 1);
//   s.record_execution(4, timings);                         // one batch of 4 elements ran
//   RequestSample r[2] = {{request_ns, queue_ns}, {...}};
//   s.record_successes(r, timings);                         // its requests, the batch's compute
//   s.record_failure(FailureReason::kRejected, request_ns); // a 503 for a full queue
//   ModelStats now = s.snapshot(pending);
//
// Meanings (Triton's): inference_count counts batch elements, execution_count model executions;
// success.ns is the request duration (received -> response); queue.ns enqueue -> execution start;
// compute_input/infer/output add, for every request of a batch, one count and the batch's whole
// duration (so queue.count and the three compute counts equal success.count); only successful
// requests add to queue and compute. batch_stats has one entry per executed batch size (of
// successful executions). fail counts failed requests with their duration, and failures counts
// them by reason: REJECTED (queue full, timed out in the queue), CANCELED (answered Unavailable at
// shutdown or unload), BACKEND (the model failed), OTHER (the request was invalid).
// Histograms (seconds, fixed buckets kLatencyBuckets, cumulative on read) observe successful
// requests: request = received -> response, queue = enqueue -> execution start,
// compute = input + infer + output of the request's batch.
// Thread safety: every member is safe from any thread (one mutex; no allocation after the first
// execution of each batch size).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>

#include "glassbox/serve/engine/api.h"
#include "glassbox/serve/engine/backend.h"

namespace glassbox::serve {

// Upper bounds of the latency histogram buckets, in seconds (+Inf is implicit).
inline constexpr std::array<double, 17> kLatencyBuckets = {
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

enum class FailureReason { kRejected, kCanceled, kBackend, kOther };
// "REJECTED", "CANCELED", "BACKEND", "OTHER" (Triton's reason label values).
const char* failure_reason_name(FailureReason reason);

// One successful request of a batch.
struct RequestSample {
  std::uint64_t request_ns = 0;  // received -> response
  std::uint64_t queue_ns = 0;    // enqueued -> its execution started
};

class StatsRecorder {
 public:
  StatsRecorder(std::string model, std::int64_t version);

  // One successful model execution over `batch_size` elements.
  void record_execution(std::int64_t batch_size, const ExecuteTimings& timings);
  // Requests answered with outputs; each adds `compute` (its batch's durations) to the compute
  // statistics.
  void record_successes(std::span<const RequestSample> requests, const ExecuteTimings& compute);
  // `count` requests that failed, each after `request_ns`.
  void record_failure(FailureReason reason, std::uint64_t request_ns, std::uint64_t count = 1);

  // A copy of everything, with `pending` (requests queued or executing now).
  ModelStats snapshot(std::uint64_t pending) const;

 private:
  struct Buckets {
    std::array<std::uint64_t, kLatencyBuckets.size()> counts{};  // per bucket, not cumulative
    std::uint64_t count = 0;
    double sum = 0;
    void observe(std::uint64_t ns);
    Histogram read() const;
  };

  const std::string model_;
  const std::string version_;
  mutable std::mutex mu_;
  std::uint64_t last_inference_ms_ = 0;
  std::uint64_t inference_count_ = 0;
  std::uint64_t execution_count_ = 0;
  DurationStat success_, fail_, queue_, compute_input_, compute_infer_, compute_output_;
  std::map<std::int64_t, BatchStat> batches_;
  std::array<std::uint64_t, 4> failures_{};  // by FailureReason
  Buckets request_, queue_hist_, compute_;
};

}  // namespace glassbox::serve
