#include "glassbox/inspect/probes.h"

#include <algorithm>
#include <cmath>
#include <ostream>

#include <fmt/format.h>
#include <torch/torch.h>

#include "glassbox/inspect/tensorboard.h"
#include "glassbox/train/trainer.h"

namespace glassbox::inspect {

namespace {

nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

double median_of_last(const std::vector<std::pair<std::int64_t, double>>& v, std::size_t n) {
  std::vector<double> x;
  for (std::size_t i = v.size() > n ? v.size() - n : 0; i < v.size(); ++i)
    if (std::isfinite(v[i].second)) x.push_back(v[i].second);
  return quantile(std::move(x), 0.5);
}

}  // namespace

ProbeOptions ProbeOptions::from(const train::DiagnosticsOptions& d) {
  ProbeOptions o;
  o.every_n_steps = d.probe_every_n_steps;
  o.activations = d.activations;
  o.histograms = d.histograms;
  o.histogram_every_n_steps = d.histogram_every_n_steps;
  o.grad_norm_every_step = d.grad_norm_every_step;
  o.dead_after_probes = d.dead_after_probes;
  o.grad_norm_low = d.grad_norm_low;
  o.grad_norm_high = d.grad_norm_high;
  o.images = d.images;
  return o;
}

nlohmann::json ProbeRecord::to_json() const {
  nlohmann::json j = {
      {"step", step}, {"epoch", epoch}, {"batch_size", batch_size}, {"loss", num(loss)}, {"grad_norm", num(grad_norm)}};
  j["activations"] = nlohmann::json::array();
  for (const auto& a : activations) {
    nlohmann::json aj = a.stats.to_json();
    aj["layer"] = a.layer;
    aj["op"] = a.op;
    aj["type"] = a.type;
    aj["shape"] = a.shape;
    j["activations"].push_back(std::move(aj));
  }
  j["parameters"] = nlohmann::json::array();
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    nlohmann::json pj = parameters[i].to_json();
    pj["update_ratio"] = i < update_ratio.size() ? num(update_ratio[i]) : nlohmann::json(nullptr);
    j["parameters"].push_back(std::move(pj));
  }
  return j;
}

ProbeCallback::ProbeCallback(ProbeOptions options, EventWriter* writer, std::filesystem::path jsonl,
                             std::ostream* alerts)
    : options_(options), writer_(writer), jsonl_path_(std::move(jsonl)), alert_out_(alerts) {}

ProbeCallback::~ProbeCallback() = default;

void ProbeCallback::on_fit_start(train::Trainer& t) {
  map_ = std::make_unique<LayerMap>(t.task()->module());
  trainable_.clear();
  for (const auto& p : map_->parameters())
    if (p.tensor.requires_grad()) trainable_.push_back({p.name, p.tensor});
  zero_grad_streak_.assign(trainable_.size(), 0);
  dead_raised_.assign(trainable_.size(), false);
  if (!jsonl_path_.empty() && !jsonl_.is_open()) jsonl_.open(jsonl_path_, std::ios::app);
}

bool ProbeCallback::probe_due(const train::Trainer& t) const {
  return options_.every_n_steps > 0 && t.global_step() % options_.every_n_steps == 0 && probed_step_ != t.global_step();
}

