// A closed-loop gRPC load generator for the serving benchmark: `concurrency` calls in flight at
// any time over a few HTTP/2 connections; each call, once answered, is sent again, for a warm-up
// period and then a measured window. It speaks gRPC's HTTP/2 mapping directly on nghttp2 (the
// library under nghttp2's own load tool, h2load): the request is framed once and answers are not
// decoded, so the client spends its CPU on HTTP/2 only, as the HTTP load generator (Beast) does on
// HTTP/1.1. A call succeeds when its trailers say grpc-status 0 (a stream's answer: when it has no
// error_message). check_grpc_reply makes one call through grpc++'s generated stub and checks the
// decoded answer. Figures are http_load.h's LoadResult: latency histogram of the window's
// successful calls, failures, throughput, this process's CPU.
//
//   GrpcLoadOptions o; o.port = server.grpc_port; o.concurrency = 32; o.seconds = 5;
//   LoadResult r = run_grpc_load(grpc_infer_request(spec, 1, 0), o);
//   check_grpc_reply("127.0.0.1", port, request, spec, 1);           // grpc++: the decoded answer
//
// Thread safety: reentrant; run_grpc_load blocks the calling thread for warmup + seconds and
// joins every thread it starts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/http_load.h"
#include "bench/serve_process.h"

namespace glassbox::bench {

struct GrpcLoadOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  int concurrency = 1;  // calls in flight
  int channels = 0;     // HTTP/2 connections; 0: one per 16 calls in flight, at most 4
  int threads = 1;      // I/O threads, each with its share of the connections (1-2 suffice)
  // ModelStreamInfer instead of ModelInfer: one bidirectional stream per channel, each with its
  // share of the calls in flight (a request is written again as soon as an answer arrives; answers
  // are taken in order for the latency, which a stream of one model's batches keeps).
  bool streaming = false;
  double warmup_seconds = 1.0;
  double seconds = 5.0;
  void validate() const;
};

// A serialized inference::ModelInferRequest for spec.model: one FP32 input [batch, dims...] in
// raw_input_contents, drawn as binary_infer_request draws it (the same values for the same seed).
std::string grpc_infer_request(const InferSpec& spec, std::int64_t batch, std::uint64_t seed);

LoadResult run_grpc_load(const std::string& serialized_request, const GrpcLoadOptions& options);

// One call; Internal naming the server unless it succeeds with spec.output holding batch x
// output_elements FP32 values in raw_output_contents.
void check_grpc_reply(const std::string& host, int port, const std::string& serialized_request, const InferSpec& spec,
                      std::int64_t batch);

}  // namespace glassbox::bench
