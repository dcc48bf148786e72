// The HTTP framing rules (request_parser.h) on their own and over real sockets: for each rule the
// status, whether the connection stays open, and that a good request is served afterwards; slow
// heads and bodies cut off at their deadline without holding up other clients; error bodies that
// stay valid UTF-8 JSON whatever bytes the request carried.
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "glassbox/serve/engine/fake_engine_test.h"
#include "glassbox/serve/http/codec.h"
#include "glassbox/serve/http/http_client_test.h"
#include "glassbox/serve/http/request_parser.h"
#include "glassbox/serve/http/routes.h"
#include "glassbox/serve/http/server.h"

namespace glassbox::serve {
namespace {

using json = nlohmann::json;
using testing::FakeEngine;
using testing::TestClient;
using testing::TestResponse;

// Parses `raw` fed in pieces of `step` bytes (each piece appended to what was not consumed).
RequestParser parse(const std::string& raw, std::size_t step = 1 << 20, ParserLimits limits = {}) {
  RequestParser p(limits);
  std::string pending;
  for (std::size_t i = 0; i < raw.size() && !p.failure() && !p.done(); i += step) {
    pending += raw.substr(i, step);
    while (!pending.empty()) {
      const std::size_t used = p.put(pending);
      pending.erase(0, used);
      if (used == 0 || p.failure() || p.done()) break;
    }
  }
  return p;
}

int status_of(const std::string& raw, std::size_t step = 1 << 20, ParserLimits limits = {}) {
  const RequestParser p = parse(raw, step, limits);
  if (p.failure()) return p.failure()->status;
  return p.done() ? 200 : 0;
}

TEST(RequestParser, ReadsTheFieldsTheServerUsesInAnyPieces) {
  const std::string raw =
      "POST /v2/models/m/infer?x=1 HTTP/1.1\r\nHost: localhost:8000\r\nAuthorization: Bearer k\r\n"
      "x-api-key:  key2 \r\nContent-Encoding: gzip\r\nAccept-Encoding: gzip\r\n"
      "Inference-Header-Content-Length: 3\r\nContent-Length: 5\r\n\r\nhello";
  for (std::size_t step : {std::size_t{1}, std::size_t{7}, raw.size()}) {
    RequestParser p = parse(raw, step);
    ASSERT_TRUE(p.done()) << step;
    const ParsedRequest& r = p.request();
    EXPECT_EQ(r.method, "POST");
    EXPECT_EQ(r.target, "/v2/models/m/infer?x=1");
    EXPECT_EQ(r.host, "localhost:8000");
    EXPECT_EQ(r.authorization, "Bearer k");
    EXPECT_EQ(r.x_api_key, "key2");
    EXPECT_EQ(r.content_encoding, "gzip");
    EXPECT_EQ(r.accept_encoding, "gzip");
    EXPECT_EQ(r.inference_header_length, "3");
    EXPECT_EQ(r.body, "hello");
    EXPECT_TRUE(r.keep_alive);
  }
}

TEST(RequestParser, ChunkedBodiesAreDecodedAndTrailersIgnored) {
  RequestParser p = parse(
      "POST /v2 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n",
      3);
  ASSERT_TRUE(p.done());
  EXPECT_EQ(p.request().body, "hello world");
  EXPECT_EQ(status_of("POST /v2 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: ChUnKeD\r\n\r\n0\r\n\r\n"), 200);
}

TEST(RequestParser, TransferCodingsOtherThanChunkedAre501) {
  for (const char* te : {"gzip", "gzip, chunked", "chunked, gzip", "identity", "x"}) {
    EXPECT_EQ(status_of(std::string("POST /v2 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: ") + te + "\r\n\r\n"), 501)
        << te;
  }
  // Split over two fields, the codings are the list of both.
  EXPECT_EQ(status_of("POST /v2 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"),
            501);
  EXPECT_EQ(status_of("POST /v2 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, chunked\r\n\r\n"), 400);
  EXPECT_EQ(status_of("POST /v2 HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 400);
}

TEST(RequestParser, TransferEncodingWithContentLengthIs400InEitherOrder) {
  for (const char* te : {"chunked", "gzip"}) {
    const std::string t = te;
    EXPECT_EQ(status_of("POST /v2 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: " + t + "\r\nContent-Length: 3\r\n\r\n"),
              400)
        << te;
    EXPECT_EQ(status_of("POST /v2 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: " + t + "\r\n\r\n"),
              400)
        << te;
  }
  const RequestParser p = parse("POST /v2 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: gzip\r\n\r\n");
  EXPECT_EQ(p.failure()->message, "a request must not carry both Transfer-Encoding and Content-Length");
  EXPECT_EQ(status_of("POST /v2 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"), 400);
  EXPECT_EQ(status_of("POST /v2 HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n"), 400);
}

TEST(RequestParser, HostIsRequiredOnHttp11AndMustBeSingleAndValid) {
  EXPECT_EQ(status_of("GET /v2 HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(parse("GET /v2 HTTP/1.1\r\n\r\n").failure()->message,
            "an HTTP/1.1 request must carry a Host header field (hint: Host: server:port)");
  EXPECT_EQ(status_of("GET /v2 HTTP/1.0\r\n\r\n"), 200);  // HTTP/1.0 predates Host
  EXPECT_EQ(status_of("GET /v2 HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET /v2 HTTP/1.1\r\nHost: a b\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET /v2 HTTP/1.1\r\nHost: a:8x\r\n\r\n"), 400);
  for (const char* ok : {"", "127.0.0.1:8000", "[::1]:8000", "my-host.example", "[fe80::1]"}) {
    EXPECT_EQ(status_of(std::string("GET /v2 HTTP/1.1\r\nHost: ") + ok + "\r\n\r\n"), 200) << ok;
  }
}

TEST(RequestParser, AbsoluteFormIsServedAsItsPath) {
  RequestParser p = parse("GET http://localhost:8000/v2/models/m?q=1 HTTP/1.1\r\nHost: localhost:8000\r\n\r\n");
  ASSERT_TRUE(p.done());
  EXPECT_EQ(p.request().target, "/v2/models/m?q=1");
  EXPECT_EQ(parse("GET HTTPS://h HTTP/1.1\r\nHost: h\r\n\r\n").request().target, "/");
  EXPECT_EQ(parse("GET http://h?x HTTP/1.1\r\nHost: h\r\n\r\n").request().target, "/?x");
  EXPECT_EQ(status_of("GET ftp://h/v2 HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET http://user@h/v2 HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET v2/health HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
}

TEST(RequestParser, TheHeadLimitCountsTheWholeHeadWhateverThePieces) {
  const ParserLimits small{2048, 1 << 20};
  std::string many = "GET /v2 HTTP/1.1\r\nHost: h\r\n";
  for (int i = 0; i < 40; ++i) many += "X-F" + std::to_string(i) + ": " + std::string(60, 'v') + "\r\n";
  many += "\r\n";
  ASSERT_GT(many.size(), 2048u);
  // Every field alone is far under the limit; together they exceed it, however they arrive.
  for (std::size_t step : {std::size_t{1}, std::size_t{50}, std::size_t{100}, many.size()}) {
    EXPECT_EQ(status_of(many, step, small), 431) << step;
  }
  EXPECT_EQ(status_of(many, 1, ParserLimits{}), 200);
}

TEST(RequestParser, BodyLimitUnknownMethodsVersionsAndExpect) {
  EXPECT_EQ(status_of("POST /v2 HTTP/1.1\r\nHost: h\r\nContent-Length: 2000\r\n\r\n", 1 << 20, {4096, 1024}), 413);
  EXPECT_EQ(status_of("POST /v2 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" +
                          std::string(2048, 'a') + "\r\n0\r\n\r\n",
                      1 << 20, {4096, 1024}),
            413);
  EXPECT_EQ(status_of("BREW /v2 HTTP/1.1\r\nHost: h\r\n\r\n"), 501);
  EXPECT_EQ(status_of("GET /v2 HTTP/2.0\r\nHost: h\r\n\r\n"), 505);
  EXPECT_EQ(status_of("GET /v2 HTTP/1.1\r\nHost: h\r\nExpect: something\r\n\r\n"), 417);
  RequestParser p = parse("POST /v2 HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\n");
  EXPECT_TRUE(p.head_done());
  EXPECT_TRUE(p.request().expect_continue);
  EXPECT_EQ(status_of("GARBAGE\r\n\r\n"), 400);
}

TEST(JsonText, InvalidUtf8IsEscapedAndValidTextKept) {
  std::string out;
  append_json_text(out, "caf\xc3\xa9 \xff\xfe \xe2\x82\xac \xed\xa0\x80 \xc0\xaf \xf0\x9f\x98\x80 \xf4\x90\x80\x80");
  EXPECT_EQ(out,
            "\"caf\xc3\xa9 \\\\xff\\\\xfe \xe2\x82\xac \\\\xed\\\\xa0\\\\x80 \\\\xc0\\\\xaf \xf0\x9f\x98\x80 "
            "\\\\xf4\\\\x90\\\\x80\\\\x80\"");
  json parsed;
  EXPECT_NO_THROW(parsed = json::parse(out));  // nlohmann rejects invalid UTF-8
  EXPECT_EQ(json::parse(out).get<std::string>().substr(6, 4), "\\xff");
}

// --- over sockets -----------------------------------------------------------------------------

HttpOptions framing_options() {
  HttpOptions o;
  o.address = "127.0.0.1";
  o.http_port = 0;
  o.metrics_port = -1;
  o.threads = 2;
  o.header_timeout = std::chrono::milliseconds(600);
  o.body_timeout = std::chrono::milliseconds(600);
  o.min_request_rate = 100;
  return o;
}

class FramingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<HttpServer>(engine_, framing_options());
    server_->start();
    port_ = server_->http_port();
  }
  void TearDown() override { server_->stop(); }

  // Sends `raw` on a fresh connection; expects `status`, then either a closed connection or a
  // good request answered on the same one; and in every case a good request on a new connection.
  void expect(const std::string& raw, int status, bool closes, const std::string& what) {
    SCOPED_TRACE(what);
    TestClient c(port_);
    ASSERT_FALSE(c.send_raw(raw));
    const TestResponse r = c.receive();
    EXPECT_EQ(r.status, status) << r.error;
    if (status >= 400) {
      json parsed;
      EXPECT_NO_THROW(parsed = json::parse(r.body)) << r.body;  // valid UTF-8 JSON
      EXPECT_EQ(r.header("content-type"), "application/json");
    }
    if (closes) {
      EXPECT_FALSE(r.keep_alive);
      EXPECT_TRUE(c.closed_by_peer());
    } else {
      EXPECT_EQ(c.call("GET", "/v2/health/live").status, 200);
    }
    EXPECT_EQ(testing::http_call(port_, "GET", "/v2/health/ready").status, 200);
  }

  FakeEngine engine_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

TEST_F(FramingTest, EachRuleAnswersItsStatusAndTheServerServesOn) {
  const std::string live = "GET /v2/health/live HTTP/1.1\r\nHost: h\r\n\r\n";
  // The smuggling attempt: an unknown transfer coding must not let the body pass as a request.
  expect("POST /v2/health/live HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n" + live, 501, true,
         "unknown transfer coding");
  expect("POST /v2 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", 400, true,
         "TE + CL");
  expect("POST /v2 HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, true, "TE in HTTP/1.0");
  expect("GET /v2/health/live HTTP/1.1\r\n\r\n", 400, true, "no Host");
  expect("GET /v2/health/live HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, true, "two Hosts");
  expect("GET http://h:1/v2/health/live HTTP/1.1\r\nHost: h:1\r\n\r\n", 200, false, "absolute-form");
  expect("BREW /v2 HTTP/1.1\r\nHost: h\r\n\r\n", 501, true, "unknown method");
  expect("OPTIONS /v2 HTTP/1.1\r\nHost: h\r\n\r\n", 405, false, "known method not allowed");
  expect("GET /v2 HTTP/1.1\r\nHost: h\r\nX-Big: " + std::string(70000, 'a') + "\r\n\r\n", 431, true, "big field");
  std::string many = "GET /v2 HTTP/1.1\r\nHost: h\r\n";
  for (int i = 0; i < 1200; ++i) many += "X-F" + std::to_string(i) + ": " + std::string(50, 'v') + "\r\n";
  expect(many + "\r\n", 431, true, "many small fields");
  expect("POST /v2/models/mlp/infer HTTP/1.1\r\nHost: h\r\nContent-Encoding: br\r\nContent-Length: 2\r\n\r\n{}", 415,
         false, "unknown content coding");
  expect("GET /v2/models/mlp/versions/0 HTTP/1.1\r\nHost: h\r\n\r\n", 404, false, "version 0");
  expect("GET /v2/models/\xff\xfe/versions/1 HTTP/1.1\r\nHost: h\r\n\r\n", 400, false, "invalid UTF-8 in a name");
}

TEST_F(FramingTest, ASlowHeadIsCutOffWithout408ingOthers) {
  TestClient slow(port_);
  ASSERT_FALSE(slow.send_raw("GET /v2/health/live HTTP/1.1\r\n"));
  const auto t0 = std::chrono::steady_clock::now();
  // While the slow client trickles header bytes (far under 100 bytes/s), others are served.
  std::thread other([&] {
    for (int i = 0; i < 10; ++i) EXPECT_EQ(testing::http_call(port_, "GET", "/v2/health/live").status, 200);
  });
  bool cut = false;
  for (int i = 0; i < 40 && !cut; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    cut = slow.send_raw("X: y\r\n").has_value();
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(3)) break;
  }
  other.join();
  const TestResponse r = slow.receive();
  EXPECT_EQ(r.status, 408) << r.error;
  EXPECT_TRUE(slow.closed_by_peer());
  EXPECT_EQ(testing::http_call(port_, "GET", "/v2/health/live").status, 200);
}

TEST_F(FramingTest, ASlowBodyIsCutOffAndAnIdleConnectionIsNot) {
  TestClient slow(port_);
  ASSERT_FALSE(slow.send_raw("POST /v2/models/mlp/infer HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n{"));
  const TestResponse r = slow.receive();  // nothing more is sent: 408 after the body's allowance
  EXPECT_EQ(r.status, 408) << r.error;
  EXPECT_NE(json::parse(r.body)["error"].get<std::string>().find("request body did not arrive in time"),
            std::string::npos);
  // A keep-alive connection waiting for its next request is under idle_timeout (60 s), not the
  // request deadlines: it is still served after well over their allowance.
  TestClient idle(port_);
  EXPECT_EQ(idle.call("GET", "/v2/health/live").status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(idle.call("GET", "/v2/health/live").status, 200);
}

TEST_F(FramingTest, ABodyThatKeepsItsRateIsReadWhole) {
  // 600 ms allowance + 1 s per 100 bytes: 40-byte pieces every 200 ms keep ahead of the deadline.
  const std::string body =
      R"({"id":"s","inputs":[{"name":"INPUT__0","datatype":"FP32","shape":[1,4],"data":[[1,2,3,4]]}]})";
  TestClient c(port_);
  ASSERT_FALSE(c.send_raw(
      "POST /v2/models/mlp/infer HTTP/1.1\r\nHost: h\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n"));
  for (std::size_t i = 0; i < body.size(); i += 40) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_FALSE(c.send_raw(body.substr(i, 40)));
  }
  EXPECT_EQ(c.receive().status, 200);
}

}  // namespace
}  // namespace glassbox::serve
