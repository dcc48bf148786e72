// run_grpc_load: a closed loop of gRPC calls over HTTP/2 on nghttp2 (see grpc_load.h), and one
// checked call through grpc++.
//
// Each worker thread runs an io_context with its share of the connections. A unary connection
// keeps its share of the calls in flight as HTTP/2 streams: a stream that closes records the call
// (grpc-status 0 in its trailers: success) and a new one starts. A streaming connection keeps one
// ModelStreamInfer stream with its share of requests outstanding: each answer message completes the
// oldest request and sends another.
#include "bench/grpc_load.h"

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <unordered_map>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <grpcpp/create_channel.h>
#include <grpcpp/grpcpp.h>
#include <nghttp2/nghttp2.h>

#include "glassbox/base/error.h"
#include "glassbox/serve/grpc/proto/grpc_service.grpc.pb.h"

namespace glassbox::bench {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;
constexpr std::string_view kModelInfer = "/inference.GRPCInferenceService/ModelInfer";
constexpr std::string_view kModelStreamInfer = "/inference.GRPCInferenceService/ModelStreamInfer";

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

std::shared_ptr<grpc::Channel> make_channel(const std::string& host, int port) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return grpc::CreateCustomChannel(host + ":" + std::to_string(port), grpc::InsecureChannelCredentials(), args);
}

struct Figures {
  LatencyHistogram latency;
  std::uint64_t completed = 0, ok = 0, transport_window = 0, failed_total = 0, completed_total = 0, bytes = 0;
  std::map<int, std::uint64_t> codes;  // window: grpc-status -> calls (a failed stream answer counts as 2, UNKNOWN)
  std::string first_failure;
};

struct Window {
  Clock::time_point start, end;
  bool contains(Clock::time_point t) const { return t >= start && t <= end; }
};

