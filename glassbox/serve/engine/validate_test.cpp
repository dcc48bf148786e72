// RequestValidator: every check's message, asserted word for word (they reach clients as 400s).
#include "glassbox/serve/engine/validate.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace glassbox::serve {
namespace {

triton::ModelConfig config(const std::string& text) {
  exporter::ParseConfigOptions o;
  o.validate = false;
  return exporter::parse_model_config(text, "test", o);
}

// One FP32 input [b, 2] (INPUT__0), as runner_test's model.
std::string one_input(int max_batch_size, const std::string& scheduling = "") {
  return R"(name: "m" max_batch_size: )" + std::to_string(max_batch_size) + R"(
    input [{ name: "INPUT__0" data_type: TYPE_FP32 dims: [2] }]
    output [{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [2] }])" +
         "\n" + scheduling;
}

constexpr const char* kTwoInputs = R"(name: "m" max_batch_size: 8
  input [{ name: "A" data_type: TYPE_FP32 dims: [2] }, { name: "B" data_type: TYPE_INT64 dims: [-1] }]
  output [{ name: "Y" data_type: TYPE_FP32 dims: [1] }, { name: "Z" data_type: TYPE_FP32 dims: [2] }]
  dynamic_batching { priority_levels: 3 default_priority_level: 2 })";

Tensor zeros(const std::string& name, DataType type, std::vector<std::int64_t> shape) {
  const std::size_t n = static_cast<std::size_t>(element_count(shape)) * element_size(type);
  return Tensor::owning(name, type, std::move(shape), std::string(n, '\0'));
}

InferRequest two(std::int64_t a_batch = 1, std::int64_t b_batch = 1, std::int64_t b_width = 3) {
  InferRequest r;
  r.inputs.push_back(zeros("A", DataType::kFp32, {a_batch, 2}));
  r.inputs.push_back(zeros("B", DataType::kInt64, {b_batch, b_width}));
  return r;
}

std::string failure(const RequestValidator& v, InferRequest r) {
  try {
    v.validate(r);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.message();
    EXPECT_FALSE(e.hint().empty()) << e.message();
    return e.message();
  }
  return "(valid)";
}

TEST(Validate, AcceptsAValidRequestAndPutsItsInputsInConfigOrder) {
  const RequestValidator v(config(kTwoInputs), false);
  InferRequest r = two(2, 2, 3);
  std::swap(r.inputs[0], r.inputs[1]);
  const RequestShape s = v.validate(r);
  EXPECT_EQ(s.batch_size, 2);
  EXPECT_EQ(s.key.dims, (std::vector<std::int64_t>{3})) << "B's variable dims";
  EXPECT_EQ(r.inputs[0].name, "A");
  EXPECT_EQ(r.inputs[1].name, "B");
  const RequestValidator fixed(config(one_input(8)), false);
  InferRequest f;
  f.inputs.push_back(zeros("INPUT__0", DataType::kFp32, {3, 2}));
  EXPECT_TRUE(fixed.validate(f).key.dims.empty()) << "fixed shapes: no key";
}

TEST(Validate, InputNamesAndCounts) {
  const RequestValidator v(config(kTwoInputs), false);
  InferRequest r = two();
  r.inputs[1].name = "C";
  EXPECT_EQ(failure(v, r), "unexpected inference input 'C' for model 'm'. Expected one of ['A','B']");
  r = two();
  r.inputs.push_back(r.inputs[0]);
  EXPECT_EQ(failure(v, r), "duplicate input 'A' for model 'm'. Expected each input once, got it 2 times");
  r = two();
  r.inputs.pop_back();
  EXPECT_EQ(
      failure(v, r),
      "expected 2 inputs but got 1 inputs for model 'm'. Got input(s) ['A'], but missing required input(s) ['B']");
  EXPECT_EQ(failure(v, InferRequest{}),
            "expected 2 inputs but got 0 inputs for model 'm'. Got input(s) [], but missing required input(s) "
            "['A','B']");
}

