#include "glassbox/nn/contract.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"

namespace glassbox::nn {

void ModelContract::visit(FieldVisitor& v) {
  v.field("format", format, "always \"glassbox-contract\"");
  v.field("version", version, "contract format version (1)");
  v.field("name", name, "the model's name");
  v.field("architecture", architecture,
          "zoo architecture (model.name: mlp, cnn, resnet50, efficientnet_b0, ...) or torchscript");
  v.section("input", [this](FieldVisitor& s) {
    s.field("name", input_name, "input tensor name");
    s.field("shape", input_shape, "one sample's shape without the batch axis, e.g. [1, 28, 28]");
    s.choice("dtype", input_dtype, "input dtype");
    s.choice("layout", layout, "NCHW for images, NC for feature vectors");
    s.field("feature_names", feature_names, "names of the features, in input order (NC; empty: unnamed)");
  });
  v.section("output", [this](FieldVisitor& s) {
    s.field("name", output_name, "output tensor name");
    s.field("num_classes", num_classes, "output width");
    s.choice("kind", output_kind, "logits or softmax probabilities");
    s.choice("task", task, "classification (softmax) | multilabel (a sigmoid per label) | regression (values)");
  });
  v.section("preprocessing", [this](FieldVisitor& s) {
    s.field("scale", scale, "raw value multiplier before mean/std (1/255 for uint8 pixels)");
    s.field("mean", mean, "per-channel mean subtracted after scaling");
    s.field("std", std, "per-channel standard deviation divided by");
    s.choice("channel_order", channel_order, "channel order the model was trained with");
  });
  v.field("labels", labels, "class names in index order");
}

void ModelContract::validate() const {
  if (!feature_names.empty()) {
    std::int64_t width = 1;
    for (auto d : input_shape) width *= d;
    GB_CHECK(static_cast<std::int64_t>(feature_names.size()) == width, InvalidArgument,
             "contract has " << feature_names.size() << " feature names for inputs of " << width << " values",
             "give one name per feature, or none");
  }
  GB_CHECK(format == "glassbox-contract", InvalidArgument,
           "contract format is \"" << format << "\", not \"glassbox-contract\"",
           "set \"format\": \"glassbox-contract\"");
  GB_CHECK(version == 1, InvalidArgument, "contract version " << version << " is not supported", "use version 1");
  GB_CHECK(!input_shape.empty(), InvalidArgument, "contract input.shape is empty",
           "give one sample's shape, e.g. [3, 224, 224]");
  for (auto d : input_shape)
    GB_CHECK(d > 0, InvalidArgument, "contract input.shape has a non-positive dimension " << d,
             "give positive sizes, e.g. [3, 224, 224]");
  if (layout == InputLayout::kNCHW) {
    GB_CHECK(input_shape.size() == 3, InvalidArgument,
             "contract input.layout NCHW needs a shape [C, H, W], got rank " << input_shape.size(),
             "use layout \"NC\" for feature vectors");
  } else {
    GB_CHECK(input_shape.size() == 1, InvalidArgument,
             "contract input.layout NC needs a shape [F], got rank " << input_shape.size(),
             "use layout \"NCHW\" for images");
  }
  const std::int64_t channels = input_shape[0];
  for (const auto* stat : {&mean, &std}) {
    const char* what = stat == &mean ? "mean" : "std";
    GB_CHECK(stat->empty() || stat->size() == 1 || static_cast<std::int64_t>(stat->size()) == channels, InvalidArgument,
             "contract preprocessing." << what << " has " << stat->size() << " values for " << channels << " channels",
             "give one value per channel, or one for all");
  }
  for (double s : std)
    GB_CHECK(std::isfinite(s) && s > 0, InvalidArgument, "contract preprocessing.std holds " << s,
             "standard deviations must be positive");
  GB_CHECK(std::isfinite(scale) && scale > 0, InvalidArgument, "contract preprocessing.scale is " << scale,
           "use 1 or 1/255");
  GB_CHECK(num_classes > 0, InvalidArgument, "contract output.num_classes is " << num_classes, "give the output width");
  GB_CHECK(labels.empty() || static_cast<std::int64_t>(labels.size()) == num_classes, InvalidArgument,
           "contract has " << labels.size() << " labels for " << num_classes << " classes",
           "give one label per class, or none");
  if (layout == InputLayout::kNCHW) {
    // gray: 1 channel; RGB/BGR: 3; none: any other count (multispectral, stacked frames), whose
    // channels have no colour order to get wrong.
    const std::string want = channels == 1 ? "gray" : channels == 3 ? "RGB or BGR" : "none";
    const bool ok = channels == 1   ? channel_order == ChannelOrder::kGray
                    : channels == 3 ? channel_order == ChannelOrder::kRGB || channel_order == ChannelOrder::kBGR
                                    : channel_order == ChannelOrder::kNone;
    GB_CHECK(ok, InvalidArgument,
             "contract channel_order " << name_of(channel_order) << " with " << channels << " channels",
             "use " + want + " for " + std::to_string(channels) + " channel" + (channels == 1 ? "" : "s"));
  } else {
    GB_CHECK(channel_order == ChannelOrder::kNone, InvalidArgument,
             "contract channel_order " << name_of(channel_order) << " for a feature vector", "use none for layout NC");
  }
  for (double m : mean)
    GB_CHECK(std::isfinite(m), InvalidArgument, "contract preprocessing.mean holds " << m,
             "means must be finite numbers");
  if (!image.is_null()) {
    GB_CHECK(layout == InputLayout::kNCHW && image.is_object() && image.contains("channels") &&
                 image["channels"].is_number_integer() && image["channels"].get<std::int64_t>() == channels &&
                 image.contains("transforms") && image["transforms"].is_array(),
             InvalidArgument,
             "contract preprocessing.image must be {\"channels\": " << channels << ", \"transforms\": [...]} for an "
                                                                    << name_of(layout) << " input of " << channels
                                                                    << " channels",
             "write it with glassbox export, or remove it for models fed raw pixels");
  }
  GB_CHECK(!input_name.empty() && !output_name.empty() && input_name != output_name, InvalidArgument,
           "contract input.name \"" << input_name << "\" and output.name \"" << output_name
                                    << "\" must be distinct and non-empty",
           "use e.g. input and logits");
}

std::vector<std::string> ModelContract::class_names() const {
  if (!labels.empty()) return labels;
  std::vector<std::string> out;
  for (std::int64_t i = 0; i < num_classes; ++i) out.push_back(std::to_string(i));
  return out;
}

ModelContract parse_contract(const std::string& json_text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::parse_error& e) {
    GB_THROW(DataLoss, source << " is not valid JSON: " << e.what(), "write the contract as JSON (docs/export.md)");
  }
  ModelContract c;
  if (j.is_object() && j.contains("preprocessing") && j["preprocessing"].is_object() &&
      j["preprocessing"].contains("image")) {
    c.image = j["preprocessing"]["image"];
    j["preprocessing"].erase("image");
  }
  from_json(j, source, visit_fn(c));
  try {
    c.validate();
  } catch (const Error& e) {
    throw Error(e.code(), source + ": " + e.message(), e.hint());
  }
  return c;
}

ModelContract read_contract(const std::filesystem::path& path) {
  GB_CHECK(std::filesystem::is_regular_file(path), NotFound, "no contract file " << path.string(),
           "write one (docs/export.md) or pass the input shape and preprocessing as flags");
  return parse_contract(read_file(path), path.string());
}

std::string contract_to_json(const ModelContract& contract) {
  ModelContract copy = contract;
  nlohmann::json j = to_json(visit_fn(copy));
  if (!contract.image.is_null()) j["preprocessing"]["image"] = contract.image;
  return j.dump(2) + "\n";
}

void write_contract(const std::filesystem::path& path, const ModelContract& contract) {
  contract.validate();
  write_file_atomic(path, contract_to_json(contract));
}

}  // namespace glassbox::nn
