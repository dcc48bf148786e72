// gRPC's message framing and header encodings (see wire.h). Tested in transport_test.cpp.
#include "glassbox/serve/grpc/wire.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace glassbox::serve {

void MessageReader::feed(std::string_view data) {
  if (error_) return;
  if (consumed_ > 0) {  // drop what was handed out: the buffer holds one message's worth at most
    buffered_.erase(0, consumed_);
    consumed_ = 0;
  }
  buffered_.append(data);
}

std::optional<MessageReader::Message> MessageReader::next() {
  if (error_ || buffered_.size() - consumed_ < 5) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(buffered_.data() + consumed_);
  const std::uint64_t length =
      (std::uint64_t{p[1]} << 24) | (std::uint64_t{p[2]} << 16) | (std::uint64_t{p[3]} << 8) | std::uint64_t{p[4]};
  if (length > max_bytes_) {
    error_ = grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        "received message larger than max (" + std::to_string(length) + " vs. " + std::to_string(max_bytes_) + ")");
    buffered_.clear();
    consumed_ = 0;
    return std::nullopt;
  }
  if (buffered_.size() - consumed_ - 5 < length) {
    // Room for the rest of the message, growing geometrically with what arrived (at most twice
    // that, plus 1 MiB): a declared length alone does not commit memory.
    const std::size_t want = consumed_ + 5 + static_cast<std::size_t>(length);
    if (buffered_.capacity() < want) {
      buffered_.reserve(std::min(want, std::max(2 * buffered_.capacity(), buffered_.size() + (std::size_t{1} << 20))));
    }
    return std::nullopt;
  }
  Message m;
  m.compressed = p[0] != 0;
  if (consumed_ == 0 && buffered_.size() == 5 + length) {  // the usual case: one whole message
    buffered_.erase(0, 5);
    m.bytes = std::move(buffered_);
    buffered_.clear();
  } else {
    m.bytes.assign(buffered_, consumed_ + 5, length);
    consumed_ += 5 + length;
  }
  return m;
}

void set_prefix(std::string& framed) {
  const auto n = static_cast<std::uint32_t>(framed.size() - 5);
  framed[0] = 0;
  framed[1] = static_cast<char>(n >> 24);
  framed[2] = static_cast<char>(n >> 16);
  framed[3] = static_cast<char>(n >> 8);
  framed[4] = static_cast<char>(n);
}

std::string frame(std::string_view message) {
  std::string out(5, '\0');
  out.append(message);
  set_prefix(out);
  return out;
}

std::optional<std::chrono::nanoseconds> parse_grpc_timeout(std::string_view v) {
  if (v.size() < 2 || v.size() > 9) return std::nullopt;
  std::int64_t n = 0;
  for (char c : v.substr(0, v.size() - 1)) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  // Nanoseconds per unit; 99999999 hours does not fit in 64-bit nanoseconds, so a value beyond
  // that saturates (about 292 years).
  std::int64_t unit = 0;
  switch (v.back()) {
    case 'H': unit = 3'600'000'000'000; break;
    case 'M': unit = 60'000'000'000; break;
    case 'S': unit = 1'000'000'000; break;
    case 'm': unit = 1'000'000; break;
    case 'u': unit = 1'000; break;
    case 'n': unit = 1; break;
    default: return std::nullopt;
  }
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  return std::chrono::nanoseconds(n > kMax / unit ? kMax : n * unit);
}

std::string percent_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c >= 0x20 && c <= 0x7E && c != '%') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace glassbox::serve
