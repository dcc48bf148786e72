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
// RunnerOptions), then they run as several batches and their outputs are joined.
// Thread safety: all members may be called from any thread. The destructor stops the instance
// threads after answering every queued request with Unavailable.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "glassbox/export/model_config.h"
#include "glassbox/serve/engine/api.h"
#include "glassbox/serve/engine/backend.h"

namespace glassbox::serve {

struct RunnerOptions {
  bool split_large_requests = false;  // the default when the config's parameter is absent
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
