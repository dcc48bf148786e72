// config.pbtxt: the model configuration of a Triton-style model repository, in protobuf's text
// format, as the message glassbox::triton::ModelConfig (glassbox/export/proto/model_config.proto,
// Triton's field names and numbers for the subset glassbox writes and serves).
//
//   ModelConfigOptions o;                       // max_batch_size 64, dynamic batching, 1 CPU instance
//   triton::ModelConfig c = make_model_config("fashion_cnn", contract, o);
//   write_model_config("repo/fashion_cnn/config.pbtxt", c);          // validated, atomic
//   triton::ModelConfig back = read_model_config("repo/fashion_cnn/config.pbtxt", "fashion_cnn");
//   std::string json = model_config_to_json(back);                   // /v2/models/NAME/config
//
// Errors (glassbox::Error, one line each):
//   - a syntax error, an unknown field or enum value, a value of the wrong type: DataLoss
//     "config.pbtxt:LINE:COL: <protobuf's message>" with a hint (the closest field name where one
//     is close);
//   - a well-formed config a server cannot use: InvalidArgument naming the field
//     ("config.pbtxt: input[0].dims[1] is 0 ...") and the fix.
// Fields of Triton's schema that glassbox's message leaves out (optimization, metric_tags,
// instance_group.rate_limiter, ...) are errors unless ParseConfigOptions::allow_unknown_fields
// skips them; a field that is in no Triton message is an error either way.
// Thread safety: free functions, reentrant. The message is a value.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "glassbox/export/proto/model_config.pb.h"
#include "glassbox/nn/contract.h"

namespace glassbox::exporter {

namespace triton = ::glassbox::triton;

// Triton's conventional names for the positional inputs/outputs of a TorchScript model.
inline constexpr const char* kTorchScriptInput = "INPUT__0";
inline constexpr const char* kTorchScriptOutput = "OUTPUT__0";
inline constexpr const char* kTorchScriptPlatform = "pytorch_libtorch";
inline constexpr const char* kLabelsFile = "labels.txt";
inline constexpr const char* kContractFile = "contract.json";
inline constexpr const char* kConfigFile = "config.pbtxt";
inline constexpr const char* kModelFile = "model.pt";

enum class InstanceKind { kCpu, kGpu };

// How `make_model_config` fills in what the contract does not say.
struct ModelConfigOptions {
  std::int32_t max_batch_size = 64;                  // largest batch the dynamic batcher forms; 0 = no batch axis
  std::vector<std::int32_t> preferred_batch_sizes;   // empty: {max_batch_size / 2, max_batch_size}
  std::uint64_t max_queue_delay_microseconds = 100;  // how long the batcher waits for a fuller batch
  bool dynamic_batching = true;
  InstanceKind instance_kind = InstanceKind::kCpu;
  std::int32_t instance_count = 1;    // parallel model instances
  std::vector<std::int32_t> gpus;     // kGpu only; empty: every GPU
  std::uint32_t latest_versions = 1;  // version_policy latest { num_versions }
  bool warmup = true;                 // a zero-filled batch of 1 at load (model_warmup)
  // platform "glassbox": the input is raw data (TYPE_UINT8 for images scaled from 0..255, else
  // TYPE_FP32) and the server applies the contract's preprocessing (scale, mean/std per channel or
  // feature, channel order) before the model, and answers probabilities.
  bool raw_input = false;
  // platform "glassbox" with a contract that has preprocessing.image (a run on image files): the
  // input is the encoded image file (TYPE_STRING dims [1]: JPEG, PNG, ... bytes), which the server
  // decodes and transforms as in training; false sends decoded pixels (TYPE_UINT8 [C, H, W]).
  bool encoded_images = true;

  // InvalidArgument naming the option: max_batch_size >= 0, preferred sizes in 1..max_batch_size,
  // instance_count >= 1, gpus only with kGpu and >= 0, latest_versions >= 1.
  void validate() const;
};

// The configuration glassbox exports for a TorchScript classifier described by `contract`:
// platform "pytorch_libtorch", INPUT__0 TYPE_FP32 dims = contract.input_shape (format
// FORMAT_NCHW for a [C, H, W] image input), OUTPUT__0 TYPE_FP32 dims [num_classes] with
// label_filename "labels.txt", dynamic batching, one instance group, version policy latest,
// default_model_filename "model.pt", and parameters "glassbox.*" carrying the preprocessing
// contract (channel_order, scale, mean, std, output_kind, architecture, and the contract file's name). The result is
// validated.
triton::ModelConfig make_model_config(const std::string& name, const nn::ModelContract& contract,
                                      const ModelConfigOptions& options = {});

// Checks what a server needs beyond the text format; InvalidArgument naming `source` and the field.
// `expected_name` (the model directory's name) must equal config.name unless it is empty.
void validate_model_config(const triton::ModelConfig& config, const std::string& expected_name = {},
                           const std::string& source = kConfigFile);

struct ParseConfigOptions {
  // Fields of Triton's schema that glassbox's message leaves out are errors (default) or skipped
  // (a server reading a repository written for Triton may choose to skip them). Either way a field
  // that is in no Triton message (a misspelt name), an unknown enum value or a value of the wrong
  // type (also in a field that would be skipped) is an error.
  bool allow_unknown_fields = false;
  bool validate = true;       // run validate_model_config after parsing
  std::string expected_name;  // for validation; empty: any name
  // When set, receives one entry per skipped field, in the order of the text: its path and, for
  // text, its line ("optimization (line 7)", "instance_group[0].rate_limiter (line 12)").
  std::vector<std::string>* skipped = nullptr;
};

// Text -> message. `source` names the file in errors ("config.pbtxt" or a path).
triton::ModelConfig parse_model_config(const std::string& text, const std::string& source = kConfigFile,
                                       const ParseConfigOptions& options = {});
// JSON with Triton's field names (what /v2/models/NAME/config answers, and the "config" parameter
// of a load request) -> message, with the same rules for Triton's other fields. Errors are
// InvalidArgument: "SOURCE is not a JSON object", "SOURCE: input[0]: Message type ... has no field
// named "dimz"." (with the closest name), or protobuf's message for a value of the wrong type.
triton::ModelConfig parse_model_config_json(const std::string& json, const std::string& source,
                                            const ParseConfigOptions& options = {});
// Message -> text: a comment line, then protobuf's multi-line text format (repeated numbers as
// [a, b], map entries sorted). Stable: the same message always prints the same text.
std::string print_model_config(const triton::ModelConfig& config);

// Reads, parses and validates a file (NotFound when missing); `expected_name` as above.
triton::ModelConfig read_model_config(const std::filesystem::path& path, const std::string& expected_name = {},
                                      const ParseConfigOptions& options = {});
// Validates, then writes atomically; returns the number of bytes written.
std::uintmax_t write_model_config(const std::filesystem::path& path, const triton::ModelConfig& config);

// The message as JSON with Triton's snake_case field names (what /v2/models/NAME/config answers).
std::string model_config_to_json(const triton::ModelConfig& config);

// "TYPE_FP32" -> "FP32", "TYPE_STRING" -> "BYTES": the KServe v2 datatype of a config data type.
std::string kserve_datatype(triton::DataType type);

}  // namespace glassbox::exporter
