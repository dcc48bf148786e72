// A closed-loop HTTP/1.1 load generator (Boost.Beast on Asio) for the serving benchmark and the
// soak test: N keep-alive connections each send one prebuilt request, wait for its response and
// send it again, for a warm-up period and then a measured window. It records per-request latency
// in an HDR-style histogram (fixed memory, ~0.8 % relative precision), status counts,
// throughput and its own process CPU time over the window, so a report can say how much of the
// machine the client took.
//
//   HttpRequestSpec req;
//   req.target = "/v2/models/mlp/infer";
//   req.headers = {{"Content-Type", "application/octet-stream"}, {"Inference-Header-Content-Length", "187"}};
//   req.body = json_header + tensor_bytes;                  // serialized once, sent by every connection
//   LoadOptions o; o.port = 8000; o.connections = 64; o.seconds = 5;
//   LoadResult r = run_load(req, o);
//   std::cout << r.throughput() << " infer/s, p99 " << r.latency.percentile_us(99) << " us\n";
//   HttpReply stats = http_call("127.0.0.1", 8000, get("/v2/models/mlp/stats"));
//
// Design: one io_context run by `threads` threads (1-2); each connection lives on its own strand
// and has exactly one operation in flight, so its handlers never race; shared counters are
// relaxed atomics; the request bytes are serialized once and written as they are; the response
// parser reuses its body string's capacity, so a request allocates nothing beyond Beast's header
// fields. A connection that fails (refused, reset, closed by the server) is counted, closed and
// reconnected after 10 ms; a response with `Connection: close` reconnects too.
// Thread safety: run_load and http_call are reentrant; run_load blocks the calling thread for
// warmup + seconds, joins every thread it starts before returning, and calls on_tick on the calling
// thread. LatencyHistogram is a value type (not synchronised).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace glassbox::bench {

// Latencies from 1 ns to ~275 s: per power of two, 128 linear sub-buckets.
class LatencyHistogram {
 public:
  void record(std::int64_t ns);
  void merge(const LatencyHistogram& other);
  std::uint64_t count() const { return count_; }
  // q in [0, 100]; 0 when empty. The value is the upper edge of the bucket holding the q-th
  // observation (never below the true value, at most ~0.8 % above it).
  double percentile_us(double q) const;
  double mean_us() const;
  double max_us() const { return static_cast<double>(max_ns_) / 1e3; }
  double min_us() const { return count_ == 0 ? 0.0 : static_cast<double>(min_ns_) / 1e3; }

 private:
  static constexpr int kSubBits = 7;       // 128 sub-buckets per power of two
  static constexpr int kMaxExponent = 37;  // values up to 2^38 ns (~275 s); larger ones are clamped
  static constexpr std::size_t kBuckets = static_cast<std::size_t>(kMaxExponent - kSubBits + 2) << kSubBits;
  static std::size_t bucket_of(std::uint64_t ns);
  static std::uint64_t upper_edge(std::size_t bucket);

  std::array<std::uint64_t, kBuckets> counts_{};
  std::uint64_t count_ = 0;
  double sum_ns_ = 0;
  std::uint64_t max_ns_ = 0;
  std::uint64_t min_ns_ = 0;
};

// One request, serialized once (Host and Content-Length are added).
struct HttpRequestSpec {
  std::string method = "POST";
  std::string target;  // "/v2/models/NAME/infer"
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};
// A GET of `target` with no body.
HttpRequestSpec get_request(std::string target);

// What on_tick sees: cumulative counts since the start (warm-up included).
struct LoadProgress {
  double elapsed_s = 0;
  bool measuring = false;       // inside the measured window
  std::uint64_t completed = 0;  // responses of any status
  std::uint64_t failed = 0;     // responses other than 2xx + transport errors
};

struct LoadOptions {
  std::string host = "127.0.0.1";  // an IPv4/IPv6 address (no name lookup)
  int port = 0;
  int connections = 1;  // concurrency: requests in flight at any time
  int threads = 1;      // io_context threads (1-2 suffice for tens of thousands of requests/s)
  double warmup_seconds = 1.0;
  double seconds = 5.0;                              // the measured window
  double tick_seconds = 0;                           // > 0: call on_tick this often
  std::function<void(const LoadProgress&)> on_tick;  // runs on run_load's calling thread
  // InvalidArgument naming the option.
  void validate() const;
};

struct LoadResult {
  double seconds = 0;                          // the measured window, as it ran
  std::uint64_t completed = 0;                 // responses that arrived in the window
  std::uint64_t ok = 0;                        // of those, 2xx
  std::map<int, std::uint64_t> status_counts;  // window: status -> responses
  std::uint64_t transport_errors = 0;          // window: connect/read/write failures, closed connections
  std::uint64_t failed_total = 0;              // whole run (warm-up too): non-2xx + transport errors
  std::uint64_t completed_total = 0;           // whole run: responses of any status
  std::string first_failure;                   // "HTTP 503: {...}" or "read: Connection reset by peer"
  LatencyHistogram latency;                    // client-side latency of the window's 2xx responses
  std::uint64_t response_bytes = 0;            // window: body bytes of 2xx responses
  double cpu_seconds = 0;                      // this process's user+system CPU over the window

  double throughput() const { return seconds > 0 ? static_cast<double>(ok) / seconds : 0.0; }
  double cpu_cores() const { return seconds > 0 ? cpu_seconds / seconds : 0.0; }
};

// Runs the closed loop for warmup_seconds + seconds and returns the window's figures. Throws
// InvalidArgument for bad options and Unavailable when no connection could be opened at all.
LoadResult run_load(const HttpRequestSpec& request, const LoadOptions& options);

struct HttpReply {
  int status = 0;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // The first header named `name` (case-insensitive), or "".
  std::string header(const std::string& name) const;
};

// One request on a fresh connection. Throws Unavailable naming the address and the failure
// (refused, timed out, malformed response).
HttpReply http_call(const std::string& host, int port, const HttpRequestSpec& request,
                    std::chrono::milliseconds timeout = std::chrono::seconds(30));

}  // namespace glassbox::bench
