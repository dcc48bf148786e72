// The KServe v2 codec: every decode path and its 400 message, response encoding (JSON numbers
// round-trip, binary outputs), and the content codings.
#include "glassbox/serve/http/codec.h"

#include <zlib.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "glassbox/serve/http/compression.h"
#include "glassbox/serve/http/routes.h"

namespace glassbox::serve {
namespace {

DecodedInfer decode(const std::string& body, std::optional<std::string> header = std::nullopt, int depth = 100) {
  auto b = std::make_shared<const std::string>(body);
  std::optional<std::string_view> h;
  if (header) h = *header;
  return decode_infer_request(b, h, "m", 0, depth);
}

// The message of the InvalidArgument decode throws ("" and a test failure when it does not).
std::string decode_error(const std::string& body, std::optional<std::string> header = std::nullopt, int depth = 100) {
  try {
    decode(body, header, depth);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.message();
    return e.message();
  }
  ADD_FAILURE() << "no error for " << body.substr(0, 200);
  return "";
}

// A request with one input `x`.
std::string one_input(const std::string& datatype, const std::string& shape, const std::string& data) {
  return R"({"inputs":[{"name":"x","datatype":")" + datatype + R"(","shape":)" + shape + R"(,"data":)" + data + "}]}";
}

template <typename T>
std::vector<T> values(const Tensor& t) {
  std::vector<T> v(t.size / sizeof(T));
  std::memcpy(v.data(), t.data, t.size);
  return v;
}

std::string u32(std::uint32_t n) { return std::string(reinterpret_cast<const char*>(&n), 4); }

TEST(Decode, FlatAndNestedJsonGiveTheSameRowMajorBytes) {
  const DecodedInfer flat = decode(one_input("FP32", "[2,2]", "[1, 2.5, -3, 4]"));
  const DecodedInfer nested = decode(one_input("FP32", "[2,2]", "[[1, 2.5], [-3, 4]]"));
  ASSERT_EQ(flat.request.inputs.size(), 1u);
  const Tensor& t = flat.request.inputs[0];
  EXPECT_EQ(t.name, "x");
  EXPECT_EQ(t.datatype, DataType::kFp32);
  EXPECT_EQ(t.shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(values<float>(t), (std::vector<float>{1, 2.5f, -3, 4}));
  EXPECT_EQ(values<float>(nested.request.inputs[0]), values<float>(t));
  EXPECT_EQ(flat.request.model, "m");
}

TEST(Decode, EveryJsonDatatype) {
  EXPECT_EQ(values<std::uint8_t>(decode(one_input("BOOL", "[3]", "[true,false,true]")).request.inputs[0]),
            (std::vector<std::uint8_t>{1, 0, 1}));
  EXPECT_EQ(values<std::uint8_t>(decode(one_input("UINT8", "[2]", "[0,255]")).request.inputs[0]),
            (std::vector<std::uint8_t>{0, 255}));
  EXPECT_EQ(values<std::int8_t>(decode(one_input("INT8", "[2]", "[-128,127]")).request.inputs[0]),
            (std::vector<std::int8_t>{-128, 127}));
  EXPECT_EQ(values<std::uint16_t>(decode(one_input("UINT16", "[1]", "[65535]")).request.inputs[0]),
            (std::vector<std::uint16_t>{65535}));
  EXPECT_EQ(values<std::int16_t>(decode(one_input("INT16", "[1]", "[-32768]")).request.inputs[0]),
            (std::vector<std::int16_t>{-32768}));
  EXPECT_EQ(values<std::uint32_t>(decode(one_input("UINT32", "[1]", "[4294967295]")).request.inputs[0]),
            (std::vector<std::uint32_t>{4294967295u}));
  EXPECT_EQ(values<std::int32_t>(decode(one_input("INT32", "[2]", "[-2147483648,7]")).request.inputs[0]),
            (std::vector<std::int32_t>{std::numeric_limits<std::int32_t>::min(), 7}));
  EXPECT_EQ(
      values<std::int64_t>(
          decode(one_input("INT64", "[2]", "[-9223372036854775808,9223372036854775807]")).request.inputs[0]),
      (std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()}));
  EXPECT_EQ(values<std::uint64_t>(decode(one_input("UINT64", "[1]", "[18446744073709551615]")).request.inputs[0]),
            (std::vector<std::uint64_t>{std::numeric_limits<std::uint64_t>::max()}));
  EXPECT_EQ(values<double>(decode(one_input("FP64", "[2]", "[1e300, 3]")).request.inputs[0]),
            (std::vector<double>{1e300, 3}));
  const Tensor bytes = decode(one_input("BYTES", "[2]", R"(["ab", ""])")).request.inputs[0];
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(bytes.data), bytes.size), u32(2) + "ab" + u32(0));
  const Tensor scalar = decode(one_input("FP32", "[]", "[5]")).request.inputs[0];
  EXPECT_EQ(values<float>(scalar), std::vector<float>{5});
  EXPECT_EQ(decode(one_input("FP32", "[0,3]", "[]")).request.inputs[0].size, 0u);
}

