// The gRPC front end's HTTP/2 connection on nghttp2 (see connection.h). Long because the
// callbacks of one nghttp2 session, the calls' states and the connection's timers only make sense
// together; gRPC's message framing and header encodings are wire.cpp, the RPCs rpcs.cpp.
// Tested with grpc++ clients in server_test.cpp, stream_test.cpp and transport_test.cpp (raw
// HTTP/2 frames: bad headers, limits, compression, deadlines, pings), and with tritonclient.grpc
// and perf_analyzer in tests/serve/grpc_test.py.
//
// Lifetimes. The connection is kept alive by the shared_ptr bound into its pending read or write;
// engine answers reach it through a weak_ptr behind the server's Gate. A call is a Call in
// `calls_` from its HEADERS until nghttp2 closes its stream; an answer for a stream that is gone
// is dropped. Outgoing bytes: nghttp2_session_mem_send into `out_`, one async_write at a time.
#include "glassbox/serve/grpc/connection.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <nghttp2/nghttp2.h>

#include "glassbox/serve/grpc/wire.h"
#include "glassbox/serve/net/zlib.h"

namespace glassbox::serve {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
using grpc::Status;
using grpc::StatusCode;

constexpr std::size_t kReadBytes = 64 * 1024;
constexpr std::size_t kWriteBatch = 256 * 1024;  // bytes gathered from nghttp2 per write
constexpr std::int32_t kStreamWindow = 4 << 20;
constexpr std::int32_t kConnectionWindow = 16 << 20;
constexpr auto kHandshakeTimeout = std::chrono::seconds(20);
constexpr std::size_t kMaxHeaderBytes = 64 * 1024;     // also advertised in SETTINGS
constexpr std::uint32_t kMaxConcurrentStreams = 4096;  // calls open at once on one connection
constexpr Clock::time_point kNever = Clock::time_point::max();

nghttp2_nv header(std::string_view name, std::string_view value) {
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
                    NGHTTP2_NV_FLAG_NO_COPY_NAME};
}

// One call: an HTTP/2 stream from the client's HEADERS until nghttp2 closes it.
struct Call {
  explicit Call(std::int32_t id, std::size_t max_bytes) : id(id), reader(max_bytes) {}
  std::int32_t id;
  bool post = false, grpc_content = false;  // :method POST; content-type application/grpc[+...|;...]
  std::string path, encoding;               // path: only when it names no RPC (for the error)
  Metadata metadata;
  std::optional<Rpc> rpc;
  Clock::time_point deadline = kNever;
  MessageReader reader;
  std::vector<std::string> messages;  // a unary call's request (one expected)
  bool started = false;               // headers accepted, messages go to the RPC
  bool request_ended = false;         // the client's END_STREAM
  bool responded = false;             // response HEADERS submitted
  bool finished = false;              // the final status is decided (trailers queued or sent)
  bool reset_after = false;           // RST_STREAM once the status is sent: stop the client's upload
  std::size_t header_bytes = 0;       // the request headers' size, as SETTINGS_MAX_HEADER_LIST_SIZE counts
  int in_flight = 0;                  // requests the RPC has not answered yet
  std::vector<std::string> out;       // framed messages; out[next] is the one being sent
  std::size_t next = 0, offset = 0;   // offset: into out[next]
  Status final_status;
  std::string status_code, status_message;  // the trailers' values (kept alive for nghttp2)
};

class H2Connection final : public Connection {
 public:
  H2Connection(tcp::socket socket, ConnectionShared& shared) : socket_(std::move(socket)), shared_(shared) {}

  ~H2Connection() override {
    if (session_) nghttp2_session_del(session_);
    std::lock_guard lock(shared_.mu);
    shared_.connections.erase(this);
    shared_.cv.notify_all();
  }

  net::any_io_executor executor() { return socket_.get_executor(); }

  // Before start() is posted: a stop() from now on reaches this connection.
  void enroll() {
    std::lock_guard lock(shared_.mu);
    shared_.connections.insert(this);
  }

