// libFuzzer target: what glassbox serve does with an untrusted inference request
// (glassbox/serve/http/codec.h), without an engine.
//
// Input layout (the seed corpus in tests/fuzz/corpus/fuzz_infer_codec/ is written this way):
//   "H:<value>\n<body>"   the request has an Inference-Header-Content-Length header whose value
//                         is <value> (any bytes but '\n', digits or not); the body follows
//   "<body>"              anything else: no header, the whole input is the body
//
// The body goes through decode_infer_request as the server's route does (model "fuzz", the
// server's default JSON depth 100). A glassbox::Error there is the expected answer to a bad
// request (a 400). When it decodes, a response whose outputs are the decoded inputs (as a model
// that echoes its inputs would answer) is encoded three times: with the request's own binary
// flags (parameters.binary_data_output, outputs[].parameters.binary_data), all as JSON and all as
// binary. Each encoding is checked:
//   - header_length is set exactly when some output is binary, the body is the JSON part plus
//     the binary outputs' bytes in order, and those bytes are the tensors' own;
//   - the JSON part is valid JSON (unless a BYTES output holds bytes that are not UTF-8: the
//     encoder passes them through), listing each output's name, datatype, shape, and its data
//     (element count) or parameters.binary_data_size;
//   - the response read back as a request (outputs renamed inputs) decodes to the same tensors:
//     bytes equal, except BOOL (any non-zero byte is true), FP32/FP64 from JSON (-0 reads back
//     as 0) and outputs JSON cannot carry (FP16/BF16, NaN and infinities as null), left out.
// Anything else that escapes (another exception type), an Error from encoding or from reading a
// response back, a failed check, a sanitizer report, a leak or a hang is a finding.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/base/error.h"
#include "glassbox/serve/engine/api.h"
#include "glassbox/serve/http/codec.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

using glassbox::Error;
using glassbox::serve::DataType;
using glassbox::serve::DecodedInfer;
using glassbox::serve::EncodedInfer;
using glassbox::serve::InferResponse;
using glassbox::serve::RequestedOutput;
using glassbox::serve::Tensor;
using json = nlohmann::json;

constexpr int kMaxJsonDepth = 100;  // HttpOptions::max_json_depth's default
const std::string kModel = "fuzz";

[[noreturn]] void fail(const std::string& what) { glassbox::fuzz::fail("fuzz_infer_codec", what); }

using glassbox::fuzz::valid_utf8;

// The elements of a (decoded, hence well-formed) BYTES tensor.
std::vector<std::string_view> bytes_elements(const Tensor& t) {
  std::vector<std::string_view> out;
  std::size_t offset = 0;
  while (offset + 4 <= t.size) {
    std::uint32_t len;
    std::memcpy(&len, t.data + offset, 4);
    offset += 4;
    if (len > t.size - offset) fail("a decoded BYTES tensor is malformed: '" + t.name + "'");
    out.emplace_back(reinterpret_cast<const char*>(t.data + offset), len);
    offset += len;
  }
  return out;
}

// JSON can carry the tensor exactly (up to -0 and BOOL's non-zero bytes).
bool json_round_trips(const Tensor& t) {
  switch (t.datatype) {
    case DataType::kFp16:
    case DataType::kBf16: return false;
    case DataType::kFp32:
      for (std::size_t i = 0; i + 4 <= t.size; i += 4) {
        float v;
        std::memcpy(&v, t.data + i, 4);
        if (!std::isfinite(v)) return false;
      }
      return true;
    case DataType::kFp64:
      for (std::size_t i = 0; i + 8 <= t.size; i += 8) {
        double v;
        std::memcpy(&v, t.data + i, 8);
        if (!std::isfinite(v)) return false;
      }
      return true;
    default: return true;
  }
}

// `got` (read back from a response) holds the values of `want` (the decoded request's tensor).
void check_same(const Tensor& want, const Tensor& got, bool from_json) {
  const std::string who = "output '" + want.name + "' read back";
  if (got.datatype != want.datatype) fail(who + " has another datatype");
  if (got.shape != want.shape) fail(who + " has another shape");
  if (got.size != want.size) {
    fail(who + " has " + std::to_string(got.size) + " bytes, sent " + std::to_string(want.size));
  }
  if (!from_json || want.size == 0) {
    if (want.size && std::memcmp(got.data, want.data, want.size) != 0) fail(who + " has other bytes");
    return;
  }
  for (std::size_t i = 0; i < want.size;) {
    switch (want.datatype) {
      case DataType::kBool:
        if ((got.data[i] != 0) != (want.data[i] != 0)) fail(who + ": BOOL element differs");
        i += 1;
        break;
      case DataType::kFp32: {
        float a, b;
        std::memcpy(&a, want.data + i, 4);
        std::memcpy(&b, got.data + i, 4);
        if (a != b) fail(who + ": FP32 element " + std::to_string(i / 4) + " differs");
        i += 4;
        break;
      }
      case DataType::kFp64: {
        double a, b;
        std::memcpy(&a, want.data + i, 8);
        std::memcpy(&b, got.data + i, 8);
        if (a != b) fail(who + ": FP64 element " + std::to_string(i / 8) + " differs");
        i += 8;
        break;
      }
      default:
        if (std::memcmp(got.data, want.data, want.size) != 0) fail(who + " has other bytes");
        i = want.size;
    }
  }
}

