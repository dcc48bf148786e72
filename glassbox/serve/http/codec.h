// The KServe v2 inference wire format (serving.md "Inference request / response" and "Binary
// tensor extension"): request bodies to serve::InferRequest, serve::InferResponse to bodies.
//
//   auto body = std::make_shared<const std::string>(std::move(raw));
//   DecodedInfer d = decode_infer_request(body, header_length, "mlp", 0, 100);  // Error 400s
//   engine.infer(std::move(d.request), [&](InferOutcome out) {
//     EncodedInfer e = encode_infer_response(out.response, d.binary_output);
//     // e.body; e.header_length set when any output is binary (application/octet-stream)
//   });
//
// Decoding: the JSON part is `body[0, Inference-Header-Content-Length)` (the whole body when the
// header is absent); binary inputs follow in the order of `inputs`, each a Tensor::view into
// `body` (no copy; the tensor keeps the body alive). JSON `data` may be flat or nested (nested
// arrays must be rectangular and match the shape); it is converted to little-endian bytes:
// BOOL true/false, integers range-checked for the datatype, numbers for FP32/FP64 (finite and
// in range), strings for BYTES. FP16/BF16 only as binary. Every failure is an Error
// (InvalidArgument -> 400) whose message names the input and the model.
// Encoding: JSON numbers are written shortest-round-trip (std::to_chars: FP32 values read back as
// the same float). JSON has no NaN or infinity: they are written as null (strict JSON; numpy
// reads null as nan in a float array); clients that need them exactly ask for binary outputs.
// FP16/BF16 outputs in JSON are written as their exact float values.
//
// Thread safety: free functions without shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "glassbox/serve/engine/api.h"

namespace glassbox::serve {

struct DecodedInfer {
  InferRequest request;
  bool binary_output = false;  // request parameter binary_data_output: the default for outputs
};

// `header_length`: the Inference-Header-Content-Length value as received (nullopt: absent).
DecodedInfer decode_infer_request(std::shared_ptr<const std::string> body,
                                  std::optional<std::string_view> header_length, const std::string& model,
                                  std::int64_t version, int max_json_depth);

struct EncodedInfer {
  std::string body;
  std::optional<std::size_t> header_length;  // set when any output is binary
};
// An output is binary when its RequestedOutput says so, or (not listed) when `binary_default`.
EncodedInfer encode_infer_response(const InferResponse& response, bool binary_default);

// Parses `text` as JSON, refusing nesting deeper than `max_depth` (400 "JSON nesting deeper than
// 100 levels") and malformed text (400 naming `what` and the parser's byte position).
nlohmann::json parse_json(std::string_view text, int max_depth, std::string_view what);

// Appends `s` as a JSON string literal (quotes included) to `out`.
void append_json_string(std::string& out, std::string_view s);
// As append_json_string, for text that may quote untrusted bytes (error messages): a byte that is
// not part of a valid UTF-8 sequence (RFC 3629: no overlong forms, no surrogates) is written as
// the four characters \xNN, so the literal is always valid UTF-8.
void append_json_text(std::string& out, std::string_view s);
// Appends a JSON number that reads back as exactly `v`; null for NaN and infinities.
void append_json_number(std::string& out, double v);
void append_json_number(std::string& out, float v);

}  // namespace glassbox::serve
