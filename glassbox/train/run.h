// run_training: the whole of `glassbox train` as a library call — data, model, task, trainer
// with the configured callbacks, fit, test with the best checkpoint, and the run directory
// (config.toml, metrics.jsonl/csv, checkpoints/, summary.json).
//
//   RunConfig cfg = load_run_config("configs/quickstart.toml", {});
//   RunOptions ro; ro.run_dir = "runs/quickstart";
//   nlohmann::json summary = run_training(cfg, ro);
//
// Errors: an existing run directory without overwrite (or resume) is AlreadyExists; nothing in it
// is touched. Thread safety: one run per process at a time (LibTorch's global RNG).
#pragma once

#include <filesystem>
#include <functional>
#include <iosfwd>

#include <nlohmann/json.hpp>

#include "glassbox/train/run_config.h"

namespace glassbox::train {

class Trainer;
class TaskModule;

struct RunOptions {
  std::filesystem::path run_dir;  // empty: runs/<run.name>
  std::filesystem::path resume;   // checkpoint to resume from (continues in its run directory)
  bool overwrite = false;         // replace an existing run directory
  bool quiet = false;             // no summary / progress output
  // Called after the built-in callbacks are added and before fit: adds more (e.g. glassbox/inspect's
  // diagnostics, which train cannot depend on). run_dir is empty when nothing is written.
  std::function<void(Trainer&, TaskModule&, const std::filesystem::path& run_dir, std::ostream& out)> configure;
};

nlohmann::json run_training(RunConfig config, const RunOptions& options, std::ostream& out);

}  // namespace glassbox::train
