// zlib for the serving front ends: inflating gzip/zlib/raw-deflate data under a size limit (HTTP
// request bodies, gRPC messages) and gzip for HTTP responses. Each front end turns the outcome
// into its protocol's error (HTTP 413/400, gRPC RESOURCE_EXHAUSTED/INTERNAL).
//
//   std::string out, error;
//   switch (inflate_limited(data, kGzipWindow, 64 << 20, out, error)) { ... }
//   std::string body = gzip(text);
//
// Thread safety: free functions without shared state.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace glassbox::serve {

// zlib window_bits for the three formats.
inline constexpr int kGzipWindow = 15 + 16;  // gzip (RFC 1952), several members allowed
inline constexpr int kZlibWindow = 15;       // zlib (RFC 1950): HTTP's and gRPC's "deflate"
inline constexpr int kRawWindow = -15;       // raw deflate (RFC 1951), as some clients send "deflate"

enum class Inflated { kOk, kCorrupt, kTooLarge };

// Inflates `in` into `out` (replaced). kCorrupt sets `error` (what is wrong with the data);
// kTooLarge: the result would exceed `max_bytes`.
Inflated inflate_limited(std::string_view in, int window_bits, std::size_t max_bytes, std::string& out,
                         std::string& error);

// The gzip (RFC 1952) encoding of `data`.
std::string gzip(std::string_view data);

}  // namespace glassbox::serve
