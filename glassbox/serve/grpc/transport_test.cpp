// gRPC's transport rules (connection.cpp, wire.cpp): message framing, grpc-timeout and
// grpc-message encodings; compressed requests, unknown methods and deadlines through grpc++
// clients; and, through a raw HTTP/2 client on nghttp2, what grpc++ never sends: a wrong method
// or content-type, a request cut inside a message, a flood of pings, unanswered keep-alive pings
// and bytes that are not HTTP/2. After each, the server still serves a good call.
#include <array>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include "glassbox/serve/grpc/grpc_fixture_test.h"
#include "glassbox/serve/grpc/wire.h"
#include "glassbox/serve/net/zlib.h"

namespace glassbox::serve {
namespace {

using testing::FakeEngine;
using testing::floats_of;
using testing::fp32_request;
using testing::GrpcServerFixture;
using testing::GrpcTestClient;
using testing::test_options;
using namespace std::chrono_literals;
namespace net = boost::asio;
using tcp = net::ip::tcp;

TEST(GrpcWire, MessageReaderSplitsAndJoins) {
  const std::string a = frame("hello"), b = frame(std::string(70000, 'x')), c = frame("");
  const std::string all = a + b + c;
  for (std::size_t step : {std::size_t{1}, std::size_t{3}, std::size_t{4096}, all.size()}) {
    MessageReader r(1 << 20);
    std::vector<std::string> got;
    for (std::size_t i = 0; i < all.size(); i += step) {
      r.feed(std::string_view(all).substr(i, step));
      while (auto m = r.next()) got.push_back(m->bytes);
    }
    ASSERT_EQ(got.size(), 3u) << "step " << step;
    EXPECT_EQ(got[0], "hello");
    EXPECT_EQ(got[1], std::string(70000, 'x'));
    EXPECT_EQ(got[2], "");
    EXPECT_TRUE(r.at_boundary());
  }
  MessageReader partial(1 << 20);
  partial.feed(a.substr(0, 7));
  EXPECT_FALSE(partial.next());
  EXPECT_FALSE(partial.at_boundary());
}

TEST(GrpcWire, MessageReaderRefusesAMessageOverTheLimitFromItsPrefix) {
  MessageReader r(100);
  r.feed(frame(std::string(101, 'x')).substr(0, 5));  // the prefix alone decides
  EXPECT_FALSE(r.next());
  ASSERT_TRUE(r.error());
  EXPECT_EQ(r.error()->error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(r.error()->error_message(), "received message larger than max (101 vs. 100)");
}

TEST(GrpcWire, TimeoutsAndMessages) {
  EXPECT_EQ(parse_grpc_timeout("250m"), std::chrono::nanoseconds(250'000'000));
  EXPECT_EQ(parse_grpc_timeout("2S"), std::chrono::nanoseconds(2'000'000'000));
  EXPECT_EQ(parse_grpc_timeout("1H"), std::chrono::nanoseconds(3'600'000'000'000));
  EXPECT_EQ(parse_grpc_timeout("99999999n"), std::chrono::nanoseconds(99'999'999));
  EXPECT_EQ(parse_grpc_timeout("99999999H"), std::chrono::nanoseconds::max());  // saturates (fuzzing found it)
  EXPECT_EQ(parse_grpc_timeout("2562047H"), std::chrono::nanoseconds(2'562'047LL * 3'600'000'000'000LL));
  EXPECT_FALSE(parse_grpc_timeout("m"));
  EXPECT_FALSE(parse_grpc_timeout("123456789S"));  // more than 8 digits
  EXPECT_FALSE(parse_grpc_timeout("12x"));
  EXPECT_FALSE(parse_grpc_timeout("1.5S"));
  EXPECT_EQ(percent_encode("plain text: ok"), "plain text: ok");
  EXPECT_EQ(percent_encode("100% \xe2\x9c\x93\n"), "100%25 %E2%9C%93%0A");
}

class GrpcTransportTest : public GrpcServerFixture {
 protected:
  // A good call on a new channel: the server still serves.
  void expect_serving() {
    GrpcTestClient fresh(server_->port());
    inference::ModelInferResponse r;
    const grpc::Status s = fresh.infer(fp32_request("mlp", {1, 2}, {1.5f, -2}), r);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(floats_of(r.raw_output_contents(0)), (std::vector<float>{1.5f, -2}));
  }
};

TEST_F(GrpcTransportTest, CompressedRequestsAreInflated) {
  for (grpc_compression_algorithm algorithm : {GRPC_COMPRESS_GZIP, GRPC_COMPRESS_DEFLATE}) {
    std::vector<float> values(4096);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 7);
    auto ctx = GrpcTestClient::context();
    ctx->set_compression_algorithm(algorithm);
    inference::ModelInferResponse r;
    const grpc::Status s = client_->stub->ModelInfer(ctx.get(), fp32_request("mlp", {1, 4096}, values), &r);
    ASSERT_TRUE(s.ok()) << algorithm << ": " << s.error_message();
    EXPECT_EQ(floats_of(r.raw_output_contents(0)), values);
  }
}

TEST_F(GrpcTransportTest, UnknownMethodIsUnimplemented) {
  grpc::GenericStub stub(client_->channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 30s);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  grpc::Slice slice(std::string("\x0a\x03mlp"));
  grpc::ByteBuffer request(&slice, 1);
  stub.UnaryCall(&ctx, "/inference.GRPCInferenceService/ModelTrain", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) { done.set_value(s); });
  const grpc::Status s = done.get_future().get();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(s.error_message(), "unknown method '/inference.GRPCInferenceService/ModelTrain'");
  expect_serving();
}

TEST_F(GrpcTransportTest, ACallPastItsDeadlineEndsAndTheLateAnswerIsDropped) {
  engine_.mode = FakeEngine::Mode::kHold;
  auto ctx = GrpcTestClient::context();
  ctx->set_deadline(std::chrono::system_clock::now() + 200ms);
  inference::ModelInferResponse r;
  const grpc::Status s = client_->stub->ModelInfer(ctx.get(), fp32_request("mlp", {1, 1}, {1}), &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  engine_.complete_all();
  engine_.mode = FakeEngine::Mode::kInline;
  expect_serving();
}

// A blocking HTTP/2 client on nghttp2 for what grpc++ does not send.
class RawH2 {
 public:
  explicit RawH2(int port, bool auto_ping_ack = true) : socket_(ioc_) {
    socket_.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(
        cb, [](nghttp2_session*, const nghttp2_frame* f, const uint8_t* n, size_t nl, const uint8_t* v, size_t vl,
               uint8_t, void* user) {
          static_cast<RawH2*>(user)->headers[f->hd.stream_id][std::string(reinterpret_cast<const char*>(n), nl)] =
              std::string(reinterpret_cast<const char*>(v), vl);
          return 0;
        });
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, [](nghttp2_session*, const nghttp2_frame* f, void* user) {
      auto& self = *static_cast<RawH2*>(user);
      if (f->hd.type == NGHTTP2_GOAWAY) {
        self.goaway_code = static_cast<int>(f->goaway.error_code);
        self.goaway_data.assign(reinterpret_cast<const char*>(f->goaway.opaque_data), f->goaway.opaque_data_len);
      }
      if (f->hd.type == NGHTTP2_PING && !(f->hd.flags & NGHTTP2_FLAG_ACK)) ++self.pings;
      return 0;
    });
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, [](nghttp2_session*, int32_t id, uint32_t, void* user) {
      static_cast<RawH2*>(user)->closed.push_back(id);
      return 0;
    });
    nghttp2_option* opt = nullptr;
    nghttp2_option_new(&opt);
    nghttp2_option_set_no_auto_ping_ack(opt, auto_ping_ack ? 0 : 1);
    nghttp2_session_client_new2(&session_, cb, this, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, nullptr, 0);
  }
  ~RawH2() { nghttp2_session_del(session_); }

  // Submits a request; `body` goes as DATA (END_STREAM after it unless `open`).
  std::int32_t request(const std::vector<std::pair<std::string, std::string>>& hdrs, std::string body,
                       bool open = false) {
    std::vector<nghttp2_nv> nv;
    for (const auto& [k, v] : hdrs)
      nv.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(k.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(v.data())), k.size(), v.size(), NGHTTP2_NV_FLAG_NONE});
    auto upload = std::make_unique<Upload>(Upload{std::move(body), 0, open});
    nghttp2_data_provider provider{};
    provider.source.ptr = upload.get();
    provider.read_callback = [](nghttp2_session*, int32_t, uint8_t* buf, size_t length, uint32_t* flags,
                                nghttp2_data_source* source, void*) -> ssize_t {
      auto& u = *static_cast<Upload*>(source->ptr);
      const std::size_t n = std::min(length, u.body.size() - u.offset);
      std::memcpy(buf, u.body.data() + u.offset, n);
      u.offset += n;
      if (u.offset == u.body.size()) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (u.open) *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      }
      return static_cast<ssize_t>(n);
    };
    uploads_.push_back(std::move(upload));
    return nghttp2_submit_request(session_, nullptr, nv.data(), nv.size(), &provider, nullptr);
  }
  static std::vector<std::pair<std::string, std::string>> grpc_headers(
      const std::string& path, const std::string& method = "POST",
      const std::string& content_type = "application/grpc") {
    return {{":method", method},
            {":scheme", "http"},
            {":path", path},
            {":authority", "localhost"},
            {"content-type", content_type},
            {"te", "trailers"}};
  }
  void ping() { nghttp2_submit_ping(session_, NGHTTP2_FLAG_NONE, nullptr); }

  // Writes what is queued, then reads until `done()` or the connection closes (false) or `limit`.
  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds limit = 5000ms) {
    const auto end = std::chrono::steady_clock::now() + limit;
    for (;;) {
      flush();
      if (done()) return true;
      if (std::chrono::steady_clock::now() > end) return false;
      socket_.non_blocking(true);
      std::array<uint8_t, 16384> buf{};
      boost::system::error_code ec;
      const std::size_t n = socket_.read_some(net::buffer(buf), ec);
      if (ec == net::error::would_block) {
        std::this_thread::sleep_for(1ms);
        continue;
      }
      if (ec) {
        eof = true;
        return done();
      }
      nghttp2_session_mem_recv(session_, buf.data(), n);
    }
  }
  void flush() {
    const uint8_t* data = nullptr;
    ssize_t n = 0;
    while ((n = nghttp2_session_mem_send(session_, &data)) > 0) {
      boost::system::error_code ec;
      socket_.non_blocking(false);
      net::write(socket_, net::buffer(data, static_cast<std::size_t>(n)), ec);
    }
  }
  void send_raw(const std::string& bytes) { net::write(socket_, net::buffer(bytes)); }
  bool is_closed(std::int32_t id) const { return std::find(closed.begin(), closed.end(), id) != closed.end(); }

  std::map<std::int32_t, std::map<std::string, std::string>> headers;  // the last value of each name
  std::vector<std::int32_t> closed;
  int goaway_code = -1;
  std::string goaway_data;
  int pings = 0;
  bool eof = false;

 private:
  net::io_context ioc_;
  tcp::socket socket_;
  nghttp2_session* session_ = nullptr;
  struct Upload {
    std::string body;
    std::size_t offset;
    bool open;
  };
  std::vector<std::unique_ptr<Upload>> uploads_;  // request bodies, alive while nghttp2 reads them
};

