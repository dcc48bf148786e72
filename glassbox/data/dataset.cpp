#include "glassbox/data/dataset.h"

#include <utility>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::data {
namespace {

// indices: any integral tensor -> [B] int64 contiguous CPU; every value in [0, n).
at::Tensor checked_indices(const at::Tensor& indices, std::int64_t n, const char* who) {
  GB_CHECK(indices.defined(), InvalidArgument, who << ": indices tensor is undefined", "pass a [B] int64 tensor");
  GB_CHECK(indices.dim() == 1, InvalidArgument, who << ": indices must be 1-D, got shape " << indices.sizes(),
           "pass a [B] int64 tensor");
  GB_CHECK(!at::isFloatingType(indices.scalar_type()) && indices.scalar_type() != at::kBool, InvalidArgument,
           who << ": indices must be integers, got " << indices.scalar_type(), "pass a [B] int64 tensor");
  at::Tensor idx = indices;
  if (idx.scalar_type() != at::kLong || !idx.device().is_cpu()) idx = idx.to(at::kCPU, at::kLong);
  idx = idx.contiguous();
  const std::int64_t* p = idx.const_data_ptr<std::int64_t>();
  const std::int64_t b = idx.size(0);
  for (std::int64_t i = 0; i < b; ++i) {
    GB_CHECK(p[i] >= 0 && p[i] < n, InvalidArgument,
             who << ": index " << p[i] << " (position " << i << " of the batch) is out of range [0, " << n << ")",
             "indices must address samples of this dataset");
  }
  return idx;
}

}  // namespace

TensorDataset::TensorDataset(at::Tensor inputs, at::Tensor targets, std::int64_t num_classes)
    : inputs_(std::move(inputs)), targets_(std::move(targets)), num_classes_(num_classes) {
  GB_CHECK(inputs_.defined() && inputs_.dim() >= 1, InvalidArgument,
           "TensorDataset: inputs must be a tensor of shape [N, ...]",
           "pass the inputs with the sample dimension first");
  GB_CHECK(targets_.defined() && targets_.dim() >= 1, InvalidArgument,
           "TensorDataset: targets must be a tensor of shape [N] or [N, ...]", "pass one target per sample");
  GB_CHECK(inputs_.size(0) == targets_.size(0), InvalidArgument,
           "TensorDataset: inputs have " << inputs_.size(0) << " samples but targets have " << targets_.size(0),
           "inputs and targets must have the same first dimension");
  if (!inputs_.device().is_cpu()) inputs_ = inputs_.cpu();
  if (!targets_.device().is_cpu()) targets_ = targets_.cpu();
  GB_CHECK(num_classes_ >= -1, InvalidArgument, "TensorDataset: num_classes must be >= -1, got " << num_classes_,
           "pass -1 to infer it from the labels");
  if (num_classes_ == -1) {
    const bool integral = at::isIntegralType(targets_.scalar_type(), /*includeBool=*/false);
    if (integral && targets_.dim() == 1 && targets_.numel() > 0) {
      num_classes_ = targets_.max().item<std::int64_t>() + 1;
      if (num_classes_ < 0) num_classes_ = 0;
    } else {
      num_classes_ = 0;
    }
  }
}

std::int64_t TensorDataset::size() const { return inputs_.size(0); }

Batch TensorDataset::get_batch(const at::Tensor& indices) const {
  at::Tensor idx = checked_indices(indices, size(), "TensorDataset::get_batch");
  Batch b;
  b.inputs = at::index_select(inputs_, 0, idx);
  b.targets = at::index_select(targets_, 0, idx);
  b.indices = std::move(idx);
  return b;
}

std::vector<std::int64_t> TensorDataset::sample_shape() const {
  auto s = inputs_.sizes();
  return {s.begin() + 1, s.end()};
}

SubsetDataset::SubsetDataset(std::shared_ptr<const Dataset> base, at::Tensor indices) : base_(std::move(base)) {
  GB_CHECK(base_ != nullptr, InvalidArgument, "SubsetDataset: base dataset is null", "pass a dataset");
  indices_ = checked_indices(indices, base_->size(), "SubsetDataset");
}

std::int64_t SubsetDataset::size() const { return indices_.size(0); }

Batch SubsetDataset::get_batch(const at::Tensor& indices) const {
  at::Tensor idx = checked_indices(indices, size(), "SubsetDataset::get_batch");
  Batch b = base_->get_batch(at::index_select(indices_, 0, idx));
  b.indices = std::move(idx);
  return b;
}

Batch SubsetDataset::get_epoch_batch(const at::Tensor& indices, std::uint64_t epoch_seed) const {
  at::Tensor idx = checked_indices(indices, size(), "SubsetDataset::get_batch");
  Batch b = base_->get_epoch_batch(at::index_select(indices_, 0, idx), epoch_seed);
  b.indices = std::move(idx);
  return b;
}

at::Tensor SubsetDataset::shuffled_order(std::uint64_t epoch_seed) const {
  const at::Tensor base_order = base_->shuffled_order(epoch_seed);
  if (!base_order.defined()) return {};
  // position_of[base index] = position in the subset, or -1 when the subset leaves it out.
  at::Tensor position_of = at::full({base_->size()}, -1, at::kLong);
  position_of.index_put_({indices_}, at::arange(size(), at::kLong));
  const at::Tensor mapped = position_of.index_select(0, base_order);
  return mapped.masked_select(mapped.ge(0));
}

at::Tensor SubsetDataset::all_targets() const {
  at::Tensor t = base_->all_targets();
  if (!t.defined()) return t;
  return at::index_select(t, 0, indices_);
}

at::Tensor root_indices(const Dataset& ds, const at::Tensor& indices) {
  at::Tensor idx = indices.to(at::kCPU, at::kLong);
  const Dataset* d = &ds;
  while (const auto* sub = dynamic_cast<const SubsetDataset*>(d)) {
    idx = at::index_select(sub->indices().to(at::kCPU), 0, idx);
    d = sub->base().get();
  }
  return idx;
}

std::pair<at::Tensor, at::Tensor> random_split_indices(std::int64_t n, std::int64_t second, std::uint64_t seed) {
  GB_CHECK(n >= 0, InvalidArgument, "random_split_indices: n must be >= 0, got " << n, "pass the dataset size");
  GB_CHECK(second >= 0 && second <= n, InvalidArgument,
           "random_split_indices: the second part (" << second << ") must be between 0 and n (" << n << ")",
           "choose a split size no larger than the data set");
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  at::Tensor perm = at::randperm(n, gen, at::TensorOptions().dtype(at::kLong));
  at::Tensor a = std::get<0>(at::sort(perm.slice(0, 0, n - second)));
  at::Tensor b = std::get<0>(at::sort(perm.slice(0, n - second, n)));
  return {a.contiguous(), b.contiguous()};
}

}  // namespace glassbox::data
