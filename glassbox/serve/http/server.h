// HttpServer: glassbox serve's KServe v2 HTTP/1.1 front end on Boost.Beast, plus the Prometheus
// endpoint on its own port. It owns the I/O threads, the listeners and the connections; the engine
// (serve::Engine, api.h) does the inference.
//
//   std::unique_ptr<serve::Engine> engine = serve::make_engine(engine_options);
//   serve::HttpOptions o;                    // options.h: address, ports, threads, limits, API key
//   serve::HttpServer server(*engine, o);
//   server.start();                          // binds; Unavailable "port 8000 is in use ..."
//   std::cout << server.http_port();
//   ...                                      // SIGTERM:
//   engine->begin_shutdown();                // readiness false, new infers 503 (the engine's)
//   engine->drain(timeout);                  // the server keeps answering meanwhile
//   server.stop();                           // finish writing responses, close, join threads
//
// Design: `threads` single-threaded io_contexts, one per I/O thread; an acceptor per port; each
// connection is a session on one io_context (round-robin), one request at a time (read, handle,
// write, read again: keep-alive, pipelined requests answered in order). Inference is
// asynchronous: the route hands the request to Engine::infer and the engine's callback posts the
// finished response back to the session's io_context, so no I/O thread waits for a model.
// Idle connections (and stalled reads or writes) close after idle_timeout. A callback that arrives after its
// connection closed, or after the server stopped, is dropped. See routes.h for the endpoints,
// codec.h for the wire format, metrics.h for /metrics.
//
// Thread safety: start() and stop() are called from one owning thread (not concurrently);
// http_port()/metrics_port() from any thread after start(). Ownership: `engine` is borrowed and
// must outlive the server (callbacks may still arrive after stop(); they are dropped safely).
#pragma once

#include <chrono>
#include <memory>

#include "glassbox/serve/engine/api.h"
#include "glassbox/serve/http/options.h"

namespace glassbox::serve {

class HttpServer {
 public:
  HttpServer(Engine& engine, HttpOptions options);  // engine: non-owning, outlives the server
  ~HttpServer();                                    // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds both ports and starts the I/O threads. Unavailable naming the address:port when a port
  // is taken ("port 8000 is in use on 0.0.0.0", hint --http-port / --metrics-port); InvalidArgument
  // for an address that does not resolve. Calling it twice is an error (FailedPrecondition).
  void start();
  int http_port() const;     // the bound ports (after start)
  int metrics_port() const;  // -1 when there is no metrics listener

  // Stops accepting, lets responses being produced or written finish (at most `grace`; requests
  // waiting for the engine are answered when their callback arrives within it, with
  // `Connection: close`), closes idle and remaining connections, joins the threads. Idempotent.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace glassbox::serve
