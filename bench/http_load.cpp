#include "bench/http_load.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include "glassbox/base/error.h"

namespace glassbox::bench {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

// ---- LatencyHistogram ----------------------------------------------------------------------

std::size_t LatencyHistogram::bucket_of(std::uint64_t ns) {
  constexpr std::uint64_t kSub = std::uint64_t{1} << kSubBits;
  if (ns < kSub) return static_cast<std::size_t>(ns);
  const int e = std::min(63 - std::countl_zero(ns), kMaxExponent);
  const std::uint64_t top = std::min<std::uint64_t>(ns >> (e - kSubBits), 2 * kSub - 1);  // [128, 255]
  return (static_cast<std::size_t>(e - kSubBits + 1) << kSubBits) + static_cast<std::size_t>(top - kSub);
}

std::uint64_t LatencyHistogram::upper_edge(std::size_t bucket) {
  constexpr std::uint64_t kSub = std::uint64_t{1} << kSubBits;
  const std::size_t region = bucket >> kSubBits;
  if (region == 0) return bucket;
  const int e = static_cast<int>(region) + kSubBits - 1;
  const std::uint64_t sub = bucket & (kSub - 1);
  return ((kSub + sub + 1) << (e - kSubBits)) - 1;
}

void LatencyHistogram::record(std::int64_t ns) {
  const std::uint64_t v = ns < 0 ? 0 : static_cast<std::uint64_t>(ns);
  ++counts_[bucket_of(v)];
  min_ns_ = count_ == 0 ? v : std::min(min_ns_, v);
  max_ns_ = std::max(max_ns_, v);
  ++count_;
  sum_ns_ += static_cast<double>(v);
}

void LatencyHistogram::merge(const LatencyHistogram& other) {
  if (other.count_ == 0) return;
  for (std::size_t i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
  min_ns_ = count_ == 0 ? other.min_ns_ : std::min(min_ns_, other.min_ns_);
  max_ns_ = std::max(max_ns_, other.max_ns_);
  count_ += other.count_;
  sum_ns_ += other.sum_ns_;
}

double LatencyHistogram::percentile_us(double q) const {
  if (count_ == 0) return 0.0;
  q = std::clamp(q, 0.0, 100.0);
  // The rank of the q-th percentile observation, 1-based (nearest-rank method).
  const auto rank =
      std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::ceil(q / 100.0 * static_cast<double>(count_))));
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank) return static_cast<double>(std::min(upper_edge(i), max_ns_)) / 1e3;
  }
  return max_us();
}

double LatencyHistogram::mean_us() const { return count_ == 0 ? 0.0 : sum_ns_ / static_cast<double>(count_) / 1e3; }

// ---- options, helpers ----------------------------------------------------------------------

void LoadOptions::validate() const {
  GB_CHECK(port > 0 && port < 65536, InvalidArgument, "load generator port " << port << " is out of range",
           std::string("pass the server's port (1-65535)"));
  GB_CHECK(connections >= 1, InvalidArgument, "load generator connections must be >= 1, got " << connections,
           std::string("pass the concurrency to drive, e.g. 16"));
  GB_CHECK(threads >= 1 && threads <= 16, InvalidArgument, "load generator threads must be 1-16, got " << threads,
           std::string("one or two threads drive tens of thousands of requests/s"));
  GB_CHECK(warmup_seconds >= 0 && seconds > 0, InvalidArgument,
           "load generator needs warmup >= 0 and seconds > 0, got " << warmup_seconds << " and " << seconds,
           std::string("pass a positive measured window"));
}

HttpRequestSpec get_request(std::string target) {
  HttpRequestSpec r;
  r.method = "GET";
  r.target = std::move(target);
  return r;
}

std::string HttpReply::header(const std::string& name) const {
  for (const auto& [k, v] : headers)
    if (beast::iequals(k, name)) return v;
  return {};
}

namespace {

// The request's bytes on the wire, serialized by Beast once.
std::string serialize(const HttpRequestSpec& spec, const std::string& host, int port) {
  http::request<http::string_body> req;
  req.method(http::string_to_verb(spec.method));
  GB_CHECK(req.method() != http::verb::unknown, InvalidArgument, "unknown HTTP method '" << spec.method << "'",
           std::string("use GET or POST"));
  req.target(spec.target);
  req.version(11);
  req.set(http::field::host, host + ":" + std::to_string(port));
  for (const auto& [k, v] : spec.headers) req.set(k, v);
  req.body() = spec.body;
  if (!spec.body.empty() || spec.method == "POST") req.prepare_payload();
  std::ostringstream os;
  os << req;
  return os.str();
}

double process_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

constexpr std::uint64_t kBodyLimit = std::uint64_t{1} << 30;

// Shared by every connection of one run.
struct Shared {
  tcp::endpoint endpoint;
  std::string request;  // serialized bytes
  Clock::time_point window_start, window_end;
  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> completed{0}, failed{0}, connects{0};
  std::mutex failure_mutex;
  std::string first_failure;

