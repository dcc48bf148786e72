#include "glassbox/data/loader.h"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/core/device.h"

namespace glassbox::data {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

std::uint64_t epoch_seed(std::int64_t seed, std::int64_t epoch) {
  return splitmix64(static_cast<std::uint64_t>(seed) * 1000003ULL + static_cast<std::uint64_t>(epoch));
}

std::uint64_t batch_seed(std::int64_t seed, std::int64_t epoch, std::int64_t batch_index) {
  return splitmix64(epoch_seed(seed, epoch) ^
                    splitmix64(static_cast<std::uint64_t>(batch_index) + 0x632BE59BD9B4E019ULL));
}

void LoaderOptions::visit(FieldVisitor& v) {
  v.field("batch_size", batch_size, "samples per batch");
  v.field("shuffle", shuffle, "shuffle the samples every epoch (the order is a function of seed and epoch)");
  v.field("drop_last", drop_last, "drop the last batch when it is smaller than batch_size");
  v.field("num_workers", num_workers, "threads gathering batches ahead; 0 gathers in the training thread");
  v.field("prefetch_factor", prefetch_factor, "batches in flight per worker");
  v.field("pin_memory", pin_memory, "copy batches into pinned host memory (only with CUDA)");
  v.field("persistent_workers", persistent_workers, "keep the worker threads alive across epochs");
  v.field("seed", seed, "seed of the shuffling and of the per-batch transform seeds");
}

void LoaderOptions::validate() const {
  GB_CHECK(batch_size >= 1, InvalidArgument, "data.batch_size must be >= 1, got " << batch_size,
           "set data.batch_size to a positive number, e.g. 128");
  GB_CHECK(num_workers >= 0, InvalidArgument, "data.num_workers must be >= 0, got " << num_workers,
           "use 0 to gather batches in the training thread");
  GB_CHECK(num_workers <= 256, InvalidArgument, "data.num_workers must be <= 256, got " << num_workers,
           "a few workers per core are plenty");
  GB_CHECK(num_replicas >= 1 && rank >= 0 && rank < num_replicas, InvalidArgument,
           "loader shard " << rank << " of " << num_replicas << " does not exist", "ranks count from 0 to W - 1");
  GB_CHECK(prefetch_factor >= 1, InvalidArgument, "data.prefetch_factor must be >= 1, got " << prefetch_factor,
           "set data.prefetch_factor to 2 (the default)");
}

struct Loader::Impl {
  struct Slot {
    bool ready = false;
    std::int64_t batch = -1;
    Batch value;  // valid when ready and !error
    std::exception_ptr error;
  };

  // Fixed at construction.
  const Dataset* dataset = nullptr;           // non-owning: the Loader owns it
  const LoaderOptions* options = nullptr;     // non-owning
  const BatchTransform* transform = nullptr;  // non-owning; null when empty
  bool pin = false;
  std::int64_t n = 0;       // samples per epoch (this shard's)
  std::int64_t full_n = 0;  // samples in the dataset
  std::int64_t num_batches = 0;
  std::int64_t window = 0;  // batches in flight: num_workers * prefetch_factor
  at::Tensor identity;      // [N] int64 0..N-1, the order without shuffling

  // Epoch state; written by the consumer, read by workers under `mu`.
  std::mutex mu;
  std::condition_variable work_cv;   // workers wait for a batch to gather
  std::condition_variable ready_cv;  // the consumer waits for the next batch
  bool started = false;
  bool stop = false;
  std::uint64_t generation = 0;  // bumped by start_epoch: results of older epochs are dropped
  std::int64_t epoch = -1;
  at::Tensor order;  // [N] int64 sample order of `epoch`
  std::int64_t next_dispatch = 0;
  std::int64_t next_deliver = 0;
  std::vector<Slot> slots;  // ring of `window` results, slot b % window holds batch b
  std::vector<std::thread> threads;

  // batch_indices() for other epochs than the current one.
  mutable std::int64_t cached_epoch = -1;
  mutable at::Tensor cached_order;