// One HTTP/2 connection of the load: `depth` calls in flight (unary: that many streams; streaming:
// one stream with that many requests outstanding). Runs on its worker's io_context.
class H2Channel {
 public:
  H2Channel(net::io_context& ioc, const tcp::endpoint& server, const std::string& framed, int depth, bool streaming,
            Window window, Figures& f)
      : socket_(ioc), retry_(ioc), framed_(framed), depth_(depth), streaming_(streaming), window_(window), f_(f) {
    boost::system::error_code ec;
    socket_.connect(server, ec);
    GB_CHECK(!ec, Unavailable, "gRPC load: cannot connect to " << server << ": " << ec.message(),
             std::string("start glassbox serve with --grpc-port, and check the port"));
    socket_.set_option(tcp::no_delay(true));
    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, &H2Channel::on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, &H2Channel::on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, &H2Channel::on_close);
    nghttp2_session_client_new(&session_, cb, this);
    nghttp2_session_callbacks_del(cb);
    const std::array<nghttp2_settings_entry, 2> settings{
        {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 4u << 20}, {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, 1u << 20}}};
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings.data(), settings.size());
    nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 16 << 20);
  }
  ~H2Channel() { nghttp2_session_del(session_); }

  void start() {
    if (streaming_) {
      open_stream();
    } else {
      for (int i = 0; i < depth_; ++i) submit_call();
    }
    flush();
    read();
  }
  bool done() const { return done_; }

 private:
  // A unary call's or the stream's state.
  struct Call {
    Clock::time_point sent;
    std::size_t offset = 0;  // into framed_ (unary) or into the message being sent (stream)
    int status = -1;         // grpc-status (-1: none seen)
    bool http_ok = false;
    std::uint64_t bytes = 0;
  };

  static H2Channel& of(void* user) { return *static_cast<H2Channel*>(user); }

  std::vector<nghttp2_nv> headers() {
    static const std::array<std::pair<std::string_view, std::string_view>, 6> kHeaders{{
        {":method", "POST"},
        {":scheme", "http"},
        {":authority", "glassbox"},
        {":path", ""},
        {"content-type", "application/grpc"},
        {"te", "trailers"},
    }};
    std::vector<nghttp2_nv> nv;
    for (const auto& [k, v] : kHeaders) {
      const std::string_view value = k == ":path" ? (streaming_ ? kModelStreamInfer : kModelInfer) : v;
      nv.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(k.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), k.size(), value.size(),
                    NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE});
    }
    return nv;
  }

  void submit_call() {
    auto call = std::make_unique<Call>();
    call->sent = Clock::now();
    nghttp2_data_provider provider{};
    provider.read_callback = &H2Channel::read_unary;
    const std::vector<nghttp2_nv> nv = headers();
    const std::int32_t id = nghttp2_submit_request(session_, nullptr, nv.data(), nv.size(), &provider, call.get());
    if (id < 0) return fail_all("gRPC load: nghttp2 refused a request");
    calls_[id] = std::move(call);
  }

  void open_stream() {
    stream_ = std::make_unique<Call>();
    to_send_ = depth_;
    nghttp2_data_provider provider{};
    provider.read_callback = &H2Channel::read_stream;
    const std::vector<nghttp2_nv> nv = headers();
    stream_id_ = nghttp2_submit_request(session_, nullptr, nv.data(), nv.size(), &provider, stream_.get());
    if (stream_id_ < 0) fail_all("gRPC load: nghttp2 refused the stream");
  }

  // A unary call's body: the framed request, then END_STREAM.
  static ssize_t read_unary(nghttp2_session* session, int32_t id, uint8_t* buf, size_t length, uint32_t* flags,
                            nghttp2_data_source*, void* user) {
    H2Channel& c = of(user);
    auto* call = static_cast<Call*>(nghttp2_session_get_stream_user_data(session, id));
    const std::size_t n = std::min(length, c.framed_.size() - call->offset);
    std::memcpy(buf, c.framed_.data() + call->offset, n);
    call->offset += n;
    if (call->offset == c.framed_.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }

  static ssize_t read_stream(nghttp2_session*, int32_t, uint8_t* buf, size_t length, uint32_t* flags,
                             nghttp2_data_source*, void* user) {
    H2Channel& c = of(user);
    std::size_t written = 0;
    while (written < length && c.to_send_ > 0) {
      const std::size_t n = std::min(length - written, c.framed_.size() - c.stream_->offset);
      std::memcpy(buf + written, c.framed_.data() + c.stream_->offset, n);
      written += n;
      c.stream_->offset += n;
      if (c.stream_->offset == c.framed_.size()) {
        c.stream_->offset = 0;
        --c.to_send_;
        c.sent_.push_back(Clock::now());
      }
    }
    if (c.stopping_ && c.to_send_ == 0 && c.sent_.empty()) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;  // the window ended and every answer is in: close our side
      return static_cast<ssize_t>(written);
    }
    if (written == 0) return NGHTTP2_ERR_DEFERRED;
    return static_cast<ssize_t>(written);
  }

  static int on_header(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                       const uint8_t* value, size_t valuelen, uint8_t, void*) {
    auto* call = static_cast<Call*>(nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
    if (call == nullptr) return 0;
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":status") call->http_ok = v == "200";
    if (n == "grpc-status") call->status = std::atoi(std::string(v).c_str());
    return 0;
  }

  static int on_data(nghttp2_session* session, uint8_t, int32_t id, const uint8_t* data, size_t len, void* user) {
    H2Channel& c = of(user);
    auto* call = static_cast<Call*>(nghttp2_session_get_stream_user_data(session, id));
    if (call == nullptr) return 0;
    call->bytes += len;
    if (c.streaming_) c.stream_data(data, len);
    return 0;
  }

  // Stream answers: length-prefixed messages; each completes the oldest request in flight.
  void stream_data(const uint8_t* data, size_t len) {
    pending_.append(reinterpret_cast<const char*>(data), len);
    std::size_t at = 0;
    while (pending_.size() - at >= 5) {
      const auto* p = reinterpret_cast<const unsigned char*>(pending_.data() + at);
      const std::size_t n = (std::size_t{p[1]} << 24) | (std::size_t{p[2]} << 16) | (std::size_t{p[3]} << 8) | p[4];
      if (pending_.size() - at - 5 < n) break;
      // A ModelStreamInferResponse with error_message (field 1) set is a failed request.
      const bool failed = n > 0 && p[5] == 0x0a;
      answered(sent_.empty() ? Clock::now() : sent_.front(), failed ? 2 : 0, 5 + n,
               "gRPC stream: an answer carried error_message");
      if (!sent_.empty()) sent_.pop_front();
      at += 5 + n;
      if (!stopping_ && Clock::now() < window_.end) {
        ++to_send_;
      } else {
        stopping_ = true;
      }
      nghttp2_session_resume_data(session_, stream_id_);
    }
    pending_.erase(0, at);
  }

  // Records one call: `code` its grpc-status (0: success), -1 when the transport failed (a reset
  // stream, a broken connection, no status).
  void answered(Clock::time_point sent, int code, std::uint64_t bytes, const std::string& why) {
    const Clock::time_point now = Clock::now();
    const bool ok = code == 0;
    ++f_.completed_total;
    if (!ok) ++f_.failed_total;
    if (window_.contains(now)) {
      if (code < 0) {
        ++f_.transport_window;
      } else {
        ++f_.completed;
        ++f_.codes[code];
      }
      if (ok) {
        ++f_.ok;
        f_.bytes += bytes;
        f_.latency.record(std::chrono::duration_cast<std::chrono::nanoseconds>(now - sent).count());
      }
    }
    if (!ok && f_.first_failure.empty()) f_.first_failure = why;
  }

  static int on_close(nghttp2_session*, int32_t id, uint32_t error_code, void* user) {
    H2Channel& c = of(user);
    if (c.streaming_) {
      const bool clean = error_code == 0 && c.stream_ && c.stream_->status == 0;
      if (!clean && c.f_.first_failure.empty())
        c.f_.first_failure = "gRPC stream ended with status " + std::to_string(c.stream_ ? c.stream_->status : -1);
      for (const Clock::time_point sent : c.sent_)
        c.answered(sent, -1, 0, "gRPC stream: ended with requests unanswered");
      c.sent_.clear();
      c.done_ = true;
      return 0;
    }
    auto it = c.calls_.find(id);
    if (it == c.calls_.end()) return 0;
    const Call& call = *it->second;
    const int code = error_code != 0 || !call.http_ok ? -1 : call.status;
    const bool ok = code == 0;
    c.answered(
        call.sent, code, call.bytes,
        code < 0 ? "gRPC: the stream was reset or answered without gRPC status" : "gRPC " + std::to_string(code));
    c.calls_.erase(it);
    if (Clock::now() >= c.window_.end) {
      if (c.calls_.empty() && c.retries_ == 0) c.done_ = true;
    } else if (ok) {
      c.submit_call();
    } else {
      c.retry_later();  // a failed call is sent again after 10 ms: a failing server is not spun on
    }
    return 0;
  }

  void retry_later() {
    if (retries_++ > 0) return;  // the timer is set already
    retry_.expires_after(std::chrono::milliseconds(10));
    retry_.async_wait([this](boost::system::error_code ec) {
      const int n = std::exchange(retries_, 0);
      if (ec) return;
      if (Clock::now() >= window_.end) {
        if (calls_.empty()) done_ = true;
        return;
      }
      for (int i = 0; i < n; ++i) submit_call();
      flush();
    });
  }

  // The connection is lost: the calls in flight on it fail (so the figures show the loss) and the
  // channel stops.
  void fail_all(const std::string& why) {
    if (f_.first_failure.empty()) f_.first_failure = why;
    if (!done_) {
      for (const auto& [id, call] : calls_) answered(call->sent, -1, 0, why);
      for (const Clock::time_point sent : sent_) answered(sent, -1, 0, why);
    }
    calls_.clear();
    sent_.clear();
    done_ = true;
  }

  void read() {
    socket_.async_read_some(net::buffer(in_), [this](boost::system::error_code ec, std::size_t n) {
      if (ec) return fail_all("gRPC load: read: " + ec.message());
      if (nghttp2_session_mem_recv(session_, in_.data(), n) < 0) return fail_all("gRPC load: HTTP/2 protocol error");
      flush();
      if (!done_)
        read();
      else
        close();
    });
  }

  void flush() {
    if (writing_) return;
    out_.clear();
    const uint8_t* data = nullptr;
    ssize_t n = 0;
    while (out_.size() < (256u << 10) && (n = nghttp2_session_mem_send(session_, &data)) > 0)
      out_.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
    if (out_.empty()) return;
    writing_ = true;
    net::async_write(socket_, net::buffer(out_), [this](boost::system::error_code ec, std::size_t) {
      writing_ = false;
      if (ec) return fail_all("gRPC load: write: " + ec.message());
      flush();
    });
  }

  void close() {
    boost::system::error_code ignored;
    retry_.cancel();
    socket_.close(ignored);
  }

  tcp::socket socket_;
  net::steady_timer retry_;
  int retries_ = 0;  // failed calls waiting for the timer
  nghttp2_session* session_ = nullptr;
  const std::string& framed_;
  int depth_;
  bool streaming_;
  Window window_;
  Figures& f_;
  std::array<uint8_t, 64 * 1024> in_{};
  std::string out_;
  bool writing_ = false, done_ = false, stopping_ = false;
  std::unordered_map<std::int32_t, std::unique_ptr<Call>> calls_;
  // streaming
  std::unique_ptr<Call> stream_;
  std::int32_t stream_id_ = -1;
  int to_send_ = 0;
  std::deque<Clock::time_point> sent_;
  std::string pending_;
};

}  // namespace

