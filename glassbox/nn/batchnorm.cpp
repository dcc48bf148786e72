// SyncBatchNorm-capable BatchNorm layers (batchnorm.h). Tested across ranks against one process in
// train/ddp_test.cpp (Ddp.SyncBatchNorm1d/2d) and through the CLI in tests/ddp (equivalence_syncbn);
// without a synchroniser they are torch's layers (the zoo's torchvision reference tests).
#include "glassbox/nn/batchnorm.h"

#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::nn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The dimensions a BatchNorm reduces over: all but the channel dimension (1).
std::vector<std::int64_t> reduce_dims(const at::Tensor& x) {
  std::vector<std::int64_t> d{0};
  for (std::int64_t i = 2; i < x.dim(); ++i) d.push_back(i);
  return d;
}

// [1, C, 1, ...] for broadcasting a per-channel vector against x.
at::Tensor per_channel(const at::Tensor& v, const at::Tensor& x) {
  std::vector<std::int64_t> shape(static_cast<std::size_t>(x.dim()), 1);
  shape[1] = v.size(0);
  return v.view(shape);
}

struct SyncBatchNormFunction : public torch::autograd::Function<SyncBatchNormFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            at::Tensor running_mean, at::Tensor running_var, double momentum, double eps,
                            BatchStatsSync* sync) {
    const auto dims = reduce_dims(x);
    const std::int64_t channels = x.size(1);
    const at::Tensor xd = x.to(torch::kDouble);
    // [sum (C), sum of squares (C), count (1)], summed over the participants.
    at::Tensor stats = torch::cat({xd.sum(dims), xd.square().sum(dims),
                                   torch::full({1}, static_cast<double>(x.numel() / channels), xd.options())});
    sync->all_reduce_sum(stats);
    const at::Tensor count = stats.narrow(0, 2 * channels, 1);
    const double n = count.item<double>();
    GB_CHECK(n > 1, InvalidArgument,
             "SyncBatchNorm saw " << n << " value(s) per channel over all ranks in training mode",
             "use a larger batch (BatchNorm needs more than one value per channel)");
    const at::Tensor mean = stats.narrow(0, 0, channels) / count;
    const at::Tensor var = (stats.narrow(0, channels, channels) / count - mean.square()).clamp_min(0.0);
    const at::Tensor invstd = (var + eps).rsqrt();
    if (running_mean.defined()) {
      torch::NoGradGuard ng;
      running_mean.mul_(1.0 - momentum).add_(mean.to(running_mean.scalar_type()), momentum);
      running_var.mul_(1.0 - momentum).add_((var * (n / (n - 1.0))).to(running_var.scalar_type()), momentum);
    }
    const at::Tensor xhat = (xd - per_channel(mean, x)) * per_channel(invstd, x);
    at::Tensor y = xhat;
    if (weight.defined()) y = y * per_channel(weight.to(torch::kDouble), x) + per_channel(bias.to(torch::kDouble), x);
    ctx->save_for_backward({x, weight, mean, invstd, count});
    ctx->saved_data["sync"] = reinterpret_cast<std::int64_t>(sync);
    return y.to(x.scalar_type()).contiguous(x.suggest_memory_format());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& mean = saved[2];
    const at::Tensor& invstd = saved[3];
    const double n = saved[4].item<double>();
    auto* sync = reinterpret_cast<BatchStatsSync*>(ctx->saved_data["sync"].toInt());
    const auto dims = reduce_dims(x);
    const std::int64_t channels = x.size(1);
    const at::Tensor gy = grads[0].to(torch::kDouble);
    const at::Tensor xmu = x.to(torch::kDouble) - per_channel(mean, x);
    const at::Tensor sum_dy = gy.sum(dims);
    const at::Tensor sum_dy_xmu = (gy * xmu).sum(dims);
    // The weight and bias gradients of this rank's samples (the data-parallel averaging follows).
    at::Tensor grad_weight, grad_bias;
    if (weight.defined()) {
      grad_weight = (sum_dy_xmu * invstd).to(weight.scalar_type());
      grad_bias = sum_dy.to(weight.scalar_type());
    }
    at::Tensor all = torch::cat({sum_dy, sum_dy_xmu});
    sync->all_reduce_sum(all);
    const at::Tensor mean_dy = all.narrow(0, 0, channels) / n;
    const at::Tensor mean_dy_xmu = all.narrow(0, channels, channels) / n;
    at::Tensor scale = invstd;
    if (weight.defined()) scale = scale * weight.to(torch::kDouble);
    const at::Tensor grad_input =
        per_channel(scale, x) * (gy - per_channel(mean_dy, x) - xmu * per_channel(invstd.square() * mean_dy_xmu, x));
    return {grad_input.to(x.scalar_type()),
            grad_weight,
            grad_bias,
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor()};
  }
};

