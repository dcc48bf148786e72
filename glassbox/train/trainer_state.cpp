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
  // Data-parallel: every rank comes here. The ranks' RNG states and the epoch's running sums are
  // gathered, rank 0 writes, and a barrier keeps the others from running ahead (or reading the
  // checkpoint) before it is complete.
  const bool epoch_running = batch_in_epoch_ < num_train_batches_ && batch_in_epoch_ > 0 && epoch_loss_sum_.defined();
  at::Tensor rng_all, cuda_rng_all;
  double sums[4] = {epoch_loss_sum_.defined() ? epoch_loss_sum_.item<double>() : 0.0,
                    static_cast<double>(epoch_loss_count_), static_cast<double>(epoch_correct_),
                    static_cast<double>(epoch_seen_)};
  if (group_ && !weights_only) {
    rng_all = group_->all_gather_rows(cpu_rng_state().unsqueeze(0), "gather of the RNG states");
    if (device_.is_cuda()) {
      const auto states = cuda_rng_states();
      cuda_rng_all = group_->all_gather_rows(states.at(static_cast<std::size_t>(device_.index())).unsqueeze(0),
                                             "gather of the RNG states");
    }
    at::Tensor t = torch::tensor({sums[0], sums[1], sums[2], sums[3]}, torch::kDouble);
    std::vector<at::Tensor> v{t};
    group_->all_reduce(v, dist::ReduceOp::kSum, "all-reduce of the epoch's sums");
    for (int i = 0; i < 4; ++i) sums[i] = t[i].item<double>();
  }
  if (!is_global_zero()) {
    group_->barrier("checkpoint save (rank 0 writes)");
    return;
  }
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
  // The world it was written in: a resume with another number of ranks maps the position in the
  // epoch by samples (batch x batch_size x world_size).
  s["world_size"] = world_size();
  s["batch_size"] = train_loader_ ? train_loader_->options().batch_size : 0;
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
    if (!epoch_done && epoch_running) {
      s["epoch_sums"] = {{"loss_sum", sums[0]},
                         {"loss_count", static_cast<std::int64_t>(sums[1])},
                         {"correct", static_cast<std::int64_t>(sums[2])},
                         {"seen", static_cast<std::int64_t>(sums[3])}};
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
    // The other ranks' generators ("rng.cpu" is rank 0's).
    for (std::int64_t r = 1; rng_all.defined() && r < rng_all.size(0); ++r)
      c.extra.tensors.emplace_back("rng.cpu.rank" + std::to_string(r), rng_all[r].contiguous());
    for (std::int64_t r = 1; cuda_rng_all.defined() && r < cuda_rng_all.size(0); ++r)
      c.extra.tensors.emplace_back("rng.cuda.rank" + std::to_string(r), cuda_rng_all[r].contiguous());
    if (precision_->uses_scaler()) c.extra.tensors.emplace_back("amp.scaler", precision_->scaler_state());
    s["precision"] = name_of(options_.precision);
  }
  c.state = std::move(s);
  for (const auto& callback : callbacks_) callback->on_save_checkpoint(*this, c);
  write_checkpoint(dir, c);
  if (group_) group_->barrier("checkpoint save (rank 0 writes)");
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
    // The epoch's sums are the global ones: rank 0 carries them on, the others start from 0.
    if (s.contains("epoch_sums") && is_global_zero()) resume_epoch_sums_ = s["epoch_sums"];
  } catch (const nlohmann::json::exception& e) {
    GB_THROW(DataLoss, "checkpoint " << path.string() << ": state.json is incomplete: " << e.what(),
             "use another checkpoint");
  }
  const std::int64_t saved_world = s.value("world_size", std::int64_t{1});
  // (Checkpoints from before data-parallel training lack batch_size: a resume keeps it.)
  const std::int64_t saved_batch = s.value("batch_size", train_loader_->options().batch_size);
  resumed_mid_epoch_ = resume_batch_ > 0;
  resumed_world_size_ = saved_world;
  if (saved_world != world_size() && resume_batch_ > 0 && saved_batch > 0) {
    // Another number of ranks: go on from the same place in the epoch's order, rounded down to a
    // whole global batch (a few samples are seen twice, none skipped).
    const std::int64_t samples = resume_batch_ * saved_batch * saved_world;
    resume_batch_ = samples / (train_loader_->options().batch_size * world_size());
  }
  GB_CHECK(resume_batch_ <= num_train_batches_, FailedPrecondition,
           "checkpoint " << path.string() << " stopped at batch " << resume_batch_ << " of an epoch, but this run has "
                         << num_train_batches_ << " batches per epoch",
           "resume with the same data and batch size");
  if (is_global_zero()) {
    if (const at::Tensor* t = c.extra.find("rng.cpu")) set_cpu_rng_state(*t);
    std::vector<at::Tensor> cuda;
    for (std::size_t i = 0;; ++i) {
      const at::Tensor* t = c.extra.find("rng.cuda." + std::to_string(i));
      if (t == nullptr) break;
      cuda.push_back(*t);
    }
    set_cuda_rng_states(cuda);
  } else if (saved_world == world_size()) {
    // The same world: each rank continues its own generators. Another world keeps the per-rank
    // seeding fit() did (the resume is exact only with the same number of ranks).
    const std::string r = std::to_string(global_rank());
    if (const at::Tensor* t = c.extra.find("rng.cpu.rank" + r)) set_cpu_rng_state(*t);
    if (const at::Tensor* t = c.extra.find("rng.cuda.rank" + r); t != nullptr && device_.is_cuda()) {
      auto states = cuda_rng_states();
      states.at(static_cast<std::size_t>(device_.index())) = *t;
      set_cuda_rng_states(states);
    }
  }
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
