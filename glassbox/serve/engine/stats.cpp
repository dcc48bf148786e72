// Per model-version statistics (stats.h).
#include "glassbox/serve/engine/stats.h"

#include <algorithm>
#include <chrono>

namespace glassbox::serve {
namespace {

void add(DurationStat& d, std::uint64_t ns, std::uint64_t count = 1) {
  d.count += count;
  d.ns += ns * count;
}

std::uint64_t epoch_ms() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

}  // namespace

const char* failure_reason_name(FailureReason reason) {
  switch (reason) {
    case FailureReason::kRejected: return "REJECTED";
    case FailureReason::kCanceled: return "CANCELED";
    case FailureReason::kBackend: return "BACKEND";
    case FailureReason::kOther: return "OTHER";
  }
  return "OTHER";
}

void StatsRecorder::Buckets::observe(std::uint64_t ns) {
  const double s = static_cast<double>(ns) * 1e-9;
  const auto it = std::lower_bound(kLatencyBuckets.begin(), kLatencyBuckets.end(), s);
  if (it != kLatencyBuckets.end()) ++counts[static_cast<std::size_t>(it - kLatencyBuckets.begin())];
  ++count;
  sum += s;
}

Histogram StatsRecorder::Buckets::read() const {
  Histogram h;
  h.bounds.assign(kLatencyBuckets.begin(), kLatencyBuckets.end());
  h.cumulative.resize(counts.size());
  std::uint64_t running = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) h.cumulative[i] = running += counts[i];
  h.count = count;
  h.sum = sum;
  return h;
}

StatsRecorder::StatsRecorder(std::string model, std::int64_t version)
    : model_(std::move(model)), version_(std::to_string(version)) {}

void StatsRecorder::record_execution(std::int64_t batch_size, const ExecuteTimings& timings) {
  const std::uint64_t now_ms = epoch_ms();
  std::lock_guard<std::mutex> lock(mu_);
  last_inference_ms_ = now_ms;
  inference_count_ += static_cast<std::uint64_t>(batch_size);
  ++execution_count_;
  BatchStat& b = batches_[batch_size];  // allocates only for a batch size seen first
  b.batch_size = batch_size;
  add(b.compute_input, timings.input_ns);
  add(b.compute_infer, timings.infer_ns);
  add(b.compute_output, timings.output_ns);
}

void StatsRecorder::record_successes(std::span<const RequestSample> requests, const ExecuteTimings& compute) {
  const std::uint64_t n = requests.size();
  const std::uint64_t compute_ns = compute.input_ns + compute.infer_ns + compute.output_ns;
  std::lock_guard<std::mutex> lock(mu_);
  add(compute_input_, compute.input_ns, n);
  add(compute_infer_, compute.infer_ns, n);
  add(compute_output_, compute.output_ns, n);
  for (const RequestSample& r : requests) {
    add(success_, r.request_ns);
    add(queue_, r.queue_ns);
    request_.observe(r.request_ns);
    queue_hist_.observe(r.queue_ns);
    compute_.observe(compute_ns);
  }
}

void StatsRecorder::record_failure(FailureReason reason, std::uint64_t request_ns, std::uint64_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  add(fail_, request_ns, count);
  failures_[static_cast<std::size_t>(reason)] += count;
}

ModelStats StatsRecorder::snapshot(std::uint64_t pending) const {
  ModelStats s;
  s.name = model_;
  s.version = version_;
  s.pending = pending;
  std::lock_guard<std::mutex> lock(mu_);
  s.last_inference_ms = last_inference_ms_;
  s.inference_count = inference_count_;
  s.execution_count = execution_count_;
  s.success = success_;
  s.fail = fail_;
  s.queue = queue_;
  s.compute_input = compute_input_;
  s.compute_infer = compute_infer_;
  s.compute_output = compute_output_;
  s.batch_stats.reserve(batches_.size());
  for (const auto& [size, b] : batches_) s.batch_stats.push_back(b);
  for (FailureReason r :
       {FailureReason::kRejected, FailureReason::kCanceled, FailureReason::kBackend, FailureReason::kOther}) {
    s.failures[failure_reason_name(r)] = failures_[static_cast<std::size_t>(r)];
  }
  s.request_seconds = request_.read();
  s.queue_seconds = queue_hist_.read();
  s.compute_seconds = compute_.read();
  return s;
}

}  // namespace glassbox::serve