template <class Base>
at::Tensor forward_with(Base& bn, const at::Tensor& input, const std::shared_ptr<BatchStatsSync>& sync) {
  if (!sync || !bn.is_training()) return bn.Base::forward(input);
  const auto& o = bn.options;
  double momentum = 0.0;
  if (o.track_running_stats() && bn.num_batches_tracked.defined()) {
    torch::NoGradGuard ng;
    bn.num_batches_tracked.add_(1);
  }
  if (o.momentum().has_value()) {
    momentum = *o.momentum();
  } else if (bn.num_batches_tracked.defined()) {
    momentum = 1.0 / bn.num_batches_tracked.template item<double>();  // a cumulative average
  }
  const bool track = o.track_running_stats();
  return sync_batch_norm(input, bn.weight, bn.bias, track ? bn.running_mean : at::Tensor(),
                         track ? bn.running_var : at::Tensor(), momentum, o.eps(), sync);
}

}  // namespace

at::Tensor sync_batch_norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                           at::Tensor running_mean, at::Tensor running_var, double momentum, double eps,
                           const std::shared_ptr<BatchStatsSync>& sync) {
  GB_CHECK(sync != nullptr, InvalidArgument, "sync_batch_norm without a synchroniser", "pass one");
  GB_CHECK(input.dim() >= 2, InvalidArgument, "BatchNorm input of " << input.dim() << " dimensions",
           "pass [N, C, ...]");
  return SyncBatchNormFunction::apply(input, weight, bias, std::move(running_mean), std::move(running_var), momentum,
                                      eps, sync.get());
}

// Module::name() is "glassbox::nn::BatchNorm1d": summaries and the doctor read the part after the
// last "::", the same as torch's layer.
BatchNorm1dImpl::BatchNorm1dImpl(const torch::nn::BatchNormOptions& options) : torch::nn::BatchNorm1dImpl(options) {}

at::Tensor BatchNorm1dImpl::forward(const at::Tensor& input) {
  return forward_with<torch::nn::BatchNorm1dImpl>(*this, input, sync_);
}

BatchNorm2dImpl::BatchNorm2dImpl(const torch::nn::BatchNormOptions& options) : torch::nn::BatchNorm2dImpl(options) {}

at::Tensor BatchNorm2dImpl::forward(const at::Tensor& input) {
  return forward_with<torch::nn::BatchNorm2dImpl>(*this, input, sync_);
}

BatchNormSyncPause::BatchNormSyncPause(torch::nn::Module& module) {
  for (const auto& m : module.modules(/*include_self=*/false)) {
    if (auto* b1 = dynamic_cast<BatchNorm1dImpl*>(m.get()); b1 != nullptr && b1->sync()) {
      saved_.emplace_back(m, b1->sync());
      b1->set_sync(nullptr);
    } else if (auto* b2 = dynamic_cast<BatchNorm2dImpl*>(m.get()); b2 != nullptr && b2->sync()) {
      saved_.emplace_back(m, b2->sync());
      b2->set_sync(nullptr);
    }
  }
}

BatchNormSyncPause::~BatchNormSyncPause() {
  for (auto& [m, sync] : saved_) {
    if (auto* b1 = dynamic_cast<BatchNorm1dImpl*>(m.get()))
      b1->set_sync(sync);
    else if (auto* b2 = dynamic_cast<BatchNorm2dImpl*>(m.get()))
      b2->set_sync(sync);
  }
}

std::vector<std::string> set_batchnorm_sync(torch::nn::Module& module, const std::shared_ptr<BatchStatsSync>& sync) {
  std::vector<std::string> synced, foreign;
  for (const auto& item : module.named_modules("", /*include_self=*/false)) {
    torch::nn::Module* m = item.value().get();
    if (auto* b1 = dynamic_cast<BatchNorm1dImpl*>(m)) {
      b1->set_sync(sync);
      synced.push_back(item.key());
    } else if (auto* b2 = dynamic_cast<BatchNorm2dImpl*>(m)) {
      b2->set_sync(sync);
      synced.push_back(item.key());
    } else if (dynamic_cast<torch::nn::BatchNorm1dImpl*>(m) || dynamic_cast<torch::nn::BatchNorm2dImpl*>(m) ||
               dynamic_cast<torch::nn::BatchNorm3dImpl*>(m)) {
      foreign.push_back(item.key());
    }
  }
  if (sync) {
    std::string list;
    for (const auto& f : foreign) list += (list.empty() ? "" : ", ") + f;
    GB_CHECK(foreign.empty(), InvalidArgument,
             "trainer.sync_batchnorm cannot synchronise torch::nn BatchNorm layers: " << list,
             "build them with glassbox::nn::BatchNorm1d / BatchNorm2d (same options and names), or set "
             "trainer.sync_batchnorm = false");
  }
  return synced;
}

}  // namespace glassbox::nn
