#include "glassbox/app/run.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <ostream>

#include <fmt/format.h>
#include <torch/torch.h>

#include "glassbox/app/data.h"
#include "glassbox/app/inference.h"
#include "glassbox/app/init_weights.h"
#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/base/interrupt.h"
#include "glassbox/core/device.h"
#include "glassbox/core/safetensors.h"
#include "glassbox/core/seed.h"
#include "glassbox/core/version.h"
#include "glassbox/data/source.h"
#include "glassbox/dist/group.h"
#include "glassbox/inspect/diagnostics.h"
#include "glassbox/train/trainer.h"

namespace glassbox::app {

namespace fs = std::filesystem;

namespace {

// Every leaf of a JSON object as "a.b.c" -> its JSON text.
void flatten(const nlohmann::json& j, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  } else {
    out[prefix] = j.dump();
  }
}

std::map<std::string, std::string> flat_config(train::RunConfig& c) {
  std::map<std::string, std::string> out;
  flatten(to_json(visit_fn(c)), "", out);
  return out;
}

bool changeable(const std::string& key) {
  for (const auto& k : resume_changeable_keys()) {
    if (k == key) return true;
    if (k.size() > 2 && k.compare(k.size() - 2, 2, ".*") == 0 && key.rfind(k.substr(0, k.size() - 1), 0) == 0)
      return true;
  }
  return false;
}

// The run directory a checkpoint belongs to: RUN/checkpoints/NAME.ckpt -> RUN; empty otherwise.
fs::path run_of_checkpoint(const fs::path& checkpoint) {
  fs::path abs = fs::absolute(checkpoint).lexically_normal();
  if (!abs.has_filename()) abs = abs.parent_path();
  if (abs.parent_path().filename() != "checkpoints") return {};
  return abs.parent_path().parent_path();
}

bool same_path(const fs::path& a, const fs::path& b) {
  return fs::weakly_canonical(fs::absolute(a)) == fs::weakly_canonical(fs::absolute(b));
}

// A schedule whose length was derived from the run's length cannot follow a run made longer or
// shorter: it would step past its end (OneCycle) or change the learning rates already used.
void check_schedule_length(const train::RunConfig& before, const train::RunConfig& after) {
  const bool longer =
      before.trainer.max_epochs != after.trainer.max_epochs || before.trainer.max_steps != after.trainer.max_steps;
  if (!longer) return;
  const auto& s = after.scheduler;
  const bool derived = (s.name == train::SchedulerKind::kOnecycle && s.total_steps == 0) ||
                       (s.name == train::SchedulerKind::kCosine && s.t_max == 0);
  GB_CHECK(!derived, InvalidArgument,
           "scheduler.name = \"" << name_of(s.name) << "\" spans the first run's length (trainer.max_epochs = "
                                 << before.trainer.max_epochs << ", max_steps = " << before.trainer.max_steps
                                 << "); resuming with max_epochs = " << after.trainer.max_epochs << ", max_steps = "
                                 << after.trainer.max_steps << " would not continue the same schedule",
           "keep the run's length, or start a new run from the checkpoint's weights with --init-from (the schedule "
           "then spans the new run)");
}

train::RunConfig base_config(const TrainRequest& r) {
  if (r.config) {
    train::RunConfig c = *r.config;
    if (!r.overrides.empty()) {
      const std::string text = c.to_toml_text();
      c = train::parse_run_config(text, "the given configuration", r.overrides);
    }
    return c;
  }
  if (!r.config_text.empty())
    return train::parse_run_config(r.config_text, r.config_source.empty() ? "config" : r.config_source, r.overrides);
  return train::load_run_config(r.config_file, r.overrides);
}

// Rows of a JSON-lines file with "step" <= max_step (and no test rows), as text.
std::string jsonl_up_to(const fs::path& path, std::int64_t max_step) {
  std::ifstream in(path);
  std::string line, text;
  while (std::getline(in, line)) {
    const nlohmann::json row = nlohmann::json::parse(line, nullptr, false);
    if (!row.is_object()) continue;
    if (row.contains("step") && row["step"].is_number() && row["step"].get<std::int64_t>() > max_step) continue;
    if (row.contains("test_loss") || row.contains("test_acc")) continue;
    text += line + "\n";
  }
  return text;
}

// An ostream that drops everything (the output of ranks other than 0).
struct NullBuffer : std::streambuf {
  int overflow(int c) override { return c; }
};

}  // namespace

