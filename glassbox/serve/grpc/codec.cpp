// ModelInferRequest -> InferRequest (views into the message where the bytes already have the
// tensor's layout), InferResponse -> ModelInferResponse, Error -> grpc::Status; see codec.h.
#include "glassbox/serve/grpc/codec.h"

#include <cstring>
#include <exception>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace glassbox::serve {
namespace {

using inference::InferParameter;
using inference::InferTensorContents;
using inference::ModelInferRequest;

[[noreturn]] void bad(std::string message, std::string hint = {}) {
  throw Error(ErrorCode::kInvalidArgument, std::move(message), std::move(hint));
}

// "input 'x' of model 'm'" (the HTTP codec's wording).
std::string of(const std::string& input, const std::string& model) {
  return "input '" + input + "' of model '" + model + "'";
}

// A parameter's value for a message.
std::string brief(const InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case InferParameter::kBoolParam: return p.bool_param() ? "true" : "false";
    case InferParameter::kInt64Param: return std::to_string(p.int64_param());
    case InferParameter::kUint64Param: return std::to_string(p.uint64_param());
    case InferParameter::kDoubleParam: return std::to_string(p.double_param());
    case InferParameter::kStringParam: return "\"" + p.string_param().substr(0, 36) + "\"";
    case InferParameter::PARAMETER_CHOICE_NOT_SET: break;
  }
  return "nothing";
}

// A non-negative integer parameter (int64_param >= 0 or uint64_param).
bool unsigned_value(const InferParameter& p, std::uint64_t& v) {
  if (p.parameter_choice_case() == InferParameter::kUint64Param) {
    v = p.uint64_param();
    return true;
  }
  if (p.parameter_choice_case() == InferParameter::kInt64Param && p.int64_param() >= 0) {
    v = static_cast<std::uint64_t>(p.int64_param());
    return true;
  }
  return false;
}

void parse_parameters(const ModelInferRequest& req, InferRequest& out) {
  const std::string& model = req.model_name();
  for (const auto& [key, v] : req.parameters()) {
    if (key == "triton_enable_empty_final_response") {
      // perf_analyzer and tritonclient's C++ client send it; every answer here is final (rpcs.cpp, stream_request).
      if (v.parameter_choice_case() != InferParameter::kBoolParam) {
        bad("parameter 'triton_enable_empty_final_response' must be true or false, got " + brief(v) + " (model '" +
            model + "')");
      }
      continue;
    }
    if (key.rfind("triton_", 0) == 0) {
      bad("parameter '" + key + "' is reserved (inference request for model '" + model + "')",
          std::string("names starting with triton_ belong to Triton; rename or drop it"));
    }
    if (key.rfind("sequence_", 0) == 0) {
      bad("parameter '" + key + "' asks for sequence batching, which glassbox serve does not support (model '" + model +
              "')",
          std::string("send each request on its own, without sequence_id/sequence_start/sequence_end"));
    }
    std::uint64_t n = 0;
    if (key == "priority") {
      if (!unsigned_value(v, n) || n > std::numeric_limits<std::uint32_t>::max()) {
        bad("parameter 'priority' must be a non-negative integer, got " + brief(v) + " (model '" + model + "')",
            std::string("1 is the highest level; 0 means the model's default"));
      }
      out.priority = static_cast<std::uint32_t>(n);
    } else if (key == "timeout") {
      if (!unsigned_value(v, n)) {
        bad("parameter 'timeout' must be a non-negative integer of microseconds, got " + brief(v) + " (model '" +
            model + "')");
      }
      out.timeout_us = n;
    }
    // Other parameters (binary_data_output, ...) are the client's business; they are ignored.
  }
}

