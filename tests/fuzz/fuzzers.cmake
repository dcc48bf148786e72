# The libFuzzer targets, one gb_fuzzer() line each: tests/fuzz/CMakeLists.txt builds them (the
# fuzz build) and tests/fuzz/fuzz_tests.cmake registers their ctest tests (the normal build).
# A target NAME has its harness in NAME.cpp, its seed corpus in corpus/NAME/, its dictionary in
# NAME.dict (optional) and the inputs of fixed crashes in regressions/NAME/ (optional).
#
#   gb_fuzzer(NAME [SOURCES project files beyond gb_fuzz_serve's...] [EXTERNAL libraries...])

# decode_infer_request on an untrusted body and header, then encode_infer_response of the result.
gb_fuzzer(fuzz_infer_codec)
# parse_json with its depth limit, and the JSON string/number writers.
gb_fuzzer(fuzz_json)
# RequestParser: the HTTP/1.1 framing rules, fed in pieces and whole (the outcomes must agree).
gb_fuzzer(fuzz_http_request SOURCES glassbox/serve/http/request_parser.cpp EXTERNAL Boost::headers)
# gRPC: a call's DATA through MessageReader in pieces and whole, each message parsed and decoded
# as ModelInfer does, the decoded tensors encoded back (serve/grpc wire.h, codec.h).
gb_fuzzer(fuzz_grpc_messages SOURCES glassbox/serve/grpc/wire.cpp glassbox/serve/grpc/codec.cpp
          EXTERNAL gb_grpc_service_proto)
