// The load generator against a small synchronous Beast server in the test process: the closed
// loop (never more than N requests in flight, every request byte-identical), keep-alive reuse,
// status counting, reconnection after `Connection: close`, an unreachable server, the histogram's
// percentiles against a sorted vector, and http_call.
#include "bench/http_load.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>

#include "glassbox/base/error.h"

namespace glassbox::bench {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

// A thread per connection; every request is checked and answered. Counts what the server saw.
class TestServer {
 public:
  // every_nth_503: each n-th request (over all connections) is answered 503; 0: never.
  // close_each: answer with `Connection: close` and close.
  explicit TestServer(int every_nth_503 = 0, bool close_each = false)
      : acceptor_(ioc_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)),
        every_nth_503_(every_nth_503),
        close_each_(close_each) {
    port_ = acceptor_.local_endpoint().port();
    accept_thread_ = std::thread([this] { accept_loop(); });
  }
  ~TestServer() {
    stop_ = true;
    beast::error_code ec;
    {
      // Wake the blocking accept with a connection to ourselves; it sees stop_ and returns.
      net::io_context io;
      tcp::socket s(io);
      s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)), ec);
    }
    accept_thread_.join();
    acceptor_.close(ec);
    // Sessions blocked in a read wake up with an error once their socket is shut down.
    for (auto& s : sockets_) s->shutdown(tcp::socket::shutdown_both, ec);
    for (auto& t : session_threads_) t.join();
  }
  int port() const { return port_; }

  std::atomic<int> connections{0};
  std::atomic<int> requests{0};
  std::atomic<int> in_flight{0};
  std::atomic<int> max_in_flight{0};
  std::atomic<int> bad_requests{0};  // a request that differs from the expected one
  std::string expected_body = "payload";
  std::string expected_header = "yes";

 private:
  void accept_loop() {
    while (!stop_) {
      auto socket = std::make_shared<tcp::socket>(ioc_);
      beast::error_code ec;
      acceptor_.accept(*socket, ec);
      if (ec || stop_) return;
      ++connections;
      sockets_.push_back(socket);
      session_threads_.emplace_back([this, socket] { session(*socket); });
    }
  }

  void session(tcp::socket& socket) {
    beast::flat_buffer buffer;
    while (true) {
      http::request<http::string_body> req;
      beast::error_code ec;
      http::read(socket, buffer, req, ec);
      if (ec) return;
      const int now = ++in_flight;
      int seen = max_in_flight.load();
      while (now > seen && !max_in_flight.compare_exchange_weak(seen, now)) {
      }
      const int n = ++requests;
      if (req.body() != expected_body || req["X-Test"] != expected_header || req.target() != "/infer") ++bad_requests;
      http::response<http::string_body> res;
      res.version(11);
      res.result(every_nth_503_ > 0 && n % every_nth_503_ == 0 ? http::status::service_unavailable : http::status::ok);
      res.body() = res.result() == http::status::ok ? "answer" : "{\"error\":\"busy\"}";
      res.keep_alive(!close_each_);
      res.prepare_payload();
      --in_flight;
      http::write(socket, res, ec);
      if (ec || close_each_) {
        socket.shutdown(tcp::socket::shutdown_both, ec);
        return;
      }
    }
  }

  net::io_context ioc_;
  tcp::acceptor acceptor_;
  int port_ = 0;
  int every_nth_503_;
  bool close_each_;
  std::atomic<bool> stop_{false};
  std::vector<std::shared_ptr<tcp::socket>> sockets_;
  std::vector<std::thread> session_threads_;
  std::thread accept_thread_;
};

HttpRequestSpec test_request() {
  HttpRequestSpec r;
  r.target = "/infer";
  r.headers = {{"X-Test", "yes"}, {"Content-Type", "application/octet-stream"}};
  r.body = "payload";
  return r;
}

LoadOptions options(int port, int connections) {
  LoadOptions o;
  o.port = port;
  o.connections = connections;
  o.warmup_seconds = 0.1;
  o.seconds = 0.4;
  return o;
}

TEST(HttpLoad, ClosedLoopKeepsConnectionsAndCountsEveryResponse) {
  TestServer server;
  LoadOptions o = options(server.port(), 4);
  o.threads = 2;
  const LoadResult r = run_load(test_request(), o);
  EXPECT_EQ(server.connections.load(), 4);    // keep-alive: one connection each, reused
  EXPECT_LE(server.max_in_flight.load(), 4);  // closed loop: at most one request per connection
  EXPECT_EQ(server.bad_requests.load(), 0);   // the prebuilt request, byte for byte, every time
  EXPECT_GT(r.ok, 10u);
  EXPECT_EQ(r.ok, r.completed);
  EXPECT_EQ(r.status_counts.at(200), r.ok);
  EXPECT_EQ(r.latency.count(), r.ok);
  EXPECT_EQ(r.response_bytes, r.ok * std::string("answer").size());
  EXPECT_EQ(r.transport_errors, 0u);
  EXPECT_EQ(r.failed_total, 0u);
  // Warm-up responses are not in the window, and the server answered every counted response.
  EXPECT_LE(r.completed, r.completed_total);
  EXPECT_LE(r.completed_total, static_cast<std::uint64_t>(server.requests.load()));
  EXPECT_GT(r.latency.percentile_us(50), 0.0);
  EXPECT_LE(r.latency.percentile_us(50), r.latency.percentile_us(99));
  EXPECT_GT(r.throughput(), 0.0);
}

