#include "glassbox/explain/attribution.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::explain {

namespace {

std::string shape_str(at::IntArrayRef s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

void check_input(const at::Tensor& x, const char* what) {
  GB_CHECK(x.defined() && x.dim() >= 1 && x.size(0) >= 1, InvalidArgument,
           what << ": the inputs must be a tensor [N, ...] with N >= 1 samples",
           "pass the samples to explain stacked along dim 0");
  GB_CHECK(x.is_floating_point(), InvalidArgument,
           what << ": the inputs must be floating point to take gradients, got " << x.scalar_type(),
           "convert the inputs with .to(torch::kFloat)");
}

// The model's outputs as [rows, K]: [rows] is read as one class.
at::Tensor as_scores(const at::Tensor& out, std::int64_t rows, const char* what) {
  const at::Tensor y = out.dim() == 1 ? out.unsqueeze(1) : out;
  GB_CHECK(y.dim() == 2 && y.size(0) == rows, InvalidArgument,
           what << ": the model's output for " << rows << " samples is " << shape_str(out.sizes()) << ", not [" << rows
                << ", K]",
           "explain a model whose forward returns one row of class scores per sample");
  return y;
}

std::vector<std::int64_t> resolve_targets(const at::Tensor& scores, const std::vector<std::int64_t>& targets,
                                          const char* what) {
  const std::int64_t n = scores.size(0), k = scores.size(1);
  GB_CHECK(targets.empty() || static_cast<std::int64_t>(targets.size()) == n, InvalidArgument,
           what << ": " << targets.size() << " target classes for " << n << " samples",
           "give one class per sample (-1 for the predicted one), or none for the predicted ones");
  const at::Tensor pred = scores.argmax(1).to(torch::kCPU);
  std::vector<std::int64_t> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t t = targets.empty() ? -1 : targets[static_cast<std::size_t>(i)];
    GB_CHECK(t >= -1 && t < k, InvalidArgument,
             what << ": target class " << t << " of sample " << i << " is outside 0.." << k - 1,
             "choose a class the model outputs, or -1 for the predicted one");
    out[static_cast<std::size_t>(i)] = t >= 0 ? t : pred[i].item<std::int64_t>();
  }
  return out;
}

// scores[i, targets[i mod N]] for every row i of a batch of `repeats` copies of the N samples.
at::Tensor target_scores(const at::Tensor& scores, const std::vector<std::int64_t>& targets, std::int64_t repeats) {
  const at::Tensor t = torch::tensor(targets, torch::kLong).to(scores.device()).repeat({repeats});
  return scores.gather(1, t.unsqueeze(1)).squeeze(1);
}

// The baseline as a tensor shaped like x.
at::Tensor expand_baseline(const at::Tensor& baseline, const at::Tensor& x) {
  if (!baseline.defined()) return torch::zeros_like(x);
  const at::IntArrayRef sample = x.sizes().slice(1);
  const at::Tensor b = baseline.to(x.device(), x.scalar_type());
  if (b.sizes() == x.sizes()) return b;
  if (b.dim() == x.dim() && b.size(0) == 1 && b.sizes().slice(1) == sample) return b.expand(x.sizes());
  if (b.sizes() == sample) return b.unsqueeze(0).expand(x.sizes());
  GB_THROW(InvalidArgument,
           "integrated_gradients: the baseline " << shape_str(b.sizes()) << " does not fit the inputs "
                                                 << shape_str(x.sizes()),
           fmt::format("give a baseline shaped {}, {} (one sample) or [1, ...], or none for zeros",
                       shape_str(x.sizes()), shape_str(sample)));
}

// d sum_i scores[i, t_i] / d in, zeros where the output does not depend on the input.
at::Tensor target_gradient(const at::Tensor& in, const at::Tensor& selected) {
  const auto g = torch::autograd::grad({selected.sum()}, {in}, /*grad_outputs=*/{}, /*retain_graph=*/false,
                                       /*create_graph=*/false, /*allow_unused=*/true);
  return g[0].defined() ? g[0] : torch::zeros_like(in);
}

// n-point Gauss-Legendre rule on [-1, 1]: nodes ascending, weights summing to 2. Each root of
// P_n by Newton's method from the usual cosine guess, then symmetrised (the rule is symmetric
// about 0) and the weights renormalised, which leaves them accurate to a few ulps.
void gauss_legendre(std::int64_t n, std::vector<double>& nodes, std::vector<double>& weights) {
  const auto un = static_cast<std::size_t>(n);
  nodes.assign(un, 0.0);
  weights.assign(un, 0.0);
  // P_n(z) and P_n'(z) by the three-term recurrence.
  auto legendre = [n](double z, double& p, double& dp) {
    double p0 = 1.0, p1 = z;
    for (std::int64_t k = 2; k <= n; ++k) {
      const double p2 = ((2.0 * k - 1.0) * z * p1 - (k - 1.0) * p0) / static_cast<double>(k);
      p0 = p1;
      p1 = p2;
    }
    p = p1;
    dp = static_cast<double>(n) * (z * p1 - p0) / (z * z - 1.0);
  };
  for (std::int64_t i = 0; i < n; ++i) {
    double z = std::cos(std::numbers::pi * (static_cast<double>(i) + 0.75) / (static_cast<double>(n) + 0.5));
    double p = 0, dp = 0;
    for (int it = 0; it < 100; ++it) {
      legendre(z, p, dp);
      const double dz = p / dp;
      z -= dz;
      if (std::abs(dz) <= 1e-16) break;
    }
    legendre(z, p, dp);
    const auto at = static_cast<std::size_t>(n - 1 - i);  // the guesses descend
    nodes[at] = z;
    weights[at] = 2.0 / ((1.0 - z * z) * dp * dp);
  }
  std::vector<double> x(un), w(un);
  double sum = 0;
  for (std::size_t i = 0; i < un; ++i) {
    x[i] = (nodes[i] - nodes[un - 1 - i]) / 2.0;
    w[i] = (weights[i] + weights[un - 1 - i]) / 2.0;
    sum += w[i];
  }
  for (std::size_t i = 0; i < un; ++i) {
    nodes[i] = x[i];
    weights[i] = w[i] * 2.0 / sum;
  }
}

Attribution saliency_impl(const ForwardFn& forward, const at::Tensor& x, const std::vector<std::int64_t>& targets,
                          const SaliencyOptions& options) {
  constexpr const char* what = "saliency";
  check_input(x, what);
  torch::AutoGradMode grad_mode(true);
  const at::Tensor in = x.detach().clone().requires_grad_(true);
  const at::Tensor scores = as_scores(forward(in), x.size(0), what);
  Attribution r;
  r.targets = resolve_targets(scores.detach(), targets, what);
  const at::Tensor g = target_gradient(in, target_scores(scores, r.targets, 1));
  r.attributions = options.abs ? g.abs() : g;
  r.outputs = scores.detach();
  return r;
}

Attribution integrated_gradients_impl(const ForwardFn& forward, const at::Tensor& x,
                                      const std::vector<std::int64_t>& targets,
                                      const IntegratedGradientsOptions& options) {
  constexpr const char* what = "integrated_gradients";
  check_input(x, what);
  GB_CHECK(options.internal_batch_size >= 0, InvalidArgument,
           what << ": internal_batch_size must be >= 0, got " << options.internal_batch_size,
           "use 0 for one forward over every step, or the most rows one forward may take");
  const Quadrature q = ig_quadrature(options.method, options.n_steps);
  const at::Tensor xd = x.detach();
  const at::Tensor base = expand_baseline(options.baseline, xd);
  const std::int64_t n = xd.size(0);
  const std::int64_t steps = options.n_steps;

  Attribution r;
  at::Tensor base_scores;
  {
    torch::NoGradGuard no_grad;
    r.outputs = as_scores(forward(xd), n, what);
    base_scores = as_scores(forward(base.contiguous()), n, what);
  }
  r.targets = resolve_targets(r.outputs, targets, what);

  torch::AutoGradMode grad_mode(true);
  const at::Tensor diff = xd - base;
  std::vector<std::int64_t> step_shape(static_cast<std::size_t>(xd.dim()) + 1, 1);  // [s, 1, 1, ...]
  std::vector<std::int64_t> rows_shape = xd.sizes().vec();                          // [s * N, ...]
  const auto opts = torch::TensorOptions().dtype(torch::kDouble);
  const std::int64_t per_batch =
      options.internal_batch_size > 0 ? std::max<std::int64_t>(1, options.internal_batch_size / n) : steps;
  at::Tensor total = torch::zeros_like(xd);
  for (std::int64_t start = 0; start < steps; start += per_batch) {
    const std::int64_t count = std::min(per_batch, steps - start);
    step_shape[0] = count;
    rows_shape[0] = count * n;
    const auto from = q.alphas.begin() + start;
    const at::Tensor alphas =
        torch::tensor(std::vector<double>(from, from + count), opts).to(xd.device(), xd.scalar_type()).view(step_shape);
    const auto wfrom = q.weights.begin() + start;
    const at::Tensor weights = torch::tensor(std::vector<double>(wfrom, wfrom + count), opts)
                                   .to(xd.device(), xd.scalar_type())
                                   .view(step_shape);
    // Row s * N + i is sample i at node s: baseline + a_s * (x - baseline).
    const at::Tensor path = (base.unsqueeze(0) + alphas * diff.unsqueeze(0)).reshape(rows_shape).requires_grad_(true);
    const at::Tensor scores = as_scores(forward(path), count * n, what);
    const at::Tensor g = target_gradient(path, target_scores(scores, r.targets, count));
    std::vector<std::int64_t> split = xd.sizes().vec();
    split.insert(split.begin(), count);
    total = total + (g.reshape(split) * weights).sum(0);
  }
  r.attributions = (total * diff).detach();
  const at::Tensor ids = torch::tensor(r.targets, torch::kLong).to(xd.device()).unsqueeze(1);
  const at::Tensor gap = r.outputs.gather(1, ids).squeeze(1) - base_scores.gather(1, ids).squeeze(1);
  r.delta = r.attributions.reshape({n, -1}).sum(1) - gap;
  return r;
}

}  // namespace