TEST(Decode, ValuesOutsideTheirDatatypeName) {
  EXPECT_EQ(decode_error(one_input("UINT8", "[2]", "[1, 300]")),
            "element 1 of input 'x' of model 'm' is 300, out of range for UINT8 [0, 255]");
  EXPECT_EQ(decode_error(one_input("INT8", "[1]", "[-129]")),
            "element 0 of input 'x' of model 'm' is -129, out of range for INT8 [-128, 127]");
  EXPECT_EQ(decode_error(one_input("UINT32", "[1]", "[-1]")),
            "element 0 of input 'x' of model 'm' is -1, out of range for UINT32 [0, 4294967295]");
  EXPECT_EQ(decode_error(one_input("INT64", "[1]", "[9223372036854775808]")),
            "element 0 of input 'x' of model 'm' is 9223372036854775808, out of range for INT64 "
            "[-9223372036854775808, 9223372036854775807]");
  EXPECT_EQ(decode_error(one_input("INT32", "[1]", "[1.5]")),
            "element 0 of input 'x' of model 'm' is 1.5, expected an integer (INT32)");
  EXPECT_EQ(decode_error(one_input("BOOL", "[2]", "[true, 1]")),
            "element 1 of input 'x' of model 'm' is 1, expected true or false (BOOL)");
  EXPECT_EQ(decode_error(one_input("FP32", "[1]", R"(["1"])")),
            "element 0 of input 'x' of model 'm' is \"1\", expected a number (FP32)");
  EXPECT_EQ(decode_error(one_input("FP32", "[1]", "[1e39]")),
            "element 0 of input 'x' of model 'm' is 1e+39, out of range for FP32");
  EXPECT_EQ(decode_error(one_input("BYTES", "[1]", "[1]")),
            "element 0 of input 'x' of model 'm' is 1, expected a string (BYTES)");
  EXPECT_EQ(decode_error(one_input("FP16", "[1]", "[1]")), "input 'x' of model 'm' is FP16, which JSON cannot carry");
  EXPECT_EQ(decode_error(one_input("BF16", "[1]", "[1]")), "input 'x' of model 'm' is BF16, which JSON cannot carry");
}

TEST(Decode, DataThatDisagreesWithTheShape) {
  EXPECT_EQ(decode_error(one_input("FP32", "[2,2]", "[1,2,3,4,5]")),
            "input 'x' of model 'm' has 5 elements in 'data' but shape [2,2] needs 4");
  EXPECT_EQ(decode_error(one_input("FP32", "[2,2]", "[1,2,3]")),
            "input 'x' of model 'm' has 3 elements in 'data' but shape [2,2] needs 4");
  EXPECT_EQ(decode_error(one_input("FP32", "[2,2]", "[[1,2],[3]]")),
            "'data' of input 'x' of model 'm' does not match its shape [2,2]: an array at depth 1 has 1 elements, "
            "expected 2");
  EXPECT_EQ(decode_error(one_input("FP32", "[2,2]", "[[1,2],[3,4],[5,6]]")),
            "'data' of input 'x' of model 'm' does not match its shape [2,2]: an array at depth 0 has 3 elements, "
            "expected 2");
  EXPECT_EQ(decode_error(one_input("FP32", "[2]", "[[1],[2]]")),
            "'data' of input 'x' of model 'm' is nested deeper than its shape [2]");
  EXPECT_EQ(decode_error(one_input("FP32", "[2,2]", "[[1,2],3]")),
            "'data' of input 'x' of model 'm' is not nested as deep as its shape [2,2] (a value at depth 1)");
  EXPECT_EQ(decode_error(one_input("FP32", "[2,2]", "[1,[2],3,4]")),
            "'data' of input 'x' of model 'm' mixes values and arrays");
  EXPECT_EQ(decode_error(one_input("FP32", "[1]", "5")),
            "'data' of input 'x' of model 'm' must be an array, got number");
}