  at::Tensor order_of(std::int64_t e) const {
    at::Tensor full = identity;
    if (options->shuffle) {
      at::Tensor own = dataset->shuffled_order(epoch_seed(options->seed, e));
      if (own.defined()) {
        full = own.to(at::kLong).contiguous();
      } else {
        at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(epoch_seed(options->seed, e));
        full = at::randperm(full_n, gen, at::TensorOptions().dtype(at::kLong));
      }
    }
    const std::int64_t w = options->num_replicas;
    if (w == 1 || full_n == 0) return full;
    const std::int64_t total = n * w;
    if (total > full_n) full = full.repeat({(total + full_n - 1) / full_n}).slice(0, 0, total);
    return full.slice(0, options->rank, total, w).contiguous();
  }

  Batch make_batch(const at::Tensor& ord, std::int64_t e, std::int64_t b) const {
    const std::int64_t start = b * options->batch_size;
    const std::int64_t end = std::min(n, start + options->batch_size);
    Batch batch = dataset->get_epoch_batch(ord.slice(0, start, end), epoch_seed(options->seed, e));
    batch.batch_index = b;
    if (transform != nullptr) {
      const std::int64_t global = b * options->num_replicas + options->rank;
      batch = (*transform)(std::move(batch), batch_seed(options->seed, e, global));
      batch.batch_index = b;
    }
    if (pin) {
      if (batch.inputs.defined() && batch.inputs.device().is_cpu() && !batch.inputs.is_pinned())
        batch.inputs = batch.inputs.pin_memory();
      if (batch.targets.defined() && batch.targets.device().is_cpu() && !batch.targets.is_pinned())
        batch.targets = batch.targets.pin_memory();
    }
    return batch;
  }

  void worker_loop() {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      work_cv.wait(lk, [&] {
        return stop || (started && next_dispatch < num_batches && next_dispatch < next_deliver + window);
      });
      if (stop) return;
      const std::int64_t b = next_dispatch++;
      const std::uint64_t gen = generation;
      const std::int64_t e = epoch;
      at::Tensor ord = order;
      lk.unlock();
      Slot result;
      result.batch = b;
      try {
        result.value = make_batch(ord, e, b);
      } catch (...) {
        result.error = std::current_exception();
      }
      lk.lock();
      if (gen == generation && !stop) {
        Slot& s = slots[static_cast<std::size_t>(b % window)];
        s = std::move(result);
        s.ready = true;
        lk.unlock();
        ready_cv.notify_one();
        lk.lock();
      } else {
        lk.unlock();
        result = Slot();  // a cancelled epoch's batch: dropped outside the lock
        lk.lock();
      }
    }
  }

  void start_workers() {
    if (!threads.empty()) return;
    {
      std::lock_guard<std::mutex> g(mu);
      stop = false;
    }
    threads.reserve(static_cast<std::size_t>(options->num_workers));
    for (std::int64_t i = 0; i < options->num_workers; ++i) threads.emplace_back([this] { worker_loop(); });
  }

  void stop_workers() {
    if (threads.empty()) return;
    {
      std::lock_guard<std::mutex> g(mu);
      stop = true;
    }
    work_cv.notify_all();
    for (auto& t : threads) t.join();
    threads.clear();
  }
};

Loader::Loader(std::shared_ptr<const Dataset> dataset, LoaderOptions options, BatchTransform transform)
    : dataset_(std::move(dataset)),
      options_(options),
      transform_(std::move(transform)),
      impl_(std::make_unique<Impl>()) {
  GB_CHECK(dataset_ != nullptr, InvalidArgument, "Loader: the dataset is null", "pass a dataset");
  options_.validate();
  Impl& s = *impl_;
  s.dataset = dataset_.get();
  s.options = &options_;
  s.transform = transform_ ? &transform_ : nullptr;
  s.pin = options_.pin_memory && cuda_available();
  s.full_n = dataset_->size();
  s.n = (s.full_n + options_.num_replicas - 1) / options_.num_replicas;
  s.num_batches =
      options_.drop_last ? s.n / options_.batch_size : (s.n + options_.batch_size - 1) / options_.batch_size;
  s.window = options_.num_workers * options_.prefetch_factor;
  s.slots.resize(static_cast<std::size_t>(s.window));
  s.identity = at::arange(s.full_n, at::TensorOptions().dtype(at::kLong));
}

