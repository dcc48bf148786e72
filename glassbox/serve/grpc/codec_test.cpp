// The gRPC inference codec without a server: raw and typed inputs (views where the bytes are the
// tensor's layout, conversions where not), the validation messages, outputs, status codes.
#include "glassbox/serve/grpc/codec.h"

#include <cstring>

#include <gtest/gtest.h>

#include "glassbox/serve/grpc/grpc_client_test.h"

namespace glassbox::serve {
namespace {

using testing::fp32_request;

std::string message_of(const inference::ModelInferRequest& r) {
  try {
    decode_infer_request(r, nullptr);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.one_line();
  }
  return "(no error)";
}

TEST(GrpcCodec, RawInputsAreViewsIntoTheMessage) {
  auto msg = std::make_shared<inference::ModelInferRequest>(fp32_request("m", {2, 2}, {1, 2, 3, 4}, "id7"));
  InferRequest r = decode_infer_request(*msg, msg);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.id, "id7");
  EXPECT_EQ(r.version, 0);
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0].shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(static_cast<const void*>(r.inputs[0].data), static_cast<const void*>(msg->raw_input_contents(0).data()));
  EXPECT_EQ(r.inputs[0].owner.get(), msg.get());
}

TEST(GrpcCodec, TypedContents) {
  auto msg = std::make_shared<inference::ModelInferRequest>();
  msg->set_model_name("m");
  msg->set_model_version("3");
  auto add = [&](const char* name, const char* type, std::int64_t n) {
    auto* in = msg->add_inputs();
    in->set_name(name);
    in->set_datatype(type);
    in->add_shape(n);
    return in->mutable_contents();
  };
  for (float f : {1.5f, -2.f}) add("f", "FP32", 2)->add_fp32_contents(f), msg->mutable_inputs(0);
  auto* i8 = add("i8", "INT8", 2);
  i8->add_int_contents(-3);
  i8->add_int_contents(100);
  auto* b = add("b", "BYTES", 2);
  b->add_bytes_contents("hi");
  b->add_bytes_contents("");
  auto* l = add("l", "INT64", 1);
  l->add_int64_contents(1ll << 40);
  // The loop above added two FP32 inputs of one value each; keep the first, fill it.
  msg->mutable_inputs()->DeleteSubrange(1, 1);
  msg->mutable_inputs(0)->mutable_contents()->add_fp32_contents(-2.f);
  InferRequest r = decode_infer_request(*msg, msg);
  EXPECT_EQ(r.version, 3);
  ASSERT_EQ(r.inputs.size(), 4u);
  float f[2];
  std::memcpy(f, r.inputs[0].data, 8);
  EXPECT_EQ(f[0], 1.5f);
  EXPECT_EQ(f[1], -2.f);
  EXPECT_EQ(static_cast<const void*>(r.inputs[0].data),
            static_cast<const void*>(msg->inputs(0).contents().fp32_contents().data()));
  ASSERT_EQ(r.inputs[1].size, 2u);
  EXPECT_EQ(static_cast<std::int8_t>(r.inputs[1].data[0]), -3);
  EXPECT_EQ(static_cast<std::int8_t>(r.inputs[1].data[1]), 100);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(r.inputs[2].data), r.inputs[2].size),
            std::string("\x02\0\0\0hi\0\0\0\0", 10));
  std::int64_t v;
  std::memcpy(&v, r.inputs[3].data, 8);
  EXPECT_EQ(v, 1ll << 40);

  msg->mutable_inputs(1)->mutable_contents()->set_int_contents(1, 300);
  EXPECT_EQ(message_of(*msg), "value 300 at index 1 of input 'i8' of model 'm' is out of range for INT8");
}