TEST(Decode, MalformedRequests) {
  const std::string bad_json = decode_error(R"({"inputs": [}")");
  EXPECT_EQ(
      bad_json.rfind(
          "malformed JSON in the inference request for model 'm' at byte 13: parse error at line 1, column 13", 0),
      0u)
      << bad_json;
  const std::string cut_short = decode_error(R"({"inputs": [)");
  EXPECT_EQ(cut_short.rfind("malformed JSON in the inference request for model 'm' at byte 13: ", 0), 0u) << cut_short;
  EXPECT_NE(cut_short.find("unexpected end of input"), std::string::npos) << cut_short;
  EXPECT_EQ(decode_error(""), "the inference request for model 'm' has an empty body");
  EXPECT_EQ(decode_error("[1]"), "the inference request for model 'm' must be a JSON object, got array");
  EXPECT_EQ(decode_error("{}"), "the inference request for model 'm' has no 'inputs'");
  EXPECT_EQ(decode_error(R"({"inputs": {}})"),
            "'inputs' of the inference request for model 'm' must be an array, got object");
  EXPECT_EQ(decode_error(R"({"inputs": [3]})"),
            "inputs[0] of the inference request for model 'm' must be an object, got number");
  EXPECT_EQ(decode_error(R"({"inputs": [{"shape":[1],"datatype":"FP32","data":[1]}]})"),
            "inputs[0] of the inference request for model 'm' has no 'name'");
  EXPECT_EQ(decode_error(R"({"inputs": [{"name":"x","shape":[1],"data":[1]}]})"),
            "input 'x' of model 'm' has no 'datatype'");
  EXPECT_EQ(decode_error(R"({"inputs": [{"name":"x","datatype":"FP32","data":[1]}]})"),
            "input 'x' of model 'm' has no 'shape'");
  EXPECT_EQ(decode_error(R"({"inputs": [{"name":"x","datatype":"FP32","shape":[1]}]})"),
            "input 'x' of model 'm' has no 'data' and no parameters.binary_data_size");
  EXPECT_EQ(decode_error(one_input("FP8", "[1]", "[1]")), "input 'x' of model 'm' has unknown datatype 'FP8'");
  EXPECT_EQ(decode_error(one_input("FP32", "[2,-3]", "[]")),
            "input 'x' of model 'm' has a negative dimension in shape [2,-3]");
  EXPECT_EQ(decode_error(one_input("FP32", "[-1,4]", "[]")),
            "input 'x' of model 'm' has shape [-1,4]: -1 (any size) belongs in a model's configuration");
  EXPECT_EQ(decode_error(one_input("FP32", "[1.5]", "[]")),
            "'shape' of input 'x' of model 'm' must be an array of integers, got [1.5]");
  EXPECT_EQ(decode_error(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]},)"
                         R"({"name":"x","datatype":"FP32","shape":[1],"data":[2]}]})"),
            "input 'x' appears twice in the inference request for model 'm'");
  EXPECT_EQ(decode_error(R"({"id": 5, "inputs": []})"),
            "'id' of the inference request for model 'm' must be a string, got number");
  EXPECT_EQ(
      decode_error(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1],"parameters":{"foo":1}}]})"),
      "unknown parameter 'foo' for input 'x' of model 'm'");
}

