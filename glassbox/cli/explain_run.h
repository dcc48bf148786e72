// `glassbox explain` as a call, shared with quickstart: class activation maps of a checkpoint's
// predictions on chosen samples of a split, written as PNGs with an index.
//
//   ExplainRequest r; r.checkpoint = "runs/cnn/checkpoints/last.ckpt"; r.misclassified = 8;
//   nlohmann::json index = explain_checkpoint(r);   // also <run>/explain/index.json
//
// Samples: `samples` (positions in the split) plus the first `misclassified` wrong and the first
// `correct` right predictions. target_class: a class name or index to explain instead of each
// prediction. method empty: gradcam for models with convolutional stages, saliency otherwise.
// Files in out_dir (default <run>/explain): sample-<i>-heatmap.png (JET), sample-<i>-overlay.png,
// index.json {"method","layer","split","items":[{"index","file_index","label","label_name",
// "predicted","predicted_name","target_class","probability","correct","heatmap","overlay"}]}.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace glassbox::cli {

struct ExplainRequest {
  std::filesystem::path checkpoint;
  std::string split = "test";
  std::vector<std::int64_t> samples;
  std::int64_t misclassified = 0;
  std::int64_t correct = 0;
  std::string target_class;
  std::string layer;
  std::string method;
  std::filesystem::path out_dir;
  std::string device = "cpu";
};

nlohmann::json explain_checkpoint(const ExplainRequest& request);

}  // namespace glassbox::cli
