// `glassbox explain` as a call: class activation maps of a checkpoint's
// (or a TorchScript file's) predictions on chosen samples of a split, written as PNGs with an index.
//
//   ExplainRequest r; r.checkpoint = "runs/cnn/checkpoints/last.ckpt"; r.misclassified = 8;
//   nlohmann::json index = explain_checkpoint(r);   // also <run>/explain/index.json
//
//   ExplainRequest t; t.script.model = "resnet.pt"; t.script.data = cfg.data; t.layer = "layer4";
//   explain_checkpoint(t);                          // <dir of resnet.pt>/explain/index.json
//
// Samples: `samples` (positions in the split) plus the first `misclassified` wrong and the first
// `correct` right predictions. target_class: a class name or index to explain instead of each
// prediction. method empty: gradcam for models with convolutional stages, saliency otherwise.
// A TorchScript model (script.model set; train/inference.h, docs/import.md) is split into
// stages by nn::ScriptModel; when its forward is not a chain the maps are saliency maps and
// index.json's "note" says why.
// Files in out_dir (default <run>/explain, for a TorchScript file <its folder>/explain):
// sample-<i>-heatmap.png (JET), sample-<i>-overlay.png, maps.npy (float32 [N, H, W], the maps in
// [0, 1] in the order of "items"), index.json {"method","layer","split","maps","items":[{"index",
// "file_index","label","label_name","predicted","predicted_name","target_class","probability",
// "correct","heatmap","overlay"}]}.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/app/inference.h"

namespace glassbox::app {

struct ExplainRequest {
  std::filesystem::path checkpoint;
  std::vector<std::string> data_overrides;  // with checkpoint: "data.KEY=value" (another place or data set)
  ScriptSource script;                      // script.model: a TorchScript file instead of a checkpoint
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

}  // namespace glassbox::app