TEST(Decode, RequestParameters) {
  const DecodedInfer d =
      decode(R"({"id":"r7","parameters":{"priority":2,"timeout":1500,"binary_data_output":true,"custom":"kept out"},)"
             R"("inputs":[],"outputs":[{"name":"a"},{"name":"b","parameters":{"binary_data":false}}]})");
  EXPECT_EQ(d.request.id, "r7");
  EXPECT_EQ(d.request.priority, 2u);
  EXPECT_EQ(d.request.timeout_us, 1500u);
  EXPECT_TRUE(d.binary_output);
  ASSERT_EQ(d.request.outputs.size(), 2u);
  EXPECT_TRUE(d.request.outputs[0].binary);   // the request's default
  EXPECT_FALSE(d.request.outputs[1].binary);  // its own parameter wins

  EXPECT_EQ(decode_error(R"({"parameters":{"triton_enable_empty_final_response":true},"inputs":[]})"),
            "parameter 'triton_enable_empty_final_response' is reserved (inference request for model 'm')");
  EXPECT_EQ(decode_error(R"({"parameters":{"sequence_id":3},"inputs":[]})"),
            "parameter 'sequence_id' asks for sequence batching, which glassbox serve does not support (model 'm')");
  EXPECT_EQ(decode_error(R"({"parameters":{"priority":-1},"inputs":[]})"),
            "parameter 'priority' must be a non-negative integer, got -1 (model 'm')");
  EXPECT_EQ(decode_error(R"({"parameters":{"timeout":"1s"},"inputs":[]})"),
            "parameter 'timeout' must be a non-negative integer of microseconds, got \"1s\" (model 'm')");
  EXPECT_EQ(decode_error(R"({"parameters":{"binary_data_output":1},"inputs":[]})"),
            "parameter 'binary_data_output' must be true or false, got 1 (model 'm')");
  EXPECT_EQ(decode_error(R"({"parameters":[],"inputs":[]})"),
            "'parameters' of the inference request for model 'm' must be an object, got array");
}

TEST(Decode, RequestedOutputs) {
  EXPECT_EQ(decode_error(R"({"inputs":[],"outputs":{}})"),
            "'outputs' of the inference request for model 'm' must be an array, got object");
  EXPECT_EQ(decode_error(R"({"inputs":[],"outputs":[{}]})"),
            "outputs[0] of the inference request for model 'm' has no 'name'");
  EXPECT_EQ(decode_error(R"({"inputs":[],"outputs":[{"name":"o"},{"name":"o"}]})"),
            "output 'o' is requested twice (model 'm')");
  EXPECT_EQ(decode(R"({"inputs":[],"outputs":[{"name":"o","parameters":{"classification":3}}]})")
                .request.outputs.at(0)
                .class_count,
            3u);
  EXPECT_EQ(decode_error(R"({"inputs":[],"outputs":[{"name":"o","parameters":{"classification":-1}}]})"),
            "parameter 'classification' of output 'o' of model 'm' must be a non-negative integer (the number of top "
            "classes), got -1");
  EXPECT_EQ(decode_error(R"({"inputs":[],"outputs":[{"name":"o","parameters":{"classification":"3"}}]})"),
            "parameter 'classification' of output 'o' of model 'm' must be a non-negative integer (the number of top "
            "classes), got \"3\"");
  EXPECT_EQ(decode_error(R"({"inputs":[],"outputs":[{"name":"o","parameters":{"binary_data_size":3}}]})"),
            "unknown parameter 'binary_data_size' for output 'o' of model 'm'");
  EXPECT_EQ(decode_error(R"({"inputs":[],"outputs":[{"name":"o","parameters":{"binary_data":"yes"}}]})"),
            "parameter 'binary_data' of output 'o' of model 'm' must be true or false, got \"yes\"");
  const DecodedInfer d = decode(R"({"inputs":[],"outputs":[{"name":"o","parameters":{"binary_data":true}}]})");
  EXPECT_FALSE(d.binary_output);
  EXPECT_TRUE(d.request.outputs.at(0).binary);
}

// A binary request: JSON header naming two inputs, then their bytes.
struct BinaryBody {
  std::string body;
  std::string header_length;
};
BinaryBody binary_body(const std::string& json, const std::string& tail) {
  return {json + tail, std::to_string(json.size())};
}