void ProbeCallback::on_train_batch_start(train::Trainer& t, const data::Batch& batch) {
  if (writer_ != nullptr && options_.images > 0 && !images_written_) {
    images_written_ = true;
    const at::Tensor& x = batch.inputs;
    if (x.is_floating_point() && (x.dim() == 4 || x.dim() == 3) && x.size(0) > 0) {
      at::Tensor imgs = x.slice(0, 0, std::min<std::int64_t>(options_.images, x.size(0))).detach().to(torch::kFloat);
      if (imgs.dim() == 3) imgs = imgs.unsqueeze(1);
      if (imgs.size(1) == 1 || imgs.size(1) == 3) {
        // Min-max over the shown batch so normalised inputs are visible.
        imgs = torch::nan_to_num(imgs, 0.0, 0.0, 0.0);
        const auto lo = imgs.min(), hi = imgs.max();
        imgs = (imgs - lo) / (hi - lo).clamp_min(1e-12);
        writer_->add_image("inputs/train_batch", imgs, t.global_step());
      }
    }
  }
  if (t.sanity_checking() || !probe_due(t)) return;
  probing_ = true;
  probed_step_ = t.global_step();
  current_ = ProbeRecord{};
  current_.step = t.global_step();
  current_.epoch = t.current_epoch();
  current_.batch_size = batch.size();
  current_.grad_norm = NAN;
  histogram_step_ = options_.histograms && writer_ != nullptr &&
                    t.global_step() % std::max<std::int64_t>(1, options_.histogram_every_n_steps) == 0;
  if (options_.activations) {
    RecorderOptions ro;
    ro.stats = true;
    ro.keep_outputs = histogram_step_;
    recorder_ = std::make_unique<ForwardRecorder>(*map_, ro);
  }
}

void ProbeCallback::on_before_backward(train::Trainer& t, const at::Tensor& loss) {
  if (recorder_ && recorder_->active()) recorder_->stop();
  if (probing_ && probed_step_ == t.global_step() && !loss_.defined()) loss_ = loss.detach();
}

void ProbeCallback::on_after_backward(train::Trainer& t) {
  if (options_.grad_norm_every_step || probing_) t.request_grad_norm();
}

void ProbeCallback::on_before_optimizer_step(train::Trainer& t) {
  const double g = t.last_grad_norm();
  const std::int64_t step = t.global_step();
  if (!std::isnan(g)) {
    grad_norms_.emplace_back(step, g);
    if (writer_ != nullptr) writer_->add_scalar("grad_norm/total", g, step);
    if (!exploding_raised_ && std::isfinite(g) && g > options_.grad_norm_high) {
      exploding_raised_ = true;
      raise({"exploding-gradients", step, "",
             fmt::format("gradient norm {:.4g} at step {} is above {:g}: explosion is near (lower the learning rate or "
                         "clip, e.g. "
                         "trainer.gradient_clip_auto_steps = 100)",
                         g, step, options_.grad_norm_high)});
    }
    // Vanishing: the median over a window of at least 20 steps stays below the low mark.
    if (!vanishing_raised_ && grad_norms_.size() >= 20 && grad_norms_.size() % 10 == 0) {
      const double med = median_of_last(grad_norms_, 50);
      if (std::isfinite(med) && med < options_.grad_norm_low) {
        vanishing_raised_ = true;
        raise({"vanishing-gradients", step, "",
               fmt::format("median gradient norm {:.3g} over the last {} steps is below {:g}: the learning rate may be "
                           "too small, or "
                           "gradients vanish",
                           med, std::min<std::size_t>(grad_norms_.size(), 50), options_.grad_norm_low)});
      }
    }
  }
  if (!probing_ || probed_step_ != step) return;
  current_.grad_norm = g;
  current_.parameters = parameter_stats(trainable_);
  before_.clear();
  torch::NoGradGuard no_grad;
  for (const auto& p : trainable_) before_.push_back(p.tensor.detach().clone());
  for (std::size_t i = 0; i < current_.parameters.size(); ++i) {
    const auto& ps = current_.parameters[i];
    if (!ps.has_grad) continue;
    zero_grad_streak_[i] = ps.grad.std == 0.0 ? zero_grad_streak_[i] + 1 : 0;
    if (zero_grad_streak_[i] >= options_.dead_after_probes && !dead_raised_[i]) {
      dead_raised_[i] = true;
      raise({"dead-layer", step, ps.name,
             fmt::format("parameter {} has had a constant gradient (std 0, |g| max {:.3g}) for {} probes up to step "
                         "{}: the layer is dead",
                         ps.name, ps.grad.max_abs, zero_grad_streak_[i], step)});
    }
  }
}

void ProbeCallback::on_train_batch_end(train::Trainer& t, const train::StepOutput&, const data::Batch&) {
  if (probing_ && t.global_step() > probed_step_) finish_record(t);
}

