// HttpOptions::validate: one InvalidArgument per bad option, naming the option and its CLI flag.
#include "glassbox/serve/http/options.h"

#include <algorithm>
#include <string>
#include <thread>

#include "glassbox/base/error.h"

namespace glassbox::serve {

void HttpOptions::validate() const {
  GB_CHECK(!address.empty(), InvalidArgument, "address is empty",
           std::string("pass --address 0.0.0.0 (every interface) or 127.0.0.1 (this machine only)"));
  GB_CHECK(http_port >= 0 && http_port <= 65535, InvalidArgument, "http_port must be 0..65535, got " << http_port,
           std::string("pass --http-port PORT (0: any free port)"));
  GB_CHECK(metrics_port >= -1 && metrics_port <= 65535, InvalidArgument,
           "metrics_port must be -1..65535, got " << metrics_port,
           std::string("pass --metrics-port PORT (0: any free port, -1: no metrics listener)"));
  GB_CHECK(http_port == 0 || metrics_port != http_port, InvalidArgument,
           "http_port and metrics_port are both " << http_port,
           std::string("give --metrics-port another port (or -1 for none)"));
  GB_CHECK(threads >= 0 && threads <= 1024, InvalidArgument, "threads must be 0..1024, got " << threads,
           std::string("pass --threads N (0: one per core, at least 2)"));
  GB_CHECK(max_body_bytes >= 1024, InvalidArgument, "max_body_bytes must be at least 1024, got " << max_body_bytes,
           std::string("pass --max-body-mib N (default 64)"));
  GB_CHECK(max_json_depth >= 1, InvalidArgument, "max_json_depth must be at least 1, got " << max_json_depth,
           std::string("use the default, 100"));
  GB_CHECK(!protect_inference || !api_key.empty(), InvalidArgument, "protect_inference is set but there is no API key",
           std::string("add --api-key-file F, or drop --protect-inference"));
  GB_CHECK(busy_poll.count() >= 0 && busy_poll.count() <= 1000000, InvalidArgument,
           "busy_poll must be 0..1000000 us, got " << busy_poll.count(),
           std::string("pass --busy-poll-us N (0: I/O threads sleep at once)"));
  GB_CHECK(idle_timeout.count() > 0, InvalidArgument,
           "idle_timeout must be positive, got " << idle_timeout.count() << " s", std::string("use the default, 60 s"));
  GB_CHECK(header_timeout.count() > 0 && body_timeout.count() > 0, InvalidArgument,
           "the request header and body timeouts must be positive, got " << header_timeout.count() << " ms and "
                                                                         << body_timeout.count() << " ms",
           std::string("pass --request-header-timeout / --request-body-timeout in seconds (default 20)"));
  GB_CHECK(max_header_bytes >= 1024, InvalidArgument,
           "max_header_bytes must be at least 1024, got " << max_header_bytes, std::string("use the default, 64 KiB"));
}

int HttpOptions::resolved_threads() const {
  if (threads > 0) return threads;
  return std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace glassbox::serve