void GrpcLoadOptions::validate() const {
  GB_CHECK(port > 0 && port < 65536, InvalidArgument, "gRPC load: port " << port << " is not a port",
           std::string("pass the server's --grpc-port"));
  GB_CHECK(concurrency >= 1 && channels >= 0 && threads >= 1 && threads <= 8, InvalidArgument,
           "gRPC load: concurrency >= 1, channels >= 0 and threads 1..8 needed",
           std::string("e.g. concurrency 32, threads 1"));
  GB_CHECK(seconds > 0 && warmup_seconds >= 0, InvalidArgument, "gRPC load: the window must be > 0 s",
           std::string("e.g. seconds 5"));
}

std::string grpc_infer_request(const InferSpec& spec, std::int64_t batch, std::uint64_t seed) {
  std::vector<std::int64_t> shape{batch};
  shape.insert(shape.end(), spec.dims.begin(), spec.dims.end());
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<float> values(static_cast<std::size_t>(n));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist;
  for (auto& v : values) v = dist(rng);
  inference::ModelInferRequest r;
  r.set_model_name(spec.model);
  auto* in = r.add_inputs();
  in->set_name(spec.input);
  in->set_datatype("FP32");
  for (auto d : shape) in->add_shape(d);
  r.add_outputs()->set_name(spec.output);
  r.add_raw_input_contents()->assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return r.SerializeAsString();
}