const std::string kInfer = "/inference.GRPCInferenceService/ModelInfer";

std::string infer_body() { return frame(fp32_request("mlp", {1, 1}, {3}).SerializeAsString()); }

TEST_F(GrpcTransportTest, NotGrpcIsAnHttpError) {
  RawH2 c(server_->port());
  const std::int32_t get = c.request(RawH2::grpc_headers(kInfer, "GET"), "");
  const std::int32_t json = c.request(RawH2::grpc_headers(kInfer, "POST", "application/json"), "{}");
  ASSERT_TRUE(c.run_until([&] { return c.is_closed(get) && c.is_closed(json); }));
  EXPECT_EQ(c.headers[get][":status"], "405");
  EXPECT_EQ(c.headers[json][":status"], "415");
  EXPECT_EQ(c.headers[json].count("grpc-status"), 0u);
  expect_serving();
}

TEST_F(GrpcTransportTest, RequestCutInsideAMessageIsInternal) {
  RawH2 c(server_->port());
  const std::string body = infer_body();
  const std::int32_t id = c.request(RawH2::grpc_headers(kInfer), body.substr(0, body.size() - 3));
  ASSERT_TRUE(c.run_until([&] { return c.is_closed(id); }));
  EXPECT_EQ(c.headers[id][":status"], "200");
  EXPECT_EQ(c.headers[id]["grpc-status"], "13");
  EXPECT_EQ(c.headers[id]["grpc-message"], "the request ended inside a message");
  // The same connection serves a whole one.
  const std::int32_t good = c.request(RawH2::grpc_headers(kInfer), infer_body());
  ASSERT_TRUE(c.run_until([&] { return c.is_closed(good); }));
  EXPECT_EQ(c.headers[good]["grpc-status"], "0");
}