IgMethod parse_ig_method(const std::string& name) {
  if (name == "gausslegendre") return IgMethod::GaussLegendre;
  if (name == "riemann_trapezoid") return IgMethod::RiemannTrapezoid;
  if (name == "riemann_left") return IgMethod::RiemannLeft;
  if (name == "riemann_right") return IgMethod::RiemannRight;
  if (name == "riemann_middle") return IgMethod::RiemannMiddle;
  GB_THROW(InvalidArgument, "unknown integrated gradients method '" << name << "'",
           "use gausslegendre, riemann_trapezoid, riemann_left, riemann_right or riemann_middle");
}

std::string ig_method_name(IgMethod m) {
  switch (m) {
    case IgMethod::GaussLegendre: return "gausslegendre";
    case IgMethod::RiemannTrapezoid: return "riemann_trapezoid";
    case IgMethod::RiemannLeft: return "riemann_left";
    case IgMethod::RiemannRight: return "riemann_right";
    case IgMethod::RiemannMiddle: return "riemann_middle";
  }
  return "gausslegendre";
}

Quadrature ig_quadrature(IgMethod method, std::int64_t n_steps) {
  GB_CHECK(n_steps >= 1, InvalidArgument, "integrated_gradients: n_steps must be >= 1, got " << n_steps,
           "use n_steps >= 1 (50 is the default)");
  Quadrature q;
  if (method == IgMethod::GaussLegendre) {
    gauss_legendre(n_steps, q.alphas, q.weights);
    for (auto& a : q.alphas) a = 0.5 * (1.0 + a);
    for (auto& w : q.weights) w *= 0.5;
    return q;
  }
  GB_CHECK(n_steps >= 2, InvalidArgument,
           "integrated_gradients: " << ig_method_name(method) << " needs n_steps >= 2, got " << n_steps,
           "use n_steps >= 2, or gausslegendre for a single step");
  const double n = static_cast<double>(n_steps);
  double lo = 0, hi = 1;
  switch (method) {
    case IgMethod::RiemannLeft: hi = 1 - 1 / n; break;
    case IgMethod::RiemannRight: lo = 1 / n; break;
    case IgMethod::RiemannMiddle:
      lo = 1 / (2 * n);
      hi = 1 - 1 / (2 * n);
      break;
    default: break;
  }
  // The nodes as float32 linspace gives them (what captum evaluates at).
  const at::Tensor a = torch::linspace(lo, hi, n_steps, torch::kFloat).to(torch::kDouble).contiguous();
  q.alphas.assign(a.data_ptr<double>(), a.data_ptr<double>() + n_steps);
  q.weights.assign(static_cast<std::size_t>(n_steps), 1 / n);
  if (method == IgMethod::RiemannTrapezoid) {
    q.weights.front() /= 2;
    q.weights.back() /= 2;
  }
  return q;
}

