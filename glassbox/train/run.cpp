#include "glassbox/train/run.h"

#include <ostream>

#include <fmt/format.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/core/seed.h"
#include "glassbox/core/version.h"
#include "glassbox/train/trainer.h"

namespace glassbox::train {

namespace fs = std::filesystem;

nlohmann::json run_training(RunConfig config, const RunOptions& options, std::ostream& out) {
  config.validate();
  fs::path run_dir = options.run_dir.empty() ? fs::path("runs") / config.name : options.run_dir;
  const bool dev_run = config.trainer.fast_dev_run > 0;
  if (!options.resume.empty()) {
    // Resuming continues in the run directory the checkpoint belongs to unless one is given.
    if (options.run_dir.empty()) {
      fs::path ckpt_dir = fs::absolute(options.resume).lexically_normal();
      if (ckpt_dir.has_filename() == false) ckpt_dir = ckpt_dir.parent_path();
      run_dir = ckpt_dir.parent_path().parent_path();
    }
    GB_CHECK(fs::exists(options.resume), NotFound, "no checkpoint at " << options.resume.string(),
             "pass --resume runs/NAME/checkpoints/last.ckpt");
  } else if (!dev_run && fs::exists(run_dir) && !fs::is_empty(run_dir)) {
    GB_CHECK(options.overwrite, AlreadyExists, "run directory " << run_dir.string() << " already exists",
             "pass --overwrite to replace it, --run-dir for another one, or --resume to continue it");
    fs::remove_all(run_dir);
  }
  const bool writes = !dev_run;

  seed_everything(static_cast<std::uint64_t>(config.trainer.seed));
  StandardDataModule data(config.data);
  data.setup();
  const DataInfo info = data.info();
  auto model = nn::make_model(config.model, nn::ModelShape{info.sample_shape, info.num_classes});
  nn::Model* model_ptr = model.get();
  ClassificationTask task(std::move(model), nn::Loss(config.loss, info.num_classes));
  if (!options.resume.empty()) {
    // Check that the checkpoint fits before anything in the run directory is touched; the
    // Trainer restores it (weights, optimiser, RNG, ...) when fit starts.
    Checkpoint probe = read_checkpoint(options.resume);
    load_module_state(task.module(), probe.model, probe.state.value("trainable_only", false));
  }
  if (writes) {
    fs::create_directories(run_dir);
    write_file_atomic(run_dir / "config.toml", config.to_toml_text());
  }

  Trainer trainer(config.trainer, config.optim, config.scheduler, writes ? run_dir : fs::path());
  trainer.set_config_text(config.to_toml_text());
  if (config.trainer.enable_model_summary && !options.quiet) {
    trainer.add_callback(std::make_unique<ModelSummary>(
        out, info.sample_shape, [model_ptr](const at::Tensor& x) { return model_ptr->forward(x); }));
  }
  if (config.trainer.enable_progress_bar && !options.quiet)
    trainer.add_callback(std::make_unique<ProgressBarCallback>(out));
  trainer.add_callback(std::make_unique<LearningRateMonitor>());
  auto timer = std::make_unique<TimerCallback>();
  TimerCallback* timer_ptr = timer.get();
  trainer.add_callback(std::move(timer));
  if (config.early_stopping.enabled) trainer.add_callback(std::make_unique<EarlyStopping>(config.early_stopping));
  CheckpointOptions ck = config.checkpoint;
  if (!data.val_dataset() && ck.monitor.rfind("val_", 0) == 0)
    ck.monitor = "";  // nothing to monitor without validation
  auto checkpoint = std::make_unique<ModelCheckpoint>(ck);
  ModelCheckpoint* ckpt = checkpoint.get();
  trainer.add_callback(std::move(checkpoint));

  if (options.configure) options.configure(trainer, task, writes ? run_dir : fs::path(), out);

  const auto started = std::chrono::steady_clock::now();
  trainer.fit(task, data, options.resume);
  const double fit_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  // Test with the best checkpoint when one was kept (Lightning's ckpt_path="best").
  std::string tested_with = "final weights";
  if (!ckpt->best_model_path().empty() && !ck.save_weights_only && fs::exists(ckpt->best_model_path())) {
    Checkpoint best = read_checkpoint(ckpt->best_model_path());
    load_module_state(task.module(), best.model, best.state.value("trainable_only", false));
    tested_with = ckpt->best_model_path();
  }
  EvalResult test;
  if (data.test_dataset()) test = trainer.test(task, data);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  nlohmann::json summary;
  summary["test"] = {{"accuracy", test.accuracy}, {"loss", test.loss}, {"samples", test.samples}};
  summary["best_checkpoint"] =
      ckpt->best_model_path().empty() ? nlohmann::json(nullptr) : nlohmann::json(ckpt->best_model_path());
  summary["best_score"] =
      ckpt->best_model_path().empty() ? nlohmann::json(nullptr) : nlohmann::json(ckpt->best_model_score());
  summary["last_checkpoint"] =
      ckpt->last_model_path().empty() ? nlohmann::json(nullptr) : nlohmann::json(ckpt->last_model_path());
  summary["tested_with"] = tested_with;
  summary["wall_seconds"] = wall;
  summary["fit_seconds"] = fit_seconds;
  summary["train_seconds"] = timer_ptr->train_seconds();
  summary["validate_seconds"] = timer_ptr->validate_seconds();
  summary["train_samples_per_second"] = trainer.samples_per_second();
  summary["epochs"] = trainer.current_epoch();
  summary["global_step"] = trainer.global_step();
  summary["stop_reason"] = trainer.stop_reason();
  summary["skipped_steps"] = trainer.skipped_steps();
  if (trainer.gradient_clip_threshold() > 0) summary["gradient_clip"] = trainer.gradient_clip_threshold();
  summary["model"] = config.model.name;
  summary["parameters"] = nn::count_parameters(task.module(), false);
  summary["trainable_parameters"] = nn::count_parameters(task.module(), true);
  summary["device"] = trainer.device().str();
  summary["precision"] = config.trainer.precision;
  summary["threads"] = torch::get_num_threads();
  summary["class_names"] = info.class_names;
  summary["glassbox_version"] = kGlassboxVersion;
  summary["torch_version"] = torch_version();
  summary["run_dir"] = writes ? run_dir.string() : "";
  for (const auto& [k, v] : trainer.callback_metrics()) summary["final_metrics"][k] = v;
  if (writes) write_file_atomic(run_dir / "summary.json", summary.dump(2) + "\n");
  if (!options.quiet) {
    out << fmt::format("test accuracy {:.4f}  test loss {:.4f}  ({} samples, {})\n", test.accuracy, test.loss,
                       test.samples, tested_with);
    out << fmt::format("{} epochs, {} steps in {:.1f} s ({:.0f} train samples/s); stopped: {}\n",
                       trainer.current_epoch(), trainer.global_step(), wall, trainer.samples_per_second(),
                       trainer.stop_reason());
    if (writes) out << "run directory: " << run_dir.string() << "\n";
  }
  return summary;
}

}  // namespace glassbox::train
