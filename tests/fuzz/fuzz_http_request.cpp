// libFuzzer target: RequestParser (glassbox/serve/http/request_parser.h), the HTTP/1.1 framing
// that every byte a client sends to glassbox serve goes through first.
//
// The input's first byte picks how the rest arrives: in pieces of 1 + (byte % 64) bytes, each
// appended to what the parser has not consumed yet, as the server feeds what each read brings.
// The limits are small (head 2 KiB, body 4 KiB) so that inputs reach them. Checks:
//   - put() never consumes more than it was given, and nothing after a failure or once done;
//   - a failure has one of the statuses the rules name and a message that, written as JSON text
//     (append_json_text), is valid UTF-8;
//   - a request that is done has a version of 1.0 or 1.1, an origin-form target ("/..."), a body
//     within the limit, and a head counted within the limit;
//   - the outcome does not depend on how the bytes were split: when both are decided, the whole
//     input at once gives the same failure status (a size limit may be met before another error,
//     or after it), or the same method, target, version, fields and body.
// Anything else, a sanitizer report, a leak or a hang is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "glassbox/serve/http/codec.h"
#include "glassbox/serve/http/request_parser.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

using glassbox::serve::ParserLimits;
using glassbox::serve::RequestParser;

constexpr ParserLimits kLimits{2048, 4096};

[[noreturn]] void fail(const std::string& what) { glassbox::fuzz::fail("fuzz_http_request", what); }

struct Outcome {
  int status = 0;  // 0: not done and no failure (more bytes needed); 200: done
  std::string summary;
};

Outcome feed(std::string_view data, std::size_t piece) {
  RequestParser p(kLimits);
  std::string pending;
  std::size_t at = 0;
  while (at < data.size() && !p.failure() && !p.done()) {
    const std::size_t n = std::min(piece, data.size() - at);
    pending.append(data.substr(at, n));
    at += n;
    while (!pending.empty()) {
      const std::size_t used = p.put(pending);
      if (used > pending.size()) fail("put() consumed more than it was given");
      pending.erase(0, used);
      if (used == 0 || p.failure() || p.done()) break;
    }
  }
  if (p.failure() || p.done()) {
    const std::size_t before = pending.size();
    if (p.put(pending.empty() ? std::string_view("x") : std::string_view(pending)) != 0)
      fail("put() consumed bytes after a failure or once done");
    (void)before;
  }
  if (const auto& f = p.failure()) {
    switch (f->status) {
      case 400:
      case 408:
      case 413:
      case 417:
      case 431:
      case 501:
      case 505: break;
      default: fail("unexpected failure status " + std::to_string(f->status));
    }
    if (f->message.empty()) fail("a failure without a message");
    std::string text;
    glassbox::serve::append_json_text(text, f->message);
    if (!glassbox::fuzz::valid_utf8(text)) fail("a failure message that is not UTF-8 once written");
    return {f->status, {}};
  }
  if (!p.done()) return {0, {}};
  const auto& r = p.request();
  if (r.version != 10 && r.version != 11) fail("done with version " + std::to_string(r.version));
  if (r.target.empty() || r.target.front() != '/') fail("done with target '" + r.target + "'");
  if (r.body.size() > kLimits.max_body_bytes) fail("a body over the limit");
  if (p.head_bytes() > kLimits.max_head_bytes) fail("a head over the limit");
  return {200, r.method + '\n' + r.target + '\n' + std::to_string(r.version) + '\n' + r.host + '\n' + r.authorization +
                   '\n' + r.x_api_key + '\n' + r.content_encoding + '\n' + r.accept_encoding + '\n' +
                   r.inference_header_length.value_or("-") + '\n' + (r.keep_alive ? "k" : "c") +
                   (r.expect_continue ? "e" : "-") + '\n' + r.body};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::size_t piece = 1 + data[0] % 64;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  const Outcome split = feed(bytes, piece);
  const Outcome whole = feed(bytes, bytes.size() + 1);
  // An incomplete request may be refused early by one feeding and wait for more bytes in the other
  // (Beast looks for the end of the head before it parses a partial one again): compare only
  // outcomes that are both decided.
  if (split.status == 0 || whole.status == 0) return 0;
  // A head with an error near the size limit may meet either first: Beast parses a head that
  // arrives whole at once, but waits for the end of one that arrives in pieces. Both refuse it.
  const auto limit = [](int s) { return s == 431 || s == 413; };
  if (split.status != 200 && whole.status != 200 && (limit(split.status) || limit(whole.status))) return 0;
  if (split.status != whole.status || split.summary != whole.summary) {
    fail("the outcome depends on the split: in pieces of " + std::to_string(piece) + " status " +
         std::to_string(split.status) + ", whole " + std::to_string(whole.status));
  }
  return 0;
}
