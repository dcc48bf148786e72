// Trainer::save_checkpoint and Trainer::restore: everything needed for a bit-exact resume.
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/core/seed.h"
#include "glassbox/core/version.h"
#include "glassbox/train/trainer.h"

namespace glassbox::train {

void Trainer::save_checkpoint(const std::filesystem::path& dir, bool weights_only, bool trainable_only) {
  GB_CHECK(task_ != nullptr && optimizer_ != nullptr, FailedPrecondition, "save_checkpoint outside fit",
           "call it from a callback");
  Checkpoint c;
  c.model.tensors = module_state(task_->module(), trainable_only);
  nlohmann::json s;
  s["format"] = kCheckpointFormat;
  s["glassbox_version"] = kGlassboxVersion;
  s["torch_version"] = torch_version();
  s["model"] = task_->name();
  s["trainable_only"] = trainable_only;
  s["weights_only"] = weights_only;
  s["epoch"] = epoch_;
  s["global_step"] = global_step_;
  // Sampler position: where the next training batch comes from. At the end of an epoch the
  // next batch is batch 0 of the next epoch.
  const bool epoch_done = batch_in_epoch_ >= num_train_batches_;
  s["resume"] = {{"epoch", epoch_done ? epoch_ + 1 : epoch_}, {"batch", epoch_done ? 0 : batch_in_epoch_}};
  s["train_seconds"] = train_seconds();
  s["samples_seen"] = samples_seen_;
  s["skipped_steps"] = skipped_steps_;
  s["gradient_clip_auto"] = {{"threshold", auto_clip_}, {"norms", auto_clip_norms_}};
  s["metrics"] = callback_metrics_;
  s["config"] = config_text_;
  for (auto it = checkpoint_extra_.begin(); it != checkpoint_extra_.end(); ++it) s[it.key()] = it.value();
  if (!weights_only) {
    c.optimizer.tensors = optimizer_->state_tensors();
    std::vector<std::string> names;
    for (const auto& [name, t] : c.optimizer.tensors) names.push_back(name);
    s["optimizer_tensors"] = names;
    if (!epoch_done && batch_in_epoch_ > 0 && epoch_loss_sum_.defined()) {
      s["epoch_sums"] = {{"loss_sum", epoch_loss_sum_.item<double>()},
                         {"loss_count", epoch_loss_count_},
                         {"correct", epoch_correct_},
                         {"seen", epoch_seen_}};
    }
    s["optimizer"] = optimizer_->state_json();
    if (unfrozen_) s["unfrozen_backbone"] = {{"lr", unfrozen_lr_}};
    s["scheduler"] = scheduler_->state();
    nlohmann::json cb = nlohmann::json::object();
    for (const auto& callback : callbacks_) cb[callback->name()] = callback->state();
    s["callbacks"] = cb;
    c.extra.tensors.emplace_back("rng.cpu", cpu_rng_state());
    const auto cuda = cuda_rng_states();
    for (std::size_t i = 0; i < cuda.size(); ++i)
      c.extra.tensors.emplace_back("rng.cuda." + std::to_string(i), cuda[i]);
    if (precision_->uses_scaler()) c.extra.tensors.emplace_back("amp.scaler", precision_->scaler_state());
    s["precision"] = name_of(options_.precision);
  }
  c.state = std::move(s);
  for (const auto& callback : callbacks_) callback->on_save_checkpoint(*this, c);
  write_checkpoint(dir, c);
}

void Trainer::restore(const std::filesystem::path& path, const ResumeOptions& resume) {
  Checkpoint c = read_checkpoint(path);
  const auto& s = c.state;
  const std::vector<std::string> missing = missing_for_resume(c);
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : "; ") + m;
    GB_THROW(FailedPrecondition, "checkpoint " << path.string() << " cannot resume exactly: it lacks " << list,
             "resume from a full checkpoint such as last.ckpt, or start a new run from its weights with --init-from " +
                 path.string());
  }
  const std::string model = s.value("model", "");
  GB_CHECK(
      model.empty() || model == task_->name(), FailedPrecondition,
      "checkpoint " << path.string() << " is of model \"" << model << "\", this run builds \"" << task_->name() << "\"",
      "set model.name = \"" + model + "\" or start a new run");
  load_module_state(task_->module(), c.model, s.value("trainable_only", false));
  try {
    // BackboneFinetuning had unfrozen the backbone: its group exists again before the state loads.
    if (s.contains("unfrozen_backbone") && !unfrozen_) unfreeze_backbone(s["unfrozen_backbone"].at("lr").get<double>());
    optimizer_->load_state(c.optimizer, s.at("optimizer"));
    scheduler_->load_state(s.at("scheduler"));
    epoch_ = s.at("resume").at("epoch").get<std::int64_t>();
    resume_batch_ = s.at("resume").at("batch").get<std::int64_t>();
    global_step_ = s.at("global_step").get<std::int64_t>();
    train_seconds_before_ = s.value("train_seconds", 0.0);
    samples_seen_ = s.value("samples_seen", std::int64_t{0});
    skipped_steps_ = s.value("skipped_steps", std::int64_t{0});
    if (s.contains("gradient_clip_auto")) {
      auto_clip_ = s["gradient_clip_auto"].value("threshold", 0.0);
      auto_clip_norms_ = s["gradient_clip_auto"].value("norms", std::vector<double>{});
    }
    if (s.contains("metrics")) callback_metrics_ = s["metrics"].get<std::map<std::string, double>>();
    const auto& cb = s.at("callbacks");
    for (auto& callback : callbacks_) {
      const auto& fresh = resume.fresh_callbacks;
      if (std::find(fresh.begin(), fresh.end(), callback->name()) != fresh.end()) continue;
      if (cb.contains(callback->name())) callback->load_state(cb[callback->name()]);
    }
    if (s.contains("epoch_sums")) resume_epoch_sums_ = s["epoch_sums"];
  } catch (const nlohmann::json::exception& e) {
    GB_THROW(DataLoss, "checkpoint " << path.string() << ": state.json is incomplete: " << e.what(),
             "use another checkpoint");
  }
  GB_CHECK(resume_batch_ <= num_train_batches_, FailedPrecondition,
           "checkpoint " << path.string() << " stopped at batch " << resume_batch_ << " of an epoch, but this run has "
                         << num_train_batches_ << " batches per epoch",
           "resume with the same data and batch size");
  for (const auto& [name, t] : c.extra.tensors) {
    if (name == "rng.cpu") set_cpu_rng_state(t);
  }
  std::vector<at::Tensor> cuda;
  for (std::size_t i = 0;; ++i) {
    const at::Tensor* t = c.extra.find("rng.cuda." + std::to_string(i));
    if (t == nullptr) break;
    cuda.push_back(*t);
  }
  set_cuda_rng_states(cuda);
  if (const at::Tensor* sc = c.extra.find("amp.scaler")) precision_->load_scaler_state(*sc);
  for (auto& callback : callbacks_) {
    const auto& fresh = resume.fresh_callbacks;
    if (std::find(fresh.begin(), fresh.end(), callback->name()) == fresh.end()) callback->on_load_checkpoint(*this, c);
  }
  // Rows logged after this checkpoint (by a run that went on, then crashed or was stopped) are
  // superseded by what this run logs: one history.
  logger_.drop_after(global_step_);
}

}  // namespace glassbox::train