const std::vector<std::string>& resume_changeable_keys() {
  static const std::vector<std::string> keys = {
      "name",
      "trainer.max_epochs",
      "trainer.max_steps",
      "trainer.max_time",
      "trainer.limit_val_batches",
      "trainer.limit_test_batches",
      "trainer.num_sanity_val_steps",
      "trainer.log_every_n_steps",
      "trainer.enable_progress_bar",
      "trainer.enable_model_summary",
      "trainer.strategy",
      "trainer.ddp_timeout",
      "trainer.ddp_shared_memory",
      "early_stopping.*",
      "checkpoint.save_top_k",
      "checkpoint.save_last",
      "checkpoint.every_n_epochs",
      "checkpoint.every_n_train_steps",
      "diagnostics.*",
      "data.root",
      "data.train_images",
      "data.train_labels",
      "data.test_images",
      "data.test_labels",
      "data.train_x",
      "data.train_y",
      "data.test_x",
      "data.test_y",
      "data.train_csv",
      "data.test_csv",
      "data.eval_batch_size",
      "data.loader.num_workers",
      "data.loader.prefetch_factor",
      "data.loader.pin_memory",
      "data.loader.persistent_workers",
  };
  return keys;
}

train::RunConfig checkpoint_config(const fs::path& checkpoint) {
  GB_CHECK(fs::exists(checkpoint), NotFound, "no checkpoint at " << checkpoint.string(),
           "pass a checkpoint directory such as runs/NAME/checkpoints/last.ckpt");
  GB_CHECK(fs::exists(checkpoint / "state.json"), DataLoss,
           "checkpoint " << checkpoint.string() << " has no state.json",
           "the checkpoint is incomplete; use another one");
  nlohmann::json state = nlohmann::json::parse(read_file(checkpoint / "state.json"), nullptr, false);
  GB_CHECK(state.is_object() && state.contains("config") && state["config"].is_string(), DataLoss,
           "checkpoint " << checkpoint.string() << " carries no configuration (state.json has no \"config\")",
           "use a checkpoint written by glassbox train");
  return train::parse_run_config(state["config"].get<std::string>(), (checkpoint / "state.json").string(), {});
}

