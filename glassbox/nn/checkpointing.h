// Gradient checkpointing (torch.utils.checkpoint): a block's activations are not kept for the
// backward pass; backward runs the block again (with the random state of the first run, so
// dropout and stochastic depth draw the same) and back-propagates through the recomputation.
// Memory for activations drops to the blocks' inputs, at the price of a second forward per block.
// Unlike PyTorch's, the recomputation leaves BatchNorm running statistics as the first forward
// left them (PyTorch's updates them twice).
//
//   at::Tensor y = checkpoint(*block, [&](const at::Tensor& x) { return block->forward(x); }, x);
//
// Only under autograd in training; in eval mode or without gradients it is a plain call.
// Thread safety: as the block's forward.
#pragma once

#include <functional>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

namespace glassbox::nn {

at::Tensor checkpoint(torch::nn::Module& block, const std::function<at::Tensor(const at::Tensor&)>& forward,
                      const at::Tensor& x);

}  // namespace glassbox::nn
