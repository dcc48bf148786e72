// The doctor, part 3: findings from the instrumented run. Over 600 lines for now: every run rule
// lives in run_findings; it is being split into one small function per finding id (a table of
// rules over collected facts), which will bring this file back under the limit.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "glassbox/inspect/doctor_internal.h"
#include "glassbox/inspect/stats.h"

namespace glassbox::inspect::detail {

namespace {

std::vector<double> finite_of(const std::vector<double>& v) {
  std::vector<double> out;
  for (double x : v)
    if (std::isfinite(x)) out.push_back(x);
  return out;
}

double mean_of(const std::vector<double>& v, std::size_t from, std::size_t to) {
  double s = 0;
  std::size_t n = 0;
  for (std::size_t i = from; i < to && i < v.size(); ++i)
    if (std::isfinite(v[i])) {
      s += v[i];
      ++n;
    }
  return n ? s / static_cast<double>(n) : NAN;
}

double median(std::vector<double> v) { return quantile(finite_of(v), 0.5); }

bool is_relu_like(const LayerActivation& a) {
  return a.type == "ReLU" || a.type == "ReLU6" || a.op == "aten::relu" || a.op == "aten::relu_" ||
         a.op == "aten::threshold";
}

// Parameters that are weight matrices/kernels (not biases or norm scales), by size.
bool is_weight(const ParameterStats& p) {
  return p.numel >= 64 && p.name.size() >= 6 && p.name.compare(p.name.size() - 6, 6, "weight") == 0;
}

struct LossTrend {
  double first = NAN, peak = NAN;  // the first step's loss, the largest finite one
  double start = NAN, end = NAN;
  bool nonfinite = false;
  bool learning = false;  // the loss fell clearly
  bool rising = false;
};

LossTrend trend(const RunFacts& r) {
  LossTrend t;
  const auto& l = r.loss;
  if (l.empty()) return t;
  const std::size_t n = l.size();
  const std::size_t k = std::max<std::size_t>(1, std::min<std::size_t>(10, n / 5));
  t.start = mean_of(l, 0, k);
  t.end = mean_of(l, n - std::min(n, std::max<std::size_t>(k, n / 10)), n);
  t.first = l.front();
  for (double x : l)
    if (std::isfinite(x) && (std::isnan(t.peak) || x > t.peak)) t.peak = x;
  t.nonfinite = std::any_of(l.begin(), l.end(), [](double x) { return !std::isfinite(x); });
  t.learning = std::isfinite(t.end) && t.end < 0.85 * t.start;
  t.rising = std::isfinite(t.start) && (!std::isfinite(t.end) || t.end > 1.1 * t.start);
  return t;
}

}  // namespace

void run_findings(const DataFacts& d, const RunFacts& r, const train::RunConfig& cfg, std::vector<Finding>& out) {
  const LossTrend lt = trend(r);
  const double lnk = d.outputs > 1 ? std::log(static_cast<double>(d.outputs)) : 1.0;
  const bool data_cause = std::any_of(
      out.begin(), out.end(), [](const Finding& f) { return f.severity == "error" || f.id == "unnormalized-input"; });
  // A symptom explained by a cause found in the data is reported with less confidence.
  const double symptom_scale = data_cause ? 0.85 : 1.0;

  // --- the run failed ---
  if (!r.error.empty()) {
    const std::string& e = r.error;
    const std::string first_line = e.substr(0, e.find('\n'));
    if (e.find("more than 1 value per channel") != std::string::npos) {
      Finding f{"batchnorm-batch-of-one", "error", 0.95, {{"step", r.failing_step}}, "", ""};
      if (!d.batchnorm_layers.empty())
        f.where["layer"] = r.failing_layer.empty() ? d.batchnorm_layers.front() : r.failing_layer;
      f.evidence = fmt::format(
          "training failed at step {}: a batch of one sample reached a BatchNorm layer in training mode ({})",
          r.failing_step, first_line);
      f.fix = "set data.loader.drop_last = true (or a batch size that leaves no batch of one)";
      out.push_back(f);
    } else if (e.find("same device") != std::string::npos || e.find("scalar type") != std::string::npos ||
               e.find("same dtype") != std::string::npos || e.find("two devices") != std::string::npos) {
      Finding f{"device-mismatch", "error", 0.9, {{"step", r.failing_step}, {"op", r.failing_op}}, "", ""};
      if (!r.failing_layer.empty()) f.where["layer"] = r.failing_layer;
      f.evidence =
          fmt::format("{} failed in {}{}: its inputs were {} ({})", r.failing_op.empty() ? "an op" : r.failing_op,
                      r.failing_layer.empty() ? "a function between modules" : "module \"" + r.failing_layer + "\"",
                      r.failing_type.empty() ? "" : " (" + r.failing_type + ")", r.failing_inputs, first_line);
      f.fix =
          "move or cast the tensors so that they meet on one device and dtype (module.to(device, dtype), "
          "inputs.to(...)) — look for "
          "tensors created inside forward without the input's options";
      out.push_back(f);
    } else if (e.find("out of bounds") != std::string::npos || e.find("Target") != std::string::npos) {
      if (std::none_of(out.begin(), out.end(), [](const Finding& f) { return f.id.rfind("label-", 0) == 0; })) {
        Finding f{"label-out-of-range",
                  "error",
                  0.85,
                  {{"step", r.failing_step}},
                  fmt::format("the loss failed: {}", first_line),
                  "labels must be 0..K-1 for a K-output model"};
        out.push_back(f);
      }
    } else {
      Finding f{"run-failed",
                "error",
                0.5,
                {{"step", r.failing_step}},
                fmt::format("the instrumented run failed at step {}: {}", r.failing_step, first_line),
                "fix the error above, then run the doctor again"};
      out.push_back(f);
    }
  }

  // --- non-finite values ---
  if (r.nonfinite && r.nonfinite->kind != "input") {
    const NonFiniteEvent& e = *r.nonfinite;
    const bool low_precision = cfg.trainer.precision != train::PrecisionMode::k32;
    if (low_precision && (e.kind == "activation" || e.kind == "gradient")) {
      Finding f{"low-precision-overflow", "error", 0.85, {{"step", e.step}, {"layer", e.layer}, {"op", e.op}}, "", ""};
      f.evidence = fmt::format("under precision {}: {}", name_of(cfg.trainer.precision), e.message);
      f.fix =
          "keep that op in float32 (autocast excludes it when you cast its input .to(float)), scale inputs down, or "
          "train in precision 32";
      out.push_back(f);
    } else if (e.kind == "activation" || e.kind == "loss") {
      Finding f{"nonfinite-activation",
                "error",
                0.9 * symptom_scale,
                {{"step", e.step}, {"layer", e.layer}, {"op", e.op}},
                e.message,
                ""};
      if (!e.bad_samples.empty()) f.where["samples"] = e.bad_samples;
      f.fix =
          e.input_max_abs > 1e30 ? "the input of that op is already near float32's limit: drop or clip the samples "
                                   "named, normalise the inputs"
          : e.op == "aten::exp" || e.op == "aten::pow"
              ? "compute it stably (subtract the maximum before exp, use log-softmax / logsumexp) or clamp its input"
              : "guard that op's domain (clamp before log/sqrt/division), lower the learning rate if activations grew";
      out.push_back(f);
    } else if (e.kind == "gradient") {
      Finding f{"nonfinite-gradient",
                "error",
                0.85 * symptom_scale,
                {{"step", e.step}, {"layer", e.layer}, {"parameter", e.parameter}},
                e.message,
                "the backward of an op between this parameter and the loss is undefined at its input (sqrt/log/pow at "
                "0, division by 0): "
                "add an epsilon or clamp"};
      out.push_back(f);
    }
  }

  // --- gradients ---
  // Gradient history up to (not including) the first non-finite step: what led there.
  std::vector<double> g = r.grad_norm;
  if (r.nonfinite && r.nonfinite->step >= 0 && static_cast<std::size_t>(r.nonfinite->step) < g.size())
    g.resize(static_cast<std::size_t>(r.nonfinite->step));
  const std::vector<double> gf = finite_of(g);
  double g0 = NAN, gmax = NAN;
  std::int64_t gmax_step = -1, exceed_step = -1;
  if (!gf.empty()) {
    std::vector<double> first;
    for (std::size_t i = 0; i < g.size() && first.size() < 5; ++i)
      if (std::isfinite(g[i])) first.push_back(g[i]);
    g0 = quantile(first, 0.5);
    for (std::size_t i = 0; i < g.size(); ++i) {
      if (!std::isfinite(g[i])) continue;
      if (std::isnan(gmax) || g[i] > gmax) {
        gmax = g[i];
        gmax_step = static_cast<std::int64_t>(i);
      }
      if (exceed_step < 0 && g[i] > cfg.diagnostics.grad_norm_high) exceed_step = static_cast<std::int64_t>(i);
    }
  }
  // Norms are requested at every step, so a NaN is a computed one.
  const bool grad_nonfinite = std::any_of(g.begin(), g.end(), [](double x) { return !std::isfinite(x); }) ||
                              (r.nonfinite && r.nonfinite->kind != "input");
  const double growth = g0 > 0 ? gmax / g0 : NAN;
  bool exploding = false;
  if (std::isfinite(growth) && growth >= 100 && (gmax > cfg.diagnostics.grad_norm_high || grad_nonfinite)) {
    exploding = true;
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
    Finding f{"exploding-gradients",
              "error",
              0.9 * symptom_scale,
              {{"step", exceed_step >= 0 ? exceed_step : gmax_step}},
              "",
              ""};
    if (!worst.empty()) f.where["parameter"] = worst;
    f.evidence = fmt::format(
        "the gradient norm grew from {:.3g} (first steps) to {:.3g} at step {} (x{:.3g}){}{}", g0, gmax, gmax_step,
        growth, grad_nonfinite ? ", then became non-finite" : "",
        worst.empty() ? ""
                      : fmt::format("; the largest growth was in {} (x{:.3g} between probes)", worst, worst_growth));
    const double clip = quantile(
        std::vector<double>(gf.begin(), gf.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(gf.size(), 20))),
        0.95);
    f.fix = fmt::format(
        "clip gradients (trainer.gradient_clip_val = {:.3g}, the 95th percentile of the first norms, or "
        "trainer.gradient_clip_auto_steps = 100) and lower optim.lr (now {:g}); normalisation layers help deep stacks",
        clip, cfg.optim.lr);
    out.push_back(f);
  }

