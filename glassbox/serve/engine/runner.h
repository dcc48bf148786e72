// ModelRunner: the scheduler of one loaded model version — Triton's dynamic batcher (or the
// default one-request-at-a-time scheduler when the config has no dynamic_batching), a pool of
// config.instance_group[*].count instance threads, request validation and statistics.
//
//   auto runner = std::make_unique<ModelRunner>(entry.config, 1, backend, RunnerOptions{});
//   runner->submit(std::move(request), std::move(done));    // validates, queues; never throws
//   ModelStats s = runner->stats();
//   runner->drain(std::chrono::seconds(10));                // queued + in-flight requests finish
//
// Batching follows Triton's semantics (see batcher.h): batches of equal non-batch shapes, never
// over max_batch_size, a preferred size is sent at once, otherwise the oldest request waits at
// most max_queue_delay_microseconds; priority levels; queue policy (max_queue_size -> 503
// "Exceeds maximum queue size", default_timeout_microseconds -> 503 "Request timeout expired").
// Requests larger than max_batch_size are refused (400) unless splitting is enabled
// (parameters { key: "glassbox.split_large_requests" value: { string_value: "true" } } or
// RunnerOptions), then they run as several batches and their outputs are joined (the first
// error wins). dynamic_batching.preserve_ordering: responses are delivered in arrival order.
// Validation messages are listed in validate.h, statistics in stats.h.
//
// Threads: config.instance_group[*].count instance threads (count 0 means 1; no group: one), each
// creating its instance and running batches; an idle instance forms the next batch itself. When
// a queue policy has timeouts, one more thread answers requests whose deadline passes while
// every instance is busy. Callbacks run on these threads (or inline in submit() for requests
// refused up front: invalid, queue full, closed), never under a lock, exactly once each; an
// exception a callback throws is swallowed.
// Errors given to callbacks: InvalidArgument (validate.h), ResourceExhausted "Exceeds maximum
// queue size", Unavailable "Request timeout expired", Unavailable `why` (after close(why), or
// for requests still queued when drain() times out), and whatever the backend threw (its
// glassbox::Error as is; other exceptions as Internal "model 'm' version N failed: ...").
// Thread safety: all members may be called from any thread. The destructor closes the runner,
// drains it for at most 100 ms (then answers every queued request with Unavailable), waits for
// executing batches and joins its threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>

#include "glassbox/export/model_config.h"
#include "glassbox/monitor/runtime.h"
#include "glassbox/serve/engine/api.h"
#include "glassbox/serve/engine/backend.h"

namespace glassbox::serve {

struct RunnerOptions {
  bool split_large_requests = false;  // the default when the config's parameter is absent
  // When set, each executed batch's sampled requests (the profile's input, the class scores, the
  // latency) are handed to the monitor in one call, on the instance thread, after their answers.
  std::shared_ptr<monitor::ModelMonitor> monitor = nullptr;
  // Output name -> its label file's lines (config label_filename): the classification extension's
  // labels.
  std::map<std::string, std::vector<std::string>> labels = {};
};

class ModelRunner {
 public:
  // Starts the instance threads; each creates its instance (backend->create_instance) and warms it
  // up. Returns when every instance is ready; rethrows the first instance's failure (after
  // stopping the others).
  ModelRunner(const exporter::triton::ModelConfig& config, std::int64_t version, std::shared_ptr<Backend> backend,
              const RunnerOptions& options = {});
  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  // Validates `request` against the config (inputs, datatypes, shapes, batch size, outputs,
  // priority, timeout); on error calls `done` inline with InvalidArgument naming the input, the
  // model, the expected and the received value. Otherwise queues it.
  void submit(InferRequest request, InferCallback done);

  // Requests queued or executing.
  std::size_t pending() const;
  ModelStats stats() const;

  // No new requests are accepted (Unavailable "model 'm' is unloading"/"server is shutting down").
  void close(const std::string& why);
  // Waits until nothing is queued or executing, at most `timeout`; true when drained. Requests
  // still queued at the deadline are answered with Unavailable.
  bool drain(std::chrono::milliseconds timeout);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace glassbox::serve
