// ModelContract: what a deployed model expects and returns — input name, per-sample shape, dtype
// and layout; the preprocessing that turns raw data into that input; the output and the class
// names. `glassbox export` writes it beside every artefact (model.json next to model.pt,
// contract.json in a model repository), and it is the sidecar that lets glassbox evaluate,
// explain and serve a TorchScript file saved by Python.
//
//   ModelContract c;
//   c.input_shape = {3, 224, 224}; c.mean = {0.485, 0.456, 0.406}; c.std = {0.229, 0.224, 0.225};
//   c.channel_order = ChannelOrder::kRGB; c.labels = {"cat", "dog"}; c.num_classes = 2;
//   write_contract("model.json", c);
//   ModelContract back = read_contract("model.json");   // InvalidArgument/NotFound/DataLoss
//
// The preprocessing it describes, per channel c of a raw sample r (uint8 pixels or raw features):
//   input[c] = (r[c] * scale - mean[c]) / std[c]
// mean/std hold one value per channel (or one value for all); empty means none.
// preprocessing.image (models trained on image files) says how an encoded image (JPEG, PNG, ...)
// becomes the raw sample: decoded to `channels` (1 gray, 3 RGB), then the eval transforms
// (albumentations' names, data/image_preprocessing.h reads them), then the formula above. nn keeps
// it as JSON, checked only for its shape here; null when absent.
// JSON shape (unknown keys are errors naming the closest known key):
//   {"format": "glassbox-contract", "version": 1, "name": "...", "architecture": "cnn",
//    "input": {"name": "input", "shape": [1, 28, 28], "dtype": "float32", "layout": "NCHW"},
//    "output": {"name": "logits", "num_classes": 10, "kind": "logits", "task": "classification"},
//    "preprocessing": {"scale": 0.00392156862745098, "mean": [0.286], "std": [0.353],
//                      "channel_order": "gray",
//                      "image": {"channels": 3, "transforms": [{"name": "Resize", ...}]}},
//    "labels": ["T-shirt/top", ...]}
// Thread safety: a value type.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/base/config.h"
#include "glassbox/core/task_kind.h"

namespace glassbox::nn {

enum class InputDtype { kFloat32 };
constexpr NameTable<InputDtype, 1> enum_names(InputDtype) { return {{{InputDtype::kFloat32, "float32"}}}; }
static_assert(is_complete_table(enum_names(InputDtype{})));

// NCHW: images [C, H, W] per sample; NC: feature vectors [F].
enum class InputLayout { kNCHW, kNC };
constexpr NameTable<InputLayout, 2> enum_names(InputLayout) {
  return {{{InputLayout::kNCHW, "NCHW"}, {InputLayout::kNC, "NC"}}};
}
static_assert(is_complete_table(enum_names(InputLayout{})));

enum class OutputKind { kLogits, kProbabilities };
constexpr NameTable<OutputKind, 2> enum_names(OutputKind) {
  return {{{OutputKind::kLogits, "logits"}, {OutputKind::kProbabilities, "probabilities"}}};
}
static_assert(is_complete_table(enum_names(OutputKind{})));

// gray: 1 channel; RGB, BGR: 3 channels in that order; none: features or other channel counts.
enum class ChannelOrder { kGray, kRGB, kBGR, kNone };
constexpr NameTable<ChannelOrder, 4> enum_names(ChannelOrder) {
  return {{{ChannelOrder::kGray, "gray"},
           {ChannelOrder::kRGB, "RGB"},
           {ChannelOrder::kBGR, "BGR"},
           {ChannelOrder::kNone, "none"}}};
}
static_assert(is_complete_table(enum_names(ChannelOrder{})));

struct ModelContract {
  std::string format = "glassbox-contract";
  std::int64_t version = 1;
  std::string name;          // the model's name (a repository's model directory)
  std::string architecture;  // the zoo's name ("mlp", "cnn", "resnet18") or "torchscript"

  std::string input_name = "input";
  std::vector<std::int64_t> input_shape;  // one sample, without the batch axis: {C, H, W} or {F}
  InputDtype input_dtype = InputDtype::kFloat32;
  InputLayout layout = InputLayout::kNCHW;
  std::vector<std::string> feature_names;  // NC: a name per feature (a CSV header's), or empty

  std::string output_name = "logits";
  std::int64_t num_classes = 0;
  OutputKind output_kind = OutputKind::kLogits;
  // What the outputs mean: class logits (softmax), label logits (a sigmoid each) or regression
  // values; labels then name the classes, the labels or the targets.
  TaskKind task = TaskKind::kClassification;

  double scale = 1.0;  // raw value -> [0, 1] (1/255 for uint8 images)
  std::vector<double> mean;
  std::vector<double> std;
  ChannelOrder channel_order = ChannelOrder::kGray;

  std::vector<std::string> labels;  // class names, index order; empty: "0".."K-1"
  nlohmann::json image;             // preprocessing.image, or null

  void visit(FieldVisitor& v);
  // InvalidArgument naming the field: shape/layout rank, mean/std length, positive std, labels
  // count equal to num_classes, channel order vs channels.
  void validate() const;
  // labels, or "0".."K-1" when none were given.
  std::vector<std::string> class_names() const;
};

// Reads and validates a contract; `source` errors name the file.
ModelContract read_contract(const std::filesystem::path& path);
ModelContract parse_contract(const std::string& json_text, const std::string& source);
// Validates and writes atomically (pretty JSON).
void write_contract(const std::filesystem::path& path, const ModelContract& contract);
std::string contract_to_json(const ModelContract& contract);

}  // namespace glassbox::nn