void parse_outputs(const ModelInferRequest& req, InferRequest& out) {
  const std::string& model = req.model_name();
  std::set<std::string> seen;
  for (const auto& o : req.outputs()) {
    if (o.name().empty()) bad("an output of the inference request for model '" + model + "' has no name");
    if (!seen.insert(o.name()).second) bad("output '" + o.name() + "' is requested twice (model '" + model + "')");
    RequestedOutput r{o.name(), true};
    for (const auto& [key, v] : o.parameters()) {
      if (key == "binary_data") continue;  // gRPC outputs are always raw bytes
      if (key == "classification") {
        // The classification extension (tritonclient.grpc sends class_count as int64_param).
        const bool is_int = v.parameter_choice_case() == inference::InferParameter::kInt64Param ||
                            v.parameter_choice_case() == inference::InferParameter::kUint64Param;
        const std::int64_t n = v.parameter_choice_case() == inference::InferParameter::kUint64Param
                                   ? static_cast<std::int64_t>(std::min<std::uint64_t>(v.uint64_param(), INT64_MAX))
                                   : v.int64_param();
        if (!is_int || n < 0 || n > UINT32_MAX) {
          bad("parameter 'classification' of output '" + o.name() + "' of model '" + model +
                  "' must be a non-negative integer (the number of top classes)",
              std::string("set int64_param to the number of classes wanted"));
        }
        r.class_count = static_cast<std::uint32_t>(n);
        continue;
      }
      bad("unknown parameter '" + key + "' for output '" + o.name() + "' of model '" + model + "'",
          std::string("an output accepts only the binary_data and classification parameters"));
    }
    out.outputs.push_back(std::move(r));
  }
}

std::vector<std::int64_t> parse_shape(const ModelInferRequest::InferInputTensor& in, const std::string& model) {
  std::vector<std::int64_t> shape(in.shape().begin(), in.shape().end());
  for (std::int64_t d : shape) {
    if (d == -1) {
      bad(of(in.name(), model) + " has shape " + shape_string(shape) +
              ": -1 (any size) belongs in a model's configuration",
          std::string("give the actual size of every dimension in a request"));
    }
    if (d < 0) bad(of(in.name(), model) + " has a negative dimension in shape " + shape_string(shape));
  }
  std::uint64_t n = 1;
  for (std::int64_t d : shape) {
    if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(d), &n) || n > (std::uint64_t{1} << 48)) {
      bad(of(in.name(), model) + " has shape " + shape_string(shape) + ", too many elements");
    }
  }
  return shape;
}

void check_bytes_elements(const std::string& raw, std::int64_t count, const std::string& input,
                          const std::string& model) {
  const std::string hint = "each BYTES element is a 4-byte little-endian length followed by that many bytes";
  std::size_t offset = 0;
  std::int64_t n = 0;
  while (offset < raw.size()) {
    if (raw.size() - offset < 4) {
      bad("BYTES element " + std::to_string(n) + " of " + of(input, model) + " runs past its raw_input_contents (" +
              std::to_string(raw.size() - offset) + " bytes left, its 4-byte length does not fit)",
          hint);
    }
    std::uint32_t len;
    std::memcpy(&len, raw.data() + offset, 4);
    offset += 4;
    if (len > raw.size() - offset) {
      bad("BYTES element " + std::to_string(n) + " of " + of(input, model) + " has length " + std::to_string(len) +
              " but only " + std::to_string(raw.size() - offset) + " bytes of its raw_input_contents are left",
          hint);
    }
    offset += len;
    ++n;
  }
  if (n != count) {
    bad(of(input, model) + " has " + std::to_string(n) +
            " BYTES elements in its raw_input_contents but its shape needs " + std::to_string(count),
        std::string("send one length-prefixed element per shape element"));
  }
}

// The typed list a datatype's values travel in ("" for FP16/BF16, which have none).
const char* contents_field(DataType t) {
  switch (t) {
    case DataType::kBool: return "bool_contents";
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32: return "int_contents";
    case DataType::kInt64: return "int64_contents";
    case DataType::kUint8:
    case DataType::kUint16:
    case DataType::kUint32: return "uint_contents";
    case DataType::kUint64: return "uint64_contents";
    case DataType::kFp32: return "fp32_contents";
    case DataType::kFp64: return "fp64_contents";
    case DataType::kBytes: return "bytes_contents";
    case DataType::kFp16:
    case DataType::kBf16: return "";
  }
  return "";
}

