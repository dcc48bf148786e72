// Trainer::run_eval: validation and test, in one process or as exact data-parallel evaluation.
// Tested by trainer_test.cpp (one process) and ddp_test.cpp / tests/ddp (exact_eval) across ranks.
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/data/dataset.h"
#include "glassbox/train/trainer.h"

namespace glassbox::train {

EvalResult Trainer::run_eval(const char* stage, const std::shared_ptr<const data::Dataset>& ds,
                             std::int64_t limit_batches) {
  auto& module = task_->module();
  module.eval();
  torch::NoGradGuard no_grad;
  const data::LoaderOptions eo = data_->eval_loader_options();
  at::Tensor loss_sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kDouble).device(device_));
  std::int64_t seen = 0;
  const bool test = std::string(stage) == "test";
  const std::unique_ptr<EvalMetrics> metrics = task_->eval_metrics();
  const auto step = [&](const data::Batch& batch) {
    auto scope = precision_->autocast();
    return test ? task_->test_step(batch) : task_->validation_step(batch);
  };
  if (!group_) {
    data::Loader loader(ds, eo);
    loader.start_epoch(0);
    std::int64_t batches = 0;
    while (auto b = loader.next()) {
      if (limit_batches >= 0 && batches >= limit_batches) break;
      data::Batch batch = to_device(std::move(*b));
      const StepOutput out = step(batch);
      const std::int64_t bsz = batch.size();
      if (out.loss.defined()) loss_sum.add_(out.loss.detach().to(torch::kDouble) * static_cast<double>(bsz));
      if (out.logits.defined() && out.logits.dim() == 2) metrics->update(out.logits, batch.targets);
      seen += bsz;
      ++batches;
    }
  } else {
    // Exact evaluation: the evaluation batches are the one-process ones; batch b runs on rank
    // b mod W, and every rank replays all of them in order from the gathered outputs (no sample
    // twice, none padded), so losses and metrics come out as one process computes them.
    const int world = group_->size(), rank = group_->rank();
    // Every rank evaluates rank 0's model: its buffers (BatchNorm statistics, which each rank's
    // training forward updated on its own) go to all ranks first.
    if (!options_.sync_batchnorm) broadcast_model_state(/*parameters=*/false);
    data::Loader whole(ds, eo);
    std::int64_t total = whole.num_batches();
    if (limit_batches >= 0) total = std::min(total, limit_batches);
    const at::Tensor order = whole.epoch_order(0);
    std::vector<std::int64_t> own;
    std::vector<at::Tensor> picks;
    for (std::int64_t b = rank; b < total; b += world) {
      own.push_back(b);
      picks.push_back(order.slice(0, b * eo.batch_size, std::min(ds->size(), (b + 1) * eo.batch_size)));
    }
    std::vector<at::Tensor> losses, logits, targets;
    std::vector<std::int64_t> sizes;
    bool has_logits = false;
    if (!own.empty()) {
      data::LoaderOptions so = eo;
      so.shuffle = false;
      so.drop_last = false;
      data::Loader loader(std::make_shared<data::SubsetDataset>(ds, torch::cat(picks)), so);
      loader.start_epoch(0);
      while (auto b = loader.next()) {
        data::Batch batch = to_device(std::move(*b));
        const StepOutput out = step(batch);
        const std::int64_t bsz = batch.size();
        losses.push_back(out.loss.defined() ? (out.loss.detach().to(torch::kDouble) * static_cast<double>(bsz)).cpu()
                                            : torch::zeros({}, torch::kDouble));
        if (out.logits.defined() && out.logits.dim() == 2) {
          has_logits = true;
          logits.push_back(out.logits.detach());
          targets.push_back(batch.targets.detach());
        }
        sizes.push_back(bsz);
      }
      GB_CHECK(sizes.size() == own.size(), Internal,
               "rank " << rank << " evaluated " << sizes.size() << " batches instead of " << own.size(), "report this");
    }
    has_logits = group_->any(has_logits, "agreement on the evaluation outputs");
    const at::Tensor ids = group_->all_gather_rows(torch::tensor(own, torch::kLong), "gather of the evaluation");
    const at::Tensor all_sizes =
        group_->all_gather_rows(torch::tensor(sizes, torch::kLong), "gather of the evaluation");
    const at::Tensor all_losses = group_->all_gather_rows(
        losses.empty() ? torch::empty({0}, torch::kDouble) : torch::stack(losses), "gather of the evaluation losses");
    at::Tensor all_logits, all_targets;
    if (has_logits) {
      const auto cat = [&](const std::vector<at::Tensor>& v) {
        return v.empty() ? torch::empty({0}, torch::TensorOptions().device(device_)) : torch::cat(v);
      };
      all_logits = group_->all_gather_rows(cat(logits), "gather of the evaluation outputs");
      all_targets = group_->all_gather_rows(cat(targets), "gather of the evaluation targets");
    }
    const std::int64_t count = ids.size(0);
    std::vector<std::int64_t> offset(static_cast<std::size_t>(count) + 1, 0);
    for (std::int64_t j = 0; j < count; ++j)
      offset[static_cast<std::size_t>(j) + 1] = offset[static_cast<std::size_t>(j)] + all_sizes[j].item<std::int64_t>();
    const at::Tensor in_order = std::get<1>(ids.sort());
    for (std::int64_t k = 0; k < count; ++k) {
      const std::int64_t j = in_order[k].item<std::int64_t>();
      const std::int64_t bsz = all_sizes[j].item<std::int64_t>();
      loss_sum.add_(all_losses[j].to(device_));
      if (has_logits && bsz > 0) {
        const std::int64_t at = offset[static_cast<std::size_t>(j)];
        metrics->update(all_logits.narrow(0, at, bsz), all_targets.narrow(0, at, bsz));
      }
      seen += bsz;
    }
  }
  EvalResult r;
  r.samples = seen;
  if (seen > 0) r.loss = loss_sum.item<double>() / static_cast<double>(seen);
  r.metrics = metrics->compute();
  if (auto it = r.metrics.find("acc"); it != r.metrics.end()) {
    r.accuracy = it->second;
    r.has_accuracy = true;
    r.metrics.erase(it);
  }
  return r;
}

}  // namespace glassbox::train
