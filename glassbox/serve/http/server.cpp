// HttpServer on Boost.Beast: listeners, one session per connection, graceful stop; see server.h.
//
// Threads. One single-threaded io_context per I/O thread (IoPool); each connection lives on one.
//
// Lifetimes. Sessions live on their io_context and are kept alive by the shared_ptr bound into
// each pending operation; while the engine holds a request (no operation pending) a session holds
// itself (`self_`). Replies reach a session through a weak_ptr, behind a Gate that stop() closes
// before the io_context goes away, so a callback that arrives late touches nothing of the
// server. `Core` (the session registry) is declared before the io_context in Impl: sessions still
// queued in the io_context are destroyed with it and unregister themselves from a live Core.
//
// Timeouts. Each I/O step (read a request, write a response, linger) stores a deadline in an
// atomic; one sweeper timer closes the sessions past theirs. That costs no timer syscall per
// request (Beast's per-operation timers cost two). A request held by the engine has no deadline.
#include "glassbox/serve/http/server.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "glassbox/base/error.h"
#include "glassbox/serve/http/io_pool.h"
#include "glassbox/serve/http/metrics.h"
#include "glassbox/serve/http/routes.h"

namespace glassbox::serve {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// Lets engine callbacks post into the io_context only while it exists: enter() fails once closed,
// close() waits for the callers inside to leave.
class Gate {
 public:
  bool enter() {
    users_.fetch_add(1);
    if (open_.load()) return true;
    users_.fetch_sub(1);
    return false;
  }
  void leave() { users_.fetch_sub(1); }
  void close() {
    open_.store(false);
    while (users_.load() != 0) std::this_thread::yield();
  }

 private:
  std::atomic<int> users_{0};
  std::atomic<bool> open_{true};
};

class Session;
using Handler = std::function<void(const HttpRequest&, Reply)>;

struct Core {
  explicit Core(HttpOptions o) : options(std::move(o)) {}
  const HttpOptions options;
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();
  std::atomic<bool> stopping{false};
  std::mutex mu;
  std::condition_variable cv;
  std::unordered_set<Session*> sessions;  // registered in start(), removed by ~Session
};

std::string_view sv(beast::string_view s) { return {s.data(), s.size()}; }

Method method_of(http::verb v) {
  switch (v) {
    case http::verb::get: return Method::kGet;
    case http::verb::head: return Method::kHead;
    case http::verb::post: return Method::kPost;
    case http::verb::put: return Method::kPut;
    case http::verb::delete_: return Method::kDelete;
    default: return Method::kOther;
  }
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Core& core, const Handler& handler)
      : socket_(std::move(socket)), core_(core), handler_(handler) {
    buffer_.reserve(kBufferBytes);
  }
  ~Session() {
    std::lock_guard lock(core_.mu);
    core_.sessions.erase(this);
    core_.cv.notify_all();
  }

