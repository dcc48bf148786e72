// The serving benchmark's plumbing (bench-internal): servers as child processes, the prebuilt
// KServe v2 binary-tensor request, the server's statistics and /proc figures.
//
//   ChildProcess server({"/proc/self/exe", "serve", "--model-repository", dir, "--http-port", "0"},
//                       dir / "server.log");
//   const std::string line = server.wait_for_line("serving: ", std::chrono::seconds(300));
//   int port = parse_serving_port(line);              // "serving: http://127.0.0.1:PORT ..."
//   HttpRequestSpec req = binary_infer_request(spec, 1, 0);
//   check_infer_reply(http_call("127.0.0.1", port, req), spec, 1, "glassbox serve");
//   server.terminate();                               // SIGTERM, then SIGKILL after the grace
//
// A ChildProcess's stdout and stderr go to its log file; it is terminated and reaped by its
// destructor (exceptions included) and gets SIGKILL if this process dies (PR_SET_PDEATHSIG).
// Thread safety: a ChildProcess belongs to one thread; the free functions are reentrant.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/http_load.h"

namespace glassbox::bench {

class ChildProcess {
 public:
  // argv[0] is the program's path (execv: no PATH lookup). Throws Unavailable if fork fails.
  ChildProcess(const std::vector<std::string>& argv, const std::filesystem::path& log_path);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool running();
  // The first log line starting with `prefix`. Throws Unavailable (with the log's tail) if the
  // process exits first or `timeout` passes.
  std::string wait_for_line(const std::string& prefix, std::chrono::milliseconds timeout);
  // SIGTERM, then SIGKILL once `grace` has passed; reaps. Returns the wait status (-1: not running).
  int terminate(std::chrono::milliseconds grace = std::chrono::seconds(15));
  // The last `bytes` of the log.
  std::string log_tail(std::size_t bytes = 1500) const;

 private:
  pid_t pid_ = -1;
  std::filesystem::path log_;
  std::string what_;  // argv[0] and argv[1], for messages
};

// The port of a "serving: http://ADDR:PORT ..." line; InvalidArgument if there is none.
int parse_serving_port(const std::string& line);

// What a model takes and returns (FP32 only).
struct InferSpec {
  std::string model;  // route name
  std::string input = "INPUT__0";
  std::string output = "OUTPUT__0";
  std::vector<std::int64_t> dims;    // one sample's shape (without the batch axis)
  std::int64_t output_elements = 0;  // per sample
};

// POST /v2/models/MODEL/infer with a binary FP32 input of [batch, dims...] (random, from `seed`)
// and the output asked for as binary: what perf_analyzer and tritonclient send by default.
HttpRequestSpec binary_infer_request(const InferSpec& spec, std::int64_t batch, std::uint64_t seed);

// Throws Internal naming `server` unless the reply is 200 with a binary output of the expected size.
void check_infer_reply(const HttpReply& reply, const InferSpec& spec, std::int64_t batch, const std::string& server);

// Cumulative statistics of one model (GET /v2/models/NAME/stats), in ns.
struct ServerStats {
  std::uint64_t success_count = 0, success_ns = 0, queue_count = 0, queue_ns = 0;
  std::uint64_t compute_input_ns = 0, compute_infer_ns = 0, compute_output_ns = 0;
  std::uint64_t execution_count = 0, inference_count = 0;
};
ServerStats fetch_stats(int port, const std::string& model);

// Per request over the interval between two snapshots (microseconds).
struct StatsDelta {
  std::uint64_t requests = 0;
  double request_us = 0, queue_us = 0, compute_us = 0, overhead_us = 0;
  double compute_input_us = 0, compute_infer_us = 0, compute_output_us = 0;  // compute_us's parts
  double mean_batch = 0;                                                     // inferences per execution
};
StatsDelta stats_delta(const ServerStats& before, const ServerStats& after);

// /proc/PID/status VmRSS in KiB (0 if unreadable); /proc/PID/stat utime+stime in seconds.
std::uint64_t rss_kib(pid_t pid);
double process_cpu_seconds(pid_t pid);  // the process and its descendants

// Waits until process `pid` uses under 5 % of a core over 200 ms (a server still working off the
// requests of connections a measurement closed); false if it is still busy after `timeout`.
bool wait_idle(pid_t pid, std::chrono::milliseconds timeout);

}  // namespace glassbox::bench
