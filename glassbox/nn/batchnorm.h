// BatchNorm1d / BatchNorm2d: torch::nn's BatchNorm layers (same options, parameter and buffer
// names and printed form; `as<torch::nn::BatchNorm2d>()` finds them) that can
// compute their training statistics over several processes — PyTorch's SyncBatchNorm, which the
// C++ frontend lacks. The zoo builds its models with them.
//
//   set_batchnorm_sync(model, sync);   // every BatchNorm layer now normalises with the statistics
//                                      // of the global batch (all ranks), in training mode
//   set_batchnorm_sync(model, nullptr) // back to per-process statistics
//
// In training mode with a synchroniser, forward sums (in float64) each channel's count, sum and
// sum of squares over all participants, normalises with the global mean and biased variance,
// and updates the running statistics with the unbiased one, as torch.nn.SyncBatchNorm does;
// backward sums the two per-channel gradient reductions the same way. The weight and bias
// gradients stay local (the data-parallel gradient averaging combines them). Evaluation mode and
// layers without a synchroniser run torch's own BatchNorm.
// Thread safety: as torch::nn modules; the synchroniser's collectives need every participant to
// run the same layers in the same order.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/batchnorm.h>

namespace glassbox::nn {

// Sums tensors over every participant in place (a collective).
class BatchStatsSync {
 public:
  virtual ~BatchStatsSync() = default;
  virtual void all_reduce_sum(at::Tensor& t) = 0;
};

class BatchNorm1dImpl : public torch::nn::BatchNorm1dImpl {
 public:
  explicit BatchNorm1dImpl(const torch::nn::BatchNormOptions& options);
  at::Tensor forward(const at::Tensor& input);
  void set_sync(std::shared_ptr<BatchStatsSync> sync) { sync_ = std::move(sync); }
  const std::shared_ptr<BatchStatsSync>& sync() const { return sync_; }

 private:
  std::shared_ptr<BatchStatsSync> sync_;
};
TORCH_MODULE(BatchNorm1d);

class BatchNorm2dImpl : public torch::nn::BatchNorm2dImpl {
 public:
  explicit BatchNorm2dImpl(const torch::nn::BatchNormOptions& options);
  at::Tensor forward(const at::Tensor& input);
  void set_sync(std::shared_ptr<BatchStatsSync> sync) { sync_ = std::move(sync); }
  const std::shared_ptr<BatchStatsSync>& sync() const { return sync_; }

 private:
  std::shared_ptr<BatchStatsSync> sync_;
};
TORCH_MODULE(BatchNorm2d);

// Turns off the synchronisation of every glassbox BatchNorm layer under a module while it lives
// (a forward pass that one rank runs on its own, e.g. replaying a step to find a NaN), then
// restores it.
class BatchNormSyncPause {
 public:
  explicit BatchNormSyncPause(torch::nn::Module& module);
  ~BatchNormSyncPause();
  BatchNormSyncPause(const BatchNormSyncPause&) = delete;
  BatchNormSyncPause& operator=(const BatchNormSyncPause&) = delete;

 private:
  std::vector<std::pair<std::shared_ptr<torch::nn::Module>, std::shared_ptr<BatchStatsSync>>> saved_;
};

// Sets (null: clears) the synchroniser of every glassbox BatchNorm layer under `module` and
// returns their module paths. torch::nn BatchNorm layers that are not glassbox's cannot be
// synchronised: InvalidArgument naming them.
std::vector<std::string> set_batchnorm_sync(torch::nn::Module& module, const std::shared_ptr<BatchStatsSync>& sync);

// Synchronised batch normalisation of `input` ([N, C, ...]) in training mode: the function the
// layers above use, exposed for tests. Updates running_mean / running_var (when defined) with
// `momentum`.
at::Tensor sync_batch_norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                           at::Tensor running_mean, at::Tensor running_var, double momentum, double eps,
                           const std::shared_ptr<BatchStatsSync>& sync);

}  // namespace glassbox::nn
