// The reference profile on disk: what the server compares its windows with.
//
//   DIR/profile.json   format, the monitored input (name, kind, shape, the normalisation to undo),
//                      its value ranges, the output and its classes, prediction count, predicted-
//                      and true-class shares, per-class error rates, and for each feature, the
//                      confidence and the entropy: name, count, min, max, mean, std, and where its
//                      sample lies
//   DIR/profile.npy    every sample, one after another: float64 [total], little-endian (NPY 1.0,
//                      readable by numpy.load)
//
//   write_reference(repo / "model" / "1", reference);
//   Reference r = read_reference(repo / "model" / "1");
//
// Both files are written atomically (profile.npy first). Errors name the file and the problem: a
// missing or unreadable file (NotFound / DataLoss), JSON that is not a profile, a newer format,
// samples that do not fit the array, unsorted or non-finite samples (DataLoss).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "glassbox/monitor/features.h"
#include "glassbox/monitor/window.h"

namespace glassbox::monitor {

constexpr int kProfileFormat = 1;

// What one output row says: the top class, its probability and the distribution's entropy (nats).
struct Scored {
  std::int64_t predicted = -1;  // -1: a non-finite score
  double confidence = 0, entropy = 0;
};
// `scores` in place: softmax when `logits`, then the top class.
Scored score(std::span<double> scores, bool logits);

// The reference profile of a data set, sample by sample:
//
//   ReferenceBuilder b(input_spec, "OUTPUT__0", /*logits=*/true, class_names);
//   for (each validation sample) b.add(input_values, output_row, label);
//   write_reference(version_dir, b.build());
//
// input_values are the model's input (normalised, as the server receives it); label -1: unknown.
class ReferenceBuilder {
 public:
  ReferenceBuilder(std::optional<InputSpec> input, std::string output, bool logits, std::vector<std::string> classes);
  void add(std::span<const double> input_values, std::span<const double> scores, std::int64_t label);
  std::int64_t size() const { return count_; }
  // InvalidArgument when nothing was added.
  Reference build(std::size_t keep = 10000) const;

 private:
  std::optional<FeatureExtractor> extractor_;
  std::string output_;
  bool logits_;
  std::vector<std::string> classes_;
  std::vector<ValueRange> ranges_;
  std::vector<std::vector<double>> features_;
  std::vector<double> confidence_, entropy_, row_, values_;
  std::vector<std::int64_t> predicted_, labels_, wrong_;
  std::int64_t count_ = 0, labelled_ = 0;
};

void write_reference(const std::filesystem::path& dir, const Reference& reference);
Reference read_reference(const std::filesystem::path& dir);

}  // namespace glassbox::monitor