TEST_F(GrpcTransportTest, AUnaryCallTakesExactlyOneMessage) {
  RawH2 c(server_->port());
  const std::int32_t none = c.request(RawH2::grpc_headers(kInfer), "");
  const std::int32_t two = c.request(RawH2::grpc_headers(kInfer), infer_body() + infer_body());
  ASSERT_TRUE(c.run_until([&] { return c.is_closed(none) && c.is_closed(two); }));
  EXPECT_EQ(c.headers[none]["grpc-status"], "12");
  EXPECT_EQ(c.headers[two]["grpc-status"], "13");
  EXPECT_EQ(c.headers[two]["grpc-message"], "the unary call carried more than one request message");
  EXPECT_EQ(engine_.seen.size(), 0u);  // neither reached the engine
  expect_serving();
}

TEST_F(GrpcTransportTest, UnsupportedEncodingAndBadCompressionAreRefused) {
  RawH2 c(server_->port());
  auto br = RawH2::grpc_headers(kInfer);
  br.emplace_back("grpc-encoding", "br");
  const std::int32_t a = c.request(br, infer_body());
  std::string flagged = infer_body();
  flagged[0] = 1;  // marked compressed, no grpc-encoding
  const std::int32_t b = c.request(RawH2::grpc_headers(kInfer), flagged);
  auto gz = RawH2::grpc_headers(kInfer);
  gz.emplace_back("grpc-encoding", "gzip");
  const std::int32_t d = c.request(gz, flagged);  // marked gzip, but not gzip data
  ASSERT_TRUE(c.run_until([&] { return c.is_closed(a) && c.is_closed(b) && c.is_closed(d); }));
  EXPECT_EQ(c.headers[a]["grpc-status"], "12");
  EXPECT_EQ(c.headers[a]["grpc-accept-encoding"], "identity,deflate,gzip");
  EXPECT_EQ(c.headers[b]["grpc-status"], "13");
  EXPECT_EQ(c.headers[d]["grpc-status"], "13");
  EXPECT_NE(c.headers[d]["grpc-message"].find("cannot decompress a gzip message"), std::string::npos);
  expect_serving();
}

