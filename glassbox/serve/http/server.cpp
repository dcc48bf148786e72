// HttpServer on Boost.Beast: listeners, one session per connection, graceful stop; see server.h.
// Long because a session's states (reading with per-phase deadlines, held by the
// engine, writing, lingering, stopping) only make sense together; the framing rules themselves
// are request_parser.cpp.
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
// Reading. The session reads with async_read_some and feeds RequestParser (request_parser.h: the
// framing rules of RFC 9110/9112), so each read can move the request's deadline: waiting for the
// first byte is idle_timeout's; the head and then the body each have their own allowance, extended
// by the bytes received (HttpOptions). A request that cannot be framed is answered and the
// connection closed; so is one that arrives too slowly (408).
//
// Timeouts. Each I/O step (read, write a response, linger) stores a deadline in an atomic; one
// sweeper timer acts on the sessions past theirs. That costs no timer syscall per request (Beast's
// per-operation timers cost two). A request held by the engine has no deadline.
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
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "glassbox/base/error.h"
#include "glassbox/serve/http/metrics.h"
#include "glassbox/serve/http/request_parser.h"
#include "glassbox/serve/http/routes.h"
#include "glassbox/serve/net/gate.h"
#include "glassbox/serve/net/io_pool.h"
#include "glassbox/serve/net/listener.h"

