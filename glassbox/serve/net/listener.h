// Listener: a listening TCP socket of a front end. Accepted connections go to the IoPool's
// contexts round-robin and are handed to `on_socket` (on the first context's thread).
//
//   auto l = std::make_shared<Listener>(pool, [](tcp::socket s) { start_session(std::move(s)); });
//   l->bind(tcp::endpoint(resolve_address(pool.first(), "0.0.0.0"), 8000), "0.0.0.0", "--http-port");
//   l->accept();                       // after pool.run()
//   l->close();                        // stop accepting
//
// bind() throws Unavailable naming the port and the flag that picks it (a port in use is an
// error: no SO_REUSEPORT). A failed accept (out of file descriptors) is retried after 50 ms.
// Thread safety: bind and port from the owning thread; accept and close from any thread.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "glassbox/serve/net/io_pool.h"

namespace glassbox::serve {

// The IP address `address` names (numeric only); InvalidArgument naming it.
boost::asio::ip::address resolve_address(boost::asio::io_context& ioc, const std::string& address);

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  using OnSocket = std::function<void(boost::asio::ip::tcp::socket)>;
  Listener(IoPool& pool, OnSocket on_socket);

  void bind(const boost::asio::ip::tcp::endpoint& endpoint, const std::string& address, const char* flag);
  int port() const;
  void accept();
  void close();

 private:
  void on_accept(boost::system::error_code ec, boost::asio::ip::tcp::socket socket);

  IoPool& pool_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_;
  OnSocket on_socket_;
};

}  // namespace glassbox::serve
