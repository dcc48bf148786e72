// Mixed precision: autocast scopes and the fp16 gradient scaler.
//
//   Precision p(PrecisionMode::kBf16Mixed, device);   // k32 | kBf16Mixed | k16Mixed (CUDA only)
//   { auto scope = p.autocast(); out = task.training_step(batch); }
//   p.scale(loss).backward(); p.unscale(params); clip(...); if (p.step_ok()) opt.step(); p.update();
//
// The scaler follows torch.amp.GradScaler: init scale 65536, growth 2 every 2000 good steps,
// backoff 0.5 on a non-finite gradient (the step is then skipped).
// Thread safety: training thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "glassbox/train/trainer_options.h"

namespace glassbox::train {

class AutocastScope {
 public:
  AutocastScope(c10::DeviceType device, c10::ScalarType dtype, bool enabled);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_;
  bool enabled_;
  bool prev_enabled_ = false;
  c10::ScalarType prev_dtype_{};
};

class Precision {
 public:
  Precision(PrecisionMode mode, c10::Device device);
  std::unique_ptr<AutocastScope> autocast() const;
  bool uses_scaler() const { return scaler_; }
  at::Tensor scale(const at::Tensor& loss) const;
  // Unscales the gradients in place; records whether any is non-finite.
  void unscale(const std::vector<at::Tensor>& params);
  bool step_ok() const { return !found_inf_; }
  void update();
  double current_scale() const;
  at::Tensor scaler_state() const;  // [scale, growth_tracker] float64
  void load_scaler_state(const at::Tensor& state);
  PrecisionMode mode() const { return mode_; }

 private:
  PrecisionMode mode_;
  c10::Device device_;
  bool autocast_ = false;
  c10::ScalarType dtype_ = c10::kFloat;
  bool scaler_ = false;
  at::Tensor scale_, growth_tracker_, found_inf_tensor_;
  bool found_inf_ = false;
  bool unscaled_ = false;
};

}  // namespace glassbox::train