TEST(Decode, BinaryInputsViewTheBody) {
  const float f[4] = {1, 2, 3, 4};
  const std::string fp32(reinterpret_cast<const char*>(f), sizeof(f));
  const std::string half("\x00\x3c\x00\xc0", 4);  // FP16 1, -2
  const auto b =
      binary_body(R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2,2],"parameters":{"binary_data_size":16}},)"
                  R"({"name":"j","datatype":"INT32","shape":[1],"data":[9]},)"
                  R"({"name":"h","datatype":"FP16","shape":[2],"parameters":{"binary_data_size":4}}]})",
                  fp32 + half);
  auto body = std::make_shared<const std::string>(b.body);
  const DecodedInfer d = decode_infer_request(body, std::string_view(b.header_length), "m", 3, 100);
  ASSERT_EQ(d.request.inputs.size(), 3u);
  const Tensor& a = d.request.inputs[0];
  EXPECT_EQ(values<float>(a), (std::vector<float>{1, 2, 3, 4}));
  // Zero copy: the tensor points into the body and keeps it alive.
  EXPECT_EQ(reinterpret_cast<const char*>(a.data), body->data() + std::stoul(b.header_length));
  EXPECT_EQ(a.owner.get(), static_cast<const void*>(body.get()));
  EXPECT_EQ(values<std::int32_t>(d.request.inputs[1]), std::vector<std::int32_t>{9});
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(d.request.inputs[2].data), 4), half);
  EXPECT_EQ(d.request.version, 3);

  // The C++ client sends the header with all-JSON bodies too: then it equals the body's length.
  const std::string json_only = one_input("FP32", "[1]", "[1]");
  EXPECT_EQ(decode(json_only, std::to_string(json_only.size())).request.inputs.size(), 1u);
}

TEST(Decode, BinaryFraming) {
  const std::string in16 =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2,2],"parameters":{"binary_data_size":16}}]})";
  const std::string bytes16(16, '\1');
  EXPECT_EQ(decode_error(in16),
            "input 'x' of model 'm' has parameters.binary_data_size but the request has no "
            "Inference-Header-Content-Length header");
  EXPECT_EQ(decode_error(in16 + bytes16),
            "the body of the inference request for model 'm' goes on after its JSON (at byte 95) and there is no "
            "Inference-Header-Content-Length header");
  EXPECT_EQ(decode_error(in16 + bytes16, "abc"),
            "Inference-Header-Content-Length must be a non-negative integer, got 'abc' (model 'm')");
  EXPECT_EQ(decode_error(in16 + bytes16, "-5"),
            "Inference-Header-Content-Length must be a non-negative integer, got '-5' (model 'm')");
  EXPECT_EQ(decode_error(in16 + bytes16, ""),
            "Inference-Header-Content-Length must be a non-negative integer, got '' (model 'm')");
  EXPECT_EQ(decode_error(in16 + bytes16, "500"), "Inference-Header-Content-Length is 500 but the body has only " +
                                                     std::to_string(in16.size() + 16) + " bytes (model 'm')");
  EXPECT_EQ(decode_error(bytes16, "0"),
            "Inference-Header-Content-Length 0 (a raw binary body for a single input) is not supported (model 'm')");
  EXPECT_EQ(decode_error(in16 + bytes16 + "xyzw", std::to_string(in16.size())),
            "4 bytes are left over after the binary inputs of the inference request for model 'm'");
  EXPECT_EQ(decode_error(in16 + bytes16.substr(0, 8), std::to_string(in16.size())),
            "the binary data of input 'x' of model 'm' (16 bytes) runs past the end of the body (8 bytes left)");
  const std::string in12 =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2,2],"parameters":{"binary_data_size":12}}]})";
  EXPECT_EQ(decode_error(in12 + std::string(12, '\0'), std::to_string(in12.size())),
            "input 'x' of model 'm' has 12 bytes of binary data but shape [2,2] of FP32 needs 16");
  const std::string both =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1],"parameters":{"binary_data_size":4}}]})";
  EXPECT_EQ(decode_error(both + "abcd", std::to_string(both.size())),
            "input 'x' of model 'm' has both 'data' and parameters.binary_data_size");
  EXPECT_EQ(
      decode_error(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":-4}}]})"),
      "parameter 'binary_data_size' of input 'x' of model 'm' must be a non-negative integer, got -4");
}

