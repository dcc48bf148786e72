// The KServe v2 gRPC inference messages to and from the engine's types (api.h), and glassbox's
// error codes as gRPC status codes.
//
//   auto payload = std::make_shared<inference::ModelInferRequest>(...);   // as received
//   InferRequest r = decode_infer_request(*payload, payload);             // Error: InvalidArgument
//   engine.infer(std::move(r), [&](InferOutcome out) {
//     if (out.error) finish(to_status(*out.error));
//     else encode_infer_response(out.response, response);                 // raw_output_contents
//   });
//
// Decoding: each input's bytes come from `raw_input_contents` (one entry per input, in order;
// BYTES elements with a 4-byte little-endian length prefix) or from its typed `contents` (the list
// of its datatype: fp32_contents for FP32, int_contents for INT8/16/32, ...). Raw bytes and the
// typed lists whose memory already is the tensor's layout (BOOL, INT32, INT64, UINT32, UINT64,
// FP32, FP64) become Tensor views into the message, which `owner` keeps alive; INT8/16, UINT8/16
// and BYTES contents are converted (range-checked). Request parameters as the HTTP codec reads
// them: priority, timeout (microseconds); binary_data_output and any other key ignored, triton_*
// reserved (but triton_enable_empty_final_response, which perf_analyzer sends: every answer is
// final), sequence_* refused. Outputs: binary_data is accepted and ignored (gRPC answers are
// always raw), classification is refused. Every failure is an Error (InvalidArgument) whose
// message names the input and the model, as the HTTP front end's do.
// Encoding: every output in raw_output_contents (tritonclient.grpc decodes only those), one copy
// of the engine's output bytes.
// Status codes (Triton's mapping of its error kinds): InvalidArgument -> INVALID_ARGUMENT,
// NotFound -> NOT_FOUND, FailedPrecondition -> FAILED_PRECONDITION (model not ready),
// ResourceExhausted and Unavailable -> UNAVAILABLE (queue full, timeout, shutting down),
// PermissionDenied -> PERMISSION_DENIED, Unimplemented -> UNIMPLEMENTED, AlreadyExists ->
// ALREADY_EXISTS, DeadlineExceeded -> DEADLINE_EXCEEDED, DataLoss and Internal -> INTERNAL; the
// message is Error::one_line().
//
// Thread safety: free functions without shared state.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <grpcpp/support/status.h>

#include "glassbox/base/error.h"
#include "glassbox/serve/engine/api.h"
#include "glassbox/serve/grpc/proto/grpc_service.pb.h"

namespace glassbox::serve {

grpc::StatusCode grpc_code(ErrorCode code);
grpc::Status to_status(const Error& error);
// Runs `body`: OK, or the status of what it threw (an Error by its code, anything else INTERNAL).
grpc::Status status_of(const std::function<void()>& body);

// "" -> 0 (the highest ready version); decimal digits -> the version; anything else
// InvalidArgument naming the model.
std::int64_t parse_model_version(const std::string& version, const std::string& model);
// Whether `version` names version 0 ("0", "00"): versions are numbered from 1, and the caller
// answers explicit_version_zero (api.h), or "not ready" for ModelReady.
bool names_version_zero(const std::string& version);

// `owner` must keep `request` alive (it becomes the owner of the tensor views).
InferRequest decode_infer_request(const inference::ModelInferRequest& request, std::shared_ptr<const void> owner);

// Overwrites `out` with the response (model, version, id, outputs, raw_output_contents).
void encode_infer_response(const InferResponse& response, inference::ModelInferResponse& out);

}  // namespace glassbox::serve
