// What is monitored of one served input sample: the features compared with the reference, and
// the raw values checked against the reference's range.
//
// The server sees the model's input (the contract's `(raw * scale - mean) / std`); the monitor
// undoes the normalisation first (`x * std + mean`), so features and ranges read in the units
// the training data had after scaling (pixels in [0, 1], a CSV's own units).
//
//   tabular [F]       a feature per input value (the contract's feature names, or f0, f1, ...);
//                     a range per feature
//   image [C, H, W]   per image: the mean and standard deviation of each channel (when C > 1),
//                     brightness (the mean of every value), contrast (their standard deviation,
//                     RMS contrast) and gradient (the mean absolute difference of adjacent values:
//                     noise raises it, blur lowers it); a range per channel
//
//   FeatureExtractor fx(spec);
//   std::vector<double> features(fx.names().size());
//   InputCounts counts;
//   fx.extract(sample, features, ranges, counts);   // sample: the C*H*W or F values of one input
//
// Non-finite input values are counted (InputCounts::non_finite), left out of the image
// statistics, and make a tabular feature NaN (which the window skips). Torch-free. Thread safety:
// an extractor is immutable after construction.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace glassbox::monitor {

enum class InputKind { kTabular, kImage };

struct InputSpec {
  std::string name;                        // the served input tensor
  InputKind kind = InputKind::kTabular;    // from the contract's layout (NC / NCHW)
  std::vector<std::int64_t> shape;         // one sample, without the batch axis
  std::vector<double> mean, std;           // the normalisation to undo: empty, one, or one per channel/feature
  std::vector<std::string> feature_names;  // tabular: a name per feature, or empty

  std::int64_t sample_size() const;
  // InvalidArgument naming the field: the shape's rank for the kind, positive sizes, mean/std
  // lengths, positive std, feature name count.
  void validate() const;
  nlohmann::json to_json() const;
  static InputSpec from_json(const nlohmann::json& j);  // throws nlohmann::json::exception or Error
};

// A value range of the reference data (a feature's, or a channel's for images).
struct ValueRange {
  std::string name;
  double min = 0, max = 0;
};

// The raw values of one or more samples, against the ranges.
struct InputCounts {
  std::int64_t values = 0;
  std::int64_t out_of_range = 0;
  std::int64_t non_finite = 0;
};

class FeatureExtractor {
 public:
  explicit FeatureExtractor(InputSpec spec);

  const InputSpec& spec() const { return spec_; }
  // The monitored features, in order.
  const std::vector<std::string>& names() const { return names_; }
  // The range groups: a name per feature (tabular) or per channel (image).
  const std::vector<std::string>& range_names() const { return range_names_; }

  // `sample` holds spec().sample_size() values of the model's input. Writes names().size()
  // features; counts the values outside `ranges` (one per range group, with `tolerance` x the
  // range's span of slack) and the non-finite ones. `ranges` may be empty (nothing is out of range).
  void extract(std::span<const double> sample, std::span<double> features, std::span<const ValueRange> ranges,
               double tolerance, InputCounts& counts) const;
  // extract() for an image sample of FP32 values as the server received them, without converting
  // them first; false (nothing written or counted) when the input is not an image or holds a
  // non-finite value: call extract() then.
  bool extract_fp32(std::span<const float> sample, std::span<double> features, std::span<const ValueRange> ranges,
                    double tolerance, InputCounts& counts) const;
  // Widens `ranges` (one per range group; start them with observe_start()) by the sample's
  // finite values.
  void observe_ranges(std::span<const double> sample, std::vector<ValueRange>& ranges) const;
  std::vector<ValueRange> observe_start() const;

 private:
  double unnormalise(double x, std::size_t group) const;
  template <typename T>
  bool image_fast(std::span<const T> sample, std::span<double> features, std::span<const ValueRange> ranges,
                  double tolerance, InputCounts& counts) const;
  std::size_t group_of(std::size_t index) const;

  InputSpec spec_;
  std::vector<std::string> names_, range_names_;
  std::size_t channels_ = 1, plane_ = 1;
};

}  // namespace glassbox::monitor
