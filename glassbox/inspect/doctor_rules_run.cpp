// The doctor's rules over the instrumented run's optimisation: failures, non-finite values,
// gradients, updates, the learning rate, weight decay, dead units. Also make_facts, which
// derives the quantities these rules share. One function per finding id.
// Tested in doctor_rules_test.cpp (hand-built facts) and doctor_test.cpp / lab_test.cpp (end to end).
#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "glassbox/inspect/doctor_internal.h"
#include "glassbox/inspect/stats.h"

namespace glassbox::inspect::detail {

namespace {

bool is_relu_like(const LayerActivation& a) {
  return a.type == "ReLU" || a.type == "ReLU6" || a.op == "aten::relu" || a.op == "aten::relu_" ||
         a.op == "aten::threshold";
}

// Parameters that are weight matrices/kernels (not biases or norm scales), by size.
bool is_weight(const ParameterStats& p) {
  return p.numel >= 64 && p.name.size() >= 6 && p.name.compare(p.name.size() - 6, 6, "weight") == 0;
}

std::string first_few(const std::vector<std::string>& v, std::size_t n = 4) {
  return fmt::format("{}{}", fmt::join(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(std::min(n, v.size())), ", "),
                     v.size() > n ? ", ..." : "");
}

// Which kind of failure the run's error is; "" when none.
std::string failure_kind(const std::string& e) {
  if (e.empty()) return "";
  if (e.find("more than 1 value per channel") != std::string::npos) return "batchnorm-batch-of-one";
  if (e.find("same device") != std::string::npos || e.find("scalar type") != std::string::npos ||
      e.find("same dtype") != std::string::npos || e.find("two devices") != std::string::npos)
    return "device-mismatch";
  if (e.find("out of bounds") != std::string::npos || e.find("Target") != std::string::npos)
    return "label-out-of-range";
  return "run-failed";
}

std::vector<Finding> run_failed(const Facts& f) {
  if (failure_kind(f.run.error) != "run-failed") return {};
  return {Finding{.id = "run-failed",
                  .severity = Severity::kError,
                  .confidence = 0.5,
                  .where = {{"step", f.run.failing_step}},
                  .evidence = fmt::format("the instrumented run failed at step {}: {}", f.run.failing_step,
                                          first_line_of(f.run.error)),
                  .fix = "fix the error above, then run the doctor again"}};
}

std::vector<Finding> device_mismatch(const Facts& f) {
  const RunFacts& r = f.run;
  if (failure_kind(r.error) != "device-mismatch") return {};
  Finding out{
      .id = "device-mismatch",
      .severity = Severity::kError,
      .confidence = 0.9,
      .where = {{"step", r.failing_step}, {"op", r.failing_op}},
      .evidence = fmt::format(
          "{} failed in {}{}: its inputs were {} ({})", r.failing_op.empty() ? "an op" : r.failing_op,
          r.failing_layer.empty() ? "a function between modules" : "module \"" + r.failing_layer + "\"",
          r.failing_type.empty() ? "" : " (" + r.failing_type + ")", r.failing_inputs, first_line_of(r.error)),
      .fix =
          "move or cast the tensors so that they meet on one device and dtype (module.to(device, dtype), "
          "inputs.to(...)) — look for tensors created inside forward without the input's options",
      .actions = {{"model.code", "repair"}},
  };
  if (!r.failing_layer.empty()) out.where["layer"] = r.failing_layer;
  return {out};
}

bool low_precision(const Facts& f) { return f.config.trainer.precision != train::PrecisionMode::k32; }

std::vector<Finding> low_precision_overflow(const Facts& f) {
  std::vector<Finding> out;
  const auto& e = f.run.nonfinite;
  if (e && low_precision(f) && (e->kind == "activation" || e->kind == "gradient"))
    out.push_back(Finding{
        .id = "low-precision-overflow",
        .severity = Severity::kError,
        .confidence = 0.85,
        .where = {{"step", e->step}, {"layer", e->layer}, {"op", e->op}},
        .evidence = fmt::format("under precision {}: {}", name_of(f.config.trainer.precision), e->message),
        .fix = "keep that op in float32 (autocast excludes it when you cast its input .to(float)), scale inputs down, "
               "or train in precision 32",
        .actions = {{"trainer.precision", "wider"}},
    });
  const RunFacts& r = f.run;
  if (r.scaler_skips > 0 && r.steps > 0 && static_cast<double>(r.scaler_skips) > 0.25 * static_cast<double>(r.steps))
    out.push_back(Finding{
        .id = "low-precision-overflow",
        .severity = Severity::kError,
        .confidence = 0.8,
        .where = {{"steps_skipped", r.scaler_skips}},
        .evidence = fmt::format("the fp16 gradient scaler found Inf/NaN gradients in {} of {} steps and skipped them",
                                r.scaler_skips, r.steps),
        .fix =
            "train in bf16-mixed or 32, or find the op that overflows (glassbox doctor with precision = \"32\" shows "
            "the magnitudes)",
        .actions = {{"trainer.precision", "wider"}},
    });
  return out;
}

std::vector<Finding> nonfinite_activation(const Facts& f) {
  const auto& e = f.run.nonfinite;
  if (!e || !(e->kind == "activation" || e->kind == "loss")) return {};
  if (low_precision(f) && e->kind == "activation") return {};  // low-precision-overflow
  const bool huge_input = e->input_max_abs > 1e30;
  Finding out{.id = "nonfinite-activation",
              .severity = Severity::kError,
              .confidence = 0.9,
              .where = {{"step", e->step}, {"layer", e->layer}, {"op", e->op}},
              .evidence = e->message};
  if (!e->bad_samples.empty()) out.where["samples"] = e->bad_samples;
  if (huge_input) {
    out.fix =
        "the input of that op is already near float32's limit: drop or clip the samples named, normalise the "
        "inputs";
    out.actions = {{"data.samples", "repair"}};
  } else if (e->op == "aten::exp" || e->op == "aten::pow") {
    out.fix = "compute it stably (subtract the maximum before exp, use log-softmax / logsumexp) or clamp its input";
    out.actions = {{"model.code", "repair"}};
  } else if (f.config.optim.lr > 0) {
    out.fix = "guard that op's domain (clamp before log/sqrt/division), lower the learning rate if activations grew";
    out.actions = {{"model.code", "repair"}, {"optim.lr", "lower"}};
  } else {
    out.fix = "guard that op's domain (clamp before log/sqrt/division)";
    out.actions = {{"model.code", "repair"}};
  }
  return {out};
}

std::vector<Finding> nonfinite_gradient(const Facts& f) {
  const auto& e = f.run.nonfinite;
  if (!e || low_precision(f) || e->kind != "gradient") return {};
  return {Finding{.id = "nonfinite-gradient",
                  .severity = Severity::kError,
                  .confidence = 0.85,
                  .where = {{"step", e->step}, {"layer", e->layer}, {"parameter", e->parameter}},
                  .evidence = e->message,
                  .fix = "the backward of an op between this parameter and the loss is undefined at its input "
                         "(sqrt/log/pow at 0, division by 0): add an epsilon or clamp",
                  .actions = {{"model.code", "repair"}}}};
}

std::vector<Finding> exploding_gradients(const Facts& f) {
  const RunSummary& s = f.summary;
  const RunFacts& r = f.run;
  if (!s.exploding) return {};
  // The parameter whose gradient grew most between the first probe and the last finite one.
  std::string worst;
  double worst_growth = 0;
  if (r.probes.size() >= 2) {
    const auto& first = r.probes.front().parameters;
    for (std::size_t i = 0; i < first.size(); ++i) {
      if (!first[i].has_grad || first[i].grad.norm <= 0) continue;
      for (auto it = r.probes.rbegin(); it != r.probes.rend(); ++it) {
        if (i >= it->parameters.size() || !std::isfinite(it->parameters[i].grad.norm) ||
            it->parameters[i].grad.nonfinite > 0)
          continue;
        const double gr = it->parameters[i].grad.norm / first[i].grad.norm;
        if (gr > worst_growth) {
          worst_growth = gr;
          worst = first[i].name;
        }
        break;
      }
    }
  }
  Finding out{
      .id = "exploding-gradients",
      .severity = Severity::kError,
      .confidence = 0.9,
      .where = {{"step", s.grad_exceed_step >= 0 ? s.grad_exceed_step : s.grad_max_step}},
      .evidence = fmt::format(
          "the gradient norm grew from {:.3g} (first steps) to {:.3g} at step {} (x{:.3g}){}{}", s.grad_first,
          s.grad_max, s.grad_max_step, s.grad_max / s.grad_first, s.grad_nonfinite ? ", then became non-finite" : "",
          worst.empty() ? ""
                        : fmt::format("; the largest growth was in {} (x{:.3g} between probes)", worst, worst_growth)),
      .fix = fmt::format("clip gradients (trainer.gradient_clip_val = {:.3g}, the 95th percentile of the first norms, "
                         "or trainer.gradient_clip_auto_steps = 100) and lower optim.lr (now {:g}); normalisation "
                         "layers help deep stacks",
                         s.clip_suggestion, f.config.optim.lr),
      .actions = {{"trainer.gradient_clip_val", "set"}, {"optim.lr", "lower"}},
  };
  if (!worst.empty()) out.where["parameter"] = worst;
  return {out};
}

// Whether a step of plain SGD (lr x gradient) on this parameter would change it in float32 at
// all: below about 1e-7 of the weight's norm it rounds away. Adaptive optimisers scale their
// steps to about lr per element, so any gradient moves a parameter they hold.
bool step_visible(const Facts& f, const ParameterStats& p, std::int64_t step) {
  const auto kind = f.config.optim.name;
  if (kind != train::OptimizerKind::kSgd) return true;
  const double lr = step >= 0 && static_cast<std::size_t>(step) < f.run.lr.size() && std::isfinite(f.run.lr[step])
                        ? f.run.lr[static_cast<std::size_t>(step)]
                        : f.config.optim.lr;
  return lr == 0 || lr * p.grad.norm >= 1e-6 * p.value.norm;
}

std::vector<Finding> parameters_not_updating(const Facts& f) {
  const RunFacts& r = f.run;
  if (r.probes.size() < 2) return {};
  std::vector<std::string> frozen_in_place;
  double gnorm = 0;
  std::size_t with_grad = 0;
  const auto& names = r.probes.front().parameters;
  for (std::size_t i = 0; i < names.size(); ++i) {
    bool has_grad = false, moved = false;
    for (std::size_t k = 0; k + 1 < r.probes.size(); ++k) {  // the last probe's update may not be finished
      const auto& p = r.probes[k];
      if (i >= p.parameters.size() || !p.parameters[i].has_grad || !(p.parameters[i].grad.norm > 0) ||
          !step_visible(f, p.parameters[i], p.step))
        continue;
      has_grad = true;
      gnorm = std::max(gnorm, p.parameters[i].grad.norm);
      if (i < p.update_ratio.size() && (p.update_ratio[i] != 0 || std::isnan(p.update_ratio[i]))) moved = true;
    }
    if (has_grad) ++with_grad;
    if (has_grad && !moved) frozen_in_place.push_back(names[i].name);
  }
  if (frozen_in_place.empty()) return {};
  const bool zero_lr = f.config.optim.lr == 0;
  std::vector<FixAction> actions{zero_lr ? FixAction{"optim.lr", "raise"} : FixAction{"optim.param_groups", "repair"}};
  return {Finding{
      .id = "parameters-not-updating",
      .severity = Severity::kError,
      .confidence = 0.9,
      .where = {{"parameters", frozen_in_place}},
      .evidence = fmt::format("{} of {} parameters with non-zero gradients (up to norm {:.3g}) did not change at all "
                              "in {} steps: {}{}",
                              frozen_in_place.size(), with_grad, gnorm, r.steps, first_few(frozen_in_place),
                              zero_lr ? "; optim.lr = 0" : ""),
      .fix = zero_lr ? "set optim.lr to a real learning rate (e.g. 1e-3 for Adam, 0.1 for SGD)"
                     : "check that these parameters are in the optimiser's parameter groups and that their learning "
                       "rate is not 0",
      .actions = std::move(actions),
  }};
}

// A loss that rose, jumped or stayed far above chance while the weights moved by more than 1 %
// per step (against about 0.1 % in healthy training).
std::vector<Finding> lr_too_high(const Facts& f) {
  const RunSummary& s = f.summary;
  const RunFacts& r = f.run;
  if (!std::isfinite(s.update_ratio)) return {};
  const bool jumped = std::isfinite(s.loss_first) && s.loss_peak > 3 * s.loss_first &&
                      (!std::isfinite(s.loss_end) || s.loss_end > 1.5 * s.chance_loss);
  // A NaN that came from the data (a NaN input, a sample near float32's limit) says nothing about the learning rate.
  const bool nan_from_data = r.nonfinite && (r.nonfinite->kind == "input" || r.nonfinite->input_max_abs > 1e30);
  const bool nonfinite = s.loss_nonfinite && !nan_from_data;
  const bool bad_loss =
      s.rising || nonfinite || jumped || (std::isfinite(s.loss_end) && s.loss_end > 1.5 * s.chance_loss);
  const double ratio = std::max(s.update_ratio, s.update_ratio_early);
  if (!bad_loss || !(ratio > 1e-2)) return {};
  return {Finding{
      .id = "lr-too-high",
      .severity = Severity::kError,
      .confidence = 0.88,
      .where = {{"parameter_groups", 0}},
      .evidence =
          fmt::format("the loss went from {:.3g} (step 0) up to {:.3g} and ends at {:.3g}{} (chance level is "
                      "{:.3g}) while the median update-to-weight ratio per step was {:.3g} (around 1e-3 is "
                      "typical); optim.lr = {:g}",
                      s.loss_first, s.loss_peak, s.loss_end, s.loss_nonfinite ? " (with non-finite values)" : "",
                      s.chance_loss, ratio, f.config.optim.lr),
      .fix = fmt::format("lower optim.lr by 10-100x (try {:g}) or use a warm-up (scheduler.warmup_steps)",
                         f.config.optim.lr / 30),
      .actions = {{"optim.lr", "lower"}},
  }};
}

std::vector<Finding> lr_too_low(const Facts& f) {
  const RunSummary& s = f.summary;
  if (!(std::isfinite(s.update_ratio) && !s.learning && s.update_ratio < 1e-5 && s.update_ratio > 0)) return {};
  if (!lr_too_high(f).empty()) return {};
  // A warm-up still raising the learning rate (the run's lr rose by half or more): the schedule,
  // not the setting, explains small steps so far.
  const auto lrs = finite_of(f.run.lr);
  if (!lrs.empty() && lrs.back() > 1.5 * lrs.front()) return {};
  if (f.run.steps < 50) return {};  // too few steps to tell a slow start from a small step
  const double gmed = median_of(f.run.grad_norm);
  if (gmed < f.config.diagnostics.grad_norm_low) return {};  // no gradient to speak of: vanishing, not the lr
  return {Finding{
      .id = "lr-too-low",
      .severity = Severity::kError,
      .confidence = 0.85,
      .where = {{"parameter_groups", 0}},
      .evidence = fmt::format("in {} steps the loss moved from {:.4g} to {:.4g} ({:+.2f}%); the median "
                              "update-to-weight ratio per step was {:.2g} (around 1e-3 is typical) with a median "
                              "gradient norm of {:.3g}; optim.lr = {:g}",
                              f.run.steps, s.loss_start, s.loss_end, 100 * (s.loss_end - s.loss_start) / s.loss_start,
                              s.update_ratio, gmed, f.config.optim.lr),
      .fix = fmt::format("raise optim.lr (about x{:.0g} would bring the update ratio near 1e-3)",
                         std::pow(10.0, std::round(std::log10(1e-3 / s.update_ratio)))),
      .actions = {{"optim.lr", "raise"}},
  }};
}

// The layers near the input receive a vanishing share of the gradient.
std::vector<Finding> vanishing_gradients(const Facts& f) {
  const RunFacts& r = f.run;
  if (r.probes.empty() || f.summary.exploding || f.summary.learning) return {};
  std::vector<double> rel;
  std::string first_name, last_name;
  double first_norm = 0, last_norm = 0;
  for (const auto& pr : r.probes) {
    const ParameterStats* a = nullptr;
    const ParameterStats* b = nullptr;
    for (const auto& p : pr.parameters) {
      if (!is_weight(p) || !p.has_grad) continue;
      if (a == nullptr) a = &p;
      b = &p;
    }
    if (a == nullptr || a == b || !(b->grad.norm > 0)) continue;
    rel.push_back(a->grad.norm / b->grad.norm);
    first_name = a->name;
    last_name = b->name;
    first_norm = a->grad.norm;
    last_norm = b->grad.norm;
  }
  const double rel_med = median_of(rel);
  if (!(rel_med < 1e-3)) return {};
  return {Finding{
      .id = "vanishing-gradients",
      .severity = Severity::kError,
      .confidence = 0.85,
      .where = {{"layer", first_name}},
      .evidence = fmt::format("the first layer's gradient ({} norm {:.3g}) is {:.2g} of the last layer's ({} norm "
                              "{:.3g}), median over {} probes; the loss moved from {:.4g} to {:.4g}",
                              first_name, first_norm, rel_med, last_name, last_norm, rel.size(), f.summary.loss_start,
                              f.summary.loss_end),
      .fix = "add normalisation (model.mlp.norm = \"batchnorm\"), use ReLU-family activations, fewer layers or "
             "residual connections",
      .actions = {{"model.normalization", "add"}},
  }};
}

// Units never positive on a whole batch, over the last probes.
std::vector<Finding> dead_relu(const Facts& f) {
  const RunFacts& r = f.run;
  if (r.probes.empty()) return {};
  std::map<std::string, std::vector<double>> dead;
  const std::size_t from = r.probes.size() > 3 ? r.probes.size() - 3 : 0;
  for (std::size_t k = from; k < r.probes.size(); ++k)
    for (const auto& a : r.probes[k].activations)
      if (is_relu_like(a) && std::isfinite(a.stats.dead_fraction) && a.shape.size() >= 2)
        dead[a.layer].push_back(a.stats.dead_fraction);
  std::string worst;
  double share = 0;
  for (const auto& [layer, v] : dead) {
    const double m = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    if (m > share) {
      share = m;
      worst = layer;
    }
  }
  if (share < 0.4) return {};
  std::vector<FixAction> actions;
  if (f.config.optim.lr > 0) actions.push_back({"optim.lr", "lower"});
  std::int64_t units = 0;
  for (const auto& a : r.probes.back().activations)
    if (a.layer == worst && a.shape.size() >= 2) units = a.shape[1];
  return {Finding{
      .id = "dead-relu",
      .severity = share >= 0.6 ? Severity::kError : Severity::kWarning,
      .confidence = 0.6 + 0.35 * share,
      .where = {{"layer", worst}},
      .evidence =
          fmt::format("{:.0f}% of the {} units of {} were never positive on a whole batch (last {} probes, up "
                      "to step {}); they pass no gradient{}",
                      100 * share, units, worst, r.probes.size() - from, r.probes.back().step,
                      f.summary.learning ? "" : fmt::format(", and the loss stays near {:.3g}", f.summary.loss_end)),
      .fix = f.config.optim.lr > 0
                 ? fmt::format("lower optim.lr (now {:g}: a large update pushes units below zero for good), or use "
                               "leaky_relu / gelu",
                               f.config.optim.lr)
                 : std::string("use leaky_relu / gelu, or an initialisation that keeps units alive (they were dead "
                               "without any update: optim.lr = 0)"),
      .actions = std::move(actions),
  }};
}

std::vector<Finding> weight_decay_too_large(const Facts& f) {
  const RunSummary& s = f.summary;
  const auto& o = f.config.optim;
  if (!(std::isfinite(s.weight_norm_first) && std::isfinite(s.weight_norm_last) && o.weight_decay > 0 &&
        s.weight_norm_last < 0.5 * s.weight_norm_first && !s.learning))
    return {};
  const double shrink = o.name == train::OptimizerKind::kAdamW ? o.lr * o.weight_decay : NAN;
  return {Finding{
      .id = "weight-decay-too-large",
      .severity = Severity::kError,
      .confidence = 0.85,
      .where = {{"parameter_groups", 0}},
      .evidence =
          fmt::format("the weight norm fell from {:.4g} to {:.4g} (x{:.3g}) in {} steps with "
                      "optim.weight_decay = {:g}{}; the loss went from {:.4g} to {:.4g}",
                      s.weight_norm_first, s.weight_norm_last, s.weight_norm_last / s.weight_norm_first, f.run.steps,
                      o.weight_decay,
                      std::isfinite(shrink)
                          ? fmt::format(" (AdamW multiplies the weights by 1 - lr*wd = {:.4g} each step)", 1 - shrink)
                          : "",
                      s.loss_start, s.loss_end),
      .fix = "use optim.weight_decay around 1e-4 (SGD/Adam) or 1e-2 (AdamW)",
      .actions = {{"optim.weight_decay", "lower"}},
  }};
}

// Frozen layers with random weights; parameters that never got a gradient.
std::vector<Finding> no_gradient(const Facts& f) {
  const RunFacts& r = f.run;
  std::vector<Finding> out;
  // Frozen layers are fine when they hold trained weights (model.init_from); a module built in
  // C++ carries no such record, so its frozen share is judged as from a config without one.
  if (f.config.model.init_from.empty() && r.total_numel > 0 && r.frozen_numel > 0 &&
      static_cast<double>(r.frozen_numel) >= 0.5 * static_cast<double>(r.total_numel))
    out.push_back(Finding{
        .id = "no-gradient",
        .severity = Severity::kError,
        .confidence = 0.8,
        .where = {{"parameters", r.frozen}},
        .evidence = fmt::format("{} of {} parameters ({:.1f}%) are frozen (trainer.freeze) at their random initial "
                                "values and get no gradient: {}",
                                r.frozen_numel, r.total_numel,
                                100.0 * static_cast<double>(r.frozen_numel) / static_cast<double>(r.total_numel),
                                first_few(r.frozen)),
        .fix = "remove those patterns from trainer.freeze (freezing only makes sense for layers loaded with trained "
               "weights)",
        .actions = {{"trainer.freeze", "remove"}},
    });
  if (!r.no_grad_params.empty())
    out.push_back(Finding{
        .id = "no-gradient",
        .severity = Severity::kError,
        .confidence = 0.9,
        .where = {{"parameters", r.no_grad_params}},
        .evidence = fmt::format("{} parameters require a gradient but never received one in {} steps: {} — the graph "
                                "is cut between them and the loss",
                                r.no_grad_params.size(), r.steps, first_few(r.no_grad_params)),
        .fix =
            "look for .detach(), .item()/.data round trips, NoGradGuard or tensors rebuilt from host data in forward",
        .actions = {{"model.code", "repair"}},
    });
  return out;
}

}  // namespace

Facts make_facts(const DataFacts& d, const RunFacts& r, const train::RunConfig& cfg) {
  Facts f{d, r, cfg, {}};
  RunSummary& s = f.summary;
  s.chance_loss = d.outputs > 1 ? std::log(static_cast<double>(d.outputs)) : 1.0;
  // The loss.
  const auto& l = r.loss;
  if (!l.empty()) {
    const std::size_t n = l.size();
    const std::size_t k = std::max<std::size_t>(1, std::min<std::size_t>(10, n / 5));
    s.loss_start = mean_of(l, 0, k);
    s.loss_end = mean_of(l, n - std::min(n, std::max<std::size_t>(k, n / 10)), n);
    s.loss_first = l.front();
    for (double x : l)
      if (std::isfinite(x) && (std::isnan(s.loss_peak) || x > s.loss_peak)) s.loss_peak = x;
    s.loss_nonfinite = std::any_of(l.begin(), l.end(), [](double x) { return !std::isfinite(x); });
    s.learning = std::isfinite(s.loss_end) && s.loss_end < 0.85 * s.loss_start;
    s.rising = std::isfinite(s.loss_start) && (!std::isfinite(s.loss_end) || s.loss_end > 1.1 * s.loss_start);
  }
  // Gradient norms up to (not including) the first non-finite step: what led there.
  std::vector<double> g = r.grad_norm;
  if (r.nonfinite && r.nonfinite->step >= 0 && static_cast<std::size_t>(r.nonfinite->step) < g.size())
    g.resize(static_cast<std::size_t>(r.nonfinite->step));
  const std::vector<double> gf = finite_of(g);
  if (!gf.empty()) {
    s.grad_first = quantile(std::vector<double>(gf.begin(), gf.begin() + std::min<std::ptrdiff_t>(5, gf.size())), 0.5);
    for (std::size_t i = 0; i < g.size(); ++i) {
      if (!std::isfinite(g[i])) continue;
      if (std::isnan(s.grad_max) || g[i] > s.grad_max) {
        s.grad_max = g[i];
        s.grad_max_step = static_cast<std::int64_t>(i);
      }
      if (s.grad_exceed_step < 0 && g[i] > cfg.diagnostics.grad_norm_high)
        s.grad_exceed_step = static_cast<std::int64_t>(i);
    }
    s.clip_suggestion =
        quantile(std::vector<double>(gf.begin(), gf.begin() + std::min<std::ptrdiff_t>(20, gf.size())), 0.95);
  }
  // Norms are requested at every step, so a NaN is a computed one.
  s.grad_nonfinite = std::any_of(g.begin(), g.end(), [](double x) { return !std::isfinite(x); }) ||
                     (r.nonfinite && r.nonfinite->kind != "input");
  // Growth: a norm that rises after the first steps (a large first step that then settles, as a
  // fresh head on a pretrained body gives, is not growth).
  const double growth = s.grad_first > 0 && s.grad_max_step >= 5 ? s.grad_max / s.grad_first : NAN;
  s.exploding =
      std::isfinite(growth) && growth >= 100 && (s.grad_max > cfg.diagnostics.grad_norm_high || s.grad_nonfinite);
  // Update-to-weight ratios and weight norms over the probes (weights only).
  std::vector<double> ratios, early;
  for (std::size_t k = 0; k < r.probes.size(); ++k) {
    const auto& pr = r.probes[k];
    double sq = 0;
    bool any = false;
    for (std::size_t i = 0; i < pr.parameters.size(); ++i) {
      if (!is_weight(pr.parameters[i])) continue;
      if (i < pr.update_ratio.size()) {
        ratios.push_back(pr.update_ratio[i]);
        // The first probes' ratios: after a divergence the weights have grown and the ratio shrinks.
        if (k < 3) early.push_back(pr.update_ratio[i]);
      }
      if (std::isfinite(pr.parameters[i].value.norm)) {
        sq += pr.parameters[i].value.norm * pr.parameters[i].value.norm;
        any = true;
      }
    }
    if (any) {
      if (std::isnan(s.weight_norm_first)) s.weight_norm_first = std::sqrt(sq);
      s.weight_norm_last = std::sqrt(sq);
    }
  }
  s.update_ratio = median_of(ratios);
  s.update_ratio_early = median_of(early);
  s.recent_acc = mean_of(r.acc, r.acc.size() > 50 ? r.acc.size() - 50 : 0, r.acc.size());
  for (const auto& [label, count] : d.train.counts)
    s.majority_share = std::max(
        s.majority_share, static_cast<double>(count) / static_cast<double>(std::max<std::int64_t>(1, d.train.size)));
  return f;
}

std::vector<Rule> run_rules() {
  return {
      {"run-failed", run_failed, {}},
      {"device-mismatch", device_mismatch, {{"model.code", "repair"}}},
      {"low-precision-overflow", low_precision_overflow, {{"trainer.precision", "wider"}}},
      {"nonfinite-activation",
       nonfinite_activation,
       {{"data.samples", "repair"}, {"model.code", "repair"}, {"optim.lr", "lower"}}},
      {"nonfinite-gradient", nonfinite_gradient, {{"model.code", "repair"}}},
      {"exploding-gradients", exploding_gradients, {{"trainer.gradient_clip_val", "set"}, {"optim.lr", "lower"}}},
      {"parameters-not-updating", parameters_not_updating, {{"optim.lr", "raise"}, {"optim.param_groups", "repair"}}},
      {"lr-too-high", lr_too_high, {{"optim.lr", "lower"}}},
      {"lr-too-low", lr_too_low, {{"optim.lr", "raise"}}},
      {"vanishing-gradients", vanishing_gradients, {{"model.normalization", "add"}}},
      {"dead-relu", dead_relu, {{"optim.lr", "lower"}}},
      {"weight-decay-too-large", weight_decay_too_large, {{"optim.weight_decay", "lower"}}},
      {"no-gradient", no_gradient, {{"trainer.freeze", "remove"}, {"model.code", "repair"}}},
  };
}

}  // namespace glassbox::inspect::detail
