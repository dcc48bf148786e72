// Tests of Loader: order, determinism across worker counts, resume, errors, worker lifetime.
#include "glassbox/data/loader.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "glassbox/base/config.h"
#include "glassbox/base/error.h"
#include "glassbox/core/device.h"
#include "glassbox/data/buffer_pool.h"
#include "glassbox/testing/testing.h"

namespace glassbox::data {
namespace {

// inputs[i] = {i, -i}, targets[i] = i % 7; counts get_batch calls and the threads making them.
class ProbeDataset final : public Dataset {
 public:
  explicit ProbeDataset(std::int64_t n, std::int64_t fail_on = -1, int delay_ms = 0)
      : inner_(torch::stack({torch::arange(n, torch::kFloat), -torch::arange(n, torch::kFloat)}, 1),
               torch::arange(n, torch::kLong).remainder(7)),
        fail_on_(fail_on),
        delay_ms_(delay_ms) {}
  std::int64_t size() const override { return inner_.size(); }
  Batch get_batch(const at::Tensor& indices) const override {
    calls_.fetch_add(1);
    {
      std::lock_guard<std::mutex> g(mu_);
      threads_.insert(std::this_thread::get_id());
    }
    if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
    if (fail_on_ >= 0 && (indices == fail_on_).any().item<bool>()) {
      GB_THROW(DataLoss, "sample " << fail_on_ << " is unreadable", "test");
    }
    return inner_.get_batch(indices);
  }
  std::vector<std::int64_t> sample_shape() const override { return {2}; }
  int calls() const { return calls_.load(); }
  std::set<std::thread::id> threads() const {
    std::lock_guard<std::mutex> g(mu_);
    return threads_;
  }

 private:
  TensorDataset inner_;
  std::int64_t fail_on_;
  int delay_ms_;
  mutable std::atomic<int> calls_{0};
  mutable std::mutex mu_;
  mutable std::set<std::thread::id> threads_;
};

LoaderOptions opts(std::int64_t bs, bool shuffle, std::int64_t workers, bool persistent = false,
                   std::int64_t seed = 7) {
  LoaderOptions o;
  o.batch_size = bs;
  o.shuffle = shuffle;
  o.num_workers = workers;
  o.persistent_workers = persistent;
  o.seed = seed;
  return o;
}

std::vector<Batch> epoch_batches(Loader& l, std::int64_t epoch, std::int64_t first = 0) {
  std::vector<Batch> out;
  l.start_epoch(epoch, first);
  while (auto b = l.next()) out.push_back(std::move(*b));
  return out;
}

at::Tensor cat_indices(const std::vector<Batch>& bs) {
  std::vector<at::Tensor> v;
  for (const auto& b : bs) v.push_back(b.indices);
  return v.empty() ? torch::empty({0}, torch::kLong) : torch::cat(v);
}

TEST(Loader, EverySampleExactlyOncePerEpochInSamplerOrder) {
  auto ds = std::make_shared<ProbeDataset>(103);
  for (std::int64_t workers : {0, 1, 3}) {
    Loader l(ds, opts(10, true, workers));
    ASSERT_EQ(l.num_batches(), 11);
    EXPECT_EQ(l.dataset_size(), 103);
    for (std::int64_t e : {0, 1}) {
      std::vector<Batch> bs = epoch_batches(l, e);
      ASSERT_EQ(bs.size(), 11u);
      for (std::size_t k = 0; k < bs.size(); ++k) {
        EXPECT_EQ(bs[k].batch_index, static_cast<std::int64_t>(k));
        EXPECT_EQ(bs[k].size(), k + 1 < bs.size() ? 10 : 3);
        EXPECT_TRUE(torch::equal(bs[k].indices, l.batch_indices(e, static_cast<std::int64_t>(k))));
        // The gathered samples are the ones the indices name.
        EXPECT_TRUE(torch::equal(bs[k].inputs.select(1, 0), bs[k].indices.to(torch::kFloat)));
        EXPECT_TRUE(torch::equal(bs[k].targets, bs[k].indices.remainder(7)));
      }
      const at::Tensor all = cat_indices(bs);
      EXPECT_TRUE(torch::equal(all, l.epoch_order(e)));
      EXPECT_TRUE(torch::equal(std::get<0>(all.sort()), torch::arange(103, torch::kLong))) << "workers " << workers;
      EXPECT_FALSE(torch::equal(all, torch::arange(103, torch::kLong)));  // shuffled
    }
  }
}

// DistributedSampler's shards, against torch.utils.data.DistributedSampler itself (no shuffle):
// padded by repeating the head, rank r takes every W-th index from r.
TEST(Loader, ShardsAreDistributedSamplers) {
  const std::string script = R"(
import sys
from torch.utils.data import DistributedSampler
n, w = int(sys.argv[1]), int(sys.argv[2])
for r in range(w):
    print(" ".join(str(i) for i in DistributedSampler(range(n), num_replicas=w, rank=r, shuffle=False)))
)";  // no single quotes: it goes to python -c '...'

