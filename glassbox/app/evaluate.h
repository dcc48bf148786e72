// `glassbox eval` as a library call: a checkpoint's predictions on a split, every metric of
// glassbox/metrics, an optional fairness audit, and the files other tools re-check.
//
//   EvalOptions o; o.checkpoint = "runs/quickstart/checkpoints/last.ckpt"; o.split = "test";
//   nlohmann::json metrics = evaluate_checkpoint(o);   // also writes <out>/metrics.json
//
//   EvalOptions t; t.script.model = "resnet.pt"; t.script.data = cfg.data;   // a TorchScript file
//   evaluate_checkpoint(t);                             // <dir of resnet.pt>/eval/metrics.json
//
// A TorchScript model (script.model set, checkpoint empty; see train/inference.h and
// docs/import.md) is evaluated on script.data with its contract's preprocessing; metrics.json then
// names "model_file" and "contract" instead of "checkpoint".
// Files (out_dir, default <run>/eval, for a TorchScript file <its folder>/eval; each written
// atomically):
//   metrics.json      everything below, with the split, checkpoint and class names
//   predictions.csv   index,label,predicted,p_0..p_{K-1} (index: the sample's row in its data file)
//   predictions.npy   float64 [N, 3 + K]: the same columns
// Metrics: confusion matrix, per-class precision/recall/F1/support/AP/ROC AUC, micro/macro/
// weighted averages, accuracy and top-k, the majority-class baseline and an imbalance warning,
// ECE with the reliability diagram's bins, one-vs-rest PR curves, balanced class weights of the
// training split; with groups, a fairness audit (glassbox/metrics/fairness.h).
// Groups: `groups_file` (.npy 1-D; .csv with a header, one column or `group_column`; .txt one
// value per line) holds one value per sample of the split's data file (the training file for
// train/val, the test file for test); or `group_column` alone names a column of the data set's
// own CSV (or a feature index of its .npy inputs).
// Errors (InvalidArgument/NotFound/DataLoss, one line each): unknown split, missing or misaligned
// group file, unknown column (with the closest name), a positive class or privileged group that
// does not exist. Existing files in out_dir are replaced only by complete new ones.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/app/inference.h"

namespace glassbox::app {

struct EvalOptions {
  std::filesystem::path checkpoint;
  std::vector<std::string> data_overrides;  // with checkpoint: "data.KEY=value" (another place or data set)
  ScriptSource script;                      // script.model: a TorchScript file instead of a checkpoint
  std::string split = "test";
  std::filesystem::path out_dir;  // empty: <run_dir>/eval
  std::string device = "cpu";
  std::int64_t batch_size = 512;
  std::int64_t bins = 15;  // calibration bins
  // Fairness (off unless groups_file or group_column is given).
  std::filesystem::path groups_file;
  std::string group_column;
  std::string positive_class;  // class name or index; empty: class 1 of two, else every class
  std::string privileged;      // empty: the largest group
  double fairness_threshold = 0.1;
  bool write = true;
};

nlohmann::json evaluate_checkpoint(const EvalOptions& options);

// The one-screen summary `glassbox eval` prints (accuracy, baseline, per-class table, ECE, flags).
std::string format_eval_summary(const nlohmann::json& metrics);

}  // namespace glassbox::app