  void start() {
    handshake_deadline_ = Clock::now() + kHandshakeTimeout;
    publish_deadline();
    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, &H2Connection::on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, &H2Connection::on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &H2Connection::on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, &H2Connection::on_frame_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, &H2Connection::on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, &H2Connection::on_stream_close);
    nghttp2_option* opt = nullptr;
    nghttp2_option_new(&opt);
    nghttp2_option_set_no_auto_ping_ack(opt, 0);
    nghttp2_option_set_max_send_header_block_length(opt, 1 << 20);
    nghttp2_session_server_new2(&session_, cb, this, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
    const std::array<nghttp2_settings_entry, 4> settings{{
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, kMaxConcurrentStreams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<std::uint32_t>(kStreamWindow)},
        {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, 1u << 20},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<std::uint32_t>(kMaxHeaderBytes)},
    }};
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings.data(), settings.size());
    nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, kConnectionWindow);
    flush();
    read();
  }

  void begin_stop() override {
    net::post(socket_.get_executor(), [self = self()] {
      if (self->closed_ || self->stopping_) return;
      self->stopping_ = true;
      nghttp2_submit_goaway(self->session_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(self->session_),
                            NGHTTP2_NO_ERROR, nullptr, 0);
      self->flush();
    });
  }

  void abort() override {
    net::post(socket_.get_executor(), [self = self()] {
      if (self->closed_) return;
      self->stopping_ = true;
      std::vector<std::int32_t> open;
      for (const auto& [id, call] : self->calls_)
        if (!call->finished) open.push_back(id);
      for (std::int32_t id : open)
        self->fail(*self->calls_.at(id), Status(StatusCode::CANCELLED, "the server is shutting down"));
      self->closing_ = true;  // close once written
      self->flush();
    });
  }

  void check(Clock::time_point now) override {
    if (now.time_since_epoch().count() < next_deadline_.load(std::memory_order_relaxed)) return;
    next_deadline_.store(kNever.time_since_epoch().count());
    net::post(socket_.get_executor(), [self = self()] { self->on_timer(); });
  }

 private:
  std::shared_ptr<H2Connection> self() { return std::static_pointer_cast<H2Connection>(shared_from_this()); }
  static H2Connection& of(void* user) { return *static_cast<H2Connection*>(user); }
  // Runs a callback's body; an exception (out of memory) must not cross nghttp2's C frames: the
  // session fails and the connection closes.
  template <typename F>
  static int guarded(F&& body) {
    try {
      return body();
    } catch (...) {
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
  }
  const GrpcOptions& options() const { return shared_.options; }

  // ---- I/O -----------------------------------------------------------------------------------

  void read() {
    socket_.async_read_some(net::buffer(in_),
                            [self = self()](boost::system::error_code ec, std::size_t n) { self->on_read(ec, n); });
  }

  void on_read(boost::system::error_code ec, std::size_t n) {
    if (closed_) return;
    if (ec) return close();
    last_read_ = Clock::now();
    const ssize_t rv = nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(in_.data()), n);
    if (rv < 0) {  // a protocol error: nghttp2 queued GOAWAY where it could
      closing_ = true;
    }
    flush();
    if (!closing_ && !closed_) read();
  }

  void flush() {
    if (writing_ || closed_) return;
    out_.clear();
    while (out_.size() < kWriteBatch) {
      const uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(session_, &data);
      if (n < 0) {
        closing_ = true;
        break;
      }
      if (n == 0) break;
      out_.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
    }
    if (out_.empty()) {
      if (closing_ || (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_))) close();
      return;
    }
    writing_ = true;
    net::async_write(socket_, net::buffer(out_), [self = self()](boost::system::error_code ec, std::size_t) {
      self->writing_ = false;
      if (ec) return self->close();
      self->flush();
    });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    calls_.clear();
    timed_calls_ = 0;
  }

  // ---- timers --------------------------------------------------------------------------------

  // The earliest deadline of this connection, for the sweeper (check()).
  void publish_deadline() {
    Clock::time_point next = handshake_deadline_;
    if (timed_calls_ > 0) {
      for (const auto& [id, call] : calls_)
        if (!call->finished) next = std::min(next, call->deadline);
    }
    next = std::min(next, ping_deadline_);
    if (keepalive_wanted()) next = std::min(next, last_read_ + options().keepalive_time);
    next_deadline_.store(next.time_since_epoch().count(), std::memory_order_relaxed);
  }

  bool keepalive_wanted() const {
    if (ping_deadline_ != kNever || stopping_) return false;
    if (!options().keepalive_permit_without_calls && calls_.empty()) return false;
    return options().http2_max_pings_without_data == 0 || pings_without_data_ < options().http2_max_pings_without_data;
  }

  void on_timer() {
    if (closed_) return;
    const Clock::time_point now = Clock::now();
    if (now >= handshake_deadline_) return close();  // no preface: not an HTTP/2 client
    if (now >= ping_deadline_) return close();       // the keep-alive ping was not answered
    std::vector<std::int32_t> late;
    for (const auto& [id, call] : calls_)
      if (!call->finished && now >= call->deadline) late.push_back(id);
    for (std::int32_t id : late) {
      Call& call = *calls_.at(id);
      fail(call, Status(StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded"));
    }
    if (keepalive_wanted() && now >= last_read_ + options().keepalive_time) {
      nghttp2_submit_ping(session_, NGHTTP2_FLAG_NONE, nullptr);
      ++pings_without_data_;
      ping_deadline_ = now + options().keepalive_timeout;
    }
    publish_deadline();
    flush();
  }

  // ---- nghttp2 callbacks ---------------------------------------------------------------------

  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    H2Connection& c = of(user);
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    c.calls_.emplace(
        frame->hd.stream_id,
        std::make_unique<Call>(frame->hd.stream_id, static_cast<std::size_t>(c.options().max_receive_bytes)));
    return 0;
  }

  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                       const uint8_t* value, size_t valuelen, uint8_t, void* user) {
    return guarded([&] { return of(user).on_request_header(frame, name, namelen, value, valuelen); });
  }

  int on_request_header(const nghttp2_frame* frame, const uint8_t* name, size_t namelen, const uint8_t* value,
                        size_t valuelen) {
    H2Connection& c = *this;
    Call* call = c.find(frame->hd.stream_id);
    if (call == nullptr || call->started) return 0;  // trailers from the client are ignored
    call->header_bytes += namelen + valuelen + 32;   // RFC 9113's accounting of a field
    if (call->header_bytes > kMaxHeaderBytes) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // resets the stream
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":method") {
      call->post = v == "POST";
    } else if (n == ":path") {
      call->rpc = find_rpc(v);
      if (!call->rpc) call->path = std::move(v);
    } else if (n == "content-type") {
      const std::string_view ct = v;
      call->grpc_content =
          ct.substr(0, 16) == "application/grpc" && (ct.size() == 16 || ct[16] == '+' || ct[16] == ';');
    } else if (n == "grpc-encoding") {
      call->encoding = v;
    } else if (n == "grpc-timeout") {
      if (auto t = parse_grpc_timeout(v)) {
        const auto limit = std::chrono::hours(24 * 365);
        if (call->deadline == kNever) ++c.timed_calls_;
        call->deadline = Clock::now() + std::min<Clock::duration>(*t, limit);
      }
    } else if (!n.empty() && n[0] != ':' && n != "te" && n != "user-agent" && n != "grpc-accept-encoding") {
      call->metadata.emplace_back(std::string(n), std::string(v));
    }
    return 0;
  }

  static int on_data_chunk(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len, void* user) {
    return guarded([&] {
      H2Connection& c = of(user);
      Call* call = c.find(id);
      if (call == nullptr || call->finished) return 0;
      call->reader.feed(std::string_view(reinterpret_cast<const char*>(data), len));
      c.take_messages(*call);
      return 0;
    });
  }

  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    return guarded([&] { return of(user).frame_received(frame); });
  }

  int frame_received(const nghttp2_frame* frame) {
    H2Connection& c = *this;
    c.handshake_deadline_ = kNever;  // the preface and a frame arrived: an HTTP/2 client
    switch (frame->hd.type) {
      case NGHTTP2_HEADERS:
        if (Call* call = c.find(frame->hd.stream_id)) {
          if (!call->started && !call->finished) c.begin(*call);
          if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) c.request_ended(*call);
        }
        break;
      case NGHTTP2_DATA:
        if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
          if (Call* call = c.find(frame->hd.stream_id)) c.request_ended(*call);
        }
        c.pings_without_data_ = 0;
        break;
      case NGHTTP2_PING:
        if (frame->hd.flags & NGHTTP2_FLAG_ACK) {
          c.ping_deadline_ = kNever;
        } else {
          c.client_ping();
        }
        break;
      default: break;
    }
    c.publish_deadline();
    return 0;
  }

  static int on_frame_send(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
    H2Connection& c = of(user);
    if (frame->hd.type == NGHTTP2_HEADERS && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
      Call* call = c.find(frame->hd.stream_id);
      if (call != nullptr && call->reset_after && !call->request_ended)
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, call->id, NGHTTP2_NO_ERROR);
    }
    if (frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) {
      c.ping_strikes_ = 0;  // the server sent something: client pings are welcome again
      c.last_ping_recv_ = Clock::time_point::min();
      c.pings_without_data_ = 0;
      c.publish_deadline();
    }
    return 0;
  }

  static int on_stream_close(nghttp2_session*, int32_t id, uint32_t, void* user) {
    H2Connection& c = of(user);
    auto it = c.calls_.find(id);
    if (it == c.calls_.end()) return 0;
    if (it->second->deadline != kNever) --c.timed_calls_;
    c.calls_.erase(it);
    c.publish_deadline();
    return 0;
  }

  // The DATA of a call's response: its framed messages, then (NO_END_STREAM) its trailers.
  static ssize_t read_data(nghttp2_session* session, int32_t id, uint8_t* buf, size_t length, uint32_t* flags,
                           nghttp2_data_source*, void* user) {
    H2Connection& c = of(user);
    Call* call = c.find(id);
    if (call == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    std::size_t written = 0;
    while (written < length && call->next < call->out.size()) {
      const std::string& front = call->out[call->next];
      const std::size_t n = std::min(length - written, front.size() - call->offset);
      std::memcpy(buf + written, front.data() + call->offset, n);
      written += n;
      call->offset += n;
      if (call->offset == front.size()) {
        ++call->next;
        call->offset = 0;
      }
    }
    if (call->next > 0) {  // sent messages go at once (a long stream keeps only what is unsent)
      call->out.erase(call->out.begin(), call->out.begin() + static_cast<std::ptrdiff_t>(call->next));
      call->next = 0;
    }
    if (call->out.empty() && call->finished) {
      *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
      const std::array<nghttp2_nv, 2> trailers{header("grpc-status", call->status_code),
                                               header("grpc-message", call->status_message)};
      nghttp2_submit_trailer(session, id, trailers.data(), call->status_message.empty() ? 1 : 2);
    } else if (written == 0) {
      return NGHTTP2_ERR_DEFERRED;
    }
    return static_cast<ssize_t>(written);
  }

  // ---- calls ---------------------------------------------------------------------------------

  Call* find(std::int32_t id) {
    auto it = calls_.find(id);
    return it == calls_.end() ? nullptr : it->second.get();
  }

  // The request headers are complete: accept the call, or end it at once.
  void begin(Call& call) {
    if (!call.post) return http_error(call, "405");
    if (!call.grpc_content) return http_error(call, "415");
    if (!call.rpc) return fail(call, Status(StatusCode::UNIMPLEMENTED, "unknown method '" + call.path + "'"));
    if (!call.encoding.empty() && call.encoding != "identity" && call.encoding != "gzip" &&
        call.encoding != "deflate") {
      return fail(call, Status(StatusCode::UNIMPLEMENTED,
                               "grpc-encoding '" + call.encoding + "' is not supported (identity, deflate, gzip are)"));
    }
    if (auto refused = shared_.rpcs.refuse(*call.rpc, call.metadata)) return fail(call, *refused);
    call.started = true;
  }

  // Hands the messages that are complete to the RPC (a stream) or keeps them (a unary call).
  void take_messages(Call& call) {
    while (!call.finished) {
      std::optional<MessageReader::Message> m = call.reader.next();
      if (!m) break;
      std::string bytes;
      if (!inflate(call, *m, bytes)) return;
      if (!call.started) continue;
      if (*call.rpc == Rpc::kModelStreamInfer) {
        ++call.in_flight;
        shared_.rpcs.stream_request(std::move(bytes), reply_to(call.id));
      } else if (call.messages.empty()) {
        call.messages.push_back(std::move(bytes));
      } else {  // a unary call takes one message: a second is refused as it arrives
        fail(call, Status(StatusCode::INTERNAL, "the unary call carried more than one request message"));
        return;
      }
    }
    if (call.reader.error() && !call.finished) fail(call, *call.reader.error());
  }

  bool inflate(Call& call, MessageReader::Message& m, std::string& out) {
    if (!m.compressed) {
      out = std::move(m.bytes);
      return true;
    }
    if (call.encoding.empty() || call.encoding == "identity") {
      fail(call, Status(StatusCode::INTERNAL, "a message is marked compressed but the call has no grpc-encoding"));
      return false;
    }
    std::string error;
    const int window = call.encoding == "gzip" ? kGzipWindow : kZlibWindow;
    const auto max = static_cast<std::size_t>(options().max_receive_bytes);
    switch (inflate_limited(m.bytes, window, max, out, error)) {
      case Inflated::kOk: return true;
      case Inflated::kCorrupt:
        fail(call, Status(StatusCode::INTERNAL, "cannot decompress a " + call.encoding + " message: " + error));
        return false;
      case Inflated::kTooLarge:
        fail(call, Status(StatusCode::RESOURCE_EXHAUSTED,
                          "received message larger than max after decompression (limit " + std::to_string(max) + ")"));
        return false;
    }
    return false;
  }

  void request_ended(Call& call) {
    call.request_ended = true;
    if (!call.started || call.finished) return;
    if (!call.reader.at_boundary()) {
      return fail(call, Status(StatusCode::INTERNAL, "the request ended inside a message"));
    }
    if (*call.rpc == Rpc::kModelStreamInfer) return maybe_end_stream(call);
    if (call.messages.empty()) {
      return fail(call, Status(StatusCode::UNIMPLEMENTED, "the unary call carried no request message"));
    }
    ++call.in_flight;
    std::string bytes = std::move(call.messages.front());
    call.messages.clear();
    shared_.rpcs.unary(*call.rpc, std::move(bytes), reply_to(call.id));
  }

  // The callback an RPC answers through: from any thread, to this connection's.
  Reply reply_to(std::int32_t id) {
    return [weak = std::weak_ptr<Connection>(shared_from_this()), gate = shared_.gate, exec = socket_.get_executor(),
            id](Answer answer) {
      if (!gate->enter()) return;
      net::post(exec, [weak, id, answer = std::move(answer)]() mutable {
        if (auto c = weak.lock()) std::static_pointer_cast<H2Connection>(c)->answered(id, std::move(answer));
      });
      gate->leave();
    };
  }

  void answered(std::int32_t id, Answer answer) {
    if (closed_) return;
    Call* call = find(id);
    if (call == nullptr || call->finished) return;  // cancelled, reset, or past its deadline
    --call->in_flight;
    Status s = answer.status;
    std::string framed(5, '\0');  // the message's prefix, then the message
    if (s.ok()) s = answer.serialize(framed);
    if (s.ok() && framed.size() - 5 > static_cast<std::size_t>(options().max_send_bytes)) {
      s = Status(StatusCode::RESOURCE_EXHAUSTED, "the response is larger than the server's limit of " +
                                                     std::to_string(options().max_send_bytes) + " bytes");
    }
    if (s.ok()) set_prefix(framed);
    if (*call->rpc == Rpc::kModelStreamInfer) {
      if (s.ok()) send(*call, std::move(framed));
      maybe_end_stream(*call);
    } else if (s.ok()) {
      send(*call, std::move(framed));
      finish(*call, Status::OK);
    } else {
      fail(*call, s);
    }
    flush_soon();
  }

  // One write for the answers the engine posted together: the flush runs after the handlers
  // already queued on this thread (the rest of a batch's answers).
  void flush_soon() {
    if (flush_posted_) return;
    flush_posted_ = true;
    net::post(socket_.get_executor(), [self = self()] {
      self->flush_posted_ = false;
      self->flush();
    });
  }

  void maybe_end_stream(Call& call) {
    if (call.request_ended && call.in_flight == 0 && !call.finished) finish(call, Status::OK);
  }

  // Queues one framed response message (the response HEADERS first).
  void send(Call& call, std::string framed) {
    call.out.push_back(std::move(framed));
    respond(call);
  }

  void respond(Call& call) {
    if (call.responded) {
      nghttp2_session_resume_data(session_, call.id);
      return;
    }
    call.responded = true;
    const std::array<nghttp2_nv, 2> headers{header(":status", "200"), header("content-type", "application/grpc")};
    nghttp2_data_provider provider{};
    provider.read_callback = &H2Connection::read_data;
    nghttp2_submit_response(session_, call.id, headers.data(), headers.size(), &provider);
  }

  // Ends the call with `status`: trailers after its messages.
  void finish(Call& call, const Status& status) {
    call.finished = true;
    call.status_code = std::to_string(static_cast<int>(status.error_code()));
    call.status_message = percent_encode(status.error_message());
    respond(call);
    publish_deadline();
  }

  // Ends the call with an error: trailers-only when nothing was sent yet.
  void fail(Call& call, const Status& status) {
    if (call.finished) return;
    call.reset_after = !call.request_ended;  // the rest of the upload is not wanted
    if (call.responded) return finish(call, status);
    call.finished = true;
    call.responded = true;
    call.status_code = std::to_string(static_cast<int>(status.error_code()));
    call.status_message = percent_encode(status.error_message());
    std::vector<nghttp2_nv> headers{header(":status", "200"), header("content-type", "application/grpc"),
                                    header("grpc-status", call.status_code)};
    if (!call.status_message.empty()) headers.push_back(header("grpc-message", call.status_message));
    if (status.error_code() == StatusCode::UNIMPLEMENTED && !call.encoding.empty())
      headers.push_back(header("grpc-accept-encoding", "identity,deflate,gzip"));
    nghttp2_submit_response(session_, call.id, headers.data(), headers.size(), nullptr);
    publish_deadline();
  }

  // A response for a request that is not gRPC: the HTTP status alone.
  void http_error(Call& call, const char* code) {
    call.finished = true;
    call.reset_after = !call.request_ended;
    call.responded = true;
    call.status_code = code;
    const std::array<nghttp2_nv, 1> headers{header(":status", call.status_code)};
    nghttp2_submit_response(session_, call.id, headers.data(), headers.size(), nullptr);
  }

  // A client's PING closer to the previous one than the allowed interval, with nothing sent by
  // the server in between, is a strike (gRPC's policy): the interval is
  // http2_min_ping_interval, or 2 hours while no call is open unless keep-alive pings without
  // calls are permitted. Past http2_max_ping_strikes: GOAWAY ENHANCE_YOUR_CALM "too_many_pings".
  void client_ping() {
    const Clock::time_point now = Clock::now();
    const bool idle = calls_.empty() && !options().keepalive_permit_without_calls;
    const auto interval =
        idle ? std::max<std::chrono::milliseconds>(options().http2_min_ping_interval, std::chrono::hours(2))
             : options().http2_min_ping_interval;
    if (last_ping_recv_ != Clock::time_point::min() && now - last_ping_recv_ < interval) {
      ++ping_strikes_;
      if (options().http2_max_ping_strikes > 0 && ping_strikes_ > options().http2_max_ping_strikes) {
        static constexpr std::string_view kWhy = "too_many_pings";
        nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(session_),
                              NGHTTP2_ENHANCE_YOUR_CALM, reinterpret_cast<const uint8_t*>(kWhy.data()), kWhy.size());
        closing_ = true;
      }
    }
    last_ping_recv_ = now;
  }

  tcp::socket socket_;
  ConnectionShared& shared_;
  nghttp2_session* session_ = nullptr;
  std::array<char, kReadBytes> in_{};
  std::string out_;
  bool writing_ = false, closing_ = false, closed_ = false, stopping_ = false, flush_posted_ = false;
  std::unordered_map<std::int32_t, std::unique_ptr<Call>> calls_;
  Clock::time_point handshake_deadline_ = kNever, ping_deadline_ = kNever;
  Clock::time_point last_read_ = Clock::now(), last_ping_recv_ = Clock::time_point::min();
  int pings_without_data_ = 0, ping_strikes_ = 0;
  int timed_calls_ = 0;  // calls with a grpc-timeout (publish_deadline looks at calls only then)
  std::atomic<Clock::rep> next_deadline_{kNever.time_since_epoch().count()};
};

}  // namespace

void start_connection(tcp::socket socket, ConnectionShared& shared) {
  auto c = std::make_shared<H2Connection>(std::move(socket), shared);
  c->enroll();
  net::post(c->executor(), [c] { c->start(); });
}

}  // namespace glassbox::serve
