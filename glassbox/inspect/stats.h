// Statistics of activations, weights and gradients, computed on the tensors' device and brought
// to the host with one copy for a whole set (never one sync per number).
//
//   at::Tensor row = activation_stats_row(output);           // [kActivationStats] float64, on device
//   std::vector<ActivationStats> s = activation_stats_to_host({row1, row2});
//   std::vector<ParameterStats> p = parameter_stats(params); // norms, std, max |.| of values and grads
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

namespace glassbox::inspect {

inline constexpr int kActivationStats = 8;

struct ActivationStats {
  double mean = 0, std = 0, min = 0, max = 0;
  double zero_fraction = 0;  // share of exactly-zero values
  // Share of units (channels: dim 1) never positive over the whole batch (and all positions):
  // after a ReLU these units pass no gradient. NaN for outputs without a unit dimension.
  double dead_fraction = 0;
  double nonfinite = 0;  // count of NaN/Inf values
  double numel = 0;
  nlohmann::json to_json() const;
};

// [kActivationStats] float64 on x's device: mean, std (population), min, max, zero fraction,
// dead-unit fraction, non-finite count, element count. Statistics other than the counts are
// over the finite values only (so one Inf does not hide the rest of the distribution).
at::Tensor activation_stats_row(const at::Tensor& x);
std::vector<ActivationStats> activation_stats_to_host(const std::vector<at::Tensor>& rows);

struct TensorSummary {
  double norm = 0, std = 0, max_abs = 0, mean = 0;
  double nonfinite = 0;
};

struct ParameterStats {
  std::string name;
  std::int64_t numel = 0;
  TensorSummary value;
  TensorSummary grad;  // all zero with has_grad = false when the parameter has no gradient
  bool has_grad = false;
  nlohmann::json to_json() const;
};

struct NamedTensor {
  std::string name;
  at::Tensor tensor;
};

// Summaries of parameter values and their .grad(), one device->host copy in all. Computed over
// all values (a non-finite value makes them NaN/Inf; `nonfinite` counts them).
std::vector<ParameterStats> parameter_stats(const std::vector<NamedTensor>& params);

// ||after - before|| / ||before|| per pair (the update-to-weight ratio), one copy in all.
std::vector<double> update_ratios(const std::vector<at::Tensor>& before, const std::vector<at::Tensor>& after);

// The q-quantile (0..1) of values with linear interpolation (numpy's default method).
double quantile(std::vector<double> values, double q);

}  // namespace glassbox::inspect
