// gRPC over HTTP/2, the parts that are not HTTP/2 itself (gRPC's PROTOCOL-HTTP2 document):
// length-prefixed messages, the grpc-timeout header, grpc-message's percent-encoding.
//
//   MessageReader r(max_bytes);
//   r.feed(data);                                  // DATA bytes as they arrive
//   while (auto m = r.next()) handle(m->compressed, m->bytes);
//   if (r.error()) fail(*r.error());               // RESOURCE_EXHAUSTED: a message over the limit
//   std::string out = frame(serialized);           // 5-byte prefix + message
//   auto t = parse_grpc_timeout("250m");           // 250 ms
//
// Thread safety: MessageReader is a value type for one thread; the functions are pure.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <grpcpp/support/status.h>

namespace glassbox::serve {

class MessageReader {
 public:
  struct Message {
    bool compressed = false;
    std::string bytes;
  };
  explicit MessageReader(std::size_t max_bytes) : max_bytes_(max_bytes) {}

  void feed(std::string_view data);
  // The next complete message, if one has arrived (and no error).
  std::optional<Message> next();
  // Set once a message declared more than max_bytes (the rest is ignored).
  const std::optional<grpc::Status>& error() const { return error_; }
  // True when no part of a message is pending (between messages).
  bool at_boundary() const { return buffered_.size() == consumed_; }

 private:
  std::size_t max_bytes_;
  std::string buffered_;
  std::size_t consumed_ = 0;
  std::optional<grpc::Status> error_;
};

// The message with its 5-byte prefix (uncompressed).
std::string frame(std::string_view message);
// Writes the prefix into framed[0..5) for the message that follows it (framed.size() - 5 bytes).
void set_prefix(std::string& framed);

// "1-8 digits" + unit (H M S m u n) → the duration (saturating at 2^63-1 ns); nullopt when
// malformed.
std::optional<std::chrono::nanoseconds> parse_grpc_timeout(std::string_view value);

// grpc-message's encoding: bytes outside 0x20..0x7E and '%' as %XX.
std::string percent_encode(std::string_view text);

}  // namespace glassbox::serve