TEST(Decode, BinaryBytesElements) {
  auto bytes_request = [](const std::string& tail, int n) {
    const std::string json = R"({"inputs":[{"name":"s","datatype":"BYTES","shape":[)" + std::to_string(n) +
                             R"(],"parameters":{"binary_data_size":)" + std::to_string(tail.size()) + "}}]}";
    return std::make_pair(json + tail, std::to_string(json.size()));
  };
  auto [ok, ok_len] = bytes_request(u32(3) + "abc" + u32(0), 2);
  const Tensor t = decode(ok, ok_len).request.inputs.at(0);
  EXPECT_EQ(t.size, 11u);
  auto [overrun, overrun_len] = bytes_request(u32(10) + "abc", 1);
  EXPECT_EQ(decode_error(overrun, overrun_len),
            "BYTES element 0 of input 's' of model 'm' has length 10 but only 3 bytes of its binary data are left");
  auto [short_len, short_len_len] = bytes_request(u32(1) + "a" + std::string("\x01\x00", 2), 2);
  EXPECT_EQ(decode_error(short_len, short_len_len),
            "BYTES element 1 of input 's' of model 'm' runs past its binary data (2 bytes left, its 4-byte length does "
            "not fit)");
  auto [few, few_len] = bytes_request(u32(1) + "a", 2);
  EXPECT_EQ(decode_error(few, few_len),
            "input 's' of model 'm' has 1 BYTES elements in its binary data but its shape needs 2");
}

TEST(Decode, JsonDepthLimit) {
  auto nested = [](int levels) { return std::string(levels, '[') + std::string(levels, ']'); };
  EXPECT_NO_THROW(parse_json(nested(100), 100, "x"));
  try {
    parse_json(nested(101), 100, "the body");
    ADD_FAILURE() << "101 levels parsed";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "JSON nesting deeper than 100 levels in the body");
  }
  // In a request: the object is level 1, "inputs" level 2, so data may nest 97 more.
  const std::string deep = R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":)" + nested(200) + "}]}";
  EXPECT_EQ(decode_error(deep), "JSON nesting deeper than 100 levels in the inference request for model 'm'");
  EXPECT_EQ(decode_error(deep, std::nullopt, 500).rfind("'data' of input 'x' of model 'm'", 0), 0u);
}

InferResponse response_with(std::vector<Tensor> outputs, std::vector<RequestedOutput> requested = {}) {
  InferResponse r;
  r.model = "m";
  r.version = 2;
  r.outputs = std::move(outputs);
  r.requested = std::move(requested);
  return r;
}

template <typename T>
Tensor tensor(const std::string& name, DataType type, std::vector<std::int64_t> shape, std::vector<T> v) {
  return Tensor::owning(name, type, std::move(shape),
                        std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)));
}

TEST(Encode, JsonOutputs) {
  InferResponse r = response_with({
      tensor<float>("f", DataType::kFp32, {3}, {0.1f, 1.0f, -2.5f}),
      tensor<std::int64_t>("i", DataType::kInt64, {1, 2}, {-5, 9007199254740993}),
      tensor<std::uint8_t>("b", DataType::kBool, {2}, {1, 0}),
      tensor<std::uint8_t>("u", DataType::kUint8, {1}, {255}),
      Tensor::owning("s", DataType::kBytes, {2}, u32(2) + "a\"" + u32(1) + "\n"),
  });
  const EncodedInfer e = encode_infer_response(r, false);
  EXPECT_FALSE(e.header_length);
  EXPECT_EQ(e.body, R"({"model_name":"m","model_version":"2","outputs":[)"
                    R"({"name":"f","datatype":"FP32","shape":[3],"data":[0.1,1,-2.5]},)"
                    R"({"name":"i","datatype":"INT64","shape":[1,2],"data":[-5,9007199254740993]},)"
                    R"({"name":"b","datatype":"BOOL","shape":[2],"data":[true,false]},)"
                    R"({"name":"u","datatype":"UINT8","shape":[1],"data":[255]},)"
                    R"({"name":"s","datatype":"BYTES","shape":[2],"data":["a\"","\n"]}]})");
  r.id = "req \"7\"";
  EXPECT_EQ(encode_infer_response(r, false).body.rfind(R"({"model_name":"m","model_version":"2","id":"req \"7\"",)", 0),
            0u);
}