TEST_F(GrpcTransportTest, ServerSideDeadlineEndsTheCall) {
  engine_.mode = FakeEngine::Mode::kHold;
  RawH2 c(server_->port());
  auto h = RawH2::grpc_headers(kInfer);
  h.emplace_back("grpc-timeout", "150m");
  const auto t0 = std::chrono::steady_clock::now();
  const std::int32_t id = c.request(h, infer_body());
  ASSERT_TRUE(c.run_until([&] { return c.is_closed(id); }));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 140ms);
  EXPECT_EQ(c.headers[id]["grpc-status"], "4");
  engine_.complete_all();
  engine_.mode = FakeEngine::Mode::kInline;
  expect_serving();
}

TEST_F(GrpcTransportTest, APingFloodWithoutCallsEndsWithTooManyPings) {
  RawH2 c(server_->port());
  ASSERT_TRUE(c.run_until([&] { return true; }));
  for (int i = 0; i < 4; ++i) c.ping();  // the default policy: 2 strikes, then GOAWAY
  ASSERT_TRUE(c.run_until([&] { return c.goaway_code >= 0; }));
  EXPECT_EQ(c.goaway_code, NGHTTP2_ENHANCE_YOUR_CALM);
  EXPECT_EQ(c.goaway_data, "too_many_pings");
  expect_serving();
}

