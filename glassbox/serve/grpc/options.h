// GrpcOptions: how `glassbox serve`'s gRPC front end listens (address, port), what it accepts
// (message sizes), who may call it (API key) and how it keeps idle connections (HTTP/2 keep-alive).
//
//   serve::GrpcOptions o;
//   o.port = 0;                      // any free port (tests); -1: no gRPC listener
//   o.api_key = "s3cret-key";        // RepositoryModelLoad/Unload and RepositoryIndex need it
//   o.validate();                    // InvalidArgument naming the option (and its CLI flag)
//
// The defaults are Triton's: messages up to INT_MAX bytes both ways (gRPC's own limit is 4 MiB;
// tritonclient.grpc raises its side to INT_MAX too), keep-alive pings every 2 hours answered
// within 20 s, no pings without calls, at most 2 pings without data, clients' pings no more often
// than every 5 minutes without data (2 strikes, then the connection is closed).
// Thread safety: a value type; GrpcServer keeps its own copy.
#pragma once

#include <chrono>
#include <climits>
#include <string>

namespace glassbox::serve {

struct GrpcOptions {
  std::string address = "0.0.0.0";
  int port = 8001;  // 0: an ephemeral port (tests); -1: no gRPC listener
  int max_receive_bytes = INT_MAX;
  int max_send_bytes = INT_MAX;
  std::string api_key;             // non-empty: the repository RPCs require it
  bool protect_inference = false;  // also require the key for inference, metadata, config, statistics
  // HTTP/2 keep-alive (gRPC channel arguments GRPC_ARG_KEEPALIVE_* and GRPC_ARG_HTTP2_*).
  std::chrono::milliseconds keepalive_time{7'200'000};         // ping an idle connection this often
  std::chrono::milliseconds keepalive_timeout{20'000};         // close it when the ping is not answered
  bool keepalive_permit_without_calls = false;                 // ping connections that have no call
  int http2_max_pings_without_data = 2;                        // 0: no limit
  std::chrono::milliseconds http2_min_ping_interval{300'000};  // clients' pings closer are strikes
  int http2_max_ping_strikes = 2;                              // 0: no limit
  // I/O threads, each serving its share of the connections (0: one per core, at least 2), and
  // how long each polls after its last event before it sleeps (0: sleep at once).
  int threads = 0;
  std::chrono::microseconds busy_poll{200};
  // At stop(): how long calls in flight may take before they are cancelled.
  std::chrono::milliseconds stop_grace{2000};

  bool enabled() const { return port >= 0; }
  int resolved_threads() const;
  // InvalidArgument naming the option.
  void validate() const;
};

}  // namespace glassbox::serve
