// HttpOptions: how `glassbox serve`'s HTTP front end listens (address, ports, threads), what it
// accepts (body size, JSON depth), who may call it (API key) and how it names metrics.
//
//   serve::HttpOptions o;
//   o.http_port = 0;                 // any free port (tests)
//   o.metrics_port = -1;             // no metrics listener
//   o.api_key = "s3cret-key";        // repository control endpoints need it
//   o.validate();                    // InvalidArgument naming the option (and its CLI flag)
//
// Thread safety: a value type; HttpServer keeps its own copy.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace glassbox::serve {

// kPrometheus: names that pass `promtool check metrics` (counters end in _total, durations in
// seconds). kTriton: Triton's exact names and units (microsecond counters) for existing dashboards.
enum class MetricNames { kPrometheus, kTriton };

struct HttpOptions {
  std::string address = "0.0.0.0";
  int http_port = 8000;                      // 0: an ephemeral port (tests)
  int metrics_port = 8002;                   // 0: ephemeral; -1: no metrics listener
  int threads = 0;                           // I/O threads; 0: std::thread::hardware_concurrency() (at least 2)
  std::size_t max_body_bytes = 64ull << 20;  // after decompression too
  int max_json_depth = 100;
  std::string api_key;             // non-empty: repository control endpoints require it
  bool protect_inference = false;  // also require the key for infer / metadata
  MetricNames metric_names = MetricNames::kPrometheus;
  std::chrono::seconds idle_timeout{60};    // keep-alive connections idle longer are closed
  std::size_t max_header_bytes = 64 << 10;  // the whole request head (line + fields) -> 431 beyond
  // Slow clients. Waiting for a request's first byte is idle_timeout's; from that byte on, the
  // head must be complete within header_timeout, extended by 1 s for every min_request_rate bytes
  // received up to twice header_timeout; the body likewise within body_timeout, extended by 1 s per
  // min_request_rate bytes without a cap. A client that falls behind gets 408 and is disconnected;
  // the others are not affected (each connection has its own deadline). min_request_rate 0: no
  // extension.
  std::chrono::milliseconds header_timeout{20000};
  std::chrono::milliseconds body_timeout{20000};
  std::size_t min_request_rate = 500;  // bytes per second
  // After its last handler an I/O thread polls for this long before it sleeps in epoll_wait, so a
  // reply posted by a model instance finds it awake: waking a sleeping thread on another core costs
  // the waker 2-50 us (50 on some VMs, where the instance then cannot start the next batch).
  // 0: sleep at once. An idle server never spins longer than this after its last event.
  std::chrono::microseconds busy_poll{200};

  // InvalidArgument naming the option.
  void validate() const;
  // The I/O thread count `threads` resolves to.
  int resolved_threads() const;
};

}  // namespace glassbox::serve