  // Update-to-weight ratios and weight norms over the probes (weights only).
  std::vector<double> ratios;
  double wnorm_first = NAN, wnorm_last = NAN;
  for (std::size_t k = 0; k < r.probes.size(); ++k) {
    const auto& pr = r.probes[k];
    double sq = 0;
    bool any = false;
    for (std::size_t i = 0; i < pr.parameters.size(); ++i) {
      if (!is_weight(pr.parameters[i])) continue;
      if (i < pr.update_ratio.size()) ratios.push_back(pr.update_ratio[i]);
      if (std::isfinite(pr.parameters[i].value.norm)) {
        sq += pr.parameters[i].value.norm * pr.parameters[i].value.norm;
        any = true;
      }
    }
    if (any) {
      if (std::isnan(wnorm_first)) wnorm_first = std::sqrt(sq);
      wnorm_last = std::sqrt(sq);
    }
  }
  const double ratio_med = median(ratios);
  // The first probes' ratios: after a divergence the weights have grown and the ratio shrinks.
  std::vector<double> early;
  for (std::size_t k = 0; k < std::min<std::size_t>(3, r.probes.size()); ++k)
    for (std::size_t i = 0; i < r.probes[k].parameters.size(); ++i)
      if (is_weight(r.probes[k].parameters[i]) && i < r.probes[k].update_ratio.size())
        early.push_back(r.probes[k].update_ratio[i]);
  const double ratio_early = median(early);