  for (auto [n, w] : {std::pair<std::int64_t, std::int64_t>{11, 3}, {10, 2}, {3, 4}, {7, 2}}) {
    const auto [rc, text] = testing::run_command(testing::python().string() + " -c '" + script + "' " +
                                                 std::to_string(n) + " " + std::to_string(w));
    ASSERT_EQ(rc, 0) << text;
    std::istringstream lines(text);
    auto ds = std::make_shared<ProbeDataset>(n);
    for (std::int64_t r = 0; r < w; ++r) {
      std::string line;
      std::getline(lines, line);
      std::istringstream in(line);
      std::vector<std::int64_t> want;
      for (std::int64_t i; in >> i;) want.push_back(i);
      LoaderOptions o;
      o.batch_size = 2;
      o.num_replicas = w;
      o.rank = r;
      Loader loader(ds, o);
      at::Tensor got = loader.epoch_order(0);
      EXPECT_EQ(std::vector<std::int64_t>(got.data_ptr<std::int64_t>(), got.data_ptr<std::int64_t>() + got.numel()),
                want)
          << "n " << n << " w " << w << " rank " << r;
      EXPECT_EQ(loader.dataset_size(), (n + w - 1) / w);
    }
  }
}

// Shuffled: the same epoch order on every rank, split as above; global batch b is the union of
// the ranks' batches b (what makes 2 ranks x batch 16 train as 1 process x batch 32).
TEST(Loader, ShuffledShardsSplitOneOrder) {
  auto ds = std::make_shared<ProbeDataset>(64);
  LoaderOptions one;
  one.batch_size = 32;
  one.shuffle = true;
  one.seed = 5;
  Loader single(ds, one);
  for (std::int64_t epoch : {0, 3}) {
    std::vector<at::Tensor> parts;
    for (std::int64_t r = 0; r < 2; ++r) {
      LoaderOptions o = one;
      o.batch_size = 16;
      o.num_replicas = 2;
      o.rank = r;
      Loader shard(ds, o);
      ASSERT_EQ(shard.num_batches(), single.num_batches());
      for (std::int64_t b = 0; b < shard.num_batches(); ++b) {
        at::Tensor mine = std::get<0>(shard.batch_indices(epoch, b).sort());
        at::Tensor whole = single.batch_indices(epoch, b);
        EXPECT_TRUE(torch::isin(mine, whole).all().item<bool>()) << "epoch " << epoch << " batch " << b;
      }
      parts.push_back(shard.epoch_order(epoch));
    }
    EXPECT_TRUE(std::get<0>(torch::cat(parts).sort()).equal(torch::arange(64, torch::kLong)));
    EXPECT_FALSE(parts[0].equal(parts[1]));
  }
  LoaderOptions bad = one;
  bad.num_replicas = 2;
  bad.rank = 2;
  EXPECT_THROW(Loader(ds, bad), Error);
}

TEST(Loader, WithoutShuffleTheOrderIsTheIdentity) {
  auto ds = std::make_shared<ProbeDataset>(25);
  Loader l(ds, opts(4, false, 2));
  EXPECT_TRUE(torch::equal(cat_indices(epoch_batches(l, 0)), torch::arange(25, torch::kLong)));
  EXPECT_TRUE(torch::equal(cat_indices(epoch_batches(l, 5)), torch::arange(25, torch::kLong)));
}

TEST(Loader, SameBatchesForAnyNumberOfWorkers) {
  auto ds = std::make_shared<ProbeDataset>(257);
  Loader ref(ds, opts(16, true, 0));
  for (std::int64_t e = 0; e < 2; ++e) {
    const std::vector<Batch> expected = epoch_batches(ref, e);
    for (std::int64_t workers : {1, 3}) {
      for (bool persistent : {false, true}) {
        Loader l(ds, opts(16, true, workers, persistent));
        const std::vector<Batch> got = epoch_batches(l, e);
        ASSERT_EQ(got.size(), expected.size());
        for (std::size_t k = 0; k < got.size(); ++k) {
          EXPECT_TRUE(torch::equal(got[k].indices, expected[k].indices)) << workers << " " << k;
          EXPECT_TRUE(torch::equal(got[k].inputs, expected[k].inputs));
          EXPECT_TRUE(torch::equal(got[k].targets, expected[k].targets));
        }
      }
    }
  }
}

TEST(Loader, OrderIsAFunctionOfSeedAndEpoch) {
  auto ds = std::make_shared<ProbeDataset>(500);
  Loader a(ds, opts(50, true, 0, false, 1));
  Loader b(ds, opts(50, true, 2, false, 1));
  Loader c(ds, opts(50, true, 0, false, 2));
  const at::Tensor a0 = cat_indices(epoch_batches(a, 0));
  const at::Tensor a1 = cat_indices(epoch_batches(a, 1));
  EXPECT_FALSE(torch::equal(a0, a1));
  EXPECT_TRUE(torch::equal(a0, cat_indices(epoch_batches(b, 0))));
  EXPECT_TRUE(torch::equal(a1, cat_indices(epoch_batches(b, 1))));
  EXPECT_FALSE(torch::equal(a0, cat_indices(epoch_batches(c, 0))));
  // Epoch 0 again after epoch 1 gives epoch 0's order.
  EXPECT_TRUE(torch::equal(a0, cat_indices(epoch_batches(a, 0))));
  // The documented recipe: randperm with a generator seeded by epoch_seed(seed, epoch).
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(epoch_seed(1, 1));
  EXPECT_TRUE(torch::equal(a1, at::randperm(500, gen, torch::kLong)));
}

TEST(Loader, DropLastCounts) {
  auto ds = std::make_shared<ProbeDataset>(103);
  LoaderOptions o = opts(10, true, 2);
  o.drop_last = true;
  Loader l(ds, o);
  EXPECT_EQ(l.num_batches(), 10);
  const std::vector<Batch> bs = epoch_batches(l, 0);
  ASSERT_EQ(bs.size(), 10u);
  for (const auto& b : bs) EXPECT_EQ(b.size(), 10);
  EXPECT_EQ(std::get<0>(at::_unique(cat_indices(bs))).numel(), 100);
  o.batch_size = 103;
  EXPECT_EQ(Loader(ds, o).num_batches(), 1);
  o.batch_size = 104;
  EXPECT_EQ(Loader(ds, o).num_batches(), 0);
  o.drop_last = false;
  EXPECT_EQ(Loader(ds, o).num_batches(), 1);
}

TEST(Loader, StartEpochMidwayIsTheTailOfTheFullEpochWithoutGatheringTheHead) {
  for (std::int64_t workers : {0, 2}) {
    auto ds = std::make_shared<ProbeDataset>(95);
    Loader l(ds, opts(10, true, workers));
    const std::vector<Batch> full = epoch_batches(l, 3);
    const int calls_before = ds->calls();
    const std::vector<Batch> tail = epoch_batches(l, 3, 4);
    EXPECT_EQ(ds->calls() - calls_before, 6) << "skipped batches must not be gathered";
    ASSERT_EQ(tail.size(), full.size() - 4);
    for (std::size_t k = 0; k < tail.size(); ++k) {
      EXPECT_EQ(tail[k].batch_index, static_cast<std::int64_t>(k + 4));
      EXPECT_TRUE(torch::equal(tail[k].indices, full[k + 4].indices));
      EXPECT_TRUE(torch::equal(tail[k].inputs, full[k + 4].inputs));
    }
    EXPECT_TRUE(epoch_batches(l, 3, l.num_batches()).empty());
    EXPECT_THROW(l.start_epoch(3, l.num_batches() + 1), Error);
  }
}

TEST(Loader, WorkerErrorsAreRethrownInOrderFromNext) {
  auto ds = std::make_shared<ProbeDataset>(40, /*fail_on=*/17);
  for (std::int64_t workers : {0, 1, 3}) {
    Loader l(ds, opts(5, false, workers));
    l.start_epoch(0);
    for (int k = 0; k < 3; ++k) {
      auto b = l.next();
      ASSERT_TRUE(b.has_value());
      EXPECT_EQ(b->batch_index, k);
    }
    try {
      l.next();
      ADD_FAILURE() << "expected the worker's error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kDataLoss);
      EXPECT_NE(e.message().find("sample 17 is unreadable"), std::string::npos);
    }
    // The epoch goes on after the failed batch.
    auto b = l.next();
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(b->batch_index, 4);
  }
  // A throwing transform is reported the same way.
  Loader l(std::make_shared<ProbeDataset>(40), opts(5, false, 2), [](Batch b, std::uint64_t) -> Batch {
    if (b.batch_index == 2) throw std::runtime_error("bad augment");
    return b;
  });
  l.start_epoch(0);
  l.next();
  l.next();
  EXPECT_THROW(
      {
        try {
          l.next();
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "bad augment");
          throw;
        }
      },
      std::runtime_error);
}

