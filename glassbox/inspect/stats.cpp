#include "glassbox/inspect/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <torch/torch.h>

namespace glassbox::inspect {

namespace {

nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

nlohmann::json summary_json(const TensorSummary& s) {
  return {{"norm", num(s.norm)},
          {"std", num(s.std)},
          {"max_abs", num(s.max_abs)},
          {"mean", num(s.mean)},
          {"nonfinite", s.nonfinite}};
}

// The CPU path: two branch-free passes over the values (count, sum, min, max and zeros of the
// finite ones; then the squared deviations from the mean) and one pass for the live channels,
// instead of a dozen ATen reductions on temporaries. A probe takes statistics of every layer's
// output, and on small layers the dispatch cost of those reductions dominated the probe step.
template <typename T>
at::Tensor activation_stats_cpu(const at::Tensor& x) {
  const at::Tensor c = x.contiguous();
  const T* d = c.const_data_ptr<T>();
  const std::int64_t numel = c.numel();
  const T big = std::numeric_limits<T>::max();
  // Eight independent accumulators per quantity: the loop is bound by the latency of one chain
  // of double additions otherwise (and the compiler may not reorder floating-point sums).
  constexpr int kLanes = 8;
  double ln[kLanes] = {}, lsum[kLanes] = {}, lzero[kLanes] = {};
  T lmn[kLanes], lmx[kLanes];
  std::fill(lmn, lmn + kLanes, std::numeric_limits<T>::infinity());
  std::fill(lmx, lmx + kLanes, -std::numeric_limits<T>::infinity());
  const std::int64_t whole = numel - numel % kLanes;
  auto take = [&](int l, T v) {
    const bool finite = v >= -big && v <= big;  // false for NaN and +-Inf
    ln[l] += finite ? 1.0 : 0.0;
    lsum[l] += finite ? static_cast<double>(v) : 0.0;
    lmn[l] = finite && v < lmn[l] ? v : lmn[l];
    lmx[l] = finite && v > lmx[l] ? v : lmx[l];
    lzero[l] += v == T(0) ? 1.0 : 0.0;
  };
  for (std::int64_t i = 0; i < whole; i += kLanes)
    for (int l = 0; l < kLanes; ++l) take(l, d[i + l]);
  for (std::int64_t i = whole; i < numel; ++i) take(0, d[i]);
  double n = 0, sum = 0, zeros = 0;
  T mn = std::numeric_limits<T>::infinity(), mx = -std::numeric_limits<T>::infinity();
  for (int l = 0; l < kLanes; ++l) {
    n += ln[l];
    sum += lsum[l];
    zeros += lzero[l];
    mn = std::min(mn, lmn[l]);
    mx = std::max(mx, lmx[l]);
  }
  const double mean = sum / std::max(n, 1.0);
  double lss[kLanes] = {};
  auto dev = [&](int l, T v) {
    const bool finite = v >= -big && v <= big;
    const double dv = finite ? static_cast<double>(v) - mean : 0.0;
    lss[l] += dv * dv;
  };
  for (std::int64_t i = 0; i < whole; i += kLanes)
    for (int l = 0; l < kLanes; ++l) dev(l, d[i + l]);
  for (std::int64_t i = whole; i < numel; ++i) dev(0, d[i]);
  double ss = 0;
  for (double v : lss) ss += v;
  // Units are the channels (dim 1): a unit is alive when it is positive anywhere in the batch.
  double dead = std::numeric_limits<double>::quiet_NaN();
  if (c.dim() >= 2 && c.size(0) > 0 && c.size(1) > 0) {
    const std::int64_t batch = c.size(0), channels = c.size(1), inner = numel / (batch * channels);
    std::vector<unsigned char> alive(static_cast<std::size_t>(channels), 0);
    for (std::int64_t b = 0; b < batch; ++b) {
      const T* row = d + b * channels * inner;
      if (inner == 1) {
        for (std::int64_t ch = 0; ch < channels; ++ch)
          alive[static_cast<std::size_t>(ch)] |= static_cast<unsigned char>(row[ch] > T(0));
      } else {
        for (std::int64_t ch = 0; ch < channels; ++ch) {
          const T* p = row + ch * inner;
          unsigned char any = 0;
          for (std::int64_t i = 0; i < inner; ++i) any |= static_cast<unsigned char>(p[i] > T(0));
          alive[static_cast<std::size_t>(ch)] |= any;
        }
      }
    }
    double live = 0;
    for (unsigned char a : alive) live += a != 0 ? 1.0 : 0.0;
    dead = 1.0 - live / static_cast<double>(channels);
  }
  const double count = static_cast<double>(numel);
  const double inf = std::numeric_limits<double>::infinity();
  at::Tensor out = torch::empty({kActivationStats}, torch::TensorOptions().dtype(torch::kDouble));
  double* o = out.data_ptr<double>();
  const double row_values[kActivationStats] = {mean,
                                               std::sqrt(ss / std::max(n, 1.0)),
                                               n > 0 ? static_cast<double>(mn) : inf,
                                               n > 0 ? static_cast<double>(mx) : -inf,
                                               zeros / count,
                                               dead,
                                               count - n,
                                               count};
  std::copy(row_values, row_values + kActivationStats, o);
  return out;
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
  if (x.device().is_cpu())
    return x.scalar_type() == torch::kDouble ? activation_stats_cpu<double>(x) : activation_stats_cpu<float>(x);
  // Elsewhere: reductions that stay on the device (no sync per layer).
  at::Tensor finite = torch::isfinite(x);
  at::Tensor zero = torch::zeros({}, x.options());
  at::Tensor n = finite.sum().to(torch::kDouble);
  at::Tensor xf = torch::where(finite, x, zero);
  at::Tensor mean = xf.sum(torch::kDouble) / n.clamp_min(1);
  at::Tensor var =
      torch::where(finite, (xf.to(torch::kDouble) - mean).square(), torch::zeros({}, dopts)).sum() / n.clamp_min(1);
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
  // All tensors (values, then the gradients that exist): the 2-norm from one multi-tensor kernel,
  // the largest magnitude from aminmax and the sum from one float reduction each (cascade summed);
  // std follows from the first two moments. One device->host copy in all. (_foreach_norm with
  // p = inf and sums accumulated in double are ten times slower on a CPU: 4 of the 5 ms a probe
  // of the quickstart MLP took.)
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
  std::vector<at::Tensor> sums, mins, maxs,
      wide;  // wide: half/bfloat16 upcast for the norm (a bf16 norm keeps 3 digits)
  wide.reserve(all.size());
  for (const auto& t : all) wide.push_back(t.element_size() < 4 ? t.to(torch::kFloat) : t);
  sums.reserve(all.size());
  mins.reserve(all.size());
  maxs.reserve(all.size());
  for (const auto& t : all) {
    if (t.numel() == 0) {
      const at::Tensor z = torch::zeros({}, t.options());
      sums.push_back(z);
      mins.push_back(z);
      maxs.push_back(z);
      continue;
    }
    sums.push_back(t.element_size() < 4 ? t.sum(torch::kFloat) : t.sum());  // half/bfloat16 would overflow
    auto [lo, hi] = torch::aminmax(t);
    mins.push_back(lo);
    maxs.push_back(hi);
  }
  at::Tensor max_abs =
      torch::maximum(torch::stack(mins).to(torch::kDouble).neg(), torch::stack(maxs).to(torch::kDouble));
  at::Tensor host = torch::cat({torch::stack(at::_foreach_norm(wide, 2)).to(torch::kDouble), max_abs,
                                torch::stack(sums).to(torch::kDouble)})
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
    if (!std::isfinite(s.norm))
      s.nonfinite = static_cast<double>(all[k].numel()) - torch::isfinite(all[k]).sum().item<double>();
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