Attribution saliency(torch::nn::Module& module, const ForwardFn& forward, const at::Tensor& x,
                     const std::vector<std::int64_t>& targets, const SaliencyOptions& options) {
  nn::EvalModeScope eval(module);
  return saliency_impl(forward, x, targets, options);
}

Attribution saliency(nn::Model& model, const at::Tensor& x, const std::vector<std::int64_t>& targets,
                     const SaliencyOptions& options) {
  return saliency(
      *model.module(), [&model](const at::Tensor& t) { return model.forward(t); }, x, targets, options);
}

Attribution integrated_gradients(torch::nn::Module& module, const ForwardFn& forward, const at::Tensor& x,
                                 const std::vector<std::int64_t>& targets, const IntegratedGradientsOptions& options) {
  nn::EvalModeScope eval(module);
  return integrated_gradients_impl(forward, x, targets, options);
}

Attribution integrated_gradients(nn::Model& model, const at::Tensor& x, const std::vector<std::int64_t>& targets,
                                 const IntegratedGradientsOptions& options) {
  return integrated_gradients(
      *model.module(), [&model](const at::Tensor& t) { return model.forward(t); }, x, targets, options);
}

std::vector<FeatureImportance> feature_importance(const at::Tensor& attributions,
                                                  const std::vector<std::string>& names) {
  GB_CHECK(attributions.defined() && attributions.dim() >= 1 && attributions.size(0) >= 1, InvalidArgument,
           "feature_importance: the attributions must be a tensor [N, ...] with N >= 1 samples",
           "pass Attribution::attributions");
  const at::Tensor mean = attributions.detach()
                              .to(torch::kCPU, torch::kDouble)
                              .reshape({attributions.size(0), -1})
                              .abs()
                              .mean(0)
                              .contiguous();
  const std::int64_t f = mean.size(0);
  GB_CHECK(names.empty() || static_cast<std::int64_t>(names.size()) == f, InvalidArgument,
           "feature_importance: " << names.size() << " feature names for " << f << " features",
           "give one name per feature (in the order of the input's columns), or none");
  std::vector<FeatureImportance> out;
  out.reserve(static_cast<std::size_t>(f));
  const double* v = mean.data_ptr<double>();
  for (std::int64_t i = 0; i < f; ++i) {
    const auto ui = static_cast<std::size_t>(i);
    out.push_back({names.empty() ? "f" + std::to_string(i) : names[ui], i, v[i]});
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.value > b.value; });
  return out;
}

nlohmann::json to_json(const std::vector<FeatureImportance>& importance) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& fi : importance) j.push_back({{"name", fi.name}, {"index", fi.index}, {"value", fi.value}});
  return j;
}

}  // namespace glassbox::explain
