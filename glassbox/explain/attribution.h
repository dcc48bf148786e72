// Attributions per input feature: how much each input value of a sample drives the score of a
// class. For tabular models ([N, F] inputs), where class activation maps do not apply; any input
// shape [N, ...] works the same way.
//
//   IntegratedGradientsOptions o;                          // baseline zeros, 50 steps, gausslegendre
//   Attribution ig = integrated_gradients(model, x, {});   // x: [N, F]; {}: the predicted classes
//   ig.attributions;   // [N, F], shaped like x
//   ig.delta;          // [N] sum(attributions) - (F(x) - F(baseline)) of the target output
//   Attribution s = saliency(model, x, {2, 0, -1});        // |d y_t / d x|; -1: the prediction
//   auto bars = feature_importance(ig.attributions, {"age", "income", "tenure"});
//   nlohmann::json j = to_json(bars);                       // [{"name", "index", "value"}, ...]
//
// Definitions, as captum 0.9.0 computes them (captum.attr.Saliency, captum.attr.IntegratedGradients):
//   saliency              |d y_t(x) / d x| (abs = true, captum's default), or the signed gradient
//   integrated_gradients  (x - b) * sum_s w_s * d y_t(b + a_s (x - b)) / d x, with the nodes a_s and
//                         weights w_s of the method over [0, 1]:
//     gausslegendre       (default) the n-point Gauss-Legendre rule (numpy's leggauss), scaled
//                         from [-1, 1]: a = (1 + node) / 2, w = weight / 2; n >= 1
//     riemann_trapezoid   a = linspace(0, 1, n), w = 1/n with the two ends halved; n >= 2 (the
//                         weights sum to 1 - 1/n, as captum's do: not exact for a linear model)
//     riemann_left        a = linspace(0, 1 - 1/n, n), w = 1/n; n >= 2
//     riemann_right       a = linspace(1/n, 1, n), w = 1/n; n >= 2
//     riemann_middle      a = linspace(1/(2n), 1 - 1/(2n), n), w = 1/n; n >= 2
// y_t is the model's raw output for the target class t (no softmax is applied here). The target is
// one class per sample, -1 (or no targets at all) for the predicted one (argmax of y(x)).
// The baseline b is zeros by default, or a tensor shaped like x, like one sample ([F]), or [1, F]
// (broadcast to every sample). internal_batch_size bounds the rows of one forward: with N samples
// it evaluates max(1, internal_batch_size / N) steps at a time (captum's internal batching).
//
// The model runs in evaluation mode (and is left in the mode it had). Gradients are taken with
// respect to the input alone (torch::autograd::grad): the parameters' .grad stay as they were.
// Outputs must be [N, K] (or [N], read as one class). Wrong shapes, a target outside 0..K-1 or
// too few steps are InvalidArgument errors naming the problem and the fix.
// Thread safety: one call at a time per model; feature_importance and to_json are reentrant.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include "glassbox/nn/model.h"

namespace glassbox::explain {

enum class IgMethod { GaussLegendre, RiemannTrapezoid, RiemannLeft, RiemannRight, RiemannMiddle };
// gausslegendre | riemann_trapezoid | riemann_left | riemann_right | riemann_middle (captum's names)
IgMethod parse_ig_method(const std::string& name);
std::string ig_method_name(IgMethod m);

// The nodes a_s in [0, 1] and weights w_s (captum's alphas and step sizes) of a method.
struct Quadrature {
  std::vector<double> alphas;
  std::vector<double> weights;
};
Quadrature ig_quadrature(IgMethod method, std::int64_t n_steps);

struct SaliencyOptions {
  bool abs = true;  // |gradient| (captum's default); false: the signed gradient
};

struct IntegratedGradientsOptions {
  at::Tensor baseline;  // undefined: zeros; else shaped like x, like one sample, or [1, ...]
  std::int64_t n_steps = 50;
  IgMethod method = IgMethod::GaussLegendre;
  std::int64_t internal_batch_size = 0;  // rows per forward; 0: all n_steps * N rows at once
};

struct Attribution {
  at::Tensor attributions;            // shaped like x, x's dtype
  at::Tensor delta;                   // [N] integrated gradients' convergence delta; undefined for saliency
  at::Tensor outputs;                 // [N, K] the model's outputs for x
  std::vector<std::int64_t> targets;  // the class explained for each sample
};

// Any forward that maps [N, ...] to [N, K]; the caller's module is put in evaluation mode.
using ForwardFn = std::function<at::Tensor(const at::Tensor&)>;

Attribution saliency(nn::Model& model, const at::Tensor& x, const std::vector<std::int64_t>& targets,
                     const SaliencyOptions& options = {});
Attribution saliency(torch::nn::Module& module, const ForwardFn& forward, const at::Tensor& x,
                     const std::vector<std::int64_t>& targets, const SaliencyOptions& options = {});

Attribution integrated_gradients(nn::Model& model, const at::Tensor& x, const std::vector<std::int64_t>& targets,
                                 const IntegratedGradientsOptions& options = {});
Attribution integrated_gradients(torch::nn::Module& module, const ForwardFn& forward, const at::Tensor& x,
                                 const std::vector<std::int64_t>& targets,
                                 const IntegratedGradientsOptions& options = {});

// One bar of a feature-importance chart.
struct FeatureImportance {
  std::string name;        // the feature's name, or "f<index>" when none are given
  std::int64_t index = 0;  // position in the flattened sample
  double value = 0;        // mean |attribution| over the samples
};

// Mean |attribution| per feature over the samples (dim 0; a sample's other dims are flattened),
// largest first (ties keep the feature order). names: empty, or one per feature.
std::vector<FeatureImportance> feature_importance(const at::Tensor& attributions,
                                                  const std::vector<std::string>& names = {});
// [{"name": ..., "index": ..., "value": ...}, ...] in the ranked order.
nlohmann::json to_json(const std::vector<FeatureImportance>& importance);

}  // namespace glassbox::explain
