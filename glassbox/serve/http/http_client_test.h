// A small blocking HTTP/1.1 client on Beast for the front end's tests (test-only header). Every
// operation runs on the client's own io_context for at most 10 s, so a server that never answers
// fails the test instead of hanging it.
//
//   TestClient c(port);                                   // one connection, keep-alive
//   TestResponse r = c.call("GET", "/v2/health/ready");
//   EXPECT_EQ(r.status, 200);
//   c.send(request); ... TestResponse later = c.receive();   // split for concurrency tests
//
// Thread safety: one thread per TestClient.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace glassbox::serve::testing {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

struct TestResponse {
  int status = 0;                              // 0: no response (see error)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  bool keep_alive = false;
  std::string error;  // transport failure
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

using Headers = std::vector<std::pair<std::string, std::string>>;

inline http::request<http::string_body> make_request(const std::string& method, const std::string& target,
                                                     std::string body = {}, const Headers& headers = {}) {
  http::request<http::string_body> req(http::string_to_verb(method), target, 11);
  req.set(http::field::host, "127.0.0.1");
  for (const auto& [k, v] : headers) req.set(k, v);
  req.body() = std::move(body);
  req.prepare_payload();
  return req;
}

class TestClient {
 public:
  explicit TestClient(int port) : stream_(ioc_) {
    beast::error_code ec;
    stream_.socket().connect({net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)}, ec);
    connected_ = !ec;
  }
  bool connected() const { return connected_; }

  TestResponse call(const std::string& method, const std::string& target, std::string body = {},
                    const Headers& headers = {}) {
    return call(make_request(method, target, std::move(body), headers));
  }
  TestResponse call(http::request<http::string_body> req) {
    if (auto e = send(std::move(req))) return TestResponse{0, {}, {}, false, *e};
    return receive();
  }

  // Writes a request; the error text on failure.
  std::optional<std::string> send(http::request<http::string_body> req) {
    request_ = std::move(req);
    beast::error_code result = net::error::timed_out;
    bool done = false;
    http::async_write(stream_, request_, [&](beast::error_code ec, std::size_t) { result = ec, done = true; });
    run(done);
    if (result) return result.message();
    return std::nullopt;
  }
  // Writes raw bytes (e.g. a hand-made chunked request).
  std::optional<std::string> send_raw(const std::string& bytes) {
    raw_ = bytes;
    beast::error_code result = net::error::timed_out;
    bool done = false;
    net::async_write(stream_, net::buffer(raw_), [&](beast::error_code ec, std::size_t) { result = ec, done = true; });
    run(done);
    if (result) return result.message();
    return std::nullopt;
  }

  TestResponse receive() {
    http::response_parser<http::string_body> parser;
    parser.body_limit(1ull << 30);
    parser.skip(skip_body_);
    beast::error_code result = net::error::timed_out;
    bool done = false;
    http::async_read(stream_, buffer_, parser, [&](beast::error_code ec, std::size_t) { result = ec, done = true; });
    if (!run(done)) result = net::error::timed_out;
    TestResponse r;
    if (result) {
      r.error = result.message();
      return r;
    }
    auto& res = parser.get();
    r.status = static_cast<int>(res.result_int());
    for (const auto& field : res) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers[name] = std::string(field.value());
    }
    r.body = std::move(res.body());
    r.keep_alive = res.keep_alive();
    return r;
  }

  // True when the server closes the connection (a read ends with end-of-file or a reset) within 10 s.
  bool closed_by_peer() {
    char byte;
    beast::error_code result = net::error::timed_out;
    bool done = false;
    stream_.socket().async_read_some(net::buffer(&byte, 1), [&](beast::error_code ec, std::size_t) {
      result = ec;
      done = true;
    });
    if (!run(done)) return false;
    return result == net::error::eof || result == net::error::connection_reset;
  }
  void expect_head_response(bool v) { skip_body_ = v; }

 private:
  // Runs until `done` (at most 10 s); on timeout closes the connection and lets the operation end.
  bool run(bool& done) {
    ioc_.restart();
    ioc_.run_for(std::chrono::seconds(10));
    if (done) return true;
    beast::error_code ignored;
    stream_.socket().close(ignored);
    ioc_.restart();
    ioc_.run();
    return false;
  }

  net::io_context ioc_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  std::string raw_;
  bool connected_ = false;
  bool skip_body_ = false;
};

// One request on a fresh connection.
inline TestResponse http_call(int port, const std::string& method, const std::string& target, std::string body = {},
                              const Headers& headers = {}) {
  TestClient c(port);
  return c.call(method, target, std::move(body), headers);
}

}  // namespace glassbox::serve::testing
