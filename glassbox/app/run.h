// run_training: the whole of `glassbox train` as a library call — the configuration (a file, a
// text, or the one stored in the checkpoint being resumed), the run directory, data, model, task,
// the trainer with its callbacks and diagnostics, fit, the test with the best checkpoint, and the
// run directory's files (config.toml, metrics.jsonl/csv, checkpoints/, summary.json).
//
//   TrainRequest r; r.config_file = "configs/quickstart.toml"; r.overrides = {"trainer.max_epochs=3"};
//   nlohmann::json summary = run_training(r, std::cout);
//
//   TrainRequest again; again.resume = "runs/quickstart/checkpoints/last.ckpt";   // its own config
//   again.overrides = {"trainer.max_epochs=5"};          // only keys that keep the resume exact
//   run_training(again, std::cout);                      // continues in runs/quickstart
//
// Resuming (Lightning's ckpt_path with its saved hyperparameters): without a config the
// checkpoint's stored one is used; a config or overrides may change only the keys of
// resume_changeable_keys() (stopping, limits, logging, checkpoint cadence, data paths); any other
// difference is an InvalidArgument listing the keys. The run continues in the checkpoint's own run
// directory; with run_dir elsewhere it forks: the new run starts its own checkpoint bookkeeping,
// copies the parent's logged history up to the checkpoint, and records its parent in
// summary.json; the parent run is never written to. A checkpoint that cannot resume exactly is
// refused naming what it lacks; init_from (or model.init_from) starts a new run from weights only.
//
// Nothing is created or rewritten before the whole request is validated (config, device, data,
// model, checkpoint); a new run whose start fails before its first step leaves no run directory.
// SIGINT/SIGTERM during fit stop after the current step: last.ckpt is written there, summary.json
// has "stop": "interrupted", the resume command is printed, and the summary is returned (the CLI
// exits 130). A non-finite stop ("stop": "nonfinite") tests the last finite checkpoint, or skips
// the test with a message.
// Launched as one rank of several (glassbox train --nproc, torchrun), every rank runs this: the
// ranks meet after validation and before anything is written; rank 0 prints and writes the run
// directory, the others are silent and return their summary with "rank" set.
// Thread safety: one run per process at a time (LibTorch's global RNG, signal handlers).
#pragma once

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/dist/world.h"
#include "glassbox/train/run_config.h"

namespace glassbox::train {
class Trainer;
class TaskModule;
}  // namespace glassbox::train

namespace glassbox::app {

struct TrainRequest {
  // The configuration, first given wins: `config` (built in code), `config_text` (named
  // config_source in errors), `config_file`; none: the checkpoint's own with `resume`, else the
  // built-in defaults. `overrides` ("key=value") apply on top.
  std::optional<train::RunConfig> config;
  std::string config_text, config_source;
  std::filesystem::path config_file;
  std::vector<std::string> overrides;

  std::filesystem::path run_dir;    // empty: runs/<name>, or the resumed checkpoint's run
  std::filesystem::path resume;     // continue exactly from this checkpoint
  std::filesystem::path init_from;  // start a new run from these weights (overrides model.init_from)
  bool overwrite = false;           // replace an existing run directory (new runs only)
  bool quiet = false;               // no progress, summary or model table
  bool diagnostics = true;          // TensorBoard, probes, non-finite monitor ([diagnostics])
  bool handle_interrupts = true;    // SIGINT/SIGTERM stop gracefully during fit
  // False on the launcher of a node other than node 0 of a data-parallel job: node 0 owns the
  // run directory (it may exist already), so planning does not check it.
  bool owns_run_dir = true;
  // Called after the built-in callbacks are added and before fit: adds more. run_dir is empty
  // when nothing is written (fast_dev_run).
  std::function<void(train::Trainer&, train::TaskModule&, const std::filesystem::path& run_dir, std::ostream& out)>
      configure;
};

// The keys a resume may change (exactly these, or every key under a section ending in ".*").
const std::vector<std::string>& resume_changeable_keys();

// What a request resolves to, validated, before anything is written.
struct TrainPlan {
  train::RunConfig config;
  std::filesystem::path run_dir;
  std::filesystem::path resume;      // empty: a new run
  bool fork = false;                 // resume into another run directory
  std::filesystem::path parent_run;  // the checkpoint's run (resume)
  std::int64_t resume_epoch = 0;     // where the resume continues
  std::int64_t resume_step = 0;
  std::vector<std::string> changed;  // keys changed on resume ("trainer.max_epochs: 3 -> 5")
};
TrainPlan plan_training(const TrainRequest& request);

nlohmann::json run_training(const TrainRequest& request, std::ostream& out);

// The data-parallel world this process trains in, from trainer.strategy and the launcher's
// environment (WorldInfo::from_env): nullopt for one process; "ddp" without a launcher is a world
// of one rank. InvalidArgument for "single" in a launched world of several.
std::optional<dist::WorldInfo> data_parallel_world(const train::TrainerOptions& trainer);

// The configuration stored in a checkpoint (its state.json).
train::RunConfig checkpoint_config(const std::filesystem::path& checkpoint);

}  // namespace glassbox::app