// The names of the non-empty lists of `c`.
std::vector<std::string> filled_lists(const InferTensorContents& c) {
  std::vector<std::string> out;
  if (c.bool_contents_size()) out.emplace_back("bool_contents");
  if (c.int_contents_size()) out.emplace_back("int_contents");
  if (c.int64_contents_size()) out.emplace_back("int64_contents");
  if (c.uint_contents_size()) out.emplace_back("uint_contents");
  if (c.uint64_contents_size()) out.emplace_back("uint64_contents");
  if (c.fp32_contents_size()) out.emplace_back("fp32_contents");
  if (c.fp64_contents_size()) out.emplace_back("fp64_contents");
  if (c.bytes_contents_size()) out.emplace_back("bytes_contents");
  return out;
}

// Narrows each value to T, refusing values outside its range.
template <typename T, typename Src>
std::string narrowed(const Src& values, const std::string& input, const std::string& model, DataType type) {
  std::string bytes(static_cast<std::size_t>(values.size()) * sizeof(T), '\0');
  for (int i = 0; i < values.size(); ++i) {
    const auto v = values.Get(i);
    if (v < static_cast<decltype(v)>(std::numeric_limits<T>::min()) ||
        v > static_cast<decltype(v)>(std::numeric_limits<T>::max())) {
      bad("value " + std::to_string(v) + " at index " + std::to_string(i) + " of " + of(input, model) +
          " is out of range for " + datatype_name(type));
    }
    const T t = static_cast<T>(v);
    std::memcpy(bytes.data() + static_cast<std::size_t>(i) * sizeof(T), &t, sizeof(T));
  }
  return bytes;
}

template <typename Field>
Tensor view_of(const Field& values, std::string name, DataType type, std::vector<std::int64_t> shape,
               const std::shared_ptr<const void>& owner) {
  return Tensor::view(std::move(name), type, std::move(shape), owner,
                      reinterpret_cast<const std::uint8_t*>(values.data()),
                      static_cast<std::size_t>(values.size()) * sizeof(*values.data()));
}

Tensor typed_input(const ModelInferRequest::InferInputTensor& in, DataType type, std::vector<std::int64_t> shape,
                   std::int64_t count, const std::string& model, const std::shared_ptr<const void>& owner) {
  const InferTensorContents& c = in.contents();
  const std::string field = contents_field(type);
  const std::vector<std::string> filled = filled_lists(c);
  if (field.empty()) {
    bad(of(in.name(), model) + " is " + datatype_name(type) + ", which has no typed contents",
        std::string("send its bytes in raw_input_contents"));
  }
  for (const std::string& f : filled) {
    if (f != field) {
      bad(of(in.name(), model) + " is " + datatype_name(type) + " but its values are in " + f,
          "put " + std::string(datatype_name(type)) + " values in contents." + field);
    }
  }
  std::int64_t given = 0;
  for (int n : {c.bool_contents_size(), c.int_contents_size(), c.int64_contents_size(), c.uint_contents_size(),
                c.uint64_contents_size(), c.fp32_contents_size(), c.fp64_contents_size(), c.bytes_contents_size()}) {
    given += n;
  }
  if (given != count) {
    bad(of(in.name(), model) + " has " + std::to_string(given) + " values in contents." + field + " but shape " +
            shape_string(shape) + " needs " + std::to_string(count),
        std::string("send one value per element of the shape (row-major)"));
  }
  const std::string& name = in.name();
  switch (type) {
    case DataType::kBool: return view_of(c.bool_contents(), name, type, std::move(shape), owner);
    case DataType::kInt32: return view_of(c.int_contents(), name, type, std::move(shape), owner);
    case DataType::kInt64: return view_of(c.int64_contents(), name, type, std::move(shape), owner);
    case DataType::kUint32: return view_of(c.uint_contents(), name, type, std::move(shape), owner);
    case DataType::kUint64: return view_of(c.uint64_contents(), name, type, std::move(shape), owner);
    case DataType::kFp32: return view_of(c.fp32_contents(), name, type, std::move(shape), owner);
    case DataType::kFp64: return view_of(c.fp64_contents(), name, type, std::move(shape), owner);
    case DataType::kInt8:
      return Tensor::owning(name, type, std::move(shape), narrowed<std::int8_t>(c.int_contents(), name, model, type));
    case DataType::kInt16:
      return Tensor::owning(name, type, std::move(shape), narrowed<std::int16_t>(c.int_contents(), name, model, type));
    case DataType::kUint8:
      return Tensor::owning(name, type, std::move(shape), narrowed<std::uint8_t>(c.uint_contents(), name, model, type));
    case DataType::kUint16:
      return Tensor::owning(name, type, std::move(shape),
                            narrowed<std::uint16_t>(c.uint_contents(), name, model, type));
    case DataType::kBytes: {
      std::string bytes;
      for (const std::string& e : c.bytes_contents()) {
        if (e.size() > std::numeric_limits<std::uint32_t>::max())
          bad("a BYTES element of " + of(name, model) + " is over 4 GiB");
        const auto len = static_cast<std::uint32_t>(e.size());
        bytes.append(reinterpret_cast<const char*>(&len), 4);
        bytes += e;
      }
      return Tensor::owning(name, type, std::move(shape), std::move(bytes));
    }
    case DataType::kFp16:
    case DataType::kBf16: break;
  }
  bad(of(name, model) + " has no typed contents");
}

}  // namespace