TEST(Loader, PersistentWorkersAreReusedAcrossEpochs) {
  auto ds = std::make_shared<ProbeDataset>(64);
  Loader l(ds, opts(4, true, 2, /*persistent=*/true));
  for (std::int64_t e = 0; e < 3; ++e) {
    const at::Tensor all = cat_indices(epoch_batches(l, e));
    EXPECT_TRUE(torch::equal(std::get<0>(all.sort()), torch::arange(64, torch::kLong)));
  }
  const std::set<std::thread::id> t = ds->threads();
  EXPECT_LE(t.size(), 2u);  // 48 batches, all gathered by the same two threads
  EXPECT_EQ(t.count(std::this_thread::get_id()), 0u);
  EXPECT_EQ(ds->calls(), 48);

  // Per-epoch workers give the same batches, also gathered off the consumer thread.
  auto ds2 = std::make_shared<ProbeDataset>(64);
  Loader l2(ds2, opts(4, true, 2, /*persistent=*/false));
  Loader ref(ds2, opts(4, true, 0));
  for (std::int64_t e = 0; e < 3; ++e) {
    EXPECT_TRUE(torch::equal(cat_indices(epoch_batches(l2, e)), cat_indices(epoch_batches(ref, e))));
  }
}

TEST(Loader, InlineGatherRunsOnTheConsumerThread) {
  auto ds = std::make_shared<ProbeDataset>(10);
  Loader l(ds, opts(3, false, 0));
  epoch_batches(l, 0);
  EXPECT_EQ(ds->threads(), std::set<std::thread::id>{std::this_thread::get_id()});
}

