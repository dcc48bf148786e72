// Request validation against a model config (validate.h).
#include "glassbox/serve/engine/validate.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace glassbox::serve {
namespace {

// "['A','B']": how name lists appear in messages.
template <class Range, class Name>
std::string name_list(const Range& items, Name name) {
  std::string s = "[";
  for (const auto& item : items) {
    if (s.size() > 1) s += ",";
    s += "'" + std::string(name(item)) + "'";
  }
  return s + "]";
}

std::string for_model(const std::string& what, std::string_view tensor, const std::string& model) {
  return what + " '" + std::string(tensor) + "' for model '" + model + "'";
}

[[noreturn]] void invalid(std::string message, std::string hint) {
  throw Error(ErrorCode::kInvalidArgument, std::move(message), std::move(hint));
}

}  // namespace

DataType config_datatype(triton::DataType type, const std::string& model, const std::string& tensor) {
  const std::optional<DataType> t =
      type == triton::TYPE_INVALID ? std::nullopt : parse_datatype(exporter::kserve_datatype(type));
  if (!t) {
    invalid("model '" + model + "': tensor '" + tensor + "' has data type " + triton::DataType_Name(type) +
                ", which has no KServe v2 datatype",
            std::string("set data_type to one of TYPE_BOOL, TYPE_UINT8 ... TYPE_FP64, TYPE_BF16, TYPE_STRING"));
  }
  return *t;
}

std::optional<std::size_t> bytes_elements_size(std::span<const std::uint8_t> data, std::uint64_t count) {
  std::size_t at = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    if (data.size() - at < 4) return std::nullopt;
    const std::uint32_t n = static_cast<std::uint32_t>(data[at]) | static_cast<std::uint32_t>(data[at + 1]) << 8 |
                            static_cast<std::uint32_t>(data[at + 2]) << 16 |
                            static_cast<std::uint32_t>(data[at + 3]) << 24;
    at += 4;
    if (data.size() - at < n) return std::nullopt;
    at += n;
  }
  return at;
}

RequestValidator::RequestValidator(const triton::ModelConfig& config, bool allow_split)
    : model_(config.name()), max_batch_size_(config.max_batch_size()), allow_split_(allow_split) {
  if (config.has_dynamic_batching()) priority_levels_ = config.dynamic_batching().priority_levels();
  for (const triton::ModelInput& in : config.input()) {
    Input i;
    i.name = in.name();
    i.datatype = config_datatype(in.data_type(), model_, in.name());
    i.dims.assign(in.dims().begin(), in.dims().end());
    i.optional = in.optional();
    i.in_key = i.optional || std::any_of(i.dims.begin(), i.dims.end(), [](std::int64_t d) { return d < 0; });
    keyed_ = keyed_ || i.in_key;
    if (!i.optional) ++required_;
    inputs_.push_back(std::move(i));
  }
  for (const triton::ModelOutput& out : config.output()) {
    output_types_.push_back(config_datatype(out.data_type(), model_, out.name()));
    outputs_.push_back(out.name());
  }
}

int RequestValidator::output_index(std::string_view name) const {
  for (std::size_t i = 0; i < outputs_.size(); ++i) {
    if (outputs_[i] == name) return static_cast<int>(i);
  }
  return -1;
}

