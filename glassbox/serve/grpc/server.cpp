// GrpcServer: the I/O threads, the listener, the connections and their sweeper; see server.h.
// The protocol is connection.cpp (HTTP/2 on nghttp2), the RPCs rpcs.cpp.
#include "glassbox/serve/grpc/server.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "glassbox/base/error.h"
#include "glassbox/serve/grpc/connection.h"
#include "glassbox/serve/net/io_pool.h"
#include "glassbox/serve/net/listener.h"

namespace glassbox::serve {

namespace net = boost::asio;
using tcp = net::ip::tcp;

struct GrpcServer::Impl {
  Impl(Engine& e, GrpcOptions o)
      : shared(e, std::move(o)),
        pool(shared.options.resolved_threads(), shared.options.busy_poll),
        sweeper(pool.first()) {}

  std::vector<std::shared_ptr<Connection>> connections() {
    std::vector<std::shared_ptr<Connection>> out;
    std::lock_guard lock(shared.mu);
    for (Connection* c : shared.connections)
      if (auto p = c->weak_from_this().lock()) out.push_back(std::move(p));
    return out;
  }
  bool wait_connections(std::chrono::milliseconds timeout) {
    std::unique_lock lock(shared.mu);
    return shared.cv.wait_for(lock, timeout, [this] { return shared.connections.empty(); });
  }
  // Lets each connection act on its passed deadlines (calls' grpc-timeout, keep-alive pings, the
  // handshake), every 20 ms.
  void sweep() {
    const auto now = std::chrono::steady_clock::now();
    for (const auto& c : connections()) c->check(now);
    sweeper.expires_after(std::chrono::milliseconds(20));
    sweeper.async_wait([this](boost::system::error_code ec) {
      if (!ec) sweep();
    });
  }

  ConnectionShared shared;  // before the pool: outlives the connections its io_contexts destroy
  IoPool pool;
  net::steady_timer sweeper;  // after the pool: destroyed before it
  std::shared_ptr<Listener> listener;
  int port = 0;
  bool started = false;
  bool stopped = false;
};

GrpcServer::GrpcServer(Engine& engine, GrpcOptions options) {
  options.validate();
  impl_ = std::make_unique<Impl>(engine, std::move(options));
}

GrpcServer::~GrpcServer() { stop(); }

void GrpcServer::start() {
  Impl& m = *impl_;
  const GrpcOptions& o = m.shared.options;
  GB_CHECK(!m.started, FailedPrecondition, "the gRPC server was started already", std::string());
  GB_CHECK(o.enabled(), FailedPrecondition, "the gRPC server is off (port -1)", std::string("pass --grpc-port PORT"));
  const auto ip = resolve_address(m.pool.first(), o.address);
  auto listener = std::make_shared<Listener>(m.pool, [&m](tcp::socket socket) {
    if (m.shared.stopping.load()) return;  // the socket closes as it goes out of scope
    start_connection(std::move(socket), m.shared);
  });
  listener->bind(tcp::endpoint(ip, static_cast<unsigned short>(o.port)), o.address, "--grpc-port");
  m.port = listener->port();
  m.listener = std::move(listener);
  m.started = true;
  m.pool.run();
  net::post(m.pool.first(), [&m] { m.sweep(); });
  m.listener->accept();
}

int GrpcServer::port() const { return impl_->port; }

void GrpcServer::stop() { stop(impl_->shared.options.stop_grace); }

void GrpcServer::stop(std::chrono::milliseconds grace) {
  Impl& m = *impl_;
  if (!m.started || m.stopped) return;
  m.stopped = true;
  m.shared.stopping.store(true);
  m.listener->close();
  for (const auto& c : m.connections()) c->begin_stop();
  if (!m.wait_connections(grace)) {
    for (const auto& c : m.connections()) c->abort();
    m.wait_connections(std::chrono::seconds(1));  // the CANCELLED trailers are written, then they close
  }
  net::post(m.pool.first(), [&m] { m.sweeper.cancel(); });
  m.pool.stop();
  m.shared.gate->close();
  m.listener.reset();
}

}  // namespace glassbox::serve