  void start() {
    {
      std::lock_guard lock(core_.mu);
      core_.sessions.insert(this);
    }
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->read_header(); });
  }

  // stop(): an idle connection closes; one whose request is arriving or being answered closes after
  // writing its answer.
  void begin_stop() {
    net::post(socket_.get_executor(), [self = shared_from_this()] {
      if (self->state_ != State::kReading) return;
      // A request already on its way (parsed in part, buffered, or waiting in the socket) is read
      // and answered (503 while shutting down); an idle keep-alive connection closes. Not at once:
      // the reactor may have read a request into the buffer already, its completion still queued
      // behind this handler. The pending read is cancelled instead, and on_read_error() closes
      // only if the cancel found it waiting with nothing read.
      if (self->arriving()) return;
      if (self->linger_) return self->close();  // its error answer is written; stop discarding
      self->close_if_idle();
    });
  }
  // stop() after the grace period: close whatever the state.
  void abort() {
    net::post(socket_.get_executor(), [self = shared_from_this()] {
      self->self_.reset();
      self->close();
    });
  }
  // stop() once no I/O thread runs: drop the self-reference of a request the engine still holds.
  void release() { self_.reset(); }

 private:
  enum class State { kReading, kBusy, kWriting, kClosed };
  static constexpr std::size_t kBufferBytes = 4 << 10;   // a connection's read buffer
  static constexpr std::size_t kMaxReadAhead = 8 << 20;  // room made for a large body

  // The sweeper (HttpServer::Impl) closes a session whose deadline passed; 0: no deadline (the
  // engine holds the request). One atomic store per I/O step instead of a timer syscall.
  void arm(std::chrono::steady_clock::duration d = {}) {
    if (d == std::chrono::steady_clock::duration{}) d = core_.options.idle_timeout;
    deadline_.store((std::chrono::steady_clock::now() + d).time_since_epoch().count(), std::memory_order_relaxed);
  }
  void disarm() { deadline_.store(0, std::memory_order_relaxed); }

 public:
  bool overdue(std::int64_t now) const {
    const std::int64_t d = deadline_.load(std::memory_order_relaxed);
    return d != 0 && d <= now;
  }
  // Sweeper: close if the deadline still stands once on the session's thread (an idle connection
  // as begin_stop() closes it).
  void expire() {
    net::post(socket_.get_executor(), [self = shared_from_this()] {
      if (!self->overdue(std::chrono::steady_clock::now().time_since_epoch().count())) return;
      if (self->state_ == State::kReading && !self->linger_ && !self->arriving()) return self->close_if_idle();
      self->close();
    });
  }

 private:
  void read_header() {
    state_ = State::kReading;
    close_if_idle_ = false;
    parser_.emplace();
    parser_->body_limit(core_.options.max_body_bytes);
    parser_->header_limit(static_cast<std::uint32_t>(core_.options.max_header_bytes));
    arm();
    http::async_read_header(socket_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::on_header, shared_from_this()));
    // Stopping (a connection accepted, or a response promised keep-alive, just before): a request
    // already sent is read and answered, an idle connection closes.
    if (core_.stopping.load()) close_if_idle();
  }

  void on_header(beast::error_code ec, std::size_t) {
    if (ec) return on_read_error(ec);
    auto& req = parser_->get();
    // Beast reads at most the buffer's free capacity (at least 512 bytes) per receive: make room for
    // a large body up front, so it arrives in few reads (shrunk again after the request).
    if (const auto n = parser_->content_length(); n && *n > buffer_.capacity() - buffer_.size()) {
      buffer_.reserve(buffer_.size() + static_cast<std::size_t>(std::min<std::uint64_t>(*n, kMaxReadAhead)));
    }
    if (!parser_->is_done() && beast::iequals(req[http::field::expect], "100-continue")) {
      continue_ = http::response<http::empty_body>(http::status::continue_, req.version());
      arm();
      http::async_write(socket_, continue_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
        if (ec) return self->close();
        self->read_body();
      });
      return;
    }
    read_body();
  }

  void read_body() {
    if (parser_->is_done()) return on_body({}, 0);
    arm();
    http::async_read(socket_, buffer_, *parser_, beast::bind_front_handler(&Session::on_body, shared_from_this()));
  }

  bool arriving() {
    beast::error_code ec;
    return (parser_ && parser_->got_some()) || buffer_.size() > 0 || socket_.available(ec) > 0;
  }
  // Closing a socket whose read is pending would lose a request the reactor has just read (its
  // completion queued behind this handler): cancel the read instead; on_read_error() closes if the
  // cancel found it still waiting with nothing read, and reads the request on otherwise.
  void close_if_idle() {
    close_if_idle_ = true;
    beast::error_code ignored;
    socket_.cancel(ignored);
  }

  void on_read_error(beast::error_code ec) {
    if (ec == net::error::operation_aborted && close_if_idle_ && state_ == State::kReading && !linger_) {
      close_if_idle_ = false;
      if (!arriving()) return close();  // idle: nothing came before the cancel
      arm();
      if (!parser_->is_header_done()) {
        http::async_read_header(socket_, buffer_, *parser_,
                                beast::bind_front_handler(&Session::on_header, shared_from_this()));
      } else {
        http::async_read(socket_, buffer_, *parser_, beast::bind_front_handler(&Session::on_body, shared_from_this()));
      }
      return;
    }
    const std::size_t limit = core_.options.max_body_bytes;
    if (ec == http::error::body_limit) {
      return fail(json_error(413, "request body is larger than the limit of " + std::to_string(limit) +
                                      " bytes (hint: send a smaller request, or raise the server's --max-body-mib)"));
    }
    if (ec == http::error::header_limit) {
      return fail(json_error(431, "request header fields are larger than the limit of " +
                                      std::to_string(core_.options.max_header_bytes) + " bytes"));
    }
    if (ec.category() == beast::error_code(http::error::end_of_stream).category() && ec != http::error::end_of_stream &&
        ec != http::error::partial_message) {
      return fail(json_error(400, "malformed HTTP request: " + ec.message()));
    }
    close();  // end of stream, timeout, reset, cancelled: nothing to answer
  }

  void on_body(beast::error_code ec, std::size_t) {
    if (ec) return on_read_error(ec);
    if (buffer_.capacity() > 4 * kBufferBytes && buffer_.size() == 0) {  // after a large body
      buffer_.shrink_to_fit();
      buffer_.reserve(kBufferBytes);
    }
    auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    head_ = req.method() == http::verb::head;
    HttpRequest r;
    r.method = method_of(req.method());
    r.target = sv(req.target());
    r.authorization = sv(req[http::field::authorization]);
    r.x_api_key = sv(req["X-API-Key"]);
    r.content_encoding = sv(req[http::field::content_encoding]);
    r.accept_encoding = sv(req[http::field::accept_encoding]);
    if (auto it = req.find("Inference-Header-Content-Length"); it != req.end())
      r.inference_header_length = sv(it->value());
    if (!req.body().empty()) r.body = std::make_shared<const std::string>(std::move(req.body()));
    state_ = State::kBusy;
    disarm();  // the engine's time is the engine's (its queue policy and timeouts)
    self_ = shared_from_this();
    const std::uint64_t seq = ++seq_;
    try {
      handler_(r, make_reply(seq));
    } catch (...) {  // the handlers catch everything themselves; this is the last line
      if (state_ == State::kBusy && seq_ == seq) {
        self_.reset();
        write(json_error(500, "internal error"));
      }
    }
  }

  Reply make_reply(std::uint64_t seq) {
    return [weak = weak_from_this(), gate = core_.gate, seq](HttpResponse response) {
      if (!gate->enter()) return;  // the server stopped: drop it
      {
        std::shared_ptr<Session> self = weak.lock();
        if (self) {
          auto executor = self->socket_.get_executor();
          net::dispatch(executor, [self = std::move(self), seq, response = std::move(response)]() mutable {
            self->on_response(seq, std::move(response));
          });
        }
      }
      gate->leave();
    };
  }

  void on_response(std::uint64_t seq, HttpResponse response) {
    if (state_ != State::kBusy || seq != seq_) return;  // a second reply, or the connection was aborted
    self_.reset();
    write(std::move(response));
  }

  // An error before the request was read whole: answer, then close without reading more.
  void fail(HttpResponse response) {
    keep_alive_ = false;
    head_ = false;
    if (parser_ && parser_->is_header_done()) version_ = parser_->get().version();
    linger_ = true;
    write(std::move(response));
  }

  void write(HttpResponse r) {
    state_ = State::kWriting;
    res_ = {};
    res_.version(version_);
    res_.result(static_cast<unsigned>(r.status));
    if (!r.content_type.empty()) res_.set(http::field::content_type, r.content_type);
    if (r.inference_header_length)
      res_.set("Inference-Header-Content-Length", std::to_string(*r.inference_header_length));
    if (!r.allow.empty()) res_.set(http::field::allow, r.allow);
    if (!r.content_encoding.empty()) res_.set(http::field::content_encoding, r.content_encoding);
    close_after_ = r.close || !keep_alive_ || core_.stopping.load();
    res_.keep_alive(!close_after_);
    if (head_) {
      res_.content_length(r.body.size());  // HEAD: the length of the body a GET would get, no body
    } else {
      res_.body() = std::move(r.body);
      res_.prepare_payload();
    }
    arm();
    http::async_write(socket_, res_, beast::bind_front_handler(&Session::on_write, shared_from_this()));
  }

  void on_write(beast::error_code ec, std::size_t) {
    res_ = {};  // an idle connection holds no response
    if (ec) return close();
    if (linger_ && !core_.stopping.load()) return linger();
    if (close_after_) return close();
    read_header();
  }

  // After an error response to a request whose body was not read: stop sending and discard what
  // the client still sends (at most 2 s), so that closing does not reset the connection before the
  // client has read the answer.
  void linger() {
    state_ = State::kReading;
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    arm(std::chrono::seconds(2));  // once: a client that keeps sending is cut off all the same
    discard_.resize(16 << 10);
    discard();
  }
  void discard() {
    socket_.async_read_some(net::buffer(discard_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return self->close();
      self->discard();
    });
  }

  void close() {
    if (state_ == State::kClosed) return;
    state_ = State::kClosed;
    beast::error_code ignored;
    disarm();
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  tcp::socket socket_;
  Core& core_;
  const Handler& handler_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::empty_body> continue_;
  http::response<http::string_body> res_;
  std::string discard_;
  std::shared_ptr<Session> self_;          // while the handler holds the request
  std::atomic<std::int64_t> deadline_{0};  // steady_clock ticks; 0: none
  State state_ = State::kReading;
  std::uint64_t seq_ = 0;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool head_ = false;
  bool close_after_ = false;
  bool linger_ = false;
  bool close_if_idle_ = false;  // close_if_idle() cancelled the read
};

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(IoPool& pool, Core& core, const Handler& handler)
      : pool_(pool), acceptor_(pool.first()), retry_(pool.first()), core_(core), handler_(handler) {}

  // Binds and listens; `flag` names the CLI option that picks this port.
  void bind(const tcp::endpoint& endpoint, const std::string& address, const char* flag) {
    beast::error_code ec;
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (ec == net::error::address_in_use) {
      throw Error(
          ErrorCode::kUnavailable, "port " + std::to_string(endpoint.port()) + " is in use on " + address,
          std::string("stop the other server on it, or pick another port with ") + flag + " (0: any free port)");
    }
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      throw Error(ErrorCode::kUnavailable,
                  "cannot listen on " + address + ":" + std::to_string(endpoint.port()) + ": " + ec.message(),
                  std::string("check --address and ") + flag);
    }
  }
  int port() const { return acceptor_.local_endpoint().port(); }

  void accept() {
    acceptor_.async_accept(pool_.next(), beast::bind_front_handler(&Listener::on_accept, shared_from_this()));
  }
  void close() {
    net::post(acceptor_.get_executor(), [self = shared_from_this()] {
      beast::error_code ignored;
      self->acceptor_.close(ignored);
      self->retry_.cancel();
    });
  }

 private:
  void on_accept(beast::error_code ec, tcp::socket socket) {  // on the first context; `socket` on next()'s
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) {  // e.g. out of file descriptors: try again shortly instead of spinning
      retry_.expires_after(std::chrono::milliseconds(50));
      retry_.async_wait([self = shared_from_this()](beast::error_code e) {
        if (!e) self->accept();
      });
      return;
    }
    if (core_.stopping.load()) return;  // the socket closes as it goes out of scope
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    std::make_shared<Session>(std::move(socket), core_, handler_)->start();
    accept();
  }

  IoPool& pool_;
  tcp::acceptor acceptor_;
  net::steady_timer retry_;
  Core& core_;
  const Handler& handler_;
};

}  // namespace