TEST(Validate, DatatypesShapesAndBatchSizes) {
  const RequestValidator v(config(kTwoInputs), false);
  InferRequest r = two();
  r.inputs[1] = zeros("B", DataType::kFp32, {1, 3});
  EXPECT_EQ(failure(v, r), "inconsistent data type for input 'B' for model 'm'. Expected INT64, got FP32");
  r = two();
  r.inputs[0] = zeros("A", DataType::kFp32, {1, 3});
  EXPECT_EQ(failure(v, r), "unexpected shape for input 'A' for model 'm'. Expected [-1,2], got [1,3]");
  r.inputs[0] = zeros("A", DataType::kFp32, {2});
  EXPECT_EQ(failure(v, r), "unexpected shape for input 'A' for model 'm'. Expected [-1,2], got [2]");
  r = two();
  r.inputs[1].shape = {1, -1};
  EXPECT_EQ(failure(v, r), "invalid shape for input 'B' for model 'm'. Expected non-negative dimensions, got [1,-1]");
  EXPECT_EQ(failure(v, two(0, 0)), "invalid batch size for input 'A' for model 'm'. Expected >= 1, got 0");
  EXPECT_EQ(failure(v, two(2, 3)),
            "inconsistent batch size for input 'B' for model 'm'. Expected 2 (the batch size of input 'A'), got 3");
  EXPECT_EQ(failure(v, two(9, 9)), "inference request batch-size must be <= 8 for 'm', got 9");
  EXPECT_EQ(failure(RequestValidator(config(kTwoInputs), true), two(9, 9)), "(valid)") << "splitting allowed";
  r = two();
  r.inputs[0].size = 4;
  EXPECT_EQ(failure(v, r), "input byte size mismatch for input 'A' for model 'm'. Expected 8, got 4");

  const RequestValidator unbatched(config(one_input(0)), false);
  InferRequest batched;
  batched.inputs.push_back(zeros("INPUT__0", DataType::kFp32, {1, 2}));
  EXPECT_EQ(failure(unbatched, batched),
            "unexpected shape for input 'INPUT__0' for model 'm'. Expected [2], got [1,2]");
  InferRequest plain;
  plain.inputs.push_back(zeros("INPUT__0", DataType::kFp32, {2}));
  EXPECT_EQ(unbatched.validate(plain).batch_size, 1);
}

TEST(Validate, BytesData) {
  const RequestValidator v(config(R"(name: "s" max_batch_size: 4
    input [{ name: "S" data_type: TYPE_STRING dims: [1] }] output [{ name: "Y" data_type: TYPE_FP32 dims: [1] }])"),
                           false);
  auto bytes = [](const std::string& data) {
    InferRequest r;
    r.inputs.push_back(Tensor::owning("S", DataType::kBytes, {2, 1}, data));
    return r;
  };
  const std::string ab("\x02\0\0\0ab", 6), c("\x01\0\0\0c", 5);
  EXPECT_EQ(failure(v, bytes(ab + c)), "(valid)");
  EXPECT_EQ(failure(v, bytes(ab + c.substr(0, 3))),
            "invalid BYTES data for input 'S' for model 's'. Expected 2 elements, each a 4-byte little-endian length "
            "and that many bytes, in 9 bytes; got the data ends inside an element");
  EXPECT_EQ(failure(v, bytes(ab + c + "xy")),
            "invalid BYTES data for input 'S' for model 's'. Expected 2 elements, each a 4-byte little-endian length "
            "and that many bytes, in 13 bytes; got 2 bytes after the last element");
}

TEST(Validate, OutputsAndPriority) {
  const RequestValidator v(config(kTwoInputs), false);
  InferRequest r = two();
  r.outputs = {{"Z", false}, {"Q", true}};
  EXPECT_EQ(failure(v, r), "unexpected inference output 'Q' for model 'm'. Expected one of ['Y','Z']");
  r.outputs = {{"Y", false}, {"Y", true}};
  EXPECT_EQ(failure(v, r), "duplicate requested output 'Y' for model 'm'. Expected each output once, got it 2 times");
  r = two();
  r.priority = 4;
  EXPECT_EQ(failure(v, r), "invalid priority for model 'm'. Expected 0 (the default level) or 1..3, got 4");
  r.priority = 3;
  EXPECT_EQ(failure(v, r), "(valid)");
  const RequestValidator one_level(config(one_input(8, "dynamic_batching { }")), false);
  InferRequest p;
  p.inputs.push_back(zeros("INPUT__0", DataType::kFp32, {1, 2}));
  p.priority = 7;
  p.timeout_us = 5;
  EXPECT_EQ(failure(one_level, p), "(valid)") << "one level: priority ignored; timeout ignored without override";
}

TEST(Validate, BoolBytesAreZeroOrOne) {
  const RequestValidator v(config(R"(name: "m" max_batch_size: 4
    input [{ name: "X" data_type: TYPE_BOOL dims: [3] }]
    output [{ name: "Y" data_type: TYPE_BOOL dims: [3] }, { name: "S" data_type: TYPE_FP32 dims: [3] }])"),
                           false);
  InferRequest r;
  r.inputs.push_back(Tensor::owning("X", DataType::kBool, {1, 3}, std::string("\x01\x00\x01", 3)));
  EXPECT_EQ(failure(v, r), "(valid)");
  r.inputs[0] = Tensor::owning("X", DataType::kBool, {1, 3}, std::string("\x01\x02\x01", 3));
  EXPECT_EQ(failure(v, r), "invalid BOOL data for input 'X' for model 'm': element 1 is the byte 2, not 0 or 1");
  // The classification extension ranks numeric scores only.
  r.inputs[0] = Tensor::owning("X", DataType::kBool, {1, 3}, std::string(3, '\0'));
  r.outputs = {RequestedOutput{"Y", false, 2}};
  EXPECT_EQ(failure(v, r), "classification of output 'Y' of model 'm' needs numeric scores, got BOOL");
  r.outputs = {RequestedOutput{"S", false, 2}};
  EXPECT_EQ(failure(v, r), "(valid)");
}

}  // namespace
}  // namespace glassbox::serve
