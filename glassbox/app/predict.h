// `glassbox predict` as a call: class probabilities (or values, label probabilities) for unlabeled inputs, from a
// checkpoint (with its stored preprocessing; no training data needed) or a TorchScript file with its contract.
//
//   PredictRequest r; r.model.checkpoint = "runs/quickstart/checkpoints/last.ckpt";
//   r.input = "new_samples.npy"; r.out = "predictions.csv";
//   PredictOutcome o = run_predict(r);   // o.samples rows written
//
// Inputs: .npy ([N, ...sample shape], raw values: uint8 images or features as in training) or
// .csv (a header; the feature columns the model was trained on, by name when it knows them, a
// label column, if present, is ignored). Each row gets the contract's preprocessing,
// (raw * scale - mean) / std, then the model. Output CSV: index,predicted,predicted_name, then
// one probability column per class (p_<class name>), in input order; written atomically.
// Regression models write one value column per target (named by the target), multi-label models
// the labels predicted (probability >= 0.5, joined by '|') and p_<label> per label; a CSV input may
// then also hold the target columns, which are left out.
// Errors (InvalidArgument, one line): a sample shape or feature count that is not the model's,
// an unknown extension.
// Thread safety: one prediction per thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "glassbox/app/inference.h"

namespace glassbox::app {

struct PredictRequest {
  ModelSpec model;  // checkpoint, or TorchScript file with its contract
  std::filesystem::path input;
  std::filesystem::path out;  // empty: predictions.csv beside the input
  std::string device = "cpu";
  std::int64_t batch_size = 512;
};

struct PredictOutcome {
  std::filesystem::path out;
  std::int64_t samples = 0;
  std::vector<std::string> class_names;
  TaskKind task = TaskKind::kClassification;
  std::vector<std::int64_t> counts;  // predictions per class (multilabel: per label; regression: none)
};

PredictOutcome run_predict(const PredictRequest& request);

}  // namespace glassbox::app