struct HttpServer::Impl {
  Impl(Engine& e, HttpOptions o)
      : engine(e),
        core(std::move(o)),
        router(e, core.options),
        api([this](const HttpRequest& r, Reply reply) { router.handle(r, std::move(reply)); }),
        metrics([this](const HttpRequest& r, Reply reply) {
          reply(metrics_response(r, engine, core.options.metric_names));
        }),
        pool(core.options.resolved_threads(), core.options.busy_poll),
        sweeper(pool.first()) {}

  // Sessions alive now (skipping any already being destroyed).
  std::vector<std::shared_ptr<Session>> sessions() {
    std::vector<std::shared_ptr<Session>> out;
    std::lock_guard lock(core.mu);
    for (Session* s : core.sessions) {
      if (auto p = s->weak_from_this().lock()) out.push_back(std::move(p));
    }
    return out;
  }
  // Closes sessions whose deadline passed, then runs again after a tenth of the idle timeout
  // (50 ms .. 1 s).
  void sweep() {
    const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    std::vector<std::shared_ptr<Session>> due;
    {
      std::lock_guard lock(core.mu);
      for (Session* s : core.sessions) {
        if (!s->overdue(now)) continue;
        if (auto p = s->weak_from_this().lock()) due.push_back(std::move(p));
      }
    }
    for (const auto& s : due) s->expire();
    due.clear();
    const auto period = std::clamp<std::chrono::steady_clock::duration>(
        core.options.idle_timeout / 10, std::chrono::milliseconds(50), std::chrono::seconds(1));
    sweeper.expires_after(period);
    sweeper.async_wait([this](beast::error_code ec) {
      if (!ec) sweep();
    });
  }
  bool wait_sessions(std::chrono::milliseconds timeout) {
    std::unique_lock lock(core.mu);
    return core.cv.wait_for(lock, timeout, [this] { return core.sessions.empty(); });
  }

