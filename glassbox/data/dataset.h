// Dataset: random access to samples, batched by index.
//
// In-memory data sets gather a whole batch with one index_select per tensor (never by stacking
// samples one at a time). `get_batch` must be thread-safe: loader workers call it concurrently.
//
//   auto ds = std::make_shared<TensorDataset>(images, labels);  // images: [N, 1, 28, 28] float32
//   Batch b = ds->get_batch(torch::tensor({0, 5, 17}));           // b.inputs: [3, 1, 28, 28]
//
// Ownership: datasets are shared (loaders and subsets hold shared_ptr<const Dataset>).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace glassbox::data {

struct Batch {
  at::Tensor inputs;   // [B, ...] float32 (or the dataset's dtype)
  at::Tensor targets;  // [B] int64 class labels (or [B, ...] for other tasks)
  at::Tensor indices;  // [B] int64 sample indices in the dataset the loader reads
  // MixUp / CutMix (mixup.h): [B] float32, sample i's inputs are lam_i of its own and 1 - lam_i of
  // sample B-1-i's (the batch flipped, as timm pairs them); targets stay the original labels, and
  // the loss mixes them with the same weights. Undefined: the batch is not mixed.
  at::Tensor mix_lambda;
  std::int64_t batch_index = 0;  // position of the batch within its epoch
  std::int64_t size() const { return indices.defined() ? indices.size(0) : 0; }
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::int64_t size() const = 0;
  // indices: [B] int64, each in [0, size()). Thread-safe.
  virtual Batch get_batch(const at::Tensor& indices) const = 0;
  // The batch as epoch `epoch_seed` sees it: data sets that augment draw sample i's parameters
  // from sample_seed(epoch_seed, i) (augment.h); the others ignore the seed.
  virtual Batch get_epoch_batch(const at::Tensor& indices, std::uint64_t epoch_seed) const {
    return get_batch(indices);
  }
  // The order of a shuffled epoch when the data set has its own (tar shards: the shards shuffled,
  // then a shuffle buffer, so reads stay near-sequential); undefined: the loader draws a uniform
  // permutation. A permutation of [0, size()) as [N] int64, a function of epoch_seed alone.
  virtual at::Tensor shuffled_order(std::uint64_t epoch_seed) const { return {}; }
  // Shape of one input sample, e.g. {1, 28, 28}.
  virtual std::vector<std::int64_t> sample_shape() const = 0;
  // Number of classes (max label + 1 for in-memory data), or 0 when unknown.
  virtual std::int64_t num_classes() const { return 0; }
  // All labels as one [N] int64 tensor when cheaply available (for statistics), else undefined.
  virtual at::Tensor all_targets() const { return {}; }
};

// Inputs and targets held in memory. inputs: [N, ...], targets: [N] (same N).
class TensorDataset final : public Dataset {
 public:
  TensorDataset(at::Tensor inputs, at::Tensor targets, std::int64_t num_classes = -1);
  std::int64_t size() const override;
  Batch get_batch(const at::Tensor& indices) const override;
  std::vector<std::int64_t> sample_shape() const override;
  std::int64_t num_classes() const override { return num_classes_; }
  at::Tensor all_targets() const override { return targets_; }
  const at::Tensor& inputs() const { return inputs_; }
  const at::Tensor& targets() const { return targets_; }

 private:
  at::Tensor inputs_;
  at::Tensor targets_;
  std::int64_t num_classes_;
};

// A view of `base` restricted to `indices` ([M] int64). Batch indices are positions in the subset.
class SubsetDataset final : public Dataset {
 public:
  SubsetDataset(std::shared_ptr<const Dataset> base, at::Tensor indices);
  std::int64_t size() const override;
  Batch get_batch(const at::Tensor& indices) const override;
  Batch get_epoch_batch(const at::Tensor& indices, std::uint64_t epoch_seed) const override;
  // The base's own order restricted to the subset (positions in the subset), if it has one.
  at::Tensor shuffled_order(std::uint64_t epoch_seed) const override;
  std::vector<std::int64_t> sample_shape() const override { return base_->sample_shape(); }
  std::int64_t num_classes() const override { return base_->num_classes(); }
  at::Tensor all_targets() const override;
  const at::Tensor& indices() const { return indices_; }
  const std::shared_ptr<const Dataset>& base() const { return base_; }

 private:
  std::shared_ptr<const Dataset> base_;
  at::Tensor indices_;
};

// Maps indices of `ds` to indices of the data set at the bottom of its chain of subsets (the
// sample's position in the file it came from). [k] int64 in, [k] int64 out.
at::Tensor root_indices(const Dataset& ds, const at::Tensor& indices);

// Seeded split of [0, n) into two disjoint index sets of sizes n - second and second
// (e.g. Fashion-MNIST's 55000/5000). The same seed gives the same split.
std::pair<at::Tensor, at::Tensor> random_split_indices(std::int64_t n, std::int64_t second, std::uint64_t seed);

}  // namespace glassbox::data
