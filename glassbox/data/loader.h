// Loader: turns a Dataset into batches, like torch.utils.data.DataLoader, but batched by index.
//
//   LoaderOptions o; o.batch_size = 128; o.shuffle = true; o.num_workers = 2; o.seed = 42;
//   Loader loader(dataset, o);
//   loader.start_epoch(epoch);                 // permutation is a function of (seed, epoch)
//   while (auto batch = loader.next()) { ... } // batches arrive in sampler order
//
// Determinism: the order of samples depends only on (seed, epoch), never on num_workers;
// a batch transform receives a seed derived from (seed, epoch, batch_index). `start_epoch(e, k)`
// resumes an epoch at batch k without reading the first k batches (exact resume).
// Workers: num_workers threads gather batches ahead (prefetch_factor batches per worker);
// with persistent_workers the threads live across epochs, otherwise they are started per epoch.
// pin_memory copies finished batches into pinned host memory (for fast non-blocking H2D copies);
// without CUDA it is a no-op.
// Thread safety: one consumer thread calls start_epoch/next; errors raised in a worker are
// rethrown from next() in the consumer thread, in sampler order (the failed batch is skipped: a
// further next() returns the batch after it). Abandoning an epoch (start_epoch again, or
// destroying the loader) cancels the batches in flight; the destructor joins every worker.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "glassbox/base/config.h"
#include "glassbox/data/dataset.h"

namespace glassbox::data {

struct LoaderOptions {
  std::int64_t batch_size = 32;
  bool shuffle = false;
  bool drop_last = false;
  std::int64_t num_workers = 0;      // 0: batches are gathered in the consumer thread
  std::int64_t prefetch_factor = 2;  // batches in flight per worker
  bool pin_memory = false;
  bool persistent_workers = false;
  std::int64_t seed = 0;
  // DistributedSampler's sharding (set by data-parallel training, not a config key): this loader
  // reads shard `rank` of `num_replicas`. The epoch's order (the same on every rank) is padded by
  // repeating its head to a multiple of num_replicas, and rank r takes positions r, r + W, ...:
  // every rank gets ceil(N / W) samples, and global batch b is the union of the ranks' batches b.
  // MixUp/CutMix seeds follow the global batch index (b * W + r), so the ranks mix differently.
  std::int64_t num_replicas = 1;
  std::int64_t rank = 0;

  void visit(FieldVisitor& v);
  void validate() const;  // throws InvalidArgument naming the field
};

// A per-batch transform run in the worker (augmentation). `seed` is unique per (epoch, batch);
// the batch arrives with batch_index set, and pinning (pin_memory) happens after the transform.
using BatchTransform = std::function<Batch(Batch, std::uint64_t seed)>;

// The seed values the loader derives: splitmix64 mixing (a bijection on 64 bits), the seed of epoch
// `epoch`'s permutation (splitmix64(seed * 1000003 + epoch)), and the seed handed to the
// BatchTransform for batch `batch_index` of `epoch`.
std::uint64_t splitmix64(std::uint64_t x);
std::uint64_t epoch_seed(std::int64_t seed, std::int64_t epoch);
std::uint64_t batch_seed(std::int64_t seed, std::int64_t epoch, std::int64_t batch_index);

class Loader {
 public:
  Loader(std::shared_ptr<const Dataset> dataset, LoaderOptions options, BatchTransform transform = nullptr);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  std::int64_t num_batches() const;
  // Samples this loader reads per epoch (its shard's with num_replicas > 1).
  std::int64_t dataset_size() const;
  const LoaderOptions& options() const { return options_; }

  // Begins (or resumes at batch `first_batch`) epoch `epoch`.
  void start_epoch(std::int64_t epoch, std::int64_t first_batch = 0);
  // The next batch in sampler order, or nullopt at the end of the epoch.
  std::optional<Batch> next();
  // Sample indices of batch `batch_index` of `epoch` (what next() would return).
  at::Tensor batch_indices(std::int64_t epoch, std::int64_t batch_index) const;
  // The sample order of `epoch`: [N] int64, a permutation of [0, N) (the identity without shuffle).
  at::Tensor epoch_order(std::int64_t epoch) const;
  // The epoch begun by the last start_epoch (-1 before the first), and the index of the batch the
  // next call to next() returns (num_batches() once the epoch is exhausted).
  std::int64_t epoch() const;
  std::int64_t next_batch_index() const;

 private:
  struct Impl;
  std::shared_ptr<const Dataset> dataset_;
  LoaderOptions options_;
  BatchTransform transform_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace glassbox::data