void ProbeCallback::finish_record(train::Trainer& t) {
  probing_ = false;
  if (!before_.empty()) {
    std::vector<at::Tensor> after;
    after.reserve(trainable_.size());
    for (const auto& p : trainable_) after.push_back(p.tensor);
    current_.update_ratio = update_ratios(before_, after);
    before_.clear();
  }
  if (loss_.defined()) {
    current_.loss = loss_.to(torch::kDouble).item<double>();
    loss_ = at::Tensor();
  }
  if (recorder_) {
    recorder_->stop();
    const auto outs = recorder_->layer_outputs();
    std::vector<at::Tensor> rows;
    std::vector<const OpRecord*> used;
    for (const OpRecord* r : outs) {
      // Module outputs carry the batch dimension; scalars such as the loss are not layers.
      if (!r->stats.defined() || r->shape.empty() || r->shape[0] != current_.batch_size) continue;
      rows.push_back(r->stats);
      used.push_back(r);
    }
    const auto stats = activation_stats_to_host(rows);
    for (std::size_t i = 0; i < used.size(); ++i) {
      LayerActivation a;
      a.layer = used[i]->layer;
      a.op = used[i]->op;
      a.type = used[i]->unit >= 0 ? map_->units()[static_cast<std::size_t>(used[i]->unit)].type : "";
      a.shape = used[i]->shape;
      a.stats = stats[i];
      current_.activations.push_back(std::move(a));
    }
    if (histogram_step_) {
      for (const OpRecord* r : used)
        if (r->output.defined()) writer_->add_histogram("activations/" + r->layer, r->output, current_.step);
    }
    recorder_.reset();
  }
  write_tensorboard(current_);
  if (jsonl_.is_open()) {
    jsonl_ << current_.to_json().dump() << "\n";
    jsonl_.flush();
  }
  history_.push_back(std::move(current_));
  if (history_.size() > options_.max_history) history_.erase(history_.begin());
  (void)t;
}

void ProbeCallback::write_tensorboard(const ProbeRecord& r) {
  if (writer_ == nullptr) return;
  for (std::size_t i = 0; i < r.parameters.size(); ++i) {
    const auto& p = r.parameters[i];
    writer_->add_scalar("weight_norm/" + p.name, p.value.norm, r.step);
    if (p.has_grad) writer_->add_scalar("grad_norm/" + p.name, p.grad.norm, r.step);
    if (i < r.update_ratio.size() && std::isfinite(r.update_ratio[i]))
      writer_->add_scalar("update_ratio/" + p.name, r.update_ratio[i], r.step);
    if (histogram_step_) {
      writer_->add_histogram("weights/" + p.name, trainable_[i].tensor, r.step);
      const at::Tensor& g = trainable_[i].tensor.grad();
      if (g.defined()) writer_->add_histogram("grads/" + p.name, g, r.step);
    }
  }
  for (const auto& a : r.activations) {
    writer_->add_scalar("activation_std/" + a.layer, a.stats.std, r.step);
    if (std::isfinite(a.stats.dead_fraction))
      writer_->add_scalar("dead_fraction/" + a.layer, a.stats.dead_fraction, r.step);
  }
}

void ProbeCallback::on_train_end(train::Trainer&) {
  if (recorder_) recorder_->stop();
  if (jsonl_.is_open()) jsonl_.flush();
  if (writer_ != nullptr) writer_->flush();
}

void ProbeCallback::on_exception(train::Trainer&, const std::exception&) {
  if (recorder_) recorder_->stop();
  recorder_.reset();
}

void ProbeCallback::raise(Alert a) {
  if (alert_out_ != nullptr) *alert_out_ << "glassbox: warning: " << a.message << "\n" << std::flush;
  alerts_.push_back(std::move(a));
}

double ProbeCallback::suggested_clip() const {
  std::vector<double> v;
  for (std::size_t i = 0; i < grad_norms_.size() && v.size() < static_cast<std::size_t>(options_.clip_steps); ++i)
    if (std::isfinite(grad_norms_[i].second)) v.push_back(grad_norms_[i].second);
  return quantile(std::move(v), 0.95);
}

}  // namespace glassbox::inspect