TEST(GrpcCodec, ValidationMessages) {
  auto r = fp32_request("m", {1, 2}, {1, 2});
  r.mutable_inputs(0)->set_shape(0, -1);
  EXPECT_EQ(message_of(r),
            "input 'INPUT__0' of model 'm' has shape [-1,2]: -1 (any size) belongs in a model's configuration (hint: "
            "give the actual size of every dimension in a request)");
  r = fp32_request("m", {1, 2}, {1, 2});
  r.add_raw_input_contents("extra");
  EXPECT_NE(message_of(r).find("has 2 raw_input_contents entries for 1 inputs"), std::string::npos);
  r = fp32_request("m", {1, 2}, {1, 2});
  *r.add_inputs() = r.inputs(0);
  r.add_raw_input_contents(r.raw_input_contents(0));
  EXPECT_EQ(message_of(r),
            "input 'INPUT__0' appears twice in the inference request for model 'm' (hint: send each "
            "input once)");
  r = fp32_request("m", {1, 2}, {1, 2});
  r.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1);
  EXPECT_NE(message_of(r).find("has both contents and a raw_input_contents entry"), std::string::npos);
  r = fp32_request("m", {1, 2}, {1, 2});
  r.clear_raw_input_contents();
  r.mutable_inputs(0)->mutable_contents()->add_int64_contents(1);
  EXPECT_EQ(message_of(r),
            "input 'INPUT__0' of model 'm' is FP32 but its values are in int64_contents (hint: put "
            "FP32 values in contents.fp32_contents)");
  r.mutable_inputs(0)->clear_contents();
  EXPECT_NE(message_of(r).find("input 'INPUT__0' of model 'm' has no data"), std::string::npos);
  r = fp32_request("m", {1, 2}, {1, 2});
  (*r.mutable_parameters())["priority"].set_int64_param(-1);
  EXPECT_NE(message_of(r).find("parameter 'priority' must be a non-negative integer, got -1"), std::string::npos);
  r = fp32_request("m", {1, 2}, {1, 2});
  (*r.mutable_parameters())["sequence_id"].set_int64_param(1);
  EXPECT_NE(message_of(r).find("asks for sequence batching"), std::string::npos);
  r = fp32_request("m", {1, 2}, {1, 2});
  (*r.add_outputs()->mutable_parameters())["classification"].set_double_param(3);
  r.mutable_outputs(0)->set_name("OUTPUT__0");
  EXPECT_NE(message_of(r).find("parameter 'classification' of output 'OUTPUT__0' of model 'm' must be a non-negative "
                               "integer"),
            std::string::npos);

  inference::ModelInferRequest bytes;
  bytes.set_model_name("m");
  auto* in = bytes.add_inputs();
  in->set_name("s");
  in->set_datatype("BYTES");
  in->add_shape(2);
  bytes.add_raw_input_contents(std::string("\x01\0\0\0a", 5));
  EXPECT_EQ(message_of(bytes),
            "input 's' of model 'm' has 1 BYTES elements in its raw_input_contents but its shape "
            "needs 2 (hint: send one length-prefixed element per shape element)");
}

TEST(GrpcCodec, ResponseIsRaw) {
  InferResponse resp;
  resp.model = "m";
  resp.version = 2;
  resp.id = "x";
  resp.outputs.push_back(Tensor::owning("OUTPUT__0", DataType::kInt64, {1, 1}, std::string("\x05\0\0\0\0\0\0\0", 8)));
  inference::ModelInferResponse out;
  encode_infer_response(resp, out);
  EXPECT_EQ(out.model_name(), "m");
  EXPECT_EQ(out.model_version(), "2");
  EXPECT_EQ(out.id(), "x");
  ASSERT_EQ(out.outputs_size(), 1);
  EXPECT_EQ(out.outputs(0).datatype(), "INT64");
  EXPECT_EQ(out.raw_output_contents(0), std::string("\x05\0\0\0\0\0\0\0", 8));
}

TEST(GrpcCodec, StatusCodes) {
  EXPECT_EQ(grpc_code(ErrorCode::kInvalidArgument), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(grpc_code(ErrorCode::kResourceExhausted), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(grpc_code(ErrorCode::kUnavailable), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(grpc_code(ErrorCode::kPermissionDenied), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(grpc_code(ErrorCode::kDataLoss), grpc::StatusCode::INTERNAL);
  const grpc::Status s = to_status(Error(ErrorCode::kNotFound, "gone", "look"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "gone (hint: look)");
  EXPECT_EQ(parse_model_version("", "m"), 0);
  EXPECT_EQ(parse_model_version("12", "m"), 12);
  EXPECT_THROW(parse_model_version("1a", "m"), Error);
  EXPECT_TRUE(names_version_zero("0"));
  EXPECT_TRUE(names_version_zero("000"));
  EXPECT_FALSE(names_version_zero(""));
  EXPECT_FALSE(names_version_zero("10"));
}

TEST(GrpcCodec, ClassificationParameter) {
  inference::ModelInferRequest r;
  r.set_model_name("m");
  auto* o = r.add_outputs();
  o->set_name("OUTPUT__0");
  (*o->mutable_parameters())["classification"].set_int64_param(3);
  EXPECT_EQ(decode_infer_request(r, nullptr).outputs.at(0).class_count, 3u);
  (*o->mutable_parameters())["classification"].set_int64_param(-2);
  EXPECT_THROW(decode_infer_request(r, nullptr), Error);
  (*o->mutable_parameters())["classification"].set_string_param("3");
  EXPECT_THROW(decode_infer_request(r, nullptr), Error);
}

}  // namespace
}  // namespace glassbox::serve
