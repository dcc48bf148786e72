#include "glassbox/train/precision.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::train {

AutocastScope::AutocastScope(c10::DeviceType device, c10::ScalarType dtype, bool enabled)
    : device_(device), enabled_(enabled) {
  if (!enabled_) return;
  prev_enabled_ = at::autocast::is_autocast_enabled(device_);
  prev_dtype_ = at::autocast::get_autocast_dtype(device_);
  at::autocast::set_autocast_enabled(device_, true);
  at::autocast::set_autocast_dtype(device_, dtype);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!enabled_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_, prev_enabled_);
  at::autocast::set_autocast_dtype(device_, prev_dtype_);
}

Precision::Precision(PrecisionMode mode, c10::Device device) : mode_(mode), device_(device) {
  switch (mode) {
    case PrecisionMode::k32: return;
    case PrecisionMode::kBf16Mixed:
      autocast_ = true;
      dtype_ = c10::kBFloat16;
      return;
    case PrecisionMode::k16Mixed: break;
  }
  {
    GB_CHECK(device.is_cuda(), InvalidArgument,
             "trainer.precision = \"16-mixed\" needs a CUDA device, this run uses " << device.str(),
             "use trainer.precision = \"bf16-mixed\" on CPU");
    autocast_ = true;
    dtype_ = c10::kHalf;
    scaler_ = true;
    auto opts = torch::TensorOptions().device(device).dtype(torch::kFloat);
    scale_ = torch::full({1}, 65536.0, opts);
    growth_tracker_ = torch::zeros({1}, opts.dtype(torch::kInt));
    found_inf_tensor_ = torch::zeros({1}, opts);
  }
}

std::unique_ptr<AutocastScope> Precision::autocast() const {
  return std::make_unique<AutocastScope>(device_.type(), dtype_, autocast_);
}

at::Tensor Precision::scale(const at::Tensor& loss) const { return scaler_ ? loss * scale_ : loss; }

void Precision::unscale(const std::vector<at::Tensor>& params) {
  if (!scaler_ || unscaled_) return;
  std::vector<at::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  found_inf_tensor_.zero_();
  at::Tensor inv = scale_.to(torch::kDouble).reciprocal().to(torch::kFloat);
  if (!grads.empty()) at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_tensor_, inv);
  found_inf_ = found_inf_tensor_.item<float>() != 0.0f;
  unscaled_ = true;
}

void Precision::update() {
  if (!scaler_) return;
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf_tensor_, 2.0, 0.5, 2000);
  unscaled_ = false;
  found_inf_ = false;
}

double Precision::current_scale() const { return scaler_ ? scale_.item<double>() : 1.0; }

at::Tensor Precision::scaler_state() const {
  if (!scaler_) return {};
  return torch::stack(
      {scale_.to(torch::kCPU, torch::kDouble).squeeze(), growth_tracker_.to(torch::kCPU, torch::kDouble).squeeze()});
}

void Precision::load_scaler_state(const at::Tensor& state) {
  if (!scaler_ || !state.defined()) return;
  scale_.fill_(state[0].item<double>());
  growth_tracker_.fill_(static_cast<int>(state[1].item<double>()));
}

}  // namespace glassbox::train
