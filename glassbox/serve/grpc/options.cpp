// GrpcOptions::validate: one InvalidArgument per bad option, naming the option and its CLI flag.
// Tested through GrpcServer (server_test.cpp) and `glassbox serve` (tests/serve/grpc_test.py).
#include "glassbox/serve/grpc/options.h"

#include <algorithm>
#include <string>
#include <thread>

#include "glassbox/base/error.h"

namespace glassbox::serve {

void GrpcOptions::validate() const {
  GB_CHECK(!address.empty(), InvalidArgument, "address is empty",
           std::string("pass --address 0.0.0.0 (every interface) or 127.0.0.1 (this machine only)"));
  GB_CHECK(port >= -1 && port <= 65535, InvalidArgument, "grpc port must be -1..65535, got " << port,
           std::string("pass --grpc-port PORT (0: any free port, -1: no gRPC listener)"));
  GB_CHECK(max_receive_bytes >= 4096 && max_send_bytes >= 4096, InvalidArgument,
           "gRPC message limits must be at least 4096 bytes, got " << max_receive_bytes << " (receive) and "
                                                                   << max_send_bytes << " (send)",
           std::string("use the defaults (INT_MAX, Triton's)"));
  GB_CHECK(!protect_inference || !api_key.empty(), InvalidArgument, "protect_inference is set but there is no API key",
           std::string("add --api-key-file F, or drop --protect-inference"));
  GB_CHECK(keepalive_time.count() > 0, InvalidArgument,
           "keepalive_time must be positive, got " << keepalive_time.count() << " ms",
           std::string("pass --grpc-keepalive-time-ms N (Triton's default: 7200000)"));
  GB_CHECK(keepalive_timeout.count() > 0, InvalidArgument,
           "keepalive_timeout must be positive, got " << keepalive_timeout.count() << " ms",
           std::string("pass --grpc-keepalive-timeout-ms N (Triton's default: 20000)"));
  GB_CHECK(http2_max_pings_without_data >= 0, InvalidArgument,
           "http2_max_pings_without_data must be >= 0, got " << http2_max_pings_without_data,
           std::string("pass --grpc-http2-max-pings-without-data N (0: no limit; Triton's default: 2)"));
  GB_CHECK(http2_min_ping_interval.count() >= 0, InvalidArgument,
           "http2_min_ping_interval must be >= 0, got " << http2_min_ping_interval.count() << " ms",
           std::string("pass --grpc-http2-min-ping-interval-ms N (Triton's default: 300000)"));
  GB_CHECK(http2_max_ping_strikes >= 0, InvalidArgument,
           "http2_max_ping_strikes must be >= 0, got " << http2_max_ping_strikes,
           std::string("use the default, 2 (0: no limit)"));
  GB_CHECK(threads >= 0 && threads <= 1024, InvalidArgument, "grpc threads must be 0..1024, got " << threads,
           std::string("pass --grpc-threads N (0: one per core, at least 2)"));
  GB_CHECK(busy_poll.count() >= 0 && busy_poll.count() <= 1000000, InvalidArgument,
           "busy_poll must be 0..1000000 us, got " << busy_poll.count(),
           std::string("pass --busy-poll-us N (0: threads sleep at once)"));
  GB_CHECK(stop_grace.count() >= 0, InvalidArgument, "stop_grace must be >= 0, got " << stop_grace.count() << " ms",
           std::string("use the default, 2000 ms"));
}

int GrpcOptions::resolved_threads() const {
  if (threads > 0) return threads;
  return std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace glassbox::serve