  void note_failure(const std::string& what) {
    failed.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(failure_mutex);
    if (first_failure.empty()) first_failure = what;
  }
};

// One keep-alive connection: connect, then write/read/write/read... on its own strand.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(net::io_context& ioc, Shared& shared)
      : strand_(net::make_strand(ioc)), socket_(strand_), timer_(strand_), shared_(shared) {}

  void start() { connect(); }
  // Posted at the end of the window: aborts what is in flight.
  void stop() {
    net::post(strand_, [self = shared_from_this()] {
      beast::error_code ec;
      self->timer_.cancel();
      self->socket_.close(ec);
    });
  }

  // Window figures; read after every io thread has been joined.
  LatencyHistogram latency;
  std::map<int, std::uint64_t> statuses;
  std::uint64_t ok = 0, completed = 0, transport_errors = 0, response_bytes = 0;

 private:
  void connect() {
    if (shared_.stopping.load(std::memory_order_relaxed)) return;
    socket_.async_connect(shared_.endpoint, [self = shared_from_this()](beast::error_code ec) {
      if (ec) return self->fail("connect", ec);
      self->shared_.connects.fetch_add(1, std::memory_order_relaxed);
      beast::error_code ignored;
      self->socket_.set_option(tcp::no_delay(true), ignored);
      self->send();
    });
  }

  void send() {
    if (shared_.stopping.load(std::memory_order_relaxed) || Clock::now() >= shared_.window_end) return;
    sent_ = Clock::now();
    net::async_write(socket_, net::buffer(shared_.request),
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       if (ec) return self->fail("write", ec);
                       self->read();
                     });
  }

  void read() {
    parser_.emplace();
    parser_->body_limit(kBodyLimit);
    parser_->get().body() = std::move(spare_);  // keeps the capacity of the previous body
    http::async_read(socket_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return self->fail("read", ec);
      self->on_response();
    });
  }

  void on_response() {
    const Clock::time_point now = Clock::now();
    auto& res = parser_->get();
    const int status = res.result_int();
    const bool good = status >= 200 && status < 300;
    shared_.completed.fetch_add(1, std::memory_order_relaxed);
    if (!good) shared_.note_failure("HTTP " + std::to_string(status) + ": " + res.body().substr(0, 300));
    if (now >= shared_.window_start && now <= shared_.window_end) {
      ++completed;
      ++statuses[status];
      if (good) {
        ++ok;
        response_bytes += res.body().size();
        latency.record(std::chrono::duration_cast<std::chrono::nanoseconds>(now - sent_).count());
      }
    }
    const bool keep_alive = res.keep_alive();
    spare_ = std::move(res.body());
    spare_.clear();
    parser_.reset();
    if (keep_alive) return send();
    beast::error_code ignored;
    socket_.close(ignored);
    connect();
  }

  void fail(const char* what, beast::error_code ec) {
    if (shared_.stopping.load(std::memory_order_relaxed)) return;  // aborted at the end: not a failure
    const Clock::time_point now = Clock::now();
    if (now >= shared_.window_start && now <= shared_.window_end) ++transport_errors;
    shared_.note_failure(std::string(what) + ": " + ec.message());
    beast::error_code ignored;
    socket_.close(ignored);
    buffer_.clear();
    parser_.reset();
    timer_.expires_after(std::chrono::milliseconds(10));
    timer_.async_wait([self = shared_from_this()](beast::error_code e) {
      if (!e) self->connect();
    });
  }

  net::strand<net::io_context::executor_type> strand_;
  tcp::socket socket_;
  net::steady_timer timer_;
  Shared& shared_;  // non-owning; outlives the connection's handlers (run_load joins first)
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::string_body>> parser_;
  std::string spare_;
  Clock::time_point sent_;
};

tcp::endpoint endpoint_of(const std::string& host, int port) {
  beast::error_code ec;
  const auto address = net::ip::make_address(host, ec);
  GB_CHECK(!ec, InvalidArgument, "'" << host << "' is not an IP address",
           std::string("pass a numeric address such as 127.0.0.1"));
  return {address, static_cast<unsigned short>(port)};
}

}  // namespace