grpc::StatusCode grpc_code(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return grpc::StatusCode::INVALID_ARGUMENT;
    case ErrorCode::kNotFound: return grpc::StatusCode::NOT_FOUND;
    case ErrorCode::kAlreadyExists: return grpc::StatusCode::ALREADY_EXISTS;
    case ErrorCode::kFailedPrecondition: return grpc::StatusCode::FAILED_PRECONDITION;
    case ErrorCode::kResourceExhausted:
    case ErrorCode::kUnavailable: return grpc::StatusCode::UNAVAILABLE;
    case ErrorCode::kPermissionDenied: return grpc::StatusCode::PERMISSION_DENIED;
    case ErrorCode::kUnimplemented: return grpc::StatusCode::UNIMPLEMENTED;
    case ErrorCode::kDeadlineExceeded: return grpc::StatusCode::DEADLINE_EXCEEDED;
    case ErrorCode::kDataLoss:
    case ErrorCode::kInternal: return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;
}

grpc::Status to_status(const Error& error) { return grpc::Status(grpc_code(error.code()), error.one_line()); }

grpc::Status status_of(const std::function<void()>& body) {
  try {
    body();
    return grpc::Status::OK;
  } catch (const Error& e) {
    return to_status(e);
  } catch (const std::exception& e) {
    return grpc::Status(grpc::StatusCode::INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "internal error");
  }
}

std::int64_t parse_model_version(const std::string& v, const std::string& model) {
  if (v.empty()) return 0;
  bool ok = v.size() <= 18;
  for (char c : v) ok = ok && c >= '0' && c <= '9';
  if (!ok) {
    throw Error(ErrorCode::kInvalidArgument,
                "model version '" + v.substr(0, 40) + "' of model '" + model + "' is not a decimal number",
                "versions are the numeric folder names, e.g. \"1\"; empty means the highest ready one");
  }
  std::int64_t n = 0;
  for (char c : v) n = n * 10 + (c - '0');
  return n;
}

bool names_version_zero(const std::string& version) {
  return !version.empty() && version.size() <= 18 &&
         std::all_of(version.begin(), version.end(), [](char c) { return c == '0'; });
}

