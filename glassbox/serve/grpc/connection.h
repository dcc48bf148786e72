// Connection: one client's HTTP/2 connection to the gRPC front end, on nghttp2 (framing, HPACK,
// flow control) and Boost.Asio (the socket, on one of the IoPool's threads). gRPC's rules on top
// of HTTP/2 are here: request headers (POST, content-type application/grpc, grpc-encoding,
// grpc-timeout, metadata), length-prefixed messages (wire.h), responses as HEADERS, DATA and
// trailers (grpc-status, grpc-message), or a trailers-only HEADERS for an error.
//
//   start_connection(std::move(socket), shared);   // registers itself in shared.connections
//   c->begin_stop();     // GOAWAY: calls in flight finish, new ones are refused, then it closes
//   c->abort();          // calls still open end with CANCELLED; the connection closes
//
// Calls: a unary call runs once its request stream ended (exactly one message); ModelStreamInfer
// hands each message over as it completes and writes answers as they come, in completion order;
// it ends with OK once the client's side ended and every request was answered. Answers from other
// threads (the engine's) are posted to the connection's thread behind the server's Gate and
// dropped when the call or the connection has gone.
// Errors: unknown method UNIMPLEMENTED; a content-type that is not gRPC's HTTP 415, a method other
// than POST HTTP 405; an unsupported grpc-encoding UNIMPLEMENTED (grpc-accept-encoding lists
// identity, deflate, gzip); a message over the limit RESOURCE_EXHAUSTED; a compressed message
// without an encoding, or one that does not inflate, INTERNAL; a unary call with no message or
// several, UNIMPLEMENTED or INTERNAL as grpc-core answers them; a call past its grpc-timeout
// DEADLINE_EXCEEDED.
// Keep-alive (GrpcOptions): a PING after keepalive_time without reads while calls are open (or
// always, with keepalive_permit_without_calls), the connection closed when no ACK comes within
// keepalive_timeout; at most http2_max_pings_without_data such pings between DATA or HEADERS
// frames. A client ping closer to the previous one than http2_min_ping_interval (2 hours while no
// call is open, unless keepalive_permit_without_calls), with nothing sent by the server in
// between, is a strike; past http2_max_ping_strikes the connection ends with GOAWAY
// ENHANCE_YOUR_CALM "too_many_pings". Limits: request headers 64 KiB (the call is reset), 4096
// calls open at once.
// A client that has not sent the HTTP/2 preface within 20 s is disconnected.
//
// Thread safety: begin_stop, abort and check may be called from any thread (they post to the
// connection's); ConnectionShared's registry is guarded by its mutex.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_set>

#include <boost/asio/ip/tcp.hpp>

#include "glassbox/serve/grpc/options.h"
#include "glassbox/serve/grpc/rpcs.h"
#include "glassbox/serve/net/gate.h"

namespace glassbox::serve {

class Connection;

// What the server's connections share: options, the RPCs, the gate and the registry.
struct ConnectionShared {
  ConnectionShared(Engine& engine, GrpcOptions o) : options(std::move(o)), rpcs(engine, options) {}
  const GrpcOptions options;
  Rpcs rpcs;
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();
  std::atomic<bool> stopping{false};
  std::mutex mu;
  std::condition_variable cv;
  std::unordered_set<Connection*> connections;  // added by start(), removed by ~Connection
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  virtual ~Connection() = default;
  virtual void begin_stop() = 0;
  virtual void abort() = 0;
  // The sweeper (any thread): posts the connection's timer work when one of its deadlines passed.
  virtual void check(std::chrono::steady_clock::time_point now) = 0;
};

// Serves `socket` (on its executor's thread); the connection registers itself in
// shared.connections and removes itself when it is destroyed.
void start_connection(boost::asio::ip::tcp::socket socket, ConnectionShared& shared);

}  // namespace glassbox::serve
