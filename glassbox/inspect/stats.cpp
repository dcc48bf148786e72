#include "glassbox/inspect/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <torch/torch.h>

namespace glassbox::inspect {

namespace {

nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

nlohmann::json summary_json(const TensorSummary& s) {
  return {{"norm", num(s.norm)}, {"std", num(s.std)}, {"max_abs", num(s.max_abs)}, {"mean", num(s.mean)}, {"nonfinite", s.nonfinite}};
}

}  // namespace

nlohmann::json ActivationStats::to_json() const {
  return {{"mean", num(mean)},
          {"std", num(std)},
          {"min", num(min)},
          {"max", num(max)},
          {"zero_fraction", num(zero_fraction)},
          {"dead_fraction", num(dead_fraction)},
          {"nonfinite", nonfinite},
          {"numel", numel}};
}

nlohmann::json ParameterStats::to_json() const {
  nlohmann::json j = {{"name", name}, {"numel", numel}, {"value", summary_json(value)}};
  j["grad"] = has_grad ? summary_json(grad) : nlohmann::json(nullptr);
  return j;
}

at::Tensor activation_stats_row(const at::Tensor& t) {
  at::Tensor x = t.detach();
  const auto dopts = torch::TensorOptions().dtype(torch::kDouble).device(x.device());
  if (x.numel() == 0) return torch::zeros({kActivationStats}, dopts);
  if (!x.is_floating_point()) x = x.to(torch::kFloat);
  if (x.scalar_type() != torch::kFloat && x.scalar_type() != torch::kDouble) x = x.to(torch::kFloat);
  at::Tensor finite = torch::isfinite(x);
  at::Tensor zero = torch::zeros({}, x.options());
  at::Tensor n = finite.sum().to(torch::kDouble);
  at::Tensor xf = torch::where(finite, x, zero);
  at::Tensor mean = xf.sum(torch::kDouble) / n.clamp_min(1);
  at::Tensor var = torch::where(finite, (xf.to(torch::kDouble) - mean).square(), torch::zeros({}, dopts)).sum() / n.clamp_min(1);
  const double inf = std::numeric_limits<double>::infinity();
  at::Tensor mn = torch::where(finite, x, torch::full({}, inf, x.options())).min().to(torch::kDouble);
  at::Tensor mx = torch::where(finite, x, torch::full({}, -inf, x.options())).max().to(torch::kDouble);
  at::Tensor zeros = (x == 0).sum().to(torch::kDouble) / static_cast<double>(x.numel());
  at::Tensor dead;
  if (x.dim() >= 2 && x.size(0) > 0) {
    at::Tensor alive = (x > 0).reshape({x.size(0), x.size(1), -1}).any(2).any(0);  // [C]
    dead = 1.0 - alive.to(torch::kDouble).mean();
  } else {
    dead = torch::full({}, std::numeric_limits<double>::quiet_NaN(), dopts);
  }
  at::Tensor count = torch::full({}, static_cast<double>(x.numel()), dopts);
  return torch::stack({mean, var.sqrt(), mn, mx, zeros, dead, count - n, count});
}

std::vector<ActivationStats> activation_stats_to_host(const std::vector<at::Tensor>& rows) {
  std::vector<ActivationStats> out;
  if (rows.empty()) return out;
  at::Tensor all = torch::stack(rows).to(torch::kCPU).contiguous();
  const double* d = all.data_ptr<double>();
  out.resize(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const double* r = d + i * kActivationStats;
    out[i] = ActivationStats{r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]};
    if (!std::isfinite(out[i].min)) out[i].min = std::numeric_limits<double>::quiet_NaN();  // no finite value
    if (!std::isfinite(out[i].max)) out[i].max = std::numeric_limits<double>::quiet_NaN();
  }
  return out;
}

std::vector<ParameterStats> parameter_stats(const std::vector<NamedTensor>& params) {
  std::vector<ParameterStats> out(params.size());
  if (params.empty()) return out;
  torch::NoGradGuard no_grad;
  // All tensors (values, then the gradients that exist): the 2-norm and the max-norm from two
  // multi-tensor kernels, the sum from one reduction each; std follows from the first two
  // moments. One device->host copy in all.
  std::vector<at::Tensor> all;
  all.reserve(params.size() * 2);
  for (std::size_t i = 0; i < params.size(); ++i) {
    out[i].name = params[i].name;
    out[i].numel = params[i].tensor.numel();
    all.push_back(params[i].tensor.detach());
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& g = params[i].tensor.grad();
    out[i].has_grad = g.defined();
    if (g.defined()) all.push_back(g);
  }
  std::vector<at::Tensor> sums;
  sums.reserve(all.size());
  for (const auto& t : all) sums.push_back(t.sum(torch::kDouble));
  at::Tensor host = torch::cat({torch::stack(at::_foreach_norm(all, 2)).to(torch::kDouble), torch::stack(at::_foreach_norm(all, INFINITY)).to(torch::kDouble),
                                torch::stack(sums)})
                        .to(torch::kCPU)
                        .contiguous();
  const double* d = host.data_ptr<double>();
  const std::size_t n = all.size();
  auto summary = [&](std::size_t k) {
    TensorSummary s;
    const double numel = static_cast<double>(std::max<std::int64_t>(1, all[k].numel()));
    s.norm = d[k];
    s.max_abs = d[n + k];
    s.mean = d[2 * n + k];
    s.mean /= numel;
    s.std = std::sqrt(std::max(0.0, s.norm * s.norm / numel - s.mean * s.mean));
    // Only a tensor with a NaN/Inf has a non-finite norm: count those values then (rare).
    if (!std::isfinite(s.norm)) s.nonfinite = static_cast<double>(all[k].numel()) - torch::isfinite(all[k]).sum().item<double>();
    return s;
  };
  std::size_t gk = params.size();
  for (std::size_t i = 0; i < params.size(); ++i) {
    out[i].value = summary(i);
    if (out[i].has_grad) out[i].grad = summary(gk++);
  }
  return out;
}

std::vector<double> update_ratios(const std::vector<at::Tensor>& before, const std::vector<at::Tensor>& after) {
  std::vector<double> out(before.size(), 0.0);
  if (before.empty()) return out;
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> a;
  a.reserve(after.size());
  for (const auto& t : after) a.push_back(t.detach());
  // Multi-tensor kernels: the differences, their norms and the weights' norms.
  const auto diffs = at::_foreach_sub(a, before);
  at::Tensor dn = torch::stack(at::_foreach_norm(diffs, 2)).to(torch::kDouble);
  at::Tensor bn = torch::stack(at::_foreach_norm(before, 2)).to(torch::kDouble);
  at::Tensor all = (dn / bn.clamp_min(1e-30)).to(torch::kCPU).contiguous();
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = all.data_ptr<double>()[i];
  return out;
}

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (pos - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

}  // namespace glassbox::inspect
