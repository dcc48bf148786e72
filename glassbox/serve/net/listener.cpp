// Listener (see listener.h). Tested through both front ends' servers (port in use, accepting,
// closing): serve/http server_test.cpp and serve/grpc server_test.cpp.
#include "glassbox/serve/net/listener.h"

#include <chrono>
#include <utility>

#include <boost/asio/post.hpp>

#include "glassbox/base/error.h"

namespace glassbox::serve {

namespace net = boost::asio;
using tcp = net::ip::tcp;

net::ip::address resolve_address(net::io_context& ioc, const std::string& address) {
  boost::system::error_code ec;
  tcp::resolver resolver(ioc);
  auto results = resolver.resolve(address, "0", tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "cannot resolve the address '" + address + "': " + ec.message(),
                std::string("pass --address as an IP address: 0.0.0.0 (every interface), 127.0.0.1 or ::"));
  }
  return results.begin()->endpoint().address();
}

Listener::Listener(IoPool& pool, OnSocket on_socket)
    : pool_(pool), acceptor_(pool.first()), retry_(pool.first()), on_socket_(std::move(on_socket)) {}

void Listener::bind(const tcp::endpoint& endpoint, const std::string& address, const char* flag) {
  boost::system::error_code ec;
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (ec == net::error::address_in_use) {
    throw Error(ErrorCode::kUnavailable, "port " + std::to_string(endpoint.port()) + " is in use on " + address,
                std::string("stop the other server on it, or pick another port with ") + flag + " (0: any free port)");
  }
  if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    throw Error(ErrorCode::kUnavailable,
                "cannot listen on " + address + ":" + std::to_string(endpoint.port()) + ": " + ec.message(),
                std::string("check --address and ") + flag);
  }
}

int Listener::port() const { return acceptor_.local_endpoint().port(); }

void Listener::accept() {
  acceptor_.async_accept(pool_.next(), [self = shared_from_this()](boost::system::error_code ec, tcp::socket s) {
    self->on_accept(ec, std::move(s));
  });
}

void Listener::close() {
  net::post(acceptor_.get_executor(), [self = shared_from_this()] {
    boost::system::error_code ignored;
    self->acceptor_.close(ignored);
    self->retry_.cancel();
  });
}

void Listener::on_accept(boost::system::error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
  if (ec) {  // e.g. out of file descriptors: try again shortly instead of spinning
    retry_.expires_after(std::chrono::milliseconds(50));
    retry_.async_wait([self = shared_from_this()](boost::system::error_code e) {
      if (!e) self->accept();
    });
    return;
  }
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  on_socket_(std::move(socket));
  accept();
}

}  // namespace glassbox::serve