TEST(Encode, FloatsRoundTripAndNonFiniteAreNull) {
  const std::vector<float> fs = {0.1f, 1.0f / 3, 1e-45f, 3.4028235e38f, -0.0f, 123456.789f, 1.17549435e-38f};
  InferResponse r = response_with({tensor<float>("f", DataType::kFp32, {7}, fs)});
  const std::string body = encode_infer_response(r, false).body;
  // Read each number's text back as a float (strtof, as a client would) and compare the bits.
  const std::size_t open = body.find("\"data\":[") + 8;
  std::vector<std::string> texts;
  for (std::size_t p = open; body[p - 1] != ']';) {
    const std::size_t end = body.find_first_of(",]", p);
    texts.push_back(body.substr(p, end - p));
    p = end + 1;
  }
  ASSERT_EQ(texts.size(), fs.size()) << body;
  for (std::size_t i = 0; i < fs.size(); ++i) {
    const float back = std::strtof(texts[i].c_str(), nullptr);
    EXPECT_EQ(std::memcmp(&back, &fs[i], 4), 0) << texts[i] << " vs " << fs[i];
  }
  EXPECT_EQ(texts[4], "-0");
  const std::vector<double> ds = {0.1, 1.0 / 3, 5e-324};
  const auto jd = nlohmann::json::parse(
      encode_infer_response(response_with({tensor<double>("d", DataType::kFp64, {3}, ds)}), false).body);
  for (std::size_t i = 0; i < ds.size(); ++i) EXPECT_EQ(jd["outputs"][0]["data"][i].get<double>(), ds[i]);

  const std::vector<float> bad = {std::nanf(""), std::numeric_limits<float>::infinity(),
                                  -std::numeric_limits<float>::infinity()};
  EXPECT_NE(encode_infer_response(response_with({tensor<float>("f", DataType::kFp32, {3}, bad)}), false)
                .body.find(R"("data":[null,null,null])"),
            std::string::npos);
  // FP16/BF16 in JSON: their exact values (half 1, -2, smallest subnormal; bfloat16 1, -0.5).
  const auto half =
      encode_infer_response(response_with({tensor<std::uint16_t>("h", DataType::kFp16, {3}, {0x3c00, 0xc000, 0x0001}),
                                           tensor<std::uint16_t>("b", DataType::kBf16, {2}, {0x3f80, 0xbf00})}),
                            false);
  EXPECT_NE(half.body.find(R"("data":[1,-2,5.9604645e-08])"), std::string::npos) << half.body;
  EXPECT_NE(half.body.find(R"("data":[1,-0.5])"), std::string::npos) << half.body;
}

TEST(Encode, BinaryOutputs) {
  const std::vector<float> a = {1, 2};
  const std::vector<std::int32_t> b = {7};
  InferResponse r =
      response_with({tensor<float>("a", DataType::kFp32, {2}, a), tensor<std::int32_t>("b", DataType::kInt32, {1}, b)},
                    {{"a", true}, {"b", false}});
  const EncodedInfer e = encode_infer_response(r, false);
  const std::string json = R"({"model_name":"m","model_version":"2","outputs":[)"
                           R"({"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}},)"
                           R"({"name":"b","datatype":"INT32","shape":[1],"data":[7]}]})";
  ASSERT_TRUE(e.header_length);
  EXPECT_EQ(*e.header_length, json.size());
  EXPECT_EQ(e.body, json + std::string(reinterpret_cast<const char*>(a.data()), 8));

  // Nothing requested by name: the request-wide default decides (binary_data_output).
  InferResponse all =
      response_with({tensor<float>("a", DataType::kFp32, {2}, a), tensor<std::int32_t>("b", DataType::kInt32, {1}, b)});
  const EncodedInfer e2 = encode_infer_response(all, true);
  ASSERT_TRUE(e2.header_length);
  EXPECT_EQ(e2.body.substr(*e2.header_length), std::string(reinterpret_cast<const char*>(a.data()), 8) +
                                                   std::string(reinterpret_cast<const char*>(b.data()), 4));
  EXPECT_FALSE(encode_infer_response(all, false).header_length);
}