LoadResult run_grpc_load(const std::string& serialized_request, const GrpcLoadOptions& o) {
  o.validate();
  boost::system::error_code ec;
  const auto address = net::ip::make_address(o.host, ec);
  GB_CHECK(!ec, InvalidArgument, "gRPC load: '" << o.host << "' is not an IP address", std::string("e.g. 127.0.0.1"));
  const tcp::endpoint server(address, static_cast<unsigned short>(o.port));
  std::string framed(5, '\0');  // the gRPC message prefix, then the message
  const auto size = static_cast<std::uint32_t>(serialized_request.size());
  for (int i = 0; i < 4; ++i) framed[static_cast<std::size_t>(1 + i)] = static_cast<char>(size >> (24 - 8 * i));
  framed += serialized_request;

  const int channel_count = std::min(
      o.concurrency, o.channels > 0 ? o.channels : std::clamp((o.concurrency + 15) / 16, 1, o.streaming ? 8 : 4));
  const int threads = std::min(o.threads, channel_count);
  const Clock::time_point start = Clock::now();
  Window window;
  window.start = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.warmup_seconds));
  window.end = window.start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  std::vector<Figures> figures(static_cast<std::size_t>(threads));
  std::vector<std::unique_ptr<net::io_context>> contexts;
  std::vector<std::unique_ptr<H2Channel>> channels;
  for (int t = 0; t < threads; ++t) contexts.push_back(std::make_unique<net::io_context>(1));
  for (int i = 0; i < channel_count; ++i) {
    const int depth = o.concurrency / channel_count + (i < o.concurrency % channel_count ? 1 : 0);
    const auto t = static_cast<std::size_t>(i % threads);
    channels.push_back(
        std::make_unique<H2Channel>(*contexts[t], server, framed, depth, o.streaming, window, figures[t]));
  }
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      net::io_context& ioc = *contexts[static_cast<std::size_t>(t)];
      for (std::size_t i = static_cast<std::size_t>(t); i < channels.size(); i += static_cast<std::size_t>(threads))
        channels[i]->start();
      // A server that stops answering cannot hold the run: 30 s after the window, it ends.
      net::steady_timer guard(ioc, window.end + std::chrono::seconds(30));
      guard.async_wait([&ioc](boost::system::error_code e) {
        if (!e) ioc.stop();
      });
      while (!ioc.stopped()) {
        ioc.run_one();
        bool all_done = true;
        for (std::size_t i = static_cast<std::size_t>(t); i < channels.size(); i += static_cast<std::size_t>(threads))
          all_done = all_done && channels[i]->done();
        if (all_done) break;
      }
    });
  }
  std::this_thread::sleep_until(window.start);
  const double cpu0 = cpu_seconds();
  std::this_thread::sleep_until(window.end);
  const double cpu1 = cpu_seconds();
  for (auto& w : workers) w.join();
  channels.clear();

  LoadResult r;
  r.seconds = std::chrono::duration<double>(window.end - window.start).count();
  r.cpu_seconds = cpu1 - cpu0;
  for (const Figures& f : figures) {
    r.completed += f.completed;
    r.ok += f.ok;
    r.transport_errors += f.transport_window;
    r.failed_total += f.failed_total;
    r.completed_total += f.completed_total;
    r.response_bytes += f.bytes;
    r.latency.merge(f.latency);
    for (const auto& [code, n] : f.codes) r.status_counts[code] += n;
    if (r.first_failure.empty()) r.first_failure = f.first_failure;
  }
  return r;
}

