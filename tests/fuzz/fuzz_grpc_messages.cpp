// libFuzzer target: what the gRPC front end does with the DATA of an untrusted call
// (glassbox/serve/grpc/wire.h, codec.h), without a connection or an engine.
//
// Input layout: the first byte picks the piece size the rest is fed in (0: whole); the rest is a
// call's DATA: length-prefixed messages, as a client sends them.
//
// The bytes go through MessageReader (limit 1 MiB) in pieces and whole; both must yield the same
// messages, and the messages, framed again, must be the bytes they came from. Each message is
// parsed as inference.ModelInferRequest and decoded as ModelInfer decodes it; a glassbox::Error
// there is the expected answer to a bad request (INVALID_ARGUMENT). When it decodes, a response
// whose outputs are the decoded inputs is encoded and each output's raw contents must be that
// input's bytes; the encoded message must serialize and parse back. The first bytes of each
// message also go through parse_grpc_timeout and percent_encode (printable ASCII out).
// Anything else that escapes, a failed check, a sanitizer report, a leak or a hang is a finding.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "glassbox/base/error.h"
#include "glassbox/serve/grpc/codec.h"
#include "glassbox/serve/grpc/wire.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

using glassbox::serve::MessageReader;

[[noreturn]] void fail(const std::string& what) { glassbox::fuzz::fail("fuzz_grpc_messages", what); }

constexpr std::size_t kLimit = 1 << 20;

std::vector<MessageReader::Message> read_all(std::string_view data, std::size_t piece, bool& error) {
  MessageReader r(kLimit);
  std::vector<MessageReader::Message> out;
  const std::size_t step = piece == 0 ? std::max<std::size_t>(data.size(), 1) : piece;
  for (std::size_t i = 0; i < data.size(); i += step) {
    r.feed(data.substr(i, step));
    while (auto m = r.next()) out.push_back(std::move(*m));
  }
  error = r.error().has_value();
  return out;
}

void check_message(const std::string& bytes) {
  const std::string_view head = std::string_view(bytes).substr(0, 9);
  (void)glassbox::serve::parse_grpc_timeout(head);
  for (char c : glassbox::serve::percent_encode(bytes.substr(0, 64)))
    if (c < 0x20 || c > 0x7e) fail("percent_encode left a byte that is not printable ASCII");

  auto request = std::make_shared<inference::ModelInferRequest>();
  if (!request->ParseFromString(bytes)) return;  // INVALID_ARGUMENT: not the message
  glassbox::serve::InferRequest decoded;
  try {
    decoded = glassbox::serve::decode_infer_request(*request, request);
  } catch (const glassbox::Error&) {
    return;  // the answer to a bad request
  }
  glassbox::serve::InferResponse response;
  response.model = decoded.model;
  response.id = decoded.id;
  response.outputs = decoded.inputs;
  inference::ModelInferResponse encoded;
  try {
    glassbox::serve::encode_infer_response(response, encoded);
  } catch (const glassbox::Error& e) {
    fail("encoding a decoded request's tensors failed: " + e.message());
  }
  if (encoded.raw_output_contents_size() != static_cast<int>(response.outputs.size()))
    fail("not every output has raw contents");
  for (std::size_t i = 0; i < response.outputs.size(); ++i) {
    const auto& t = response.outputs[i];
    const std::string& raw = encoded.raw_output_contents(static_cast<int>(i));
    if (raw.size() != t.size ||
        (t.size > 0 && raw.compare(0, raw.size(), reinterpret_cast<const char*>(t.data), t.size) != 0))
      fail("an output's raw contents are not its tensor's bytes");
  }
  std::string wire;
  if (!encoded.SerializeToString(&wire)) fail("the response does not serialize");
  inference::ModelInferResponse back;
  if (!back.ParseFromString(wire)) fail("the serialized response does not parse");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t piece = data[0];
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  bool error_pieces = false, error_whole = false;
  const auto pieces = read_all(body, piece, error_pieces);
  const auto whole = read_all(body, 0, error_whole);
  if (error_pieces != error_whole || pieces.size() != whole.size()) fail("pieces and whole disagree");
  std::size_t at = 0;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    if (pieces[i].bytes != whole[i].bytes || pieces[i].compressed != whole[i].compressed)
      fail("pieces and whole disagree on a message");
    const std::string framed = glassbox::serve::frame(whole[i].bytes);
    if (body.substr(at + 1, 4) != std::string_view(framed).substr(1, 4) ||
        body.substr(at + 5, whole[i].bytes.size()) != whole[i].bytes || (body[at] != 0) != whole[i].compressed)
      fail("a message is not the bytes it came from");
    at += framed.size();
    check_message(whole[i].bytes);
  }
  return 0;
}