TrainPlan plan_training(const TrainRequest& r) {
  TrainPlan p;
  const bool any_config = r.config || !r.config_text.empty() || !r.config_file.empty();
  if (!r.resume.empty()) {
    GB_CHECK(r.init_from.empty(), InvalidArgument, "--resume and --init-from are mutually exclusive",
             "--resume continues a run exactly; --init-from starts a new run from a checkpoint's weights");
    GB_CHECK(fs::exists(r.resume), NotFound, "no checkpoint at " << r.resume.string(),
             "pass --resume runs/NAME/checkpoints/last.ckpt");
    const train::Checkpoint ck = train::read_checkpoint(r.resume);
    const std::vector<std::string> missing = train::missing_for_resume(ck);
    if (!missing.empty()) {
      std::string list;
      for (const auto& m : missing) list += (list.empty() ? "" : "; ") + m;
      GB_THROW(
          FailedPrecondition, "checkpoint " << r.resume.string() << " cannot resume exactly: it lacks " << list,
          "resume from a full checkpoint such as last.ckpt, or start a new run from its weights with --init-from " +
              r.resume.string());
    }
    train::RunConfig stored = checkpoint_config(r.resume);
    train::RunConfig wanted;
    if (any_config) {
      wanted = base_config(r);
    } else {
      wanted = train::parse_run_config(stored.to_toml_text(), (r.resume / "state.json").string(), r.overrides);
    }
    const auto before = flat_config(stored), after = flat_config(wanted);
    std::vector<std::string> refused;
    for (const auto& [key, value] : after) {
      auto it = before.find(key);
      const std::string old = it == before.end() ? "(unset)" : it->second;
      if (old == value) continue;
      const std::string change = key + ": " + old + " -> " + value;
      if (changeable(key))
        p.changed.push_back(change);
      else
        refused.push_back(change);
    }
    if (!refused.empty()) {
      std::string list;
      for (const auto& k : refused) list += (list.empty() ? "" : "; ") + k;
      GB_THROW(
          InvalidArgument,
          "resuming " << r.resume.string() << " with another configuration would not continue the same run: " << list,
          "drop CONFIG and these --set values (the checkpoint carries its configuration), or start a new run "
          "from its weights with --init-from " +
              r.resume.string());
    }
    check_schedule_length(stored, wanted);
    p.config = std::move(wanted);
    p.resume = r.resume;
    p.parent_run = run_of_checkpoint(r.resume);
    p.resume_epoch = ck.state.at("resume").value("epoch", std::int64_t{0});
    p.resume_step = ck.state.value("global_step", std::int64_t{0});
    if (r.run_dir.empty()) {
      GB_CHECK(!p.parent_run.empty(), InvalidArgument,
               "checkpoint " << r.resume.string() << " is not inside a run directory (RUN/checkpoints/NAME.ckpt)",
               "pass --run-dir for the continued run");
      p.run_dir = p.parent_run;
    } else {
      p.run_dir = r.run_dir;
      p.fork = p.parent_run.empty() || !same_path(p.run_dir, p.parent_run);
    }
  } else {
    p.config = any_config ? base_config(r) : train::parse_run_config("", "defaults", r.overrides);
    if (!r.init_from.empty()) p.config.model.init_from = r.init_from.string();
    p.run_dir = r.run_dir.empty() ? fs::path("runs") / p.config.name : r.run_dir;
  }
  p.config.validate();
  const bool dev_run = p.config.trainer.fast_dev_run > 0;
  // Data-parallel: rank 0 owns the run directory (the others may find it already made).
  const auto world = data_parallel_world(p.config.trainer);
  const bool rank0 = (!world || world->rank == 0) && r.owns_run_dir;
  if (rank0 && (p.resume.empty() || p.fork) && !dev_run && fs::exists(p.run_dir) && !fs::is_empty(p.run_dir)) {
    GB_CHECK(r.overwrite, AlreadyExists, "run directory " << p.run_dir.string() << " already exists",
             p.fork ? std::string("pass another --run-dir for the forked run, or --overwrite to replace it")
                    : std::string("pass --overwrite to replace it, --run-dir for another one, or --resume to continue "
                                  "it"));
    if (!p.resume.empty()) {
      const fs::path rel = fs::weakly_canonical(p.resume).lexically_relative(fs::weakly_canonical(p.run_dir));
      GB_CHECK(rel.empty() || rel.native().rfind("..", 0) == 0, InvalidArgument,
               "--overwrite would delete " << p.run_dir.string() << ", which holds the checkpoint being resumed",
               "fork into another --run-dir");
    }
  }
  // The device is checked before anything is written (a run directory left by a failed start
  // would block the corrected retry).
  resolve_device(p.config.trainer.device);
  return p;
}

