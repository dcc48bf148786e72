// RunConfig: the whole configuration of a training run — one TOML file, one struct.
//
//   [run]        name
//   [data]       source (format, root, val_size, ...) and [data.loader] (batch_size, workers, ...)
//   [model]      name and [model.<name>] options
//   [loss]       loss function
//   [optim]      optimiser
//   [scheduler]  learning-rate schedule
//   [trainer]    the loop (epochs, precision, clipping, ...)
//   [checkpoint] ModelCheckpoint
//   [early_stopping]
//   [diagnostics] probes, TensorBoard, non-finite policy (implemented by glassbox/inspect)
//
//   RunConfig cfg = load_run_config("configs/cnn.toml", {"trainer.max_epochs=3"});
//   std::string text = cfg.to_toml_text();  // the effective config, saved in the run directory
//
// Thread safety: plain data.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "glassbox/base/config.h"
#include "glassbox/nn/losses.h"
#include "glassbox/nn/registry.h"
#include "glassbox/train/averaging.h"
#include "glassbox/train/callbacks.h"
#include "glassbox/train/datamodule.h"
#include "glassbox/train/diagnostics_options.h"
#include "glassbox/train/optimizer.h"
#include "glassbox/train/scheduler.h"
#include "glassbox/train/trainer_options.h"

namespace glassbox::train {

struct RunConfig {
  std::string name = "run";  // run directory name under runs/
  DataModuleOptions data;
  nn::ModelOptions model;
  nn::LossOptions loss;
  OptimizerOptions optim;
  SchedulerOptions scheduler;
  TrainerOptions trainer;
  CheckpointOptions checkpoint;
  EarlyStoppingOptions early_stopping;
  EmaOptions ema;
  SwaOptions swa;
  DiagnosticsOptions diagnostics;

  void visit(FieldVisitor& v);
  void validate() const;
  std::string to_toml_text();
};

// Loads a TOML file (empty path: defaults) and applies "--set" overrides; validates everything.
RunConfig load_run_config(const std::filesystem::path& path, const std::vector<std::string>& overrides);
RunConfig parse_run_config(std::string_view text, std::string_view source, const std::vector<std::string>& overrides);

}  // namespace glassbox::train
