// DataParallel on c10d's Reducer (data_parallel.h). Tested with real ranks in dist_test.cpp
// (Dist.*) and train/ddp_test.cpp.
#include "glassbox/dist/data_parallel.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::dist {

namespace {

constexpr std::int64_t kFirstBucketBytes = 1024 * 1024;  // c10d's _DEFAULT_FIRST_BUCKET_BYTES
constexpr std::size_t kBroadcastBytes = 250 * 1024 * 1024;
constexpr std::size_t kShmChunkBytes = 4 * 1024 * 1024;  // per rank, plus one for the result

// The Reducer's comm hook: the bucket averaged in place through shared memory, on the exchange's
// helper thread; backward goes on meanwhile, and the Reducer waits for the future at its end.
class SharedMemoryHook final : public c10d::CommHookInterface {
 public:
  explicit SharedMemoryHook(SharedMemoryReduce& shm) : shm_(shm) {}
  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    return shm_.all_reduce_mean_async(bucket.getBufferRef());
  }
  at::Tensor parseHookResult(const c10::IValue& result) override { return result.toTensor(); }

 private:
  SharedMemoryReduce& shm_;
};

// "Parameter indices which did not receive grad for rank 0: 2 3" -> {2, 3}.
std::vector<std::size_t> unused_indices(const std::string& message) {
  std::vector<std::size_t> out;
  const std::string marker = "did not receive grad for rank";
  auto at = message.find(marker);
  if (at == std::string::npos) return out;
  at = message.find(':', at);
  if (at == std::string::npos) return out;
  std::size_t i = at + 1;
  while (i < message.size() && message[i] != '\n') {
    while (i < message.size() && message[i] == ' ') ++i;
    std::size_t j = i;
    while (j < message.size() && std::isdigit(static_cast<unsigned char>(message[j]))) ++j;
    if (j == i) break;
    out.push_back(static_cast<std::size_t>(std::stoull(message.substr(i, j - i))));
    i = j;
  }
  return out;
}

}  // namespace

DataParallel::DataParallel(std::shared_ptr<Group> group, torch::nn::Module& module, std::vector<at::Tensor> params,
                           std::vector<std::string> names, DataParallelOptions options)
    : group_(std::move(group)),
      module_(module),
      params_(std::move(params)),
      names_(std::move(names)),
      options_(options) {
  GB_CHECK(!params_.empty(), FailedPrecondition, "data-parallel training needs trainable parameters",
           "check trainer.freeze");
  // The same model everywhere: shapes checked against rank 0, then rank 0's values sent out.
  try {
    c10d::verify_params_across_processes(group_->native(), params_, std::nullopt);
  } catch (const c10::Error& e) {
    std::string m = e.what_without_backtrace();
    if (m.find("DDP expects same model") == std::string::npos) group_->fail("check of the model across ranks", e);
    m = m.substr(0, m.find('\n'));
    GB_THROW(InvalidArgument, "the ranks build different models: " << m,
             "give every rank the same configuration (model, freeze settings, data shape)");
  } catch (const std::exception& e) {
    group_->fail("check of the model across ranks", e);
  }
  broadcast_state(true, true);

  const auto bucket_bytes = static_cast<std::int64_t>(options_.bucket_cap_mb * 1024 * 1024);
  std::vector<bool> sparse(params_.size(), false);
  auto [buckets, limits] = c10d::compute_bucket_assignment_by_size(
      params_, {static_cast<std::size_t>(kFirstBucketBytes), static_cast<std::size_t>(bucket_bytes)}, sparse);
  (void)limits;
  std::reverse(buckets.begin(), buckets.end());  // as DDP: the last layers' gradients are ready first
  buckets_ = static_cast<std::int64_t>(buckets.size());
  std::unordered_map<std::size_t, std::string> param_names;
  for (std::size_t i = 0; i < names_.size(); ++i) param_names[i] = names_[i];
  reducer_ = std::make_unique<c10d::Reducer>(params_, std::move(buckets), group_->native(), sparse, bucket_bytes,
                                             options_.find_unused_parameters, options_.gradient_as_bucket_view,
                                             std::move(param_names), kFirstBucketBytes,
                                             /*skip_all_reduce_unused_params=*/false,
                                             /*use_python_reducer=*/false);
  // Collective: every rank takes the same branch (the same options and device).
  const bool plain_cpu = std::all_of(params_.begin(), params_.end(), [](const at::Tensor& p) {
    return p.device().is_cpu() && at::isFloatingType(p.scalar_type()) && !p.is_sparse();
  });
  if (options_.shared_memory && group_->device().is_cpu() && plain_cpu) {
    shm_ = SharedMemoryReduce::create(group_, kShmChunkBytes);
    if (shm_) reducer_->register_comm_hook(std::make_unique<SharedMemoryHook>(*shm_));
  }
}

std::string DataParallel::transport() const { return shm_ ? "shared memory" : group_->backend_name(); }

DataParallel::~DataParallel() = default;

void DataParallel::broadcast_state(bool params, bool buffers) {
  std::vector<at::Tensor> tensors;
  if (params)
    for (const auto& p : module_.parameters(true)) tensors.push_back(p.detach());
  if (buffers)
    for (const auto& b : module_.buffers(true)) tensors.push_back(b.detach());
  if (tensors.empty() || group_->size() == 1) return;
  try {
    torch::NoGradGuard ng;
    c10d::broadcast_coalesced(group_->native(), tensors, kBroadcastBytes, 0);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    group_->fail(params ? "broadcast of the model state" : "broadcast of the buffers", e);
  }
}

void DataParallel::before_forward(bool sync) {
  syncing_ = sync && torch::GradMode::is_enabled();
  try {
    if (syncing_) {
      reducer_->prepare_for_forward();
      // Collective on every rank; true once, after the first step.
      reducer_->rebuild_buckets();
    }
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    const std::string m = e.what_without_backtrace();
    if (m.find("Expected to have finished reduction") != std::string::npos) {
      std::string list;
      for (std::size_t i : unused_indices(m))
        if (i < names_.size()) list += (list.empty() ? "" : ", ") + names_[i];
      GB_THROW(FailedPrecondition,
               "parameters received no gradient in the last step, so their gradients could not be averaged over the "
               "ranks"
                   << (list.empty() ? std::string() : ": " + list),
               "make every trainable parameter take part in the loss, freeze the unused ones (trainer.freeze), or set "
               "trainer.find_unused_parameters = true");
    }
    group_->fail("gradient bucket rebuild", e);
  } catch (const std::exception& e) {
    group_->fail("gradient bucket rebuild", e);
  }
  if (options_.broadcast_buffers && syncing_) broadcast_state(false, true);
}

void DataParallel::before_backward(const std::vector<at::Tensor>& outputs) {
  if (!syncing_) return;
  reducer_->prepare_for_backward(options_.find_unused_parameters ? outputs : std::vector<at::Tensor>{});
}

void DataParallel::after_backward() {
  if (!syncing_) return;
  ++steps_;
  if (steps_ == 1 && !options_.find_unused_parameters) {
    // Python's DDP reports an unused parameter only at the next step, after one optimiser step
    // with gradients that were not averaged; the first step is checked here instead.
    std::string list;
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (!params_[i].grad().defined()) list += (list.empty() ? "" : ", ") + names_[i];
    GB_CHECK(list.empty(), FailedPrecondition,
             "parameters received no gradient, so their gradients cannot be averaged over the ranks: " << list,
             "make every trainable parameter take part in the loss, freeze the unused ones (trainer.freeze), or set "
             "trainer.find_unused_parameters = true");
  }
}

}  // namespace glassbox::dist