InferRequest decode_infer_request(const ModelInferRequest& req, std::shared_ptr<const void> owner) {
  const std::string& model = req.model_name();
  if (model.empty()) bad("the inference request names no model", std::string("set model_name"));
  const std::string what = "the inference request for model '" + model + "'";
  InferRequest out;
  out.model = model;
  out.version = parse_model_version(req.model_version(), model);
  out.id = req.id();
  parse_parameters(req, out);

  const int n_raw = req.raw_input_contents_size();
  if (n_raw != 0 && n_raw != req.inputs_size()) {
    bad(what + " has " + std::to_string(n_raw) + " raw_input_contents entries for " +
            std::to_string(req.inputs_size()) + " inputs",
        std::string("send one raw_input_contents entry per input, in the order of inputs (or none, and typed "
                    "contents in each input)"));
  }
  std::set<std::string> names;
  out.inputs.reserve(static_cast<std::size_t>(req.inputs_size()));
  for (int i = 0; i < req.inputs_size(); ++i) {
    const auto& in = req.inputs(i);
    const std::string& name = in.name();
    if (name.empty()) bad("inputs[" + std::to_string(i) + "] of " + what + " has no name");
    if (!names.insert(name).second)
      bad("input '" + name + "' appears twice in " + what, std::string("send each input once"));
    const auto type = parse_datatype(in.datatype());
    if (!type) {
      bad(of(name, model) + " has unknown datatype '" + in.datatype().substr(0, 40) + "'",
          std::string("use one of BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, FP32, FP64, "
                      "BF16, BYTES"));
    }
    for (const auto& [key, v] : in.parameters()) {
      if (key == "binary_data_size") continue;  // the HTTP extension's; the raw entry carries its size here
      if (key.rfind("shared_memory_", 0) == 0) {
        bad(of(name, model) + " is in shared memory (parameter '" + key + "'), which glassbox serve does not support",
            std::string("send the tensor in raw_input_contents"));
      }
      bad("unknown parameter '" + key + "' for " + of(name, model),
          std::string("an input takes no parameters over gRPC"));
    }
    std::vector<std::int64_t> shape = parse_shape(in, model);
    const std::int64_t count = element_count(shape);
    const bool has_contents = !filled_lists(in.contents()).empty();
    if (n_raw == 0) {
      if (!has_contents && count != 0) {
        bad(of(name, model) + " has no data", std::string("send its bytes in raw_input_contents or its values in "
                                                          "contents"));
      }
      out.inputs.push_back(typed_input(in, *type, std::move(shape), count, model, owner));
      continue;
    }
    if (has_contents) {
      bad(of(name, model) + " has both contents and a raw_input_contents entry",
          std::string("send the values once: typed contents for every input, or raw_input_contents for every input"));
    }
    const std::string& raw = req.raw_input_contents(i);
    if (*type == DataType::kBytes) {
      check_bytes_elements(raw, count, name, model);
    } else if (raw.size() != static_cast<std::size_t>(count) * element_size(*type)) {
      bad(of(name, model) + " has " + std::to_string(raw.size()) + " bytes of raw_input_contents but shape " +
              shape_string(shape) + " of " + datatype_name(*type) + " needs " +
              std::to_string(static_cast<std::size_t>(count) * element_size(*type)),
          std::string("raw_input_contents must hold the element count times the element size"));
    }
    out.inputs.push_back(Tensor::view(name, *type, std::move(shape), owner,
                                      reinterpret_cast<const std::uint8_t*>(raw.data()), raw.size()));
  }
  parse_outputs(req, out);
  return out;
}

void encode_infer_response(const InferResponse& response, inference::ModelInferResponse& out) {
  out.Clear();
  out.set_model_name(response.model);
  out.set_model_version(std::to_string(response.version));
  out.set_id(response.id);
  for (const Tensor& t : response.outputs) {
    auto* o = out.add_outputs();
    o->set_name(t.name);
    o->set_datatype(datatype_name(t.datatype));
    for (std::int64_t d : t.shape) o->add_shape(d);
    out.add_raw_output_contents(reinterpret_cast<const char*>(t.data), t.size);
  }
}

}  // namespace glassbox::serve