  // Parameters with gradients that do not move at all.
  if (r.probes.size() >= 2) {
    std::vector<std::string> frozen_in_place;
    double gnorm = 0;
    std::size_t with_grad = 0;
    const auto& names = r.probes.front().parameters;
    for (std::size_t i = 0; i < names.size(); ++i) {
      bool has_grad = false, moved = false;
      for (std::size_t k = 0; k + 1 < r.probes.size(); ++k) {  // the last probe's update may not be finished
        const auto& p = r.probes[k];
        if (i >= p.parameters.size() || !p.parameters[i].has_grad || !(p.parameters[i].grad.norm > 0)) continue;
        has_grad = true;
        gnorm = std::max(gnorm, p.parameters[i].grad.norm);
        if (i < p.update_ratio.size() && (p.update_ratio[i] != 0 || std::isnan(p.update_ratio[i]))) moved = true;
      }
      if (has_grad) ++with_grad;
      if (has_grad && !moved) frozen_in_place.push_back(names[i].name);
    }
    if (!frozen_in_place.empty()) {
      Finding f{"parameters-not-updating", "error", 0.9, {{"parameters", frozen_in_place}}, "", ""};
      f.evidence = fmt::format(
          "{} of {} parameters with non-zero gradients (up to norm {:.3g}) did not change at all in {} steps: {}{}",
          frozen_in_place.size(), with_grad, gnorm, r.steps,
          fmt::join(
              frozen_in_place.begin(),
              frozen_in_place.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(4, frozen_in_place.size())),
              ", "),
          cfg.optim.lr == 0 ? "; optim.lr = 0" : "");
      f.fix = cfg.optim.lr == 0 ? "set optim.lr to a real learning rate (e.g. 1e-3 for Adam, 0.1 for SGD)"
                                : "check that these parameters are in the optimiser's parameter groups and that their "
                                  "learning rate is not 0";
      out.push_back(f);
    }
  }

  // lr too high / too low.
  if (std::isfinite(ratio_med)) {
    const bool jumped =
        std::isfinite(lt.first) && lt.peak > 3 * lt.first && (!std::isfinite(lt.end) || lt.end > 1.5 * lnk);
    // A NaN that came from the data (a NaN input, a sample near float32's limit) says nothing about the learning rate.
    const bool nan_from_data = r.nonfinite && (r.nonfinite->kind == "input" || r.nonfinite->input_max_abs > 1e30);
    const bool nonfinite = lt.nonfinite && !nan_from_data;
    if ((lt.rising || nonfinite || jumped || (std::isfinite(lt.end) && lt.end > 1.5 * lnk)) &&
        std::max(ratio_med, ratio_early) > 1e-2) {
      Finding f{"lr-too-high", "error", (exploding ? 0.75 : 0.88) * symptom_scale, {{"parameter_groups", 0}}, "", ""};
      f.evidence = fmt::format(
          "the loss went from {:.3g} (step 0) up to {:.3g} and ends at {:.3g}{} (chance level is {:.3g}) while the "
          "median "
          "update-to-weight ratio per step was {:.3g} (around 1e-3 is typical); optim.lr = {:g}",
          lt.first, lt.peak, lt.end, lt.nonfinite ? " (with non-finite values)" : "", lnk,
          std::max(ratio_med, ratio_early), cfg.optim.lr);
      f.fix = fmt::format("lower optim.lr by 10-100x (try {:g}) or use a warm-up (scheduler.warmup_steps)",
                          cfg.optim.lr / 30);
      out.push_back(f);
    } else if (!lt.learning && ratio_med < 1e-5 && ratio_med > 0) {
      const double gmed = median(g);
      if (!(gmed < cfg.diagnostics.grad_norm_low)) {
        Finding f{"lr-too-low", "error", 0.85 * symptom_scale, {{"parameter_groups", 0}}, "", ""};
        f.evidence = fmt::format(
            "in {} steps the loss moved from {:.4g} to {:.4g} ({:+.2f}%); the median update-to-weight ratio per step "
            "was "
            "{:.2g} (around 1e-3 is typical) with a median gradient norm of {:.3g}; optim.lr = {:g}",
            r.steps, lt.start, lt.end, 100 * (lt.end - lt.start) / lt.start, ratio_med, gmed, cfg.optim.lr);
        f.fix = fmt::format("raise optim.lr (about x{:.0g} would bring the update ratio near 1e-3)",
                            std::pow(10.0, std::round(std::log10(1e-3 / ratio_med))));
        out.push_back(f);
      }
    }
  }

  // Vanishing gradients: the layers near the input receive a vanishing share of the gradient.
  if (!r.probes.empty() && !exploding) {
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
    const double rel_med = median(rel);
    if (std::isfinite(rel_med) && rel_med < 1e-3 && !lt.learning) {
      Finding f{"vanishing-gradients", "error", 0.85 * symptom_scale, {{"layer", first_name}}, "", ""};
      f.evidence = fmt::format(
          "the first layer's gradient ({} norm {:.3g}) is {:.2g} of the last layer's ({} norm {:.3g}), median over {} "
          "probes; the loss moved from {:.4g} to {:.4g}",
          first_name, first_norm, rel_med, last_name, last_norm, rel.size(), lt.start, lt.end);
      f.fix =
          "add normalisation (model.mlp.norm = \"batchnorm\"), use ReLU-family activations, fewer layers or residual "
          "connections";
      out.push_back(f);
    }
  }

  // Dead ReLUs: units never positive on a whole batch, over the last probes.
  if (!r.probes.empty()) {
    std::map<std::string, std::vector<double>> dead;
    const std::size_t from = r.probes.size() > 3 ? r.probes.size() - 3 : 0;
    for (std::size_t k = from; k < r.probes.size(); ++k)
      for (const auto& a : r.probes[k].activations)
        if (is_relu_like(a) && std::isfinite(a.stats.dead_fraction) && a.shape.size() >= 2)
          dead[a.layer].push_back(a.stats.dead_fraction);
    std::string worst;
    double worst_share = 0;
    std::int64_t units = 0;
    for (const auto& [layer, v] : dead) {
      const double m = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
      if (m > worst_share) {
        worst_share = m;
        worst = layer;
      }
    }
    for (const auto& a : r.probes.back().activations)
      if (a.layer == worst && a.shape.size() >= 2) units = a.shape[1];
    if (worst_share >= 0.4) {
      Finding f{"dead-relu", worst_share >= 0.6 ? "error" : "warning", 0.6 + 0.35 * worst_share, {{"layer", worst}}, "",
                ""};
      f.evidence = fmt::format(
          "{:.0f}% of the {} units of {} were never positive on a whole batch (last {} probes, up to step {}); they "
          "pass no "
          "gradient{}",
          100 * worst_share, units, worst, r.probes.size() - from, r.probes.back().step,
          lt.learning ? "" : fmt::format(", and the loss stays near {:.3g}", lt.end));
      f.fix = fmt::format(
          "lower optim.lr (now {:g}: a large update pushes units below zero for good), or use leaky_relu / gelu",
          cfg.optim.lr);
      out.push_back(f);
    }
  }

  // Weight decay collapsing the weights.
  if (std::isfinite(wnorm_first) && std::isfinite(wnorm_last) && cfg.optim.weight_decay > 0 &&
      wnorm_last < 0.5 * wnorm_first && !lt.learning) {
    Finding f{"weight-decay-too-large", "error", 0.85, {{"parameter_groups", 0}}, "", ""};
    const double shrink = cfg.optim.name == train::OptimizerKind::kAdamW ? cfg.optim.lr * cfg.optim.weight_decay : NAN;
    f.evidence = fmt::format(
        "the weight norm fell from {:.4g} to {:.4g} (x{:.3g}) in {} steps with optim.weight_decay = {:g}{}; the loss "
        "went from "
        "{:.4g} to {:.4g}",
        wnorm_first, wnorm_last, wnorm_last / wnorm_first, r.steps, cfg.optim.weight_decay,
        std::isfinite(shrink)
            ? fmt::format(" (AdamW multiplies the weights by 1 - lr*wd = {:.4g} each step)", 1 - shrink)
            : "",
        lt.start, lt.end);
    f.fix = "use optim.weight_decay around 1e-4 (SGD/Adam) or 1e-2 (AdamW)";
    out.push_back(f);
  }

  // Frozen layers with random weights; parameters that never got a gradient.
  if (r.total_numel > 0 && r.frozen_numel > 0 &&
      static_cast<double>(r.frozen_numel) >= 0.5 * static_cast<double>(r.total_numel)) {
    Finding f{"no-gradient", "error", 0.8, {{"parameters", r.frozen}}, "", ""};
    f.evidence = fmt::format(
        "{} of {} parameters ({:.1f}%) are frozen (trainer.freeze) at their random initial values and get no gradient: "
        "{}{}",
        r.frozen_numel, r.total_numel, 100.0 * static_cast<double>(r.frozen_numel) / static_cast<double>(r.total_numel),
        fmt::join(r.frozen.begin(),
                  r.frozen.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(4, r.frozen.size())), ", "),
        r.frozen.size() > 4 ? ", ..." : "");
    f.fix =
        "remove those patterns from trainer.freeze (freezing only makes sense for layers loaded with trained weights)";
    out.push_back(f);
  }
  if (!r.no_grad_params.empty()) {
    Finding f{"no-gradient", "error", 0.9, {{"parameters", r.no_grad_params}}, "", ""};
    f.evidence = fmt::format(
        "{} parameters require a gradient but never received one in {} steps: {} — the graph is cut between them and "
        "the loss",
        r.no_grad_params.size(), r.steps,
        fmt::join(
            r.no_grad_params.begin(),
            r.no_grad_params.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(4, r.no_grad_params.size())),
            ", "));
    f.fix = "look for .detach(), .item()/.data round trips, NoGradGuard or tensors rebuilt from host data in forward";
    out.push_back(f);
  }

  // Labels independent of the inputs.
  if (d.knn_agreement >= 0) {
    // Four standard deviations of the permutation null (and at least 0.005, for a null that
    // barely varies): a false alarm is then rarer than 1 in 10 000 for a normal null.
    const double margin = std::max(4 * d.knn_sigma, 0.005);
    double recent_acc = mean_of(r.acc, r.acc.size() > 50 ? r.acc.size() - 50 : 0, r.acc.size());
    double majority = 0;
    for (const auto& [label, count] : d.train.counts)
      majority =
          std::max(majority, static_cast<double>(count) / static_cast<double>(std::max<std::int64_t>(1, d.train.size)));
    if (d.knn_agreement <= d.knn_chance + margin && d.train.counts.size() > 1) {
      const bool stuck = !r.acc.empty() && std::isfinite(recent_acc) && recent_acc <= majority + 0.05;
      Finding f{"labels-shuffled", stuck ? "error" : "warning", stuck ? 0.88 : 0.55, {{"split", "train"}}, "", ""};
      f.evidence = fmt::format(
          "the nearest training neighbour of {} training samples has the same label {:.1f}% of the time, averaged "
          "over classes — what labels independent of the inputs give under these class frequencies ({:.1f}% +- "
          "{:.1f}%, from permuted labels){}",
          d.knn_queries, 100 * d.knn_agreement, 100 * d.knn_chance, 100 * d.knn_sigma,
          stuck ? fmt::format("; training accuracy stays at {:.1f}% (majority class {:.1f}%)", 100 * recent_acc,
                              100 * majority)
                : "");
      f.fix = "check that inputs and labels are stored and shuffled together (one index for both)";
      out.push_back(f);
    }
  }

  // Class imbalance that the model just follows.
  for (auto& f : out) {
    if (f.id != "class-imbalance") continue;
    const double share = [&] {
      double m = 0;
      for (const auto& [label, count] : d.train.counts)
        m = std::max(m, static_cast<double>(count) / static_cast<double>(d.train.size));
      return m;
    }();
    const double recent_acc = mean_of(r.acc, r.acc.size() > 50 ? r.acc.size() - 50 : 0, r.acc.size());
    const bool weighted = !cfg.loss.class_weights.empty() ||
                          nn::resolve_loss(cfg.loss.name, cfg.data.source.task) == nn::LossKind::kFocal;
    if (share >= 0.7 && std::isfinite(recent_acc) && recent_acc <= share + 0.03 && !weighted) {
      f.severity = "error";
      f.confidence = 0.8;
      f.evidence += fmt::format("; the run's training accuracy ({:.1f}%) is no better than that", 100 * recent_acc);
    }
  }

  // The same batch over and over.
  if (r.batch_hash.size() >= 20) {
    std::map<std::uint64_t, std::int64_t> seen;
    for (auto h : r.batch_hash) ++seen[h];
    // Batches recur across epochs of course; within the batches of one epoch they should differ.
    const double distinct = static_cast<double>(seen.size());
    const double expected = static_cast<double>(std::min<std::int64_t>(static_cast<std::int64_t>(r.batch_hash.size()),
                                                                       std::max<std::int64_t>(1, r.batches_per_epoch)));
    if (distinct <= 0.25 * expected) {
      Finding f{"repeated-batches",
                cfg.trainer.overfit_batches > 0 ? "info" : "error",
                cfg.trainer.overfit_batches > 0 ? 0.3 : 0.85,
                {{"steps", r.batch_hash.size()}},
                "",
                ""};
      f.evidence = fmt::format("the training loader yielded {} distinct batches in {} steps ({} batches per epoch){}",
                               seen.size(), r.batch_hash.size(), r.batches_per_epoch,
                               cfg.trainer.overfit_batches > 0 ? " (trainer.overfit_batches is set: expected)" : "");
      f.fix =
          "shuffle the training data (data.loader.shuffle = true) and check trainer.limit_train_batches / the sampler";
      out.push_back(f);
    }
  }

  // BatchNorm: running statistics far from the batch statistics. The accuracy gap alone sits near
  // its threshold when the model has barely learnt (a few hundred steps of batches of two); the
  // loss on the same samples separates the cases by a wide margin (healthy: within 10 %).
  // On few samples a smaller gap is already beyond sampling error: the two accuracies are
  // measured on the same samples, so the test is McNemar's on the discordant pairs (b samples
  // right only with batch statistics, c only with running ones): z = (b - c) / sqrt(b + c),
  // about normal without drift. z >= 4 with a gap of at least 8 points is drift whatever the
  // sample size; above 15 points the gap alone suffices, as before.
  const double bn_discordant = static_cast<double>(r.bn_only_train_right + r.bn_only_eval_right);
  const double bn_z = bn_discordant > 0
                          ? static_cast<double>(r.bn_only_train_right - r.bn_only_eval_right) / std::sqrt(bn_discordant)
                          : 0.0;
  const double bn_gap = r.bn_train_mode_acc - r.bn_eval_mode_acc;
  const bool bn_acc_gap = r.bn_train_mode_acc >= 0 && (bn_gap > 0.15 || (bn_gap >= 0.08 && bn_z >= 4.0));
  const bool bn_loss_gap = std::isfinite(r.bn_train_mode_loss) && std::isfinite(r.bn_eval_mode_loss) &&
                           r.bn_eval_mode_loss > 2.0 * r.bn_train_mode_loss &&
                           r.bn_eval_mode_loss - r.bn_train_mode_loss > 0.5;
  if (bn_acc_gap || bn_loss_gap) {
    Finding f{"batchnorm-stats-drift",
              "error",
              0.85,
              {{"layer", d.batchnorm_layers.empty() ? "" : d.batchnorm_layers.front()}},
              "",
              ""};
    f.evidence = fmt::format(
        "on the same training samples, accuracy is {:.1f}% and the loss {:.3g} with the statistics of batches of 256 "
        "(train mode) but {:.1f}% and {:.3g} with the running statistics evaluation uses (eval mode); the running "
        "statistics were gathered from batches of {}; of {} samples, {} are right only with batch statistics and "
        "{} only with running ones (McNemar z = {:.1f})",
        100 * r.bn_train_mode_acc, r.bn_train_mode_loss, 100 * r.bn_eval_mode_acc, r.bn_eval_mode_loss, d.batch_size,
        r.bn_samples, r.bn_only_train_right, r.bn_only_eval_right, bn_z);
    f.fix =
        "lower the BatchNorm momentum (bn_momentum = 0.1 or less for small batches), use larger batches, and evaluate "
        "in eval mode";
    out.push_back(f);
  }

  // Over-fitting: validation loss rising while training loss falls.
  if (r.validations.size() >= 3) {
    std::size_t best = 0;
    for (std::size_t i = 1; i < r.validations.size(); ++i)
      if (r.validations[i].val_loss < r.validations[best].val_loss) best = i;
    const Validation& b = r.validations[best];
    const Validation& last = r.validations.back();
    // Only a model that fits its training data over-fits (a diverged run's losses say nothing).
    if (best + 2 <= r.validations.size() - 1 && last.val_loss > 1.1 * b.val_loss && last.train_loss < b.train_loss &&
        last.train_loss < lnk) {
      Finding f{"overfitting", "warning", 0.8, {{"step", b.step}}, "", ""};
      f.evidence = fmt::format(
          "validation loss rose from {:.4g} (step {}) to {:.4g} (step {}) while the training loss fell from {:.4g} to "
          "{:.4g}; "
          "{} training samples",
          b.val_loss, b.step, last.val_loss, last.step, b.train_loss, last.train_loss, d.train.size);
      f.fix =
          "more data or augmentation, dropout (model.mlp.dropout), weight decay, a smaller model, and early_stopping "
          "on val_loss";
      out.push_back(f);
    }
  }

  // The loader as the bottleneck.
  if (r.steps >= 20 && r.seconds >= 0.5 && r.data_wait > 0.5 * r.seconds) {
    Finding f{"data-loading-bottleneck", "warning", 0.8, {{"data_wait_share", r.data_wait / r.seconds}}, "", ""};
    f.evidence = fmt::format(
        "{:.0f}% of the {:.1f} s of training went to waiting for the next batch (data.loader.num_workers = {})",
        100 * r.data_wait / r.seconds, r.seconds, cfg.data.loader.num_workers);
    f.fix =
        "raise data.loader.num_workers (and prefetch_factor), keep the data in memory, move per-sample work out of "
        "get_batch";
    out.push_back(f);
  }

  // fp16 with a gradient scaler that keeps skipping.
  if (r.scaler_skips > 0 && r.steps > 0 && static_cast<double>(r.scaler_skips) > 0.25 * static_cast<double>(r.steps)) {
    Finding f{"low-precision-overflow", "error", 0.8, {{"steps_skipped", r.scaler_skips}}, "", ""};
    f.evidence = fmt::format("the fp16 gradient scaler found Inf/NaN gradients in {} of {} steps and skipped them",
                             r.scaler_skips, r.steps);
    f.fix =
        "train in bf16-mixed or 32, or find the op that overflows (glassbox doctor with precision = \"32\" shows the "
        "magnitudes)";
    out.push_back(f);
  }
  (void)lnk;
}

}  // namespace glassbox::inspect::detail