TEST_F(GrpcTransportTest, KeepAlivePingsAndAnUnansweredOneClosesTheConnection) {
  GrpcOptions o = test_options();
  o.keepalive_time = 100ms;
  o.keepalive_timeout = 200ms;
  o.keepalive_permit_without_calls = true;
  o.http2_max_pings_without_data = 0;
  start(o);
  RawH2 answers(server_->port());
  ASSERT_TRUE(answers.run_until([&] { return answers.pings >= 3; }));  // acked: pinged again and again
  EXPECT_FALSE(answers.eof);
  RawH2 silent(server_->port(), /*auto_ping_ack=*/false);
  ASSERT_TRUE(silent.run_until([&] { return silent.eof; }));  // no ACK: closed
  EXPECT_GE(silent.pings, 1);
  expect_serving();
}

TEST_F(GrpcTransportTest, AMessageThatDoesNotParseIsInvalidArgumentWithoutALogLine) {
  RawH2 c(server_->port());
  ::testing::internal::CaptureStderr();
  const std::int32_t id =
      c.request(RawH2::grpc_headers(kInfer), frame(std::string("\x0a\x01\xff", 3)));  // model_name: not UTF-8
  ASSERT_TRUE(c.run_until([&] { return c.is_closed(id); }));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(c.headers[id]["grpc-status"], "3");
  EXPECT_EQ(c.headers[id]["grpc-message"], "the request is not a valid inference.ModelInferRequest message");
  EXPECT_EQ(log.find("libprotobuf"), std::string::npos) << log;
  expect_serving();
}

TEST_F(GrpcTransportTest, OversizedRequestHeadersResetOnlyThatCall) {
  RawH2 c(server_->port());
  auto h = RawH2::grpc_headers(kInfer);
  h.emplace_back("x-big", std::string(70 * 1024, 'a'));  // over the 64 KiB the server advertises
  const std::int32_t big = c.request(h, infer_body());
  ASSERT_TRUE(c.run_until([&] { return c.is_closed(big); }));
  EXPECT_EQ(c.headers[big].count("grpc-status"), 0u);  // reset, not answered
  const std::int32_t good = c.request(RawH2::grpc_headers(kInfer), infer_body());
  ASSERT_TRUE(c.run_until([&] { return c.is_closed(good); }));
  EXPECT_EQ(c.headers[good]["grpc-status"], "0");
  EXPECT_TRUE(engine_.seen.size() == 1u);  // only the good call reached the engine
}

TEST_F(GrpcTransportTest, BytesThatAreNotHttp2CloseOnlyThatConnection) {
  RawH2 c(server_->port());
  c.send_raw("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(c.run_until([&] { return c.eof; }));
  expect_serving();
}

}  // namespace
}  // namespace glassbox::serve
