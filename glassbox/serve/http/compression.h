// HTTP content codings for glassbox serve: inflating gzip/deflate request bodies under the body
// limit, and gzip for responses when the client accepts it.
//
//   auto body = decode_content(raw, "gzip", 64 << 20);   // 413 (HttpError), InvalidArgument, Unimplemented
//   if (accepts_gzip(accept_encoding)) compressed = gzip(text);
//
// Thread safety: free functions without shared state.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "glassbox/serve/net/zlib.h"

namespace glassbox::serve {

// `encoding`: the Content-Encoding header ("" or "identity": `body` itself; "gzip"/"x-gzip";
// "deflate": zlib format, or raw deflate as some clients send). Throws HttpError 413 when the
// inflated body exceeds `max_bytes`, InvalidArgument (400) for corrupt or truncated data,
// HttpError 415 "unsupported Content-Encoding 'br'" for other codings.
std::shared_ptr<const std::string> decode_content(std::shared_ptr<const std::string> body, std::string_view encoding,
                                                  std::size_t max_bytes);

// True when an Accept-Encoding header allows gzip (a "gzip" or "*" token without q=0).
bool accepts_gzip(std::string_view accept_encoding);

// gzip(data): serve/net/zlib.h.

}  // namespace glassbox::serve