void check_grpc_reply(const std::string& host, int port, const std::string& serialized_request, const InferSpec& spec,
                      std::int64_t batch) {
  auto stub = inference::GRPCInferenceService::NewStub(make_channel(host, port));
  inference::ModelInferRequest request;
  GB_CHECK(request.ParseFromString(serialized_request), Internal, "the benchmark's gRPC request does not parse",
           std::string("report this as a bug"));
  inference::ModelInferResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  const grpc::Status s = stub->ModelInfer(&context, request, &response);
  GB_CHECK(s.ok(), Internal,
           "glassbox serve (gRPC) answered " << static_cast<int>(s.error_code()) << " to an inference on '"
                                             << spec.model << "': " << s.error_message().substr(0, 300),
           std::string("the benchmark's request must be valid; check the server's log"));
  const std::size_t want = static_cast<std::size_t>(batch * spec.output_elements) * sizeof(float);
  GB_CHECK(response.outputs_size() == 1 && response.outputs(0).name() == spec.output &&
               response.raw_output_contents_size() == 1 && response.raw_output_contents(0).size() == want,
           Internal,
           "glassbox serve (gRPC) answered '" << spec.model << "' with " << response.outputs_size() << " outputs and "
                                              << response.raw_output_contents_size() << " raw contents",
           "expected " + spec.output + " with " + std::to_string(want) + " bytes");
}

}  // namespace glassbox::bench