void check_encoding(const InferResponse& response, bool binary_default, const char* mode) {
  EncodedInfer e;
  try {
    e = glassbox::serve::encode_infer_response(response, binary_default);
  } catch (const Error& err) {
    fail(std::string("encoding (") + mode + ") a decoded request's tensors failed: " + err.one_line());
  }

  // Which outputs are binary, as encode_infer_response's contract says.
  std::vector<bool> binary;
  std::size_t binary_bytes = 0;
  bool utf8_safe = true;
  for (const Tensor& t : response.outputs) {
    bool b = binary_default;
    for (const RequestedOutput& r : response.requested) {
      if (r.name == t.name) b = r.binary;
    }
    binary.push_back(b);
    if (b) binary_bytes += t.size;
    if (!b && t.datatype == DataType::kBytes) {
      for (std::string_view s : bytes_elements(t)) utf8_safe = utf8_safe && valid_utf8(s);
    }
  }
  const bool any_binary = std::any_of(binary.begin(), binary.end(), [](bool b) { return b; });
  if (e.header_length.has_value() != any_binary) fail(std::string("header_length wrong (") + mode + ")");
  const std::size_t json_size = e.header_length.value_or(e.body.size());
  if (json_size > e.body.size() || e.body.size() - json_size != binary_bytes) {
    fail(std::string("body is not the JSON part plus the binary outputs (") + mode + ")");
  }
  std::size_t offset = json_size;
  for (std::size_t i = 0; i < response.outputs.size(); ++i) {
    if (!binary[i]) continue;
    const Tensor& t = response.outputs[i];
    if (t.size && std::memcmp(e.body.data() + offset, t.data, t.size) != 0) {
      fail("binary bytes of output '" + t.name + "' differ from the tensor's (" + mode + ")");
    }
    offset += t.size;
  }

  const std::string_view json_text(e.body.data(), json_size);
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::parse_error& err) {
    if (!utf8_safe) return;  // BYTES that are not UTF-8, passed through as they are
    fail(std::string("the encoded response (") + mode + ") is not valid JSON: " + err.what());
  }
  const json& outs = doc.at("outputs");
  if (!outs.is_array() || outs.size() != response.outputs.size()) fail("'outputs' does not list every output");
  for (std::size_t i = 0; i < outs.size(); ++i) {
    const Tensor& t = response.outputs[i];
    const json& o = outs[i];
    if (o.at("name") != t.name || o.at("datatype") != glassbox::serve::datatype_name(t.datatype) ||
        o.at("shape").get<std::vector<std::int64_t>>() != t.shape) {
      fail("output " + std::to_string(i) + " is described wrongly (" + mode + ")");
    }
    if (binary[i]) {
      if (o.at("parameters").at("binary_data_size") != t.size) fail("binary_data_size wrong for '" + t.name + "'");
    } else if (static_cast<std::int64_t>(o.at("data").size()) != t.element_count()) {
      fail("'data' of '" + t.name + "' has the wrong element count (" + mode + ")");
    }
  }

  // The response as a request: it decodes to the same tensors.
  json request = json::object();
  if (doc.contains("id")) request["id"] = doc["id"];
  json inputs = json::array();
  std::vector<const Tensor*> expected;
  std::vector<bool> expected_json;
  for (std::size_t i = 0; i < outs.size(); ++i) {
    if (!binary[i] && !json_round_trips(response.outputs[i])) continue;
    inputs.push_back(outs[i]);
    expected.push_back(&response.outputs[i]);
    expected_json.push_back(!binary[i]);
  }
  request["inputs"] = std::move(inputs);
  std::string body = request.dump();
  std::optional<std::string> header;
  if (any_binary) {
    header = std::to_string(body.size());
    body.append(e.body, json_size, std::string::npos);
  }
  DecodedInfer back;
  try {
    back = glassbox::serve::decode_infer_request(std::make_shared<const std::string>(std::move(body)), header, kModel,
                                                 0, kMaxJsonDepth);
  } catch (const Error& err) {
    fail(std::string("the response (") + mode + ") does not decode as a request: " + err.one_line());
  }
  if (back.request.inputs.size() != expected.size()) fail("the response read back has another number of tensors");
  for (std::size_t i = 0; i < expected.size(); ++i) {
    check_same(*expected[i], back.request.inputs[i], expected_json[i]);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::optional<std::string_view> header;
  if (input.size() >= 2 && input.substr(0, 2) == "H:") {
    const std::size_t eol = input.find('\n');
    header = input.substr(2, eol == std::string_view::npos ? std::string_view::npos : eol - 2);
    input = eol == std::string_view::npos ? std::string_view() : input.substr(eol + 1);
  }
  auto body = std::make_shared<const std::string>(input);

  DecodedInfer decoded;
  try {
    decoded = glassbox::serve::decode_infer_request(body, header, kModel, 0, kMaxJsonDepth);
  } catch (const Error&) {
    return 0;  // a 400: the expected answer to a bad request
  }
  if (decoded.request.model != kModel) fail("the decoded request names another model");
  // codec.h: JSON numbers for FP32/FP64 are finite and in range (binary inputs may be anything).
  for (const Tensor& t : decoded.request.inputs) {
    if (t.owner != body && (t.datatype == DataType::kFp32 || t.datatype == DataType::kFp64) && !json_round_trips(t)) {
      fail("input '" + t.name + "' decoded from JSON 'data' holds a NaN or an infinity");
    }
  }

  InferResponse response;
  response.model = kModel;
  response.version = 1;
  response.id = decoded.request.id;
  response.outputs = decoded.request.inputs;
  response.requested = decoded.request.outputs;
  check_encoding(response, decoded.binary_output, "as requested");
  response.requested.clear();
  check_encoding(response, false, "all JSON");
  check_encoding(response, true, "all binary");
  return 0;
}