void RequestValidator::check_inputs(InferRequest& request) const {
  std::vector<Tensor>& given = request.inputs;
  auto config_index = [&](std::string_view name) -> int {
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      if (inputs_[i].name == name) return static_cast<int>(i);
    }
    return -1;
  };
  for (std::size_t i = 0; i < given.size(); ++i) {
    if (config_index(given[i].name) < 0) {
      invalid("unexpected inference input '" + given[i].name + "' for model '" + model_ + "'. Expected one of " +
                  name_list(inputs_, [](const Input& in) -> const std::string& { return in.name; }),
              std::string("name the request's inputs as GET /v2/models/") + model_ + " lists them");
    }
    const auto n = std::count_if(given.begin(), given.end(), [&](const Tensor& t) { return t.name == given[i].name; });
    if (n > 1) {
      invalid("duplicate input '" + given[i].name + "' for model '" + model_ + "'. Expected each input once, got it " +
                  std::to_string(n) + " times",
              std::string("send every input once"));
    }
  }
  // Every name is known and unique: put them in config order, noting what is missing.
  std::size_t placed = 0;
  std::vector<std::string> missing;
  for (const Input& in : inputs_) {
    auto it = std::find_if(given.begin() + static_cast<std::ptrdiff_t>(placed), given.end(),
                           [&](const Tensor& t) { return t.name == in.name; });
    if (it == given.end()) {
      if (!in.optional) missing.push_back(in.name);
      continue;
    }
    std::swap(given[placed++], *it);
  }
  if (!missing.empty()) {
    const std::string expected =
        required_ == inputs_.size() ? std::to_string(required_)
                                    : "between " + std::to_string(required_) + " and " + std::to_string(inputs_.size());
    invalid("expected " + expected + " inputs but got " + std::to_string(given.size()) + " inputs for model '" +
                model_ + "'. Got input(s) " +
                name_list(given, [](const Tensor& t) -> const std::string& { return t.name; }) +
                ", but missing required input(s) " +
                name_list(missing, [](const std::string& s) -> const std::string& { return s; }),
            std::string("provide every required input"));
  }
}

void RequestValidator::check_outputs(const InferRequest& request) const {
  const std::vector<RequestedOutput>& wanted = request.outputs;
  for (const RequestedOutput& o : wanted) {
    const int index = output_index(o.name);
    if (index < 0) {
      invalid("unexpected inference output '" + o.name + "' for model '" + model_ + "'. Expected one of " +
                  name_list(outputs_, [](const std::string& s) -> const std::string& { return s; }),
              std::string("request outputs by the names GET /v2/models/") + model_ + " lists, or omit \"outputs\"");
    }
    const DataType type = output_types_[static_cast<std::size_t>(index)];
    if (o.class_count > 0 && (type == DataType::kBytes || type == DataType::kBool)) {
      invalid("classification of output '" + o.name + "' of model '" + model_ + "' needs numeric scores, got " +
                  datatype_name(type),
              std::string("ask for classification only on an output of scores"));
    }
    const auto n =
        std::count_if(wanted.begin(), wanted.end(), [&](const RequestedOutput& r) { return r.name == o.name; });
    if (n > 1) {
      invalid("duplicate requested output '" + o.name + "' for model '" + model_ +
                  "'. Expected each output once, got it " + std::to_string(n) + " times",
              std::string("request every output once"));
    }
  }
}