TEST(Loader, PrefetchWindowIsBounded) {
  auto ds = std::make_shared<ProbeDataset>(200);
  LoaderOptions o = opts(2, false, 2);
  o.prefetch_factor = 3;
  Loader l(ds, o);
  l.start_epoch(0);
  ASSERT_TRUE(l.next().has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  // Delivered batch 0, window 2 * 3: batches 1..6 at most are gathered ahead.
  EXPECT_LE(ds->calls(), 7);
  EXPECT_GE(ds->calls(), 1);
}

TEST(Loader, AbandonedEpochsAndDestructionMidEpochAreClean) {
  auto ds = std::make_shared<ProbeDataset>(300, -1, /*delay_ms=*/2);
  for (bool persistent : {false, true}) {
    Loader l(ds, opts(10, true, 3, persistent));
    l.start_epoch(0);
    l.next();
    l.next();
    // Restart: the new epoch's batches are correct although old ones were in flight.
    Loader ref(ds, opts(10, true, 0));
    const std::vector<Batch> got = epoch_batches(l, 1);
    const std::vector<Batch> expected = epoch_batches(ref, 1);
    ASSERT_EQ(got.size(), expected.size());
    for (std::size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(torch::equal(got[k].indices, expected[k].indices));
    l.start_epoch(2);
    l.next();
    // ~Loader with batches in flight joins the workers.
  }
  SUCCEED();
}

TEST(Loader, TransformSeedIsAFunctionOfSeedEpochAndBatch) {
  auto ds = std::make_shared<ProbeDataset>(60);
  // An augmentation: noise from a generator seeded with the transform seed; the seed is recorded.
  auto transform = [](Batch b, std::uint64_t seed) {
    at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
    b.inputs = b.inputs + at::randn(b.inputs.sizes(), g, at::TensorOptions());
    b.targets = torch::full({b.size()}, static_cast<std::int64_t>(seed >> 1), torch::kLong);
    return b;
  };
  std::vector<std::vector<Batch>> runs;
  for (std::int64_t workers : {0, 3}) {
    Loader l(ds, opts(8, true, workers, false, 11), transform);
    runs.push_back(epoch_batches(l, 2));
    runs.push_back(epoch_batches(l, 2));
  }
  std::set<std::int64_t> seeds;
  for (std::size_t k = 0; k < runs[0].size(); ++k) {
    const auto expected_seed = static_cast<std::int64_t>(batch_seed(11, 2, static_cast<std::int64_t>(k)) >> 1);
    EXPECT_EQ(runs[0][k].targets[0].item<std::int64_t>(), expected_seed);
    seeds.insert(expected_seed);
    for (std::size_t r = 1; r < runs.size(); ++r) {
      EXPECT_TRUE(torch::equal(runs[r][k].inputs, runs[0][k].inputs)) << r << " " << k;
      EXPECT_TRUE(torch::equal(runs[r][k].targets, runs[0][k].targets));
    }
  }
  EXPECT_EQ(seeds.size(), runs[0].size());  // unique per batch
  EXPECT_NE(batch_seed(11, 2, 0), batch_seed(11, 3, 0));
  EXPECT_NE(batch_seed(11, 2, 0), batch_seed(12, 2, 0));
}

TEST(Loader, PinMemoryPinsOnlyWithCuda) {
  auto ds = std::make_shared<ProbeDataset>(20);
  for (std::int64_t workers : {0, 2}) {
    LoaderOptions o = opts(8, false, workers);
    o.pin_memory = true;
    Loader l(ds, o);
    const std::vector<Batch> bs = epoch_batches(l, 0);
    ASSERT_EQ(bs.size(), 3u);
    for (const auto& b : bs) {
      EXPECT_EQ(b.inputs.is_pinned(), cuda_available());
      EXPECT_TRUE(torch::equal(b.inputs.select(1, 0), b.indices.to(torch::kFloat)));
    }
  }
}

TEST(Loader, NextBeforeStartEpochAndEndOfEpoch) {
  Loader l(std::make_shared<ProbeDataset>(5), opts(2, false, 0));
  EXPECT_THROW(l.next(), Error);
  l.start_epoch(0);
  EXPECT_EQ(l.epoch(), 0);
  int n = 0;
  while (l.next()) ++n;
  EXPECT_EQ(n, 3);
  EXPECT_FALSE(l.next().has_value());
  EXPECT_EQ(l.next_batch_index(), 3);
  EXPECT_THROW(Loader(nullptr, opts(2, false, 0)), Error);
}

// Collects field names through the FieldVisitor interface.
class NameVisitor final : public FieldVisitor {
 public:
  std::vector<std::string> names;
  void field(std::string_view n, std::int64_t&, std::string_view) override { names.emplace_back(n); }
  void field(std::string_view n, double&, std::string_view) override { names.emplace_back(n); }
  void field(std::string_view n, bool&, std::string_view) override { names.emplace_back(n); }
  void field(std::string_view n, std::string&, std::string_view) override { names.emplace_back(n); }
  void field(std::string_view n, std::vector<std::int64_t>&, std::string_view) override { names.emplace_back(n); }
  void field(std::string_view n, std::vector<double>&, std::string_view) override { names.emplace_back(n); }
  void field(std::string_view n, std::vector<std::string>&, std::string_view) override { names.emplace_back(n); }
  void choice(std::string_view n, std::string&, const std::vector<std::string_view>&, std::string_view) override {
    names.emplace_back(n);
  }
  void section(std::string_view n, const std::function<void(FieldVisitor&)>&) override { names.emplace_back(n); }
  void table_list(std::string_view n, std::size_t, const std::function<void(std::size_t)>&,
                  const std::function<void(FieldVisitor&, std::size_t)>&, std::string_view) override {
    names.emplace_back(n);
  }
};

TEST(LoaderOptions, VisitAndValidate) {
  LoaderOptions o;
  NameVisitor v;
  o.visit(v);
  EXPECT_EQ(v.names, (std::vector<std::string>{"batch_size", "shuffle", "drop_last", "num_workers", "prefetch_factor",
                                               "pin_memory", "persistent_workers", "seed"}));
  load_config("batch_size = 64\nshuffle = true\nnum_workers = 3\nseed = 9\n", "t.toml", {"drop_last=true"},
              visit_fn(o));
  EXPECT_EQ(o.batch_size, 64);
  EXPECT_TRUE(o.shuffle);
  EXPECT_TRUE(o.drop_last);
  EXPECT_EQ(o.num_workers, 3);
  EXPECT_EQ(o.seed, 9);
  EXPECT_NO_THROW(o.validate());
  const auto bad = [](auto mutate, const std::string& msg) {
    LoaderOptions b;
    mutate(b);
    try {
      b.validate();
      ADD_FAILURE() << "expected " << msg;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_EQ(e.message(), msg);
    }
  };
  bad([](LoaderOptions& b) { b.batch_size = 0; }, "data.batch_size must be >= 1, got 0");
  bad([](LoaderOptions& b) { b.num_workers = -1; }, "data.num_workers must be >= 0, got -1");
  bad([](LoaderOptions& b) { b.prefetch_factor = 0; }, "data.prefetch_factor must be >= 1, got 0");
  LoaderOptions zero;
  zero.batch_size = 0;
  EXPECT_THROW(Loader(std::make_shared<ProbeDataset>(5), zero), Error);
}

TEST(BufferPool, ReleasedBatchMemoryIsReusedAndTheFreeListIsBounded) {
  const std::vector<std::int64_t> shape = {3, 5, 7};
  void* first = nullptr;
  {
    at::Tensor t = pooled_empty(shape);
    EXPECT_EQ(t.sizes(), at::IntArrayRef(shape));
    EXPECT_EQ(t.scalar_type(), at::kFloat);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 64, 0u);
    t.fill_(2.5f);
    first = t.data_ptr();
  }
  const std::size_t held = pooled_free_bytes();
  EXPECT_GE(held, 3u * 5 * 7 * sizeof(float));
  {
    // Released on another thread (the consumer of a loader's batch), taken again here.
    at::Tensor t = pooled_empty(shape);
    EXPECT_EQ(t.data_ptr(), first);
    EXPECT_EQ(pooled_free_bytes(), held - 448);  // 105 floats, rounded up to 64 bytes
    std::thread([t = std::move(t)]() mutable { t = at::Tensor(); }).join();
  }
  EXPECT_EQ(pooled_free_bytes(), held);
  // A view keeps the buffer: it returns only when the last reference goes.
  at::Tensor view;
  {
    at::Tensor t = pooled_empty({64, 64});
    view = t[3];
  }
  EXPECT_EQ(pooled_free_bytes(), held);
  view = at::Tensor();
  EXPECT_GT(pooled_free_bytes(), held);
  // Far more released at once than the bound: the pool keeps at most kMaxPooledBytes.
  std::vector<at::Tensor> many;
  for (int i = 0; i < 12; ++i) many.push_back(pooled_empty({8 << 20}));  // 32 MiB each (never touched)
  many.clear();
  EXPECT_LE(pooled_free_bytes(), kMaxPooledBytes);
  EXPECT_GT(pooled_free_bytes(), kMaxPooledBytes / 2);
}

}  // namespace
}  // namespace glassbox::data