LoadResult run_load(const HttpRequestSpec& request, const LoadOptions& o) {
  o.validate();
  Shared shared;
  shared.endpoint = endpoint_of(o.host, o.port);
  shared.request = serialize(request, o.host, o.port);
  net::io_context ioc(o.threads);
  std::vector<std::shared_ptr<Connection>> connections;
  connections.reserve(static_cast<std::size_t>(o.connections));
  for (int i = 0; i < o.connections; ++i) connections.push_back(std::make_shared<Connection>(ioc, shared));

  const auto start = Clock::now();
  auto at = [&](double s) {
    return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  shared.window_start = at(o.warmup_seconds);
  shared.window_end = at(o.warmup_seconds + o.seconds);
  for (auto& c : connections) c->start();
  auto guard =
      net::make_work_guard(ioc);  // the io threads run until the end, even when every connection waits on a timer
  std::vector<std::thread> threads;
  for (int i = 0; i < o.threads; ++i) threads.emplace_back([&ioc] { ioc.run(); });

  // The calling thread keeps time: CPU at the window's edges, ticks, then stop.
  double cpu_start = 0, cpu_end = 0;
  bool started = false;
  const double tick = o.on_tick && o.tick_seconds > 0 ? o.tick_seconds : 0;
  double next_tick = tick > 0 ? tick : o.warmup_seconds + o.seconds + 1;
  while (true) {
    const Clock::time_point now = Clock::now();
    if (!started && now >= shared.window_start) {
      cpu_start = process_cpu_seconds();
      started = true;
    }
    if (now >= shared.window_end) break;
    Clock::time_point wake = started ? shared.window_end : shared.window_start;
    if (tick > 0) wake = std::min(wake, at(next_tick));
    std::this_thread::sleep_until(wake);
    if (tick > 0 && Clock::now() >= at(next_tick)) {
      LoadProgress p;
      p.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
      p.measuring = Clock::now() >= shared.window_start;
      p.completed = shared.completed.load(std::memory_order_relaxed);
      p.failed = shared.failed.load(std::memory_order_relaxed);
      o.on_tick(p);
      next_tick += tick;
    }
  }
  cpu_end = process_cpu_seconds();
  shared.stopping.store(true);
  for (auto& c : connections) c->stop();
  guard.reset();
  for (auto& t : threads) t.join();

  LoadResult r;
  r.seconds = std::chrono::duration<double>(shared.window_end - shared.window_start).count();
  r.cpu_seconds = cpu_end - cpu_start;
  for (const auto& c : connections) {
    r.latency.merge(c->latency);
    for (const auto& [status, n] : c->statuses) r.status_counts[status] += n;
    r.ok += c->ok;
    r.completed += c->completed;
    r.transport_errors += c->transport_errors;
    r.response_bytes += c->response_bytes;
  }
  r.failed_total = shared.failed.load();
  r.completed_total = shared.completed.load();
  r.first_failure = shared.first_failure;
  GB_CHECK(shared.connects.load() > 0, Unavailable,
           "the load generator could not connect to " << o.host << ":" << o.port << " (" << shared.first_failure << ")",
           std::string("start the server first and check its address"));
  return r;
}

HttpReply http_call(const std::string& host, int port, const HttpRequestSpec& request,
                    std::chrono::milliseconds timeout) {
  const std::string bytes = serialize(request, host, port);
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(kBodyLimit);
  beast::error_code result;
  const char* step = "connect";
  stream.expires_after(timeout);
  stream.async_connect(endpoint_of(host, port), [&](beast::error_code ec) {
    if (ec) {
      result = ec;
      return;
    }
    step = "write";
    net::async_write(stream, net::buffer(bytes), [&](beast::error_code ec2, std::size_t) {
      if (ec2) {
        result = ec2;
        return;
      }
      step = "read";
      http::async_read(stream, buffer, parser, [&](beast::error_code ec3, std::size_t) { result = ec3; });
    });
  });
  ioc.run();
  GB_CHECK(!result, Unavailable,
           request.method << " http://" << host << ":" << port << request.target << " failed at " << step << ": "
                          << result.message(),
           std::string("check that the server is running and listening on that port"));
  HttpReply reply;
  reply.status = parser.get().result_int();
  reply.body = std::move(parser.get().body());
  for (const auto& f : parser.get()) reply.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  return reply;
}

}  // namespace glassbox::bench