RequestShape RequestValidator::validate(InferRequest& request) const {
  check_inputs(request);
  RequestShape result;
  const bool batched = max_batch_size_ > 0;
  const Tensor* first = nullptr;  // the input that fixed the batch size
  std::size_t at = 0;             // position in request.inputs (config order, absent optionals skipped)
  for (const Input& in : inputs_) {
    if (at >= request.inputs.size() || request.inputs[at].name != in.name) {
      if (in.in_key) result.key.dims.push_back(-1);  // an absent optional input
      continue;
    }
    const Tensor& t = request.inputs[at++];
    // Messages are built only on failure: a valid request allocates nothing here.
    auto what = [&] { return for_model("input", t.name, model_); };
    if (t.datatype != in.datatype) {
      invalid("inconsistent data type for " + what() + ". Expected " + datatype_name(in.datatype) + ", got " +
                  datatype_name(t.datatype),
              std::string("send '") + t.name + "' as " + datatype_name(in.datatype));
    }
    if (std::any_of(t.shape.begin(), t.shape.end(), [](std::int64_t d) { return d < 0; })) {
      invalid("invalid shape for " + what() + ". Expected non-negative dimensions, got " + shape_string(t.shape),
              std::string("send the actual size of every dimension (-1 is only a wildcard in the model's metadata)"));
    }
    const std::size_t offset = batched ? 1 : 0;  // where the config's dims start in the request's shape
    bool match = t.shape.size() == in.dims.size() + offset;
    for (std::size_t d = 0; match && d < in.dims.size(); ++d) {
      match = in.dims[d] < 0 || in.dims[d] == t.shape[d + offset];
    }
    if (!match) {
      std::vector<std::int64_t> expected;
      if (batched) expected.push_back(-1);
      expected.insert(expected.end(), in.dims.begin(), in.dims.end());
      invalid(
          "unexpected shape for " + what() + ". Expected " + shape_string(expected) + ", got " + shape_string(t.shape),
          std::string("reshape '") + t.name + "' to " + shape_string(expected) +
              (batched ? " (the first axis is the batch)" : ""));
    }
    if (batched) {
      const std::int64_t b = t.shape[0];
      if (b < 1) {
        invalid("invalid batch size for " + what() + ". Expected >= 1, got " + std::to_string(b),
                std::string("send at least one batch element"));
      }
      if (first == nullptr) {
        first = &t;
        result.batch_size = b;
      } else if (b != result.batch_size) {
        invalid("inconsistent batch size for " + what() + ". Expected " + std::to_string(result.batch_size) +
                    " (the batch size of input '" + first->name + "'), got " + std::to_string(b),
                std::string("give every input the same first dimension"));
      }
    }
    if (in.in_key) {
      result.key.dims.insert(result.key.dims.end(), t.shape.begin() + static_cast<std::ptrdiff_t>(offset),
                             t.shape.end());
    }
    std::uint64_t elements = 1;
    bool overflow = false;
    for (std::int64_t d : t.shape)
      overflow = overflow || __builtin_mul_overflow(elements, static_cast<std::uint64_t>(d), &elements);
    if (t.datatype != DataType::kBytes) {
      std::uint64_t want = 0;
      overflow = overflow || __builtin_mul_overflow(elements, element_size(t.datatype), &want);
      if (overflow || t.size != want) {
        invalid("input byte size mismatch for " + what() + ". Expected " +
                    (overflow ? std::string("more than 2^64") : std::to_string(want)) + ", got " +
                    std::to_string(t.size),
                std::string("send shape x element size bytes (") + shape_string(t.shape) + " x " +
                    std::to_string(element_size(t.datatype)) + ")");
      }
      // A bool is one byte, 0 or 1: any other value is not a bool (undefined behaviour once read
      // as one). JSON inputs are written as 0/1; binary and gRPC raw ones are checked here.
      if (t.datatype == DataType::kBool) {
        const auto* bad = std::find_if(t.data, t.data + t.size, [](std::uint8_t b) { return b > 1; });
        if (bad != t.data + t.size) {
          invalid("invalid BOOL data for " + what() + ": element " + std::to_string(bad - t.data) + " is the byte " +
                      std::to_string(*bad) + ", not 0 or 1",
                  std::string("send each BOOL element as one byte, 0 (false) or 1 (true)"));
        }
      }
    } else {
      const std::optional<std::size_t> used = overflow ? std::nullopt : bytes_elements_size(t.bytes(), elements);
      if (!used || *used != t.size) {
        const std::string got =
            used ? std::to_string(t.size - *used) + " bytes after the last element" : "the data ends inside an element";
        invalid("invalid BYTES data for " + what() + ". Expected " + std::to_string(elements) +
                    " elements, each a 4-byte little-endian length and that many bytes, in " + std::to_string(t.size) +
                    " bytes; got " + got,
                std::string("serialize every element as its length (uint32, little-endian) followed by its bytes"));
      }
    }
  }
  if (!keyed_) result.key.dims.clear();
  if (batched && result.batch_size > max_batch_size_ && !allow_split_) {
    invalid("inference request batch-size must be <= " + std::to_string(max_batch_size_) + " for '" + model_ +
                "', got " + std::to_string(result.batch_size),
            "send at most " + std::to_string(max_batch_size_) +
                " elements per request, or set the model's parameter glassbox.split_large_requests to \"true\"");
  }
  check_outputs(request);
  if (priority_levels_ > 0 && request.priority > priority_levels_) {
    invalid("invalid priority for model '" + model_ + "'. Expected 0 (the default level) or 1.." +
                std::to_string(priority_levels_) + ", got " + std::to_string(request.priority),
            std::string("use a priority between 1 (highest) and ") + std::to_string(priority_levels_) +
                ", or 0 for the model's default");
  }
  return result;
}

}  // namespace glassbox::serve
