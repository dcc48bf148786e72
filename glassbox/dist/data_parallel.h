// DataParallel: what PyTorch's DistributedDataParallel does to a module, on c10d's own Reducer —
// the model's state broadcast from rank 0 and checked equal in shape on every rank, gradients
// averaged over the ranks in buckets (25 MiB, the first 1 MiB) whose all-reduce overlaps the
// backward pass, buckets rebuilt after the first step in the order the gradients became ready,
// gradients kept as views into the buckets, and buffers (BatchNorm statistics) re-broadcast from
// rank 0 before every forward. CPU ranks on one machine exchange the gradients through shared
// memory (a comm hook on the Reducer), others through the group's backend.
//
//   DataParallel ddp(group, module, trainable, {});       // every rank, same model
//   ddp.before_forward(/*sync=*/true);                     // false inside gradient accumulation
//   loss = ...forward...;
//   ddp.before_backward({loss});
//   loss.backward();                                       // gradients arrive averaged
//   ddp.after_backward();
//
// A parameter that takes no part in the loss is an error naming it (unless
// find_unused_parameters, which walks the graph each step as DDP does).
// Thread safety: the training thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include "glassbox/dist/group.h"
#include "glassbox/dist/shm_reduce.h"

namespace c10d {
class Reducer;
}

namespace glassbox::dist {

struct DataParallelOptions {
  double bucket_cap_mb = 25.0;
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = true;
  bool broadcast_buffers = true;  // false e.g. under SyncBatchNorm, whose statistics agree already
  // CPU ranks on one machine average their gradients through shared memory (shm_reduce.h)
  // rather than Gloo over loopback TCP; Gloo where that is not possible.
  bool shared_memory = true;
};

class DataParallel {
 public:
  // `params`: the trainable parameters in module order, with their names.
  DataParallel(std::shared_ptr<Group> group, torch::nn::Module& module, std::vector<at::Tensor> params,
               std::vector<std::string> names, DataParallelOptions options);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  void before_forward(bool sync);
  void before_backward(const std::vector<at::Tensor>& outputs);
  void after_backward();
  // Sends rank 0's parameters and buffers to every rank (done at construction).
  void broadcast_state(bool params, bool buffers);
  const std::vector<std::string>& names() const { return names_; }
  std::int64_t num_buckets() const { return buckets_; }
  // "shared memory" or the group's backend ("gloo", "nccl"): what averages the gradients.
  std::string transport() const;

 private:
  std::shared_ptr<Group> group_;
  torch::nn::Module& module_;
  std::vector<at::Tensor> params_;
  std::vector<std::string> names_;
  DataParallelOptions options_;
  std::unique_ptr<SharedMemoryReduce> shm_;  // before reducer_: the Reducer's hook uses it
  std::unique_ptr<c10d::Reducer> reducer_;
  bool syncing_ = false;
  std::int64_t steps_ = 0;
  std::int64_t buckets_ = 0;
};

}  // namespace glassbox::dist