  Engine& engine;
  Core core;  // before the pool: outlives the sessions its io_contexts destroy
  Router router;
  Handler api, metrics;
  IoPool pool;
  net::steady_timer sweeper;  // after the pool: destroyed before it
  std::shared_ptr<Listener> http_listener, metrics_listener;
  int http_port = -1, metrics_port = -1;
  bool started = false, stopped = false;
};

HttpServer::HttpServer(Engine& engine, HttpOptions options)
    : impl_(std::make_unique<Impl>(engine, std::move(options))) {}

HttpServer::~HttpServer() { stop(); }

int HttpServer::http_port() const { return impl_->http_port; }
int HttpServer::metrics_port() const { return impl_->metrics_port; }

void HttpServer::start() {
  Impl& m = *impl_;
  GB_CHECK(!m.started, FailedPrecondition, "the HTTP server was already started", std::string("start it once"));
  const HttpOptions& o = m.core.options;
  o.validate();
  beast::error_code ec;
  tcp::resolver resolver(m.pool.first());
  auto results = resolver.resolve(o.address, "0", tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "cannot resolve the address '" + o.address + "': " + ec.message(),
                std::string("pass --address as an IP address: 0.0.0.0 (every interface), 127.0.0.1 or ::"));
  }
  const auto ip = results.begin()->endpoint().address();
  auto http_listener = std::make_shared<Listener>(m.pool, m.core, m.api);
  http_listener->bind(tcp::endpoint(ip, static_cast<unsigned short>(o.http_port)), o.address, "--http-port");
  std::shared_ptr<Listener> metrics_listener;
  if (o.metrics_port >= 0) {
    metrics_listener = std::make_shared<Listener>(m.pool, m.core, m.metrics);
    metrics_listener->bind(tcp::endpoint(ip, static_cast<unsigned short>(o.metrics_port)), o.address, "--metrics-port");
  }
  m.http_port = http_listener->port();
  m.metrics_port = metrics_listener ? metrics_listener->port() : -1;
  m.http_listener = std::move(http_listener);
  m.metrics_listener = std::move(metrics_listener);

  m.pool.run();
  net::post(m.pool.first(), [&m] { m.sweep(); });
  m.http_listener->accept();
  if (m.metrics_listener) m.metrics_listener->accept();
  m.started = true;
}

void HttpServer::stop(std::chrono::milliseconds grace) {
  Impl& m = *impl_;
  if (!m.started || m.stopped) return;
  m.stopped = true;
  m.core.stopping.store(true);
  m.http_listener->close();
  if (m.metrics_listener) m.metrics_listener->close();
  for (const auto& s : m.sessions()) s->begin_stop();
  if (!m.wait_sessions(grace)) {
    for (const auto& s : m.sessions()) s->abort();
    m.wait_sessions(std::chrono::seconds(1));  // closed sockets end their operations at once
  }
  m.pool.stop();
  m.core.gate->close();
  for (const auto& s : m.sessions()) s->release();
  m.http_listener.reset();
  m.metrics_listener.reset();
}

}  // namespace glassbox::serve
