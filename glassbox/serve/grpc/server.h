// GrpcServer: glassbox serve's KServe v2 gRPC front end (Triton's inference.GRPCInferenceService,
// proto/grpc_service.proto), beside the HTTP one and over the same engine (so the same models,
// batcher, statistics and metrics).
//
//   std::unique_ptr<serve::Engine> engine = serve::make_engine(engine_options);
//   serve::GrpcOptions o;                    // options.h: address, port, limits, keep-alive, API key
//   serve::GrpcServer grpc(*engine, o);
//   grpc.start();                            // binds; Unavailable "port 8001 is in use on ..."
//   std::cout << grpc.port();
//   ...                                      // SIGTERM:
//   engine->begin_shutdown();                // ServerReady false, new inferences UNAVAILABLE
//   engine->drain(timeout);                  // the server keeps answering meanwhile
//   grpc.stop();                             // no new calls; calls in flight finish or are cancelled
//
// Design: gRPC's HTTP/2 transport is glassbox's own, on nghttp2 and the same I/O threads design
// as the HTTP front end (connection.h): a connection lives on one thread, which reads, decodes,
// hands requests to the engine and writes the answers the engine posts back; no thread waits for
// a model. Messages up to INT_MAX bytes both ways, HTTP/2 keep-alive as Triton configures it, a
// port in use is an error (no SO_REUSEPORT).
//
// Thread safety: start() and stop() are called from one owning thread (not concurrently); port()
// from any thread after start(). Ownership: `engine` is borrowed and must outlive the server;
// answers the engine gives after stop() are dropped.
#pragma once

#include <chrono>
#include <memory>

#include "glassbox/serve/engine/api.h"
#include "glassbox/serve/grpc/options.h"

namespace glassbox::serve {

class GrpcServer {
 public:
  GrpcServer(Engine& engine, GrpcOptions options);  // engine: non-owning, outlives the server
  ~GrpcServer();                                    // stop()
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Binds and starts serving. Unavailable naming the address:port when it cannot bind (hint
  // --grpc-port); FailedPrecondition when called twice or with the port off (-1).
  void start();
  int port() const;  // the bound port (after start)

  // Stops accepting calls; calls in flight have options.stop_grace (or `grace`) to finish, then
  // are cancelled; returns when every call is done. Idempotent.
  void stop();
  void stop(std::chrono::milliseconds grace);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace glassbox::serve