namespace glassbox::serve {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

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
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] { self->next_request(); });
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
  // While reading: waiting for a request's first byte (idle_timeout), its head, or its body (each
  // with its own deadline, extended by the bytes received).
  enum class Phase { kIdle, kHead, kBody };
  static constexpr std::size_t kBufferBytes = 4 << 10;   // a connection's read buffer
  static constexpr std::size_t kMaxReadAhead = 8 << 20;  // room made for a large body

  using Clock = std::chrono::steady_clock;
  // The sweeper (HttpServer::Impl) closes a session whose deadline passed; 0: no deadline (the
  // engine holds the request). One atomic store per I/O step instead of a timer syscall.
  void arm_at(Clock::time_point t) { deadline_.store(t.time_since_epoch().count(), std::memory_order_relaxed); }
  void arm(Clock::duration d) { arm_at(Clock::now() + d); }
  void disarm() { deadline_.store(0, std::memory_order_relaxed); }

  // The deadline of the phase a request is in: its allowance from the phase's start, plus 1 s for
  // every min_request_rate bytes received in it (the head's capped at twice its allowance).
  void arm_phase() {
    const HttpOptions& o = core_.options;
    const Clock::duration base = phase_ == Phase::kHead ? Clock::duration(o.header_timeout) : o.body_timeout;
    Clock::duration extra{};
    if (o.min_request_rate > 0) {
      extra = std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(static_cast<double>(phase_bytes_) / static_cast<double>(o.min_request_rate)));
      if (phase_ == Phase::kHead) extra = std::min(extra, base);
    }
    arm_at(phase_start_ + base + extra);
  }

 public:
  bool overdue(std::int64_t now) const {
    const std::int64_t d = deadline_.load(std::memory_order_relaxed);
    return d != 0 && d <= now;
  }
  // Sweeper: act if the deadline still stands once on the session's thread. An idle connection
  // closes as begin_stop() closes it; a request arriving too slowly is answered 408 and closed.
  void expire() {
    net::post(socket_.get_executor(), [self = shared_from_this()] {
      if (!self->overdue(Clock::now().time_since_epoch().count())) return;
      if (self->state_ == State::kReading && !self->linger_) {
        if (self->phase_ == Phase::kIdle && !self->arriving()) return self->close_if_idle();
        if (self->phase_ != Phase::kIdle) {
          self->timed_out_ = true;  // on_read_error() answers once the read is cancelled
          beast::error_code ignored;
          self->socket_.cancel(ignored);
          return;
        }
      }
      self->close();
    });
  }

 private:
  void next_request() {
    state_ = State::kReading;
    close_if_idle_ = false;
    timed_out_ = false;
    parser_.emplace(ParserLimits{core_.options.max_header_bytes, core_.options.max_body_bytes});
    phase_ = Phase::kIdle;
    phase_bytes_ = 0;
    arm(core_.options.idle_timeout);
    if (buffer_.size() > 0) {  // a pipelined request's bytes arrived with the previous one
      begin_phase(Phase::kHead, 0);
      return parse();
    }
    read_some();
    // Stopping (a connection accepted, or a response promised keep-alive, just before): a request
    // already sent is read and answered, an idle connection closes.
    if (core_.stopping.load()) close_if_idle();
  }

  void begin_phase(Phase p, std::size_t bytes) {
    phase_ = p;
    phase_start_ = Clock::now();
    phase_bytes_ = bytes;
  }

  void read_some() {
    std::size_t n = kBufferBytes;
    if (parser_->head_done()) {  // the body: room for what is declared (bounded), or 64 KiB of chunks
      const auto declared = parser_->declared_length();
      const std::uint64_t have = parser_->request().body.size();
      n = declared ? static_cast<std::size_t>(std::clamp<std::uint64_t>(*declared > have ? *declared - have : 0,
                                                                        kBufferBytes, kMaxReadAhead))
                   : std::size_t{64} << 10;
    }
    socket_.async_read_some(buffer_.prepare(n), beast::bind_front_handler(&Session::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, std::size_t n) {
    if (ec) return on_read_error(ec);
    buffer_.commit(n);
    if (phase_ == Phase::kIdle) begin_phase(Phase::kHead, 0);
    phase_bytes_ += n;
    parse();
  }

  // Feeds what is buffered to the parser; reads more, answers a framing error, or hands the
  // request to the handler.
  void parse() {
    while (true) {
      const auto data = buffer_.data();
      const std::size_t used = parser_->put(std::string_view(static_cast<const char*>(data.data()), data.size()));
      buffer_.consume(used);
      if (const auto& f = parser_->failure()) return fail(json_error(f->status, f->message));
      if (parser_->done()) return dispatch();
      if (parser_->head_done() && phase_ == Phase::kHead) {
        begin_phase(Phase::kBody, buffer_.size());
        if (parser_->request().expect_continue) return send_continue();
      }
      if (used == 0 || buffer_.size() == 0) break;
    }
    arm_phase();
    read_some();
  }

  // Expect: 100-continue: the interim answer, then the body.
  void send_continue() {
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    arm(core_.options.idle_timeout);
    net::async_write(socket_, net::buffer(kContinue.data(), kContinue.size()),
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       if (ec) return self->close();
                       self->begin_phase(Phase::kBody, self->buffer_.size());
                       self->parse();
                     });
  }

  bool arriving() {
    beast::error_code ec;
    return (parser_ && parser_->started()) || buffer_.size() > 0 || socket_.available(ec) > 0;
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
    if (ec == net::error::operation_aborted && timed_out_ && state_ == State::kReading && !linger_) {
      timed_out_ = false;
      const bool head = phase_ == Phase::kHead;
      const auto& o = core_.options;
      return fail(
          json_error(408, std::string(head ? "the request head" : "the request body") + " did not arrive in time (" +
                              std::to_string((head ? o.header_timeout : o.body_timeout).count()) +
                              " ms, extended by 1 s per " + std::to_string(o.min_request_rate) + " bytes received)"));
    }
    if (ec == net::error::operation_aborted && close_if_idle_ && state_ == State::kReading && !linger_) {
      close_if_idle_ = false;
      if (!arriving()) return close();  // idle: nothing came before the cancel
      if (phase_ == Phase::kIdle) begin_phase(Phase::kHead, 0);
      if (buffer_.size() > 0) return parse();
      arm_phase();
      return read_some();
    }
    close();  // end of stream, timeout, reset, cancelled: nothing to answer
  }

  static Method method_of(std::string_view m) {
    switch (http::string_to_verb(beast::string_view(m.data(), m.size()))) {
      case http::verb::get: return Method::kGet;
      case http::verb::head: return Method::kHead;
      case http::verb::post: return Method::kPost;
      case http::verb::put: return Method::kPut;
      case http::verb::delete_: return Method::kDelete;
      default: return Method::kOther;
    }
    return Method::kOther;
  }

  void dispatch() {
    if (buffer_.capacity() > 4 * kBufferBytes && buffer_.size() == 0) {  // after a large body
      buffer_.shrink_to_fit();
      buffer_.reserve(kBufferBytes);
    }
    ParsedRequest& req = parser_->request();
    keep_alive_ = req.keep_alive;
    version_ = req.version;
    HttpRequest r;
    r.method = method_of(req.method);
    head_ = r.method == Method::kHead;
    r.method_name = req.method;
    r.target = req.target;
    r.authorization = req.authorization;
    r.x_api_key = req.x_api_key;
    r.content_encoding = req.content_encoding;
    r.accept_encoding = req.accept_encoding;
    if (req.inference_header_length) r.inference_header_length = *req.inference_header_length;
    if (!req.body.empty()) r.body = std::make_shared<const std::string>(std::move(req.body));
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

  // A request that cannot be framed or read whole: answer, then close without reading more.
  void fail(HttpResponse response) {
    keep_alive_ = false;
    head_ = false;
    if (parser_ && parser_->head_done()) version_ = parser_->request().version;
    linger_ = true;
    write(std::move(response));
  }

  void write(HttpResponse r) {
    state_ = State::kWriting;
    res_ = {};
    res_.version(version_ == 10 ? 10 : 11);
    res_.result(static_cast<unsigned>(r.status));
    if (!r.content_type.empty()) res_.set(http::field::content_type, r.content_type);
    if (r.inference_header_length)
      res_.set("Inference-Header-Content-Length", std::to_string(*r.inference_header_length));
    if (!r.allow.empty()) res_.set(http::field::allow, r.allow);
    if (!r.content_encoding.empty()) res_.set(http::field::content_encoding, r.content_encoding);
    if (!r.accept_encoding.empty()) res_.set(http::field::accept_encoding, r.accept_encoding);
    close_after_ = r.close || !keep_alive_ || core_.stopping.load();
    res_.keep_alive(!close_after_);
    if (head_) {
      res_.content_length(r.body.size());  // HEAD: the length of the body a GET would get, no body
    } else {
      res_.body() = std::move(r.body);
      res_.prepare_payload();
    }
    arm(core_.options.idle_timeout);
    http::async_write(socket_, res_, beast::bind_front_handler(&Session::on_write, shared_from_this()));
  }

  void on_write(beast::error_code ec, std::size_t) {
    res_ = {};  // an idle connection holds no response
    if (ec) return close();
    if (linger_ && !core_.stopping.load()) return linger();
    if (close_after_) return close();
    next_request();
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
  std::optional<RequestParser> parser_;
  http::response<http::string_body> res_;
  std::string discard_;
  std::shared_ptr<Session> self_;          // while the handler holds the request
  std::atomic<std::int64_t> deadline_{0};  // steady_clock ticks; 0: none
  State state_ = State::kReading;
  Phase phase_ = Phase::kIdle;
  Clock::time_point phase_start_{};
  std::size_t phase_bytes_ = 0;  // bytes received since the phase began
  std::uint64_t seq_ = 0;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool head_ = false;
  bool close_after_ = false;
  bool linger_ = false;
  bool close_if_idle_ = false;  // close_if_idle() cancelled the read
  bool timed_out_ = false;      // expire() cancelled a slow request's read
};

// Starts a session for each accepted connection (on the first context's thread).
Listener::OnSocket start_sessions(Core& core, const Handler& handler) {
  return [&core, &handler](tcp::socket socket) {
    if (core.stopping.load()) return;  // the socket closes as it goes out of scope
    std::make_shared<Session>(std::move(socket), core, handler)->start();
  };
}

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
  // Acts on sessions whose deadline passed, then runs again after a tenth of the shortest
  // timeout (50 ms .. 1 s).
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
    const HttpOptions& o = core.options;
    const auto shortest =
        std::min<std::chrono::steady_clock::duration>({o.idle_timeout, o.header_timeout, o.body_timeout});
    const auto period = std::clamp<std::chrono::steady_clock::duration>(shortest / 10, std::chrono::milliseconds(50),
                                                                        std::chrono::seconds(1));
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
  const auto ip = resolve_address(m.pool.first(), o.address);
  auto http_listener = std::make_shared<Listener>(m.pool, start_sessions(m.core, m.api));
  http_listener->bind(tcp::endpoint(ip, static_cast<unsigned short>(o.http_port)), o.address, "--http-port");
  std::shared_ptr<Listener> metrics_listener;
  if (o.metrics_port >= 0) {
    metrics_listener = std::make_shared<Listener>(m.pool, start_sessions(m.core, m.metrics));
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
