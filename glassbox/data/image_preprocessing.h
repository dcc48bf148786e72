// image_preprocessing: how an encoded image becomes a model's raw input, as a model's contract
// records it (preprocessing.image), so that export, predict and the server reproduce the eval-time
// preprocessing of training exactly.
//
//   ImagePreprocessing p = image_preprocessing_of(run.data.source, 3);   // channels + eval transforms
//   nlohmann::json j = to_json(p);                                       // into the contract
//   ImagePreprocessor pre(image_preprocessing_from_json(j, "contract.json"));
//   at::Tensor x = pre(jpeg_bytes, "request 0");                          // [C, H, W] uint8
//
// The raw sample is what the contract's scale/mean/std then apply to: the image decoded to
// `channels` (RGB or gray), run through the eval transforms. A final Normalize with albumentations'
// "standard" normalisation is not part of `transforms`: its max_pixel_value, mean and std are the
// contract's scale, mean and std (standardization_of), which every consumer already applies.
// Other final Normalize modes stay in `transforms` and the sample comes out float32.
// Thread safety: an ImagePreprocessor is immutable; operator() may run on many threads at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>
#include <opencv2/core/mat.hpp>
#include <opencv2/core/matx.hpp>

#include "glassbox/data/augment.h"
#include "glassbox/data/source.h"
#include "glassbox/data/transform_spec.h"

namespace glassbox::data {

struct ImagePreprocessing {
  std::int64_t channels = 3;              // decode to 1 (gray) or 3 (RGB)
  std::vector<TransformSpec> transforms;  // deterministic eval transforms
};

// A final standard Normalize as the contract's constants: scale = 1 / max_pixel_value.
struct Standardization {
  double scale = 1.0 / 255.0;
  std::vector<double> mean, std;
};
// The run's eval pipeline for a model fed `channels`-channel images (a standard final Normalize
// left out), and that Normalize's constants when it has one.
ImagePreprocessing image_preprocessing_of(const DataOptions& d, std::int64_t channels);
std::optional<Standardization> standardization_of(const std::vector<TransformSpec>& transforms);

nlohmann::json to_json(const ImagePreprocessing& p);
// InvalidArgument naming `source` and the step for an unknown transform or parameter.
ImagePreprocessing image_preprocessing_from_json(const nlohmann::json& j, const std::string& source);

// Where the pixels of an image run through `pipeline` come from in the image: the affine map
// (x_in, y_in) = A (x_out, y_out, 1), fitted (least squares) to the source coordinates that the
// pipeline's geometric steps carry along as a nearest-neighbour mask. Exact for resizes, crops,
// pads, flips and rot90; nullopt when fewer than 3 output pixels come from the image (all padding).
// Explanations use it to draw a heat map computed on the model's input over the original file.
std::optional<cv::Matx23d> source_affine(const cv::Mat& image, const Pipeline& pipeline);

class ImagePreprocessor {
 public:
  explicit ImagePreprocessor(ImagePreprocessing p);
  // Decodes and transforms one encoded image: [C, H, W] uint8 (float32 when a step ends in
  // floats). DataLoss naming `name` for bytes that are no image.
  at::Tensor operator()(std::string_view bytes, const std::string& name) const;
  // The same for an image already decoded (HWC, 8-bit, RGB or gray).
  at::Tensor operator()(cv::Mat image) const;
  const ImagePreprocessing& spec() const { return spec_; }

 private:
  ImagePreprocessing spec_;
  Pipeline pipeline_;
};

}  // namespace glassbox::data