nlohmann::json run_training(const TrainRequest& request, std::ostream& user_out) {
  TrainPlan plan = plan_training(request);
  train::RunConfig& config = plan.config;
  const fs::path run_dir = plan.run_dir;
  const bool resuming = !plan.resume.empty();
  // Data-parallel: every rank runs this; rank 0 talks and writes files.
  const std::optional<dist::WorldInfo> world = data_parallel_world(config.trainer);
  const bool rank0 = !world || world->rank == 0;
  NullBuffer null_buffer;
  std::ostream null_out(&null_buffer);
  std::ostream& out = rank0 ? user_out : null_out;
  const bool quiet = request.quiet || !rank0;
  const bool writes = config.trainer.fast_dev_run == 0;  // the run writes files (rank 0 does)
  const bool writer = writes && rank0;

  // Everything that can fail on the user's input, before the disk is touched.
  seed_everything(static_cast<std::uint64_t>(config.trainer.seed));
  train::StandardDataModule data(config.data);
  data.setup();
  const train::DataInfo info = data.info();
  auto model = nn::make_model(config.model, nn::ModelShape{info.sample_shape, info.num_classes});
  nn::Model* model_ptr = model.get();
  if (config.trainer.gradient_checkpointing) apply_gradient_checkpointing(*model, true);
  std::optional<nn::InitReport> init;
  if (!resuming && !config.model.init_from.empty()) init = load_initial_weights(*model->module(), config.model);
  const TaskKind kind = config.data.source.task;
  train::ModelTask task(kind, std::move(model), nn::Loss(config.loss, info.num_classes, kind));
  if (resuming) {
    // The checkpoint must fit this model; the Trainer restores everything when fit starts.
    const train::Checkpoint probe = train::read_checkpoint(plan.resume);
    train::load_module_state(task.module(), probe.model, probe.state.value("trainable_only", false));
  }

  // The rendezvous, before anything is written: a job whose ranks never meet leaves nothing.
  std::shared_ptr<dist::Group> group;
  if (world) {
    dist::GroupOptions go;
    go.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(config.trainer.ddp_timeout * 1000));
    go.device = resolve_device(config.trainer.device);
    if (go.device.is_cuda() && config.trainer.device.find(':') == std::string::npos)
      go.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(world->local_rank));
    group = dist::Group::connect(*world, go);
  }

  bool created = false;
  if (writer) {
    if (!resuming || plan.fork) {
      if (fs::exists(run_dir) && !fs::is_empty(run_dir)) fs::remove_all(run_dir);  // --overwrite, checked
      created = !fs::exists(run_dir);
      fs::create_directories(run_dir);
    }
    if (plan.fork) {
      // The parent's history up to the checkpoint, so the fork's curves start where it starts.
      const fs::path parent_rows = plan.parent_run / "metrics.jsonl";
      if (!plan.parent_run.empty() && fs::exists(parent_rows))
        write_file_atomic(run_dir / "metrics.jsonl", jsonl_up_to(parent_rows, plan.resume_step));
    } else if (resuming && fs::exists(run_dir / "probes.jsonl")) {
      write_file_atomic(run_dir / "probes.jsonl", jsonl_up_to(run_dir / "probes.jsonl", plan.resume_step));
    }
    write_file_atomic(run_dir / "config.toml", config.to_toml_text());
    // Image files: a grid of what the training pipeline does to a few of them (the report shows it).
    if (data::is_image_format(config.data.source.format) && !(resuming && !plan.fork)) {
      try {
        PreviewRequest pr;
        pr.config = run_dir / "config.toml";
        pr.out = run_dir / "augmentation.png";
        pr.samples = 6;
        pr.variants = 6;
        preview_augmentation(pr);
      } catch (const Error& e) {
        if (!quiet) out << "no augmentation preview: " << e.one_line() << "\n";
      }
    }
  }
  if (!info.skipped_files.empty() && !quiet)
    out << fmt::format("left out {} image(s) that do not decode (data.on_bad_image = \"skip\"), first: {}\n",
                       info.skipped_files.size(), info.skipped_files.front());
  if (resuming && !quiet) {
    out << fmt::format("resuming {} from epoch {}, step {}{}\n",
                       plan.parent_run.empty() ? plan.resume.string() : plan.parent_run.string(), plan.resume_epoch,
                       plan.resume_step, plan.fork ? " into " + run_dir.string() : "");
    for (const auto& c : plan.changed) out << "  changed " << c << "\n";
  }

  train::Trainer trainer(config.trainer, config.optim, config.scheduler, writes ? run_dir : fs::path(), group);
  if (group) {
    if (!quiet)
      out << fmt::format("data-parallel: {} ranks on {} node(s), {} backend, global batch {}\n", group->size(),
                         group->size() / std::max(1, world->local_world_size), group->backend_name(),
                         config.data.loader.batch_size * group->size());
  }
  trainer.set_config_text(config.to_toml_text());
  const double scale = data_scale(config.data.source);
  const bool probabilities = config.model.name == "mlp" && config.model.mlp.output == nn::MlpOutput::kSoftmax;
  trainer.set_checkpoint_extra({{"data_info", data_info_to_json(info, scale)},
                                {"contract", nlohmann::json::parse(nn::contract_to_json(contract_for(
                                                 config, info, scale, probabilities, run_dir.filename().string())))}});
  if (init && !quiet) out << "init_from " << config.model.init_from << ": " << init->summary() << "\n";
  if (config.trainer.enable_model_summary && !quiet) {
    trainer.add_callback(std::make_unique<train::ModelSummary>(
        out, info.sample_shape, [model_ptr](const at::Tensor& x) { return model_ptr->forward(x); }));
  }
  if (config.trainer.enable_progress_bar && !quiet)
    trainer.add_callback(std::make_unique<train::ProgressBarCallback>(out));
  trainer.add_callback(std::make_unique<train::LearningRateMonitor>());
  auto timer = std::make_unique<train::TimerCallback>();
  train::TimerCallback* timer_ptr = timer.get();
  trainer.add_callback(std::move(timer));
  if (config.early_stopping.enabled)
    trainer.add_callback(std::make_unique<train::EarlyStopping>(config.early_stopping));
  if (config.ema.enabled) trainer.add_callback(std::make_unique<train::EmaCallback>(config.ema));
  train::SwaCallback* swa = nullptr;
  if (config.swa.enabled) {
    auto cb = std::make_unique<train::SwaCallback>(config.swa);
    swa = cb.get();
    trainer.add_callback(std::move(cb));
  }
  train::CheckpointOptions ck = config.checkpoint;
  if (!data.val_dataset() && ck.monitor.rfind("val_", 0) == 0) ck.monitor = "";  // nothing to monitor
  auto checkpoint = std::make_unique<train::ModelCheckpoint>(ck);
  train::ModelCheckpoint* ckpt = checkpoint.get();
  trainer.add_callback(std::move(checkpoint));
  if (request.diagnostics) {
    inspect::install_diagnostics(trainer, config.diagnostics, writer ? run_dir : fs::path(), out, config.to_toml_text(),
                                 inspect::flatten_hparams(to_json(visit_fn(config))));
  }
  if (request.configure) request.configure(trainer, task, writer ? run_dir : fs::path(), out);

  std::optional<InterruptScope> interrupts;
  if (request.handle_interrupts) interrupts.emplace();
  clear_interrupt();
  const auto started = std::chrono::steady_clock::now();
  train::ResumeOptions ro;
  if (plan.fork) ro.fresh_callbacks = {"ModelCheckpoint"};
  try {
    trainer.fit(task, data, plan.resume, ro);
  } catch (const std::exception& e) {
    // The other ranks name this one and its error (a failure of theirs is reported by them).
    const auto* ge = dynamic_cast<const Error*>(&e);
    const bool peer_fault =
        ge != nullptr && (ge->code() == ErrorCode::kUnavailable || ge->code() == ErrorCode::kDeadlineExceeded);
    if (group && !peer_fault) group->report_failure(ge != nullptr ? ge->one_line() : std::string(e.what()));
    // A new run that failed before its first step leaves nothing behind.
    if (created && trainer.global_step() == 0) {
      std::error_code ec;
      fs::remove_all(run_dir, ec);
    }
    throw;
  }
  const double fit_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const train::StopKind stop = trainer.stop_kind();
  std::string last = ckpt->last_model_path();
  if (stop == train::StopKind::kInterrupted && writes && config.trainer.enable_checkpointing &&
      (last.empty() || !ck.save_last)) {
    // Interrupted without save_last: the state to resume from is written anyway.
    const fs::path p = (ck.dirpath.empty() ? run_dir / "checkpoints" : fs::path(ck.dirpath)) / "last.ckpt";
    trainer.save_checkpoint(p, false, false);
    last = p.string();
  }
  // SWA's averaged weights (with their recomputed BatchNorm statistics) as a checkpoint of their own.
  std::string swa_checkpoint;
  if (swa && swa->averaged() > 0 && writes && config.trainer.enable_checkpointing) {
    const fs::path p = (ck.dirpath.empty() ? run_dir / "checkpoints" : fs::path(ck.dirpath)) / "swa.ckpt";
    trainer.save_checkpoint(p, /*weights_only=*/true, false);
    swa_checkpoint = p.string();
  }

  // Test with the best checkpoint when one was kept (Lightning's ckpt_path="best"); not after an
  // interrupt; after a non-finite stop only with finite weights.
  std::string tested_with = "final weights";
  std::string test_note;
  train::EvalResult test;
  // SWA's averaged weights exist only at the end of fit: they are what is tested.
  const bool has_best = !ckpt->best_model_path().empty() && !ck.save_weights_only &&
                        fs::exists(ckpt->best_model_path()) && !(swa && swa->averaged() > 0);
  if (stop == train::StopKind::kInterrupted) {
    test_note = "not tested: interrupted";
  } else if (data.test_dataset()) {
    std::string use;
    if (has_best) {
      use = ckpt->best_model_path();
    } else if (stop == train::StopKind::kNonFinite && !last.empty() && fs::exists(last)) {
      use = last;  // checkpoints are only written with finite weights
    }
    if (group) {
      // Rank 0 wrote the checkpoints and decides; the others get its choice and its weights (they
      // may not see its file system).
      const std::int64_t code = group->max(rank0 ? (use.empty()   ? 0
                                                    : use == last ? 2
                                                                  : 1)
                                                 : 0,
                                           "agreement on the weights to test");
      if (!rank0) use = code == 0 ? std::string() : code == 2 ? last : ckpt->best_model_path();
    }
    if (!use.empty()) {
      if (rank0 || !group) {
        const train::Checkpoint best = train::read_checkpoint(use);
        train::load_module_state(task.module(), best.model, best.state.value("trainable_only", false));
      }
      trainer.broadcast_model_state(/*parameters=*/true);
      tested_with = use;
    }
    if (stop == train::StopKind::kNonFinite && use.empty()) {
      test_note = "not tested: the weights are not finite and no checkpoint was saved before";
    } else {
      test = trainer.test(task, data);
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  nlohmann::json summary;
  if (test.has_accuracy) {
    summary["test"] = {{"accuracy", test.accuracy}, {"loss", test.loss}, {"samples", test.samples}};
  } else {
    summary["test"] = {{"loss", test.loss}, {"samples", test.samples}};
    for (const auto& [k, v] : test.metrics) summary["test"][k] = v;
  }
  if (!test_note.empty()) summary["test"] = nullptr;
  summary["task"] = name_of(kind);
  if (!test_note.empty()) summary["test_note"] = test_note;
  const auto path_or_null = [](const std::string& p) {
    return p.empty() ? nlohmann::json(nullptr) : nlohmann::json(p);
  };
  summary["best_checkpoint"] = path_or_null(ckpt->best_model_path());
  summary["best_score"] =
      ckpt->best_model_path().empty() ? nlohmann::json(nullptr) : nlohmann::json(ckpt->best_model_score());
  summary["last_checkpoint"] = path_or_null(last);
  summary["tested_with"] = tested_with;
  summary["wall_seconds"] = wall;
  summary["fit_seconds"] = fit_seconds;
  summary["train_seconds"] = timer_ptr->train_seconds();
  summary["validate_seconds"] = timer_ptr->validate_seconds();
  summary["train_samples_per_second"] = trainer.samples_per_second();
  summary["epochs"] = trainer.current_epoch();
  summary["global_step"] = trainer.global_step();
  summary["stop"] = train::stop_kind_name(stop);
  summary["stop_reason"] = trainer.stop_reason();
  summary["skipped_steps"] = trainer.skipped_steps();
  if (!info.skipped_files.empty()) {
    // Images that do not decode, left out (data.on_bad_image = "skip"): counted, the first named.
    const std::size_t shown = std::min<std::size_t>(info.skipped_files.size(), 20);
    summary["skipped_files"] = {
        {"count", info.skipped_files.size()},
        {"first", std::vector<std::string>(info.skipped_files.begin(),
                                           info.skipped_files.begin() + static_cast<std::ptrdiff_t>(shown))}};
  }
  if (trainer.gradient_clip_threshold() > 0) summary["gradient_clip"] = trainer.gradient_clip_threshold();
  summary["model"] = config.model.name;
  summary["parameters"] = nn::count_parameters(task.module(), false);
  summary["trainable_parameters"] = nn::count_parameters(task.module(), true);
  summary["device"] = trainer.device().str();
  summary["world_size"] = trainer.world_size();
  summary["strategy"] = group ? "ddp" : "single";
  if (group) {
    summary["backend"] = group->backend_name();
    summary["global_batch_size"] = trainer.global_batch_size();
  }

  summary["precision"] = name_of(config.trainer.precision);
  summary["threads"] = torch::get_num_threads();
  summary["class_names"] = info.class_names;
  summary["glassbox_version"] = kGlassboxVersion;
  summary["torch_version"] = torch_version();
  summary["run_dir"] = writes ? run_dir.string() : "";
  if (resuming) {
    summary["resumed_from"] = {
        {"checkpoint", plan.resume.string()}, {"epoch", plan.resume_epoch}, {"step", plan.resume_step}};
    if (plan.fork) summary["parent_run"] = plan.parent_run.string();
    if (trainer.resumed_world_size() > 0) summary["resumed_from"]["world_size"] = trainer.resumed_world_size();
  }
  if (config.ema.enabled) summary["ema"] = {{"decay", config.ema.decay}, {"validated", config.ema.validate}};
  if (swa)
    summary["swa"] = {{"averaged_epochs", swa->averaged()},
                      {"from_epoch", swa->start_epoch(config.trainer.max_epochs)},
                      {"checkpoint", path_or_null(swa_checkpoint)}};
  if (trainer.freeze_report().frozen > 0) {
    summary["frozen"] = {{"parameters", trainer.freeze_report().frozen},
                         {"of", trainer.freeze_report().total},
                         {"fraction", trainer.freeze_report().fraction()}};
    if (trainer.unfrozen_lr() > 0) {
      summary["frozen"]["unfrozen_at_epoch"] = config.trainer.unfreeze_at_epoch;
      summary["frozen"]["final_backbone_lr"] = trainer.unfrozen_lr();
    }
  }
  if (init) {
    summary["init_from"] = config.model.init_from;
    summary["init"] = init->to_json();
  }
  for (const auto& [k, v] : trainer.callback_metrics()) summary["final_metrics"][k] = v;
  if (writer) write_file_atomic(run_dir / "summary.json", summary.dump(2) + "\n");
  if (!rank0) summary["rank"] = world->rank;  // not in summary.json: tells callers this is not rank 0
  if (!quiet) {
    if (test_note.empty() && test.has_accuracy) {
      out << fmt::format("test accuracy {:.4f}  test loss {:.4f}  ({} samples, {})\n", test.accuracy, test.loss,
                         test.samples, tested_with);
    } else if (test_note.empty()) {
      const auto metric = [&](const char* k) { return test.metrics.count(k) ? test.metrics.at(k) : NAN; };
      if (kind == TaskKind::kRegression) {
        out << fmt::format("test MAE {:.4g}  RMSE {:.4g}  R² {:.4f}  test loss {:.4g}  ({} samples, {})\n",
                           metric("mae"), metric("rmse"), metric("r2"), test.loss, test.samples, tested_with);
      } else {
        out << fmt::format(
            "test micro F1 {:.4f}  macro F1 {:.4f}  subset accuracy {:.4f}  test loss {:.4f}  ({} samples, {})\n",
            metric("micro_f1"), metric("macro_f1"), metric("subset_acc"), test.loss, test.samples, tested_with);
      }
    } else {
      out << test_note << "\n";
    }
    out << fmt::format("{} epochs, {} steps in {:.1f} s ({:.0f} train samples/s); stopped: {}\n",
                       trainer.current_epoch(), trainer.global_step(), wall, trainer.samples_per_second(),
                       trainer.stop_reason());
    if (writes) out << "run directory: " << run_dir.string() << "\n";
    if (stop == train::StopKind::kInterrupted && !last.empty())
      out << fmt::format("interrupted at epoch {}, step {}; resume with: glassbox train --resume {}\n",
                         trainer.current_epoch(), trainer.global_step(), last);
  }
  return summary;
}

}  // namespace glassbox::app