TEST(HttpLoad, CountsStatusesAndFailures) {
  TestServer server(/*every_nth_503=*/3);
  const LoadResult r = run_load(test_request(), options(server.port(), 2));
  ASSERT_GT(r.completed, 6u);
  EXPECT_GT(r.status_counts.at(503), 0u);
  EXPECT_EQ(r.status_counts.at(200) + r.status_counts.at(503), r.completed);
  EXPECT_EQ(r.ok, r.status_counts.at(200));
  EXPECT_EQ(r.latency.count(), r.ok);  // latency of successes only
  EXPECT_GE(r.failed_total, r.status_counts.at(503));
  EXPECT_EQ(r.first_failure, "HTTP 503: {\"error\":\"busy\"}");
}

TEST(HttpLoad, ReconnectsWhenTheServerClosesEachConnection) {
  TestServer server(0, /*close_each=*/true);
  const LoadResult r = run_load(test_request(), options(server.port(), 2));
  EXPECT_GT(r.ok, 2u);
  EXPECT_EQ(r.failed_total, 0u);  // a closed keep-alive is not a failure
  // One connection per answered request (plus the ones open at the end).
  EXPECT_GE(server.connections.load(), static_cast<int>(r.completed_total));
  EXPECT_LE(server.connections.load(), static_cast<int>(r.completed_total) + 2);
}

TEST(HttpLoad, TicksOnTheCallingThread) {
  TestServer server;
  LoadOptions o = options(server.port(), 1);
  o.tick_seconds = 0.1;
  std::vector<LoadProgress> ticks;
  const auto caller = std::this_thread::get_id();
  bool same_thread = true;
  o.on_tick = [&](const LoadProgress& p) {
    same_thread = same_thread && std::this_thread::get_id() == caller;
    ticks.push_back(p);
  };
  const LoadResult r = run_load(test_request(), o);
  ASSERT_GE(ticks.size(), 2u);
  EXPECT_TRUE(same_thread);
  for (std::size_t i = 1; i < ticks.size(); ++i) EXPECT_GE(ticks[i].completed, ticks[i - 1].completed);
  EXPECT_LE(ticks.back().completed, r.completed_total);
}

TEST(HttpLoad, NoServerIsUnavailable) {
  int port = 0;
  {
    net::io_context io;
    tcp::acceptor a(io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    port = a.local_endpoint().port();
  }  // closed: nothing listens there now
  LoadOptions o = options(port, 1);
  o.warmup_seconds = 0;
  o.seconds = 0.1;
  try {
    run_load(test_request(), o);
    FAIL() << "expected Unavailable";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    EXPECT_NE(e.message().find("could not connect to 127.0.0.1:" + std::to_string(port)), std::string::npos)
        << e.message();
  }
  EXPECT_THROW(http_call("127.0.0.1", port, get_request("/")), Error);
}

TEST(HttpLoad, RejectsBadOptions) {
  LoadOptions o;
  o.port = 0;
  EXPECT_THROW(o.validate(), Error);
  o.port = 80;
  o.connections = 0;
  EXPECT_THROW(o.validate(), Error);
  o.connections = 1;
  o.seconds = 0;
  EXPECT_THROW(o.validate(), Error);
}

TEST(HttpLoad, HttpCallReturnsStatusBodyAndHeaders) {
  TestServer server(/*every_nth_503=*/2);
  const HttpReply first = http_call("127.0.0.1", server.port(), test_request());
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.body, "answer");
  EXPECT_EQ(first.header("content-length"), "6");
  EXPECT_EQ(first.header("X-Missing"), "");
  const HttpReply second = http_call("127.0.0.1", server.port(), test_request());
  EXPECT_EQ(second.status, 503);
}

TEST(LatencyHistogram, PercentilesWithinOneBucketOfTheSortedValues) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(11.0, 1.5);  // ~60 us median, long tail
  LatencyHistogram h, a, b;
  std::vector<std::int64_t> values;
  for (int i = 0; i < 20000; ++i) {
    const auto v = static_cast<std::int64_t>(dist(rng));
    values.push_back(v);
    h.record(v);
    (i % 2 ? a : b).record(v);
  }
  a.merge(b);
  std::sort(values.begin(), values.end());
  for (double q : {1.0, 50.0, 90.0, 99.0, 99.9, 100.0}) {
    const auto rank = static_cast<std::size_t>(std::ceil(q / 100.0 * static_cast<double>(values.size())));
    const double exact = static_cast<double>(values[std::max<std::size_t>(rank, 1) - 1]) / 1e3;
    EXPECT_GE(h.percentile_us(q), exact) << q;
    EXPECT_LE(h.percentile_us(q), exact * 1.008 + 1e-3) << q;
    EXPECT_EQ(a.percentile_us(q), h.percentile_us(q)) << q;
  }
  EXPECT_EQ(h.count(), values.size());
  EXPECT_DOUBLE_EQ(h.max_us(), static_cast<double>(values.back()) / 1e3);
  EXPECT_DOUBLE_EQ(h.min_us(), static_cast<double>(values.front()) / 1e3);
  double sum = 0;
  for (auto v : values) sum += static_cast<double>(v);
  EXPECT_NEAR(h.mean_us(), sum / static_cast<double>(values.size()) / 1e3, 1e-6);
  // Small values are exact; huge ones are clamped into the last bucket.
  LatencyHistogram small;
  small.record(5);
  small.record(100);
  EXPECT_DOUBLE_EQ(small.percentile_us(50), 0.005);
  EXPECT_DOUBLE_EQ(small.percentile_us(100), 0.1);
  LatencyHistogram empty;
  EXPECT_EQ(empty.percentile_us(99), 0.0);
}

}  // namespace
}  // namespace glassbox::bench