TEST(Encode, MalformedOutputsAreInternalErrors) {
  InferResponse r = response_with({Tensor::owning("f", DataType::kFp32, {2}, std::string(7, '\0'))});
  try {
    encode_infer_response(r, false);
    ADD_FAILURE() << "encoded 7 bytes as 2 floats";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
    EXPECT_EQ(e.message(), "output 'f' of model 'm' has 7 bytes for shape [2]");
  }
}

TEST(JsonString, EscapesWhatJsonRequires) {
  std::string out;
  append_json_string(out, std::string("a\"b\\c\n\t\x01\x1f", 10) + "\xc3\xa9");
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\t\\u0001\\u001f\\u0000\xc3\xa9\"");
  EXPECT_EQ(nlohmann::json::parse(out).get<std::string>(), std::string("a\"b\\c\n\t\x01\x1f", 10) + "\xc3\xa9");
}

// zlib's own encoders for the request bodies clients send.
std::string zlib_deflate(const std::string& in, int window_bits) {
  z_stream zs{};
  deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, in.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// The status a failure answers with: an HttpError's own (framing), else its code's mapping.
int http_error_status(const std::function<void()>& f, std::string* message) {
  try {
    f();
  } catch (const HttpError& e) {
    *message = e.message();
    return e.status();
  } catch (const Error& e) {
    *message = e.message();
    return http_status(e.code());
  }
  return 0;
}

TEST(Compression, InflatesGzipAndDeflateUnderTheLimit) {
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "glassbox " + std::to_string(i) + "\n";
  auto in = [](std::string s) { return std::make_shared<const std::string>(std::move(s)); };
  EXPECT_EQ(*decode_content(in(zlib_deflate(text, 15 + 16)), "gzip", 1 << 20), text);
  EXPECT_EQ(*decode_content(in(gzip(text)), "x-gzip", 1 << 20), text);
  EXPECT_EQ(*decode_content(in(zlib_deflate(text, 15)), "deflate", 1 << 20), text);   // zlib format
  EXPECT_EQ(*decode_content(in(zlib_deflate(text, -15)), "Deflate", 1 << 20), text);  // raw deflate
  EXPECT_EQ(*decode_content(in(gzip("ab") + gzip("cd")), "gzip", 1 << 20), "abcd");   // two members
  const auto plain = in(text);
  EXPECT_EQ(decode_content(plain, "", 10).get(), plain.get());
  EXPECT_EQ(decode_content(plain, "identity", 10).get(), plain.get());

  std::string message;
  EXPECT_EQ(http_error_status([&] { decode_content(in(gzip(std::string(100000, 'z'))), "gzip", 99999); }, &message),
            413);
  EXPECT_EQ(message, "request body is larger than the limit of 99999 bytes after gzip decompression");
  EXPECT_EQ(*decode_content(in(gzip(std::string(100000, 'z'))), "gzip", 100000), std::string(100000, 'z'));
  EXPECT_EQ(http_error_status([&] { decode_content(in("not gzip at all"), "gzip", 1000); }, &message), 400);
  EXPECT_EQ(message, "cannot decompress the gzip request body: incorrect header check");
  const std::string truncated = gzip(text).substr(0, 100);
  EXPECT_EQ(http_error_status([&] { decode_content(in(truncated), "gzip", 1 << 20); }, &message), 400);
  EXPECT_EQ(message, "cannot decompress the gzip request body: the compressed data is truncated");
  EXPECT_EQ(http_error_status([&] { decode_content(in(text), "br", 1 << 20); }, &message), 415);
  EXPECT_EQ(message, "unsupported Content-Encoding 'br'");
}

TEST(Compression, AcceptEncoding) {
  EXPECT_TRUE(accepts_gzip("gzip"));
  EXPECT_TRUE(accepts_gzip("deflate, GZIP;q=0.5"));
  EXPECT_TRUE(accepts_gzip("*"));
  EXPECT_FALSE(accepts_gzip("gzip;q=0"));
  EXPECT_FALSE(accepts_gzip("gzip; q=0.000, br"));
  EXPECT_FALSE(accepts_gzip("deflate, br"));
  EXPECT_FALSE(accepts_gzip(""));
}

}  // namespace
}  // namespace glassbox::serve