Loader::~Loader() {
  if (impl_) impl_->stop_workers();
}

std::int64_t Loader::num_batches() const { return impl_->num_batches; }
std::int64_t Loader::dataset_size() const { return impl_->n; }
std::int64_t Loader::epoch() const { return impl_->epoch; }
std::int64_t Loader::next_batch_index() const { return impl_->started ? impl_->next_deliver : 0; }

at::Tensor Loader::epoch_order(std::int64_t epoch) const {
  Impl& s = *impl_;
  if (s.started && epoch == s.epoch) return s.order;
  if (epoch != s.cached_epoch || !s.cached_order.defined()) {
    s.cached_order = s.order_of(epoch);
    s.cached_epoch = epoch;
  }
  return s.cached_order;
}

at::Tensor Loader::batch_indices(std::int64_t epoch, std::int64_t batch_index) const {
  GB_CHECK(batch_index >= 0 && batch_index < impl_->num_batches, InvalidArgument,
           "Loader::batch_indices: batch " << batch_index << " is out of range [0, " << impl_->num_batches << ")",
           "pass a batch index below num_batches()");
  const std::int64_t start = batch_index * options_.batch_size;
  const std::int64_t end = std::min(impl_->n, start + options_.batch_size);
  return epoch_order(epoch).slice(0, start, end);
}

void Loader::start_epoch(std::int64_t epoch, std::int64_t first_batch) {
  Impl& s = *impl_;
  GB_CHECK(epoch >= 0, InvalidArgument, "Loader::start_epoch: epoch must be >= 0, got " << epoch,
           "epochs count from 0");
  GB_CHECK(first_batch >= 0 && first_batch <= s.num_batches, InvalidArgument,
           "Loader::start_epoch: first batch " << first_batch << " is out of range [0, " << s.num_batches << "]",
           "resume at a batch index below num_batches()");
  at::Tensor ord = (s.started && epoch == s.epoch) ? s.order : s.order_of(epoch);
  if (options_.num_workers == 0) {
    s.epoch = epoch;
    s.order = std::move(ord);
    s.next_deliver = first_batch;
    s.started = true;
    return;
  }
  // Threads of an abandoned epoch: per-epoch workers are replaced; persistent ones drop their
  // in-flight results (the generation check) and carry on with the new epoch.
  if (!options_.persistent_workers) s.stop_workers();
  {
    std::lock_guard<std::mutex> g(s.mu);
    ++s.generation;
    s.epoch = epoch;
    s.order = std::move(ord);
    s.next_dispatch = first_batch;
    s.next_deliver = first_batch;
    for (auto& slot : s.slots) slot = Impl::Slot();
    s.started = true;
  }
  s.start_workers();
  s.work_cv.notify_all();
}

std::optional<Batch> Loader::next() {
  Impl& s = *impl_;
  GB_CHECK(s.started, FailedPrecondition, "Loader::next() called before start_epoch()",
           "call loader.start_epoch(epoch) at the start of every epoch");
  if (s.next_deliver >= s.num_batches) {
    if (!options_.persistent_workers) s.stop_workers();
    return std::nullopt;
  }
  if (options_.num_workers == 0) {
    const std::int64_t b = s.next_deliver++;
    return s.make_batch(s.order, s.epoch, b);
  }
  Impl::Slot got;
  {
    std::unique_lock<std::mutex> lk(s.mu);
    const std::int64_t b = s.next_deliver;
    Impl::Slot& slot = s.slots[static_cast<std::size_t>(b % s.window)];
    s.ready_cv.wait(lk, [&] { return slot.ready && slot.batch == b; });
    got = std::move(slot);
    slot = Impl::Slot();
    ++s.next_deliver;
  }
  s.work_cv.notify_one();
  if (got.error) std::rethrow_exception(got.error);
  return std::optional<Batch>(std::move(got.value));
}

}  // namespace glassbox::data
