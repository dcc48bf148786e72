// Request validation: an InferRequest checked against its model's config before it is queued, so
// that a bad request is a 400 naming the input, the model, the expected and the received value
// and never reaches a backend.
//
//   RequestValidator v(config, /*allow_split=*/false);
//   RequestShape s = v.validate(request);   // throws InvalidArgument; inputs now in config order
//   queue.push({.batch_size = s.batch_size, .key = std::move(s.key), ...}, ...);
//
// Checks, in this order, each failure an Error(InvalidArgument) with one of these messages:
//   unexpected inference input 'X' for model 'm'. Expected one of ['A','B']
//   duplicate input 'X' for model 'm'. Expected each input once, got it 2 times
//   expected 2 inputs but got 1 inputs for model 'm'. Got input(s) ['A'], but missing required input(s) ['B']
//     ("between 1 and 2 inputs" when some are optional)
//   inconsistent data type for input 'X' for model 'm'. Expected FP32, got INT64
//   invalid shape for input 'X' for model 'm'. Expected non-negative dimensions, got [2,-1]
//   unexpected shape for input 'X' for model 'm'. Expected [-1,1,28,28], got [1,784]
//     (the batch axis shows as -1 when max_batch_size > 0; -1 config dims accept any size)
//   invalid batch size for input 'X' for model 'm'. Expected >= 1, got 0
//   inconsistent batch size for input 'B' for model 'm'. Expected 2 (the batch size of input 'A'), got 3
//   inference request batch-size must be <= 8 for 'm', got 10   (unless splitting is allowed)
//   input byte size mismatch for input 'X' for model 'm'. Expected 3136, got 3132
//   invalid BYTES data for input 'X' for model 'm'. Expected 3 elements, each a 4-byte
//     little-endian length and that many bytes, in 17 bytes; got <what was found>
//   unexpected inference output 'Y' for model 'm'. Expected one of ['OUTPUT__0']
//   duplicate requested output 'Y' for model 'm'. Expected each output once, got it 2 times
//   invalid priority for model 'm'. Expected 0 (the default level) or 1..3, got 5
// A priority is checked only when the config has priority_levels > 0 (with one level Triton
// ignores it, and so does glassbox). A timeout_us the queue policy does not allow to override is
// ignored (Triton's behaviour), not an error.
// Thread safety: validate() is const and reentrant; one validator serves every thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "glassbox/export/model_config.h"
#include "glassbox/serve/engine/api.h"
#include "glassbox/serve/engine/batcher.h"

namespace glassbox::serve {

struct RequestShape {
  std::int64_t batch_size = 1;  // the requests' first axis; 1 when max_batch_size is 0
  ShapeKey key;                 // see batcher.h; empty for fixed-shape models
};

class RequestValidator {
 public:
  // InvalidArgument for a config data type with no KServe v2 name.
  RequestValidator(const triton::ModelConfig& config, bool allow_split);

  // Checks `request` (throws InvalidArgument as listed above) and reorders its inputs into
  // config order (optional inputs that are absent are skipped).
  RequestShape validate(InferRequest& request) const;

  const std::string& model() const { return model_; }
  std::int64_t max_batch_size() const { return max_batch_size_; }
  std::size_t output_count() const { return outputs_.size(); }
  // The config index of output `name`, or -1.
  int output_index(std::string_view name) const;

 private:
  struct Input {
    std::string name;
    DataType datatype = DataType::kFp32;
    std::vector<std::int64_t> dims;  // without the batch axis
    bool optional = false;
    bool in_key = false;  // variable dims or optional: part of the shape key
  };

  void check_inputs(InferRequest& request) const;
  void check_outputs(const InferRequest& request) const;

  std::string model_;
  std::int64_t max_batch_size_ = 0;
  bool allow_split_ = false;
  std::uint64_t priority_levels_ = 0;
  std::vector<Input> inputs_;
  std::size_t required_ = 0;
  std::vector<std::string> outputs_;
  std::vector<DataType> output_types_;
  bool keyed_ = false;  // some input is in the key
};

// The KServe v2 datatype of a config data type; InvalidArgument for TYPE_INVALID.
DataType config_datatype(triton::DataType type, const std::string& model, const std::string& tensor);

// Serialized BYTES elements (4-byte little-endian length, then the bytes): the number of bytes
// the first `count` elements of `data` take, or nullopt when `data` ends before them.
std::optional<std::size_t> bytes_elements_size(std::span<const std::uint8_t> data, std::uint64_t count);

}  // namespace glassbox::serve
