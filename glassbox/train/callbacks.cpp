#include "glassbox/train/callbacks.h"

#include <cmath>
#include <limits>
#include <ostream>

#include <fmt/format.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/train/trainer.h"

namespace glassbox::train {
namespace {

double worst(MetricMode mode) {
  return mode == MetricMode::kMin ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
}

std::string fmt_metric(double v) { return fmt::format("{:.4f}", v); }

}  // namespace

// ---------------------------------------------------------------- ModelCheckpoint

void CheckpointOptions::visit(FieldVisitor& v) {
  v.field("monitor", monitor, "metric that ranks checkpoints (\"\": keep the latest)");
  v.choice("mode", mode, "whether lower or higher is better");
  v.field("save_top_k", save_top_k, "best checkpoints kept (-1: all, 0: none besides last)");
  v.field("save_last", save_last, "also keep last.ckpt");
  v.field("save_weights_only", save_weights_only, "store weights only (cannot resume)");
  v.field("save_trainable_only", save_trainable_only,
          "store only trainable parameters (frozen backbones are not copied)");
  v.field("every_n_epochs", every_n_epochs, "check every N epochs");
  v.field("every_n_train_steps", every_n_train_steps, "also save every N optimiser steps (0: off)");
  v.field("dirpath", dirpath, "directory (default: <run_dir>/checkpoints)");
}

void CheckpointOptions::validate() const {
  GB_CHECK(save_top_k >= -1, InvalidArgument, "checkpoint.save_top_k must be >= -1, got " << save_top_k,
           "use 1, -1 (all) or 0");
  GB_CHECK(every_n_epochs >= 0, InvalidArgument, "checkpoint.every_n_epochs must be >= 0, got " << every_n_epochs,
           "use 1");
  GB_CHECK(every_n_train_steps >= 0, InvalidArgument, "checkpoint.every_n_train_steps must be >= 0", "use 0 (off)");
}

ModelCheckpoint::ModelCheckpoint(CheckpointOptions options)
    : options_(std::move(options)), best_score_(worst(options_.mode)) {
  options_.validate();
}

std::filesystem::path ModelCheckpoint::dir(const Trainer& t) const {
  return options_.dirpath.empty() ? t.run_dir() / "checkpoints" : std::filesystem::path(options_.dirpath);
}

bool ModelCheckpoint::better(double a, double b) const { return options_.mode == MetricMode::kMin ? a < b : a > b; }

namespace {

// True when every parameter and buffer is finite (one fused reduction per dtype group), on every
// rank of a data-parallel job.
bool weights_finite(Trainer& t) {
  std::vector<at::Tensor> floats;
  for (const auto& p : t.task()->module().parameters()) floats.push_back(p.detach());
  for (const auto& b : t.task()->module().buffers())
    if (b.is_floating_point()) floats.push_back(b.detach());
  bool finite = floats.empty() || torch::stack(at::_foreach_norm(floats, 1)).sum().isfinite().item<bool>();
  // Data-parallel: the ranks' buffers may differ (BatchNorm statistics); saving is collective, so
  // they decide together.
  if (const auto& g = t.process_group()) finite = !g->any(!finite, "agreement on the weights being finite");
  return finite;
}

// Only files of this run's own checkpoint directory are ever removed (a run forked from another
// run's checkpoint inherits nothing to delete, but the guard holds whatever the state says).
void remove_own(const std::filesystem::path& dir, const std::string& path) {
  const auto rel = std::filesystem::weakly_canonical(path).lexically_relative(std::filesystem::weakly_canonical(dir));
  if (rel.empty() || rel.native().rfind("..", 0) == 0 || rel.has_parent_path()) return;
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

}  // namespace

void ModelCheckpoint::save(Trainer& t, bool monitored) {
  if (!t.writes_files() || !t.options().enable_checkpointing || t.sanity_checking()) return;
  if (!weights_finite(t)) return;  // a non-finite model is worth nothing and must not replace a good one
  const std::string name = fmt::format("epoch={}-step={}.ckpt", t.current_epoch(), t.global_step());
  const auto d = dir(t);
  if (monitored && !options_.monitor.empty() && options_.save_top_k != 0) {
    auto it = t.callback_metrics().find(options_.monitor);
    GB_CHECK(it != t.callback_metrics().end(), FailedPrecondition,
             "checkpoint.monitor = \"" << options_.monitor << "\" was not computed",
             "monitor a logged metric: val_loss, val_acc, val_macro_f1, val_macro_ap, val_recall_<k>, train_loss (or "
             "set checkpoint.monitor = \"\")");
    const double score = it->second;
    if (!std::isfinite(score)) return;
    const bool keep_all = options_.save_top_k == -1;
    if (!keep_all && static_cast<std::int64_t>(top_.size()) >= options_.save_top_k) {
      // replace the worst kept one if this is better
      auto worst_it = std::max_element(top_.begin(), top_.end(),
                                       [&](const Saved& a, const Saved& b) { return better(a.score, b.score); });
      if (!better(score, worst_it->score)) return;
      const std::string old = worst_it->path;
      top_.erase(worst_it);
      t.save_checkpoint(d / name, options_.save_weights_only, options_.save_trainable_only);
      if (old != (d / name).string() && t.is_global_zero()) remove_own(d, old);
    } else {
      t.save_checkpoint(d / name, options_.save_weights_only, options_.save_trainable_only);
    }
    top_.push_back({(d / name).string(), score});
    if (best_path_.empty() || better(score, best_score_)) {
      best_score_ = score;
      best_path_ = (d / name).string();
    }
    last_saved_step_ = t.global_step();
  } else if (!monitored || options_.monitor.empty()) {
    if (options_.save_top_k == 0) return;
    t.save_checkpoint(d / name, options_.save_weights_only, options_.save_trainable_only);
    top_.push_back({(d / name).string(), 0.0});
    best_path_ = (d / name).string();
    if (options_.save_top_k > 0) {
      while (static_cast<std::int64_t>(top_.size()) > options_.save_top_k) {
        if (t.is_global_zero()) remove_own(d, top_.front().path);
        top_.erase(top_.begin());
      }
    }
    last_saved_step_ = t.global_step();
  }
  if (options_.save_last) save_last(t);
}

void ModelCheckpoint::save_last(Trainer& t) {
  if (!t.writes_files() || !t.options().enable_checkpointing) return;
  if (!weights_finite(t)) return;
  const auto p = dir(t) / "last.ckpt";
  t.save_checkpoint(p, options_.save_weights_only, options_.save_trainable_only);
  last_path_ = p.string();
}

void ModelCheckpoint::on_validation_end(Trainer& t) {
  if (t.sanity_checking() || options_.monitor.empty()) return;
  if (options_.every_n_epochs == 0 || (t.current_epoch() + 1) % options_.every_n_epochs != 0) return;
  if (t.callback_metrics().count(options_.monitor) == 0) return;
  if (t.batch_in_epoch() >= t.num_training_batches()) {
    pending_ = true;  // end of epoch: saved in on_train_epoch_end, after the epoch's scheduler step
    return;
  }
  save(t, true);
}

void ModelCheckpoint::on_train_epoch_end(Trainer& t) {
  const bool epoch_complete = t.batch_in_epoch() >= t.num_training_batches();
  if (!epoch_complete) return;
  // Monitoring a metric that is not validated (e.g. train_loss) saves here; unmonitored too.
  const bool monitored_here = !options_.monitor.empty() && options_.monitor.rfind("val_", 0) != 0;
  if (pending_) {
    pending_ = false;
    save(t, true);
  } else if (options_.every_n_epochs > 0 && (t.current_epoch() + 1) % options_.every_n_epochs == 0) {
    if (options_.monitor.empty())
      save(t, false);
    else if (monitored_here)
      save(t, true);
  }
  if (options_.save_last && last_saved_step_ != t.global_step()) save_last(t);
}

void ModelCheckpoint::on_train_batch_end(Trainer& t, const StepOutput&, const data::Batch&) {
  if (options_.every_n_train_steps > 0 && t.global_step() > 0 && t.global_step() % options_.every_n_train_steps == 0 &&
      last_saved_step_ != t.global_step()) {
    save(t, false);
  }
}

void ModelCheckpoint::on_train_end(Trainer& t) {
  if (options_.save_last) save_last(t);
}

nlohmann::json ModelCheckpoint::state() const {
  nlohmann::json top = nlohmann::json::array();
  for (const auto& s : top_) top.push_back({{"path", s.path}, {"score", s.score}});
  return {{"best_model_path", best_path_}, {"best_model_score", best_score_}, {"top", top},
          {"last_model_path", last_path_}, {"monitor", options_.monitor},     {"mode", name_of(options_.mode)}};
}

void ModelCheckpoint::load_state(const nlohmann::json& s) {
  best_path_ = s.value("best_model_path", "");
  if (s.contains("best_model_score") && s["best_model_score"].is_number())
    best_score_ = s["best_model_score"].get<double>();
  last_path_ = s.value("last_model_path", "");
  top_.clear();
  if (s.contains("top"))
    for (const auto& e : s["top"]) top_.push_back({e.at("path").get<std::string>(), e.at("score").get<double>()});
}

// ---------------------------------------------------------------- EarlyStopping

void EarlyStoppingOptions::visit(FieldVisitor& v) {
  v.field("enabled", enabled, "stop when the monitored metric stops improving");
  v.field("monitor", monitor, "metric to watch");
  v.choice("mode", mode, "whether lower or higher is better");
  v.field("min_delta", min_delta, "smallest change that counts as an improvement");
  v.field("patience", patience, "validation checks without improvement before stopping");
  v.field("check_finite", check_finite, "stop when the metric becomes NaN or infinite");
  v.field("stopping_threshold", stopping_threshold,
          "stop once the metric is better than this (with use_stopping_threshold)");
  v.field("use_stopping_threshold", use_stopping_threshold, "enable stopping_threshold");
  v.field("divergence_threshold", divergence_threshold,
          "stop once the metric is worse than this (with use_divergence_threshold)");
  v.field("use_divergence_threshold", use_divergence_threshold, "enable divergence_threshold");
}

void EarlyStoppingOptions::validate() const {
  GB_CHECK(patience >= 0, InvalidArgument, "early_stopping.patience must be >= 0, got " << patience,
           "use 3 (Lightning's default)");
  GB_CHECK(min_delta >= 0, InvalidArgument, "early_stopping.min_delta must be >= 0, got " << min_delta,
           "use 0 or a small positive number");
}

EarlyStopping::EarlyStopping(EarlyStoppingOptions options) : options_(std::move(options)), best_(worst(options_.mode)) {
  options_.validate();
}

void EarlyStopping::on_validation_end(Trainer& t) {
  if (t.sanity_checking()) return;
  auto it = t.callback_metrics().find(options_.monitor);
  GB_CHECK(it != t.callback_metrics().end(), FailedPrecondition,
           "early_stopping.monitor = \"" << options_.monitor << "\" was not computed", "monitor val_loss or val_acc");
  const double v = it->second;
  const bool min = options_.mode == MetricMode::kMin;
  if (options_.check_finite && !std::isfinite(v)) {
    reason_ = fmt::format("{} = {} is not finite; previous best {}", options_.monitor, v, fmt_metric(best_));
  } else if (options_.use_stopping_threshold &&
             (min ? v < options_.stopping_threshold : v > options_.stopping_threshold)) {
    reason_ = fmt::format("stopping threshold reached: {} = {} {} {}", options_.monitor, fmt_metric(v), min ? "<" : ">",
                          options_.stopping_threshold);
  } else if (options_.use_divergence_threshold &&
             (min ? v > options_.divergence_threshold : v < options_.divergence_threshold)) {
    reason_ = fmt::format("divergence threshold passed: {} = {} {} {}", options_.monitor, fmt_metric(v),
                          min ? ">" : "<", options_.divergence_threshold);
  } else if (min ? v < best_ - options_.min_delta : v > best_ + options_.min_delta) {
    best_ = v;
    wait_ = 0;
    return;
  } else {
    ++wait_;
    if (wait_ < options_.patience) return;
    reason_ = fmt::format("{} did not improve by more than {} for {} validation checks; best {}", options_.monitor,
                          options_.min_delta, wait_, fmt_metric(best_));
  }
  stopped_epoch_ = t.current_epoch();
  t.request_stop("early stopping: " + reason_,
                 options_.check_finite && !std::isfinite(v) ? StopKind::kNonFinite : StopKind::kEarlyStopping);
}

nlohmann::json EarlyStopping::state() const {
  return {{"best", std::isfinite(best_) ? nlohmann::json(best_) : nlohmann::json(nullptr)},
          {"wait", wait_},
          {"stopped_epoch", stopped_epoch_},
          {"reason", reason_},
          {"patience", options_.patience}};
}

void EarlyStopping::load_state(const nlohmann::json& s) {
  best_ = s.contains("best") && s["best"].is_number() ? s["best"].get<double>() : worst(options_.mode);
  wait_ = s.value("wait", std::int64_t{0});
  stopped_epoch_ = s.value("stopped_epoch", std::int64_t{-1});
  reason_ = s.value("reason", "");
}

// ---------------------------------------------------------------- LearningRateMonitor

void LearningRateMonitor::on_train_batch_end(Trainer& t, const StepOutput&, const data::Batch&) {
  if (t.optimizer() == nullptr || t.global_step() % t.options().log_every_n_steps != 0 || t.options().fast_dev_run > 0)
    return;
  nlohmann::json row = {{"step", t.global_step()}, {"epoch", t.current_epoch()}};
  for (std::size_t i = 0; i < t.optimizer()->num_groups(); ++i)
    row["lr-group" + std::to_string(i)] = t.optimizer()->lr(i);
  t.logger().log(row);
}

// ---------------------------------------------------------------- ProgressBar

ProgressBarCallback::ProgressBarCallback(std::ostream& out) : bar_(out, true) {}

namespace {

std::string loss_text(double v) { return std::isfinite(v) ? fmt::format("loss {:.4f}", v) : "loss non-finite"; }

}  // namespace

void ProgressBarCallback::on_train_epoch_start(Trainer& t) {
  const std::string epochs = t.options().max_epochs > 0 ? std::to_string(t.options().max_epochs) : "?";
  bar_.start(fmt::format("epoch {}/{}", t.current_epoch() + 1, epochs), t.num_training_batches());
  epoch_start_ = std::chrono::steady_clock::now();
  if (fit_batches_ < 0) fit_start_ = epoch_start_;
  if (fit_batches_ < 0) fit_batches_ = 0;
  epoch_samples_ = 0;
  batches_ = 0;
}

void ProgressBarCallback::on_fit_start(Trainer&) { fit_batches_ = -1; }

void ProgressBarCallback::on_train_batch_end(Trainer& t, const StepOutput& out, const data::Batch& batch) {
  epoch_samples_ += batch.size();
  ++batches_;
  ++fit_batches_;
  if (batches_ % 20 == 0 || t.batch_in_epoch() == t.num_training_batches()) {
    last_loss_ = out.loss.item<double>();
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - epoch_start_).count();
    // The ETA of the whole run: the batches left in this epoch and the epochs after it (bounded by
    // max_steps), at this fit's pace so far.
    const std::int64_t per_epoch = t.num_training_batches();
    std::int64_t left = per_epoch - t.batch_in_epoch();
    if (t.options().max_epochs > 0) left += (t.options().max_epochs - t.current_epoch() - 1) * per_epoch;
    if (t.options().max_steps > 0) {
      const std::int64_t steps_left = std::max<std::int64_t>(0, t.options().max_steps - t.global_step());
      left = std::min(left, steps_left * t.options().accumulate_grad_batches);
    }
    const double fit_s = std::chrono::duration<double>(now - fit_start_).count();
    bar_.set_eta(t.options().max_epochs > 0 || t.options().max_steps > 0
                     ? fit_s * static_cast<double>(left) / static_cast<double>(std::max<std::int64_t>(1, fit_batches_))
                     : -1.0);
    bar_.update(t.batch_in_epoch(), loss_text(last_loss_), s > 0 ? static_cast<double>(epoch_samples_) / s : 0.0);
  }
}

void ProgressBarCallback::on_train_epoch_end(Trainer& t) {
  const auto& m = t.callback_metrics();
  std::string text;
  for (const char* k : {"train_loss", "val_loss", "val_acc", "val_rmse", "val_r2", "val_micro_f1"}) {
    auto it = m.find(k);
    if (it != m.end()) text += fmt::format("{}{} {:.4f}", text.empty() ? "" : " ", k, it->second);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start_).count();
  text += fmt::format(" {} samples/s", format_count(s > 0 ? static_cast<double>(epoch_samples_) / s : 0.0));
  if (t.should_stop() && !t.stop_reason().empty()) text += " (stopped: " + t.stop_reason() + ")";
  bar_.finish(text, std::min(t.batch_in_epoch(), t.num_training_batches()));
}

// ---------------------------------------------------------------- ModelSummary

std::string summarize_model(torch::nn::Module& module, const std::vector<std::int64_t>& sample_shape,
                            c10::Device device, const std::function<at::Tensor(const at::Tensor&)>& forward) {
  // Output shapes: when the module's forward is the chain of its leaf modules (true for
  // sequential models), run the chain on a dummy input and record each shape; the result is
  // verified against the module's own forward, otherwise shapes are left out.
  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> leaves;
  for (const auto& item : module.named_modules("", false)) {
    if (item.value()->children().empty()) leaves.emplace_back(item.key(), item.value());
  }
  std::map<std::string, std::string> shapes;
  if (!sample_shape.empty()) {
    const bool was_training = module.is_training();
    module.eval();
    try {
      torch::NoGradGuard ng;
      std::vector<std::int64_t> shape = {2};
      shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
      at::Tensor x = torch::zeros(shape, torch::TensorOptions().device(device));
      bool ok = true;
      at::Tensor y = x;
      std::map<std::string, std::string> chain;
      for (auto& [name, leaf] : leaves) {
        auto* any = leaf.get();
        at::Tensor out;
        if (auto* l = any->as<torch::nn::Linear>())
          out = l->forward(y);
        else if (auto* c = any->as<torch::nn::Conv2d>())
          out = c->forward(y);
        else if (auto* b = any->as<torch::nn::BatchNorm1d>())
          out = b->forward(y);
        else if (auto* b2 = any->as<torch::nn::BatchNorm2d>())
          out = b2->forward(y);
        else if (auto* g = any->as<torch::nn::GroupNorm>())
          out = g->forward(y);
        else if (auto* ln = any->as<torch::nn::LayerNorm>())
          out = ln->forward(y);
        else if (auto* r = any->as<torch::nn::ReLU>())
          out = r->forward(y.clone());
        else if (auto* ge = any->as<torch::nn::GELU>())
          out = ge->forward(y);
        else if (auto* th = any->as<torch::nn::Tanh>())
          out = th->forward(y);
        else if (auto* si = any->as<torch::nn::SiLU>())
          out = si->forward(y);
        else if (auto* lr = any->as<torch::nn::LeakyReLU>())
          out = lr->forward(y);
        else if (auto* d = any->as<torch::nn::Dropout>())
          out = d->forward(y);
        else if (auto* mp = any->as<torch::nn::MaxPool2d>())
          out = mp->forward(y);
        else if (auto* f = any->as<torch::nn::Flatten>())
          out = f->forward(y);
        else {
          ok = false;
          break;
        }
        y = out;
        std::ostringstream os;
        os << out.sizes();
        chain[name] = os.str();
      }
      if (ok && forward) {
        // The chain must reproduce the real forward's output, else its shapes are not trusted.
        at::Tensor ref = forward(x);
        ok = ref.sizes() == y.sizes() && torch::allclose(ref, y, 1e-4, 1e-5);
      }
      if (ok) shapes = chain;
    } catch (const std::exception&) {
      shapes.clear();
    }
    if (was_training) module.train();
  }
  std::ostringstream os;
  os << fmt::format("  {:<4} {:<32} {:<14} {:>12}  {}\n", "#", "name", "type", "params", "output shape");
  std::int64_t total = 0, trainable = 0;
  int i = 0;
  for (auto& [name, leaf] : leaves) {
    std::int64_t n = 0;
    for (const auto& p : leaf->parameters(false)) n += p.numel();
    std::string type = leaf->name();
    if (auto pos = type.rfind("::"); pos != std::string::npos) type = type.substr(pos + 2);
    if (type.size() > 4 && type.compare(type.size() - 4, 4, "Impl") == 0) type.resize(type.size() - 4);
    auto it = shapes.find(name);
    os << fmt::format("  {:<4} {:<32} {:<14} {:>12}  {}\n", i++, name, type, n, it == shapes.end() ? "-" : it->second);
  }
  for (const auto& p : module.parameters(true)) {
    total += p.numel();
    if (p.requires_grad()) trainable += p.numel();
  }
  os << fmt::format("  {} parameters ({} trainable, {} frozen), {:.2f} MB as float32\n", total, trainable,
                    total - trainable, static_cast<double>(total) * 4.0 / 1e6);
  return os.str();
}

ModelSummary::ModelSummary(std::ostream& out, std::vector<std::int64_t> sample_shape,
                           std::function<at::Tensor(const at::Tensor&)> forward)
    : out_(out), sample_shape_(std::move(sample_shape)), forward_(std::move(forward)) {}

void ModelSummary::on_fit_start(Trainer& t) {
  if (t.task() == nullptr || !t.options().enable_model_summary) return;
  out_ << "model: " << t.task()->name() << "\n"
       << summarize_model(t.task()->module(), sample_shape_, t.device(), forward_) << std::flush;
}

// ---------------------------------------------------------------- Timer

TimerCallback::TimerCallback(double duration_s) : duration_s_(duration_s) {}

void TimerCallback::on_fit_start(Trainer&) { mark_ = std::chrono::steady_clock::now(); }
void TimerCallback::on_train_epoch_start(Trainer&) { mark_ = std::chrono::steady_clock::now(); }
void TimerCallback::on_train_epoch_end(Trainer&) {
  train_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - mark_).count();
  mark_ = std::chrono::steady_clock::now();
}
void TimerCallback::on_validation_start(Trainer&) {
  const auto now = std::chrono::steady_clock::now();
  train_s_ += std::chrono::duration<double>(now - mark_).count();
  mark_ = now;
}
void TimerCallback::on_validation_end(Trainer&) {
  const auto now = std::chrono::steady_clock::now();
  val_s_ += std::chrono::duration<double>(now - mark_).count();
  mark_ = now;
}
void TimerCallback::on_train_batch_end(Trainer& t, const StepOutput&, const data::Batch&) {
  if (duration_s_ <= 0) return;
  const double elapsed =
      train_s_ + val_s_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - mark_).count();
  if (elapsed >= duration_s_)
    t.request_stop(fmt::format("Timer: {:.1f} s elapsed (limit {:.1f} s)", elapsed, duration_s_), StopKind::kMaxTime);
}
nlohmann::json TimerCallback::state() const { return {{"train_seconds", train_s_}, {"validate_seconds", val_s_}}; }
void TimerCallback::load_state(const nlohmann::json& s) {
  train_s_ = s.value("train_seconds", 0.0);
  val_s_ = s.value("validate_seconds", 0.0);
}

}  // namespace glassbox::train
