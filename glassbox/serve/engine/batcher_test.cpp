// The dynamic batcher's policy with a fake clock: every decision (wait, send, which requests) of
// Triton's semantics, without threads.
#include "glassbox/serve/engine/batcher.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace glassbox::serve {
namespace {

using std::chrono::microseconds;

triton::ModelConfig config(const std::string& text) {
  exporter::ParseConfigOptions o;
  o.validate = false;
  return exporter::parse_model_config(text, "test", o);
}

// A queue of ints (the payloads are request numbers) and a fake clock.
struct Fixture {
  explicit Fixture(const std::string& text) : q(BatchPolicy::from_config(config(text))) {}

  void push(int id, std::int64_t batch_size = 1, std::uint32_t priority = 0, std::uint64_t timeout_us = 0,
            std::vector<std::int64_t> key = {}) {
    const BatchPolicy& p = q.policy();
    ItemInfo info;
    info.batch_size = batch_size;
    info.level = p.level_of(priority);
    info.enqueued = now;
    info.deadline = p.deadline(info.level, timeout_us, now);
    info.key.dims = std::move(key);
    q.push(std::move(info), int(id));
  }
  BatchDecision form() {
    expired.clear();
    return q.form(now, batch, expired);
  }
  void at(std::int64_t us) { now = SchedTime{} + std::chrono::hours(1) + microseconds(us); }

  BatchQueue<int> q;
  SchedTime now = SchedTime{} + std::chrono::hours(1);
  std::vector<int> batch, expired;
};

constexpr const char* kDelay100 = R"(name: "m" max_batch_size: 8
  dynamic_batching { max_queue_delay_microseconds: 100 })";

TEST(Batcher, WaitsForTheDelayThenSendsWhatIsThere) {
  Fixture f(kDelay100);
  EXPECT_EQ(f.form().kind, BatchDecision::kNothing);
  f.at(0);
  f.push(0);
  f.at(10);
  f.push(1);
  f.at(20);
  f.push(2);
  BatchDecision d = f.form();
  ASSERT_EQ(d.kind, BatchDecision::kWait);
  f.at(100);
  EXPECT_EQ(d.wake, f.now) << "the oldest request's delay ends at t=100us";
  f.at(99);
  EXPECT_EQ(f.form().kind, BatchDecision::kWait);
  EXPECT_TRUE(f.batch.empty());
  f.at(100);
  EXPECT_EQ(f.form().kind, BatchDecision::kExecute);
  EXPECT_EQ(f.batch, (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(f.q.empty());
}

TEST(Batcher, DelayZeroSendsWhatIsThereAtOnce) {
  Fixture f(R"(name: "m" max_batch_size: 8 dynamic_batching { })");
  f.push(0);
  f.push(1);
  EXPECT_EQ(f.form().kind, BatchDecision::kExecute);
  EXPECT_EQ(f.batch, (std::vector<int>{0, 1}));
}

TEST(Batcher, PreferredSizeIsSentAtOnceLargestFirst) {
  Fixture f(R"(name: "m" max_batch_size: 8
    dynamic_batching { preferred_batch_size: [2, 4] max_queue_delay_microseconds: 1000000 })");
  f.push(0);
  EXPECT_EQ(f.form().kind, BatchDecision::kWait);
  f.push(1);
  f.push(2);
  EXPECT_EQ(f.form().kind, BatchDecision::kExecute) << "3 queued: the preferred 2 goes now";
  EXPECT_EQ(f.batch, (std::vector<int>{0, 1}));
  EXPECT_EQ(f.form().kind, BatchDecision::kWait) << "1 left, below every preferred size";
  for (int i = 3; i < 8; ++i) f.push(i);
  EXPECT_EQ(f.form().kind, BatchDecision::kExecute);
  EXPECT_EQ(f.batch, (std::vector<int>{2, 3, 4, 5})) << "6 queued: the largest preferred size reached, 4";
  EXPECT_EQ(f.q.size(), 2u);
}

TEST(Batcher, MaxBatchSizeIsThePreferredSizeWhenNoneIsGiven) {
  Fixture f(kDelay100);
  for (int i = 0; i < 7; ++i) f.push(i);
  EXPECT_EQ(f.form().kind, BatchDecision::kWait);
  f.push(7, 1);
  EXPECT_EQ(f.form().kind, BatchDecision::kExecute);
  EXPECT_EQ(f.batch.size(), 8u);
}

TEST(Batcher, NeverAboveMaxBatchSizeAndNeverSplits) {
  Fixture f(R"(name: "m" max_batch_size: 4
    dynamic_batching { preferred_batch_size: [2] max_queue_delay_microseconds: 100 })");
  f.at(0);
  f.push(0, 3);
  f.push(1, 3);
  // 3 + 3 would pass max_batch_size: the 3 goes alone, now (it cannot grow to a preferred size).
  EXPECT_EQ(f.form().kind, BatchDecision::kExecute);
  EXPECT_EQ(f.batch, (std::vector<int>{0}));
  EXPECT_EQ(f.form().kind, BatchDecision::kExecute);
  EXPECT_EQ(f.batch, (std::vector<int>{1}));
  // Five requests of one, delay over: everything up to max_batch_size goes (past the preferred 2).
  for (int i = 2; i < 7; ++i) f.push(i);
  f.at(100);
  EXPECT_EQ(f.form().kind, BatchDecision::kExecute);
  EXPECT_EQ(f.batch, (std::vector<int>{2, 3, 4, 5}));
}

TEST(Batcher, WithinTheDelayAPreferredSizeWinsOverALargerBatch) {
  Fixture f(R"(name: "m" max_batch_size: 8
    dynamic_batching { preferred_batch_size: [2] max_queue_delay_microseconds: 100 })");
  f.at(0);
  for (int i = 0; i < 5; ++i) f.push(i);
  EXPECT_EQ(f.form().kind, BatchDecision::kExecute);
  EXPECT_EQ(f.batch, (std::vector<int>{0, 1}));
}

TEST(Batcher, UnequalShapesDoNotBatch) {
  Fixture f(kDelay100);
  f.at(0);
  f.push(0, 1, 0, 0, {3});
  f.push(1, 1, 0, 0, {3});
  f.push(2, 1, 0, 0, {5});
  f.push(3, 1, 0, 0, {3});
  // The [5] ends the first batch, which is sent at once (no reordering past it).
  EXPECT_EQ(f.form().kind, BatchDecision::kExecute);
  EXPECT_EQ(f.batch, (std::vector<int>{0, 1}));
  EXPECT_EQ(f.form().kind, BatchDecision::kExecute);
  EXPECT_EQ(f.batch, (std::vector<int>{2}));
  EXPECT_EQ(f.form().kind, BatchDecision::kWait) << "the last [3] waits for company";
}

TEST(Batcher, HigherPriorityLevelsGoFirst) {
  Fixture f(R"(name: "m" max_batch_size: 1
    dynamic_batching { priority_levels: 3 default_priority_level: 2 })");
  f.push(0, 1, 3);
  f.push(1, 1, 0);  // default: level 2
  f.push(2, 1, 2);
  f.push(3, 1, 1);
  std::vector<int> order;
  while (f.form().kind == BatchDecision::kExecute) order.insert(order.end(), f.batch.begin(), f.batch.end());
  EXPECT_EQ(order, (std::vector<int>{3, 1, 2, 0}));
}

TEST(Batcher, ABatchContinuesIntoTheNextLevel) {
  Fixture f(R"(name: "m" max_batch_size: 4 dynamic_batching { priority_levels: 2 default_priority_level: 2 })");
  f.push(0, 1, 2);
  f.push(1, 1, 2);
  f.push(2, 1, 1);
  EXPECT_EQ(f.form().kind, BatchDecision::kExecute);
  EXPECT_EQ(f.batch, (std::vector<int>{2, 0, 1}));
}

TEST(Batcher, QueueFullIsResourceExhaustedPerLevel) {
  Fixture f(R"(name: "m" max_batch_size: 4 dynamic_batching {
    priority_levels: 2 default_priority_level: 1
    default_queue_policy { max_queue_size: 2 }
    priority_queue_policy { key: 2 value: { max_queue_size: 1 } } })");
  f.push(0, 1, 1);
  f.push(1, 1, 1);
  try {
    f.push(2, 1, 1);
    FAIL() << "a third request fit in a queue of 2";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted);
    EXPECT_EQ(e.message(), "Exceeds maximum queue size");
    EXPECT_NE(e.hint().find("maximum of 2"), std::string::npos) << e.hint();
  }
  f.push(3, 1, 2);
  EXPECT_THROW(f.push(4, 1, 2), Error);
  EXPECT_THROW(f.q.check_room(1, 1), Error);
  EXPECT_EQ(f.q.size(), 3u);
}

TEST(Batcher, TimedOutRequestsAreRejected) {
  Fixture f(R"(name: "m" max_batch_size: 4 dynamic_batching {
    max_queue_delay_microseconds: 1000 default_queue_policy { default_timeout_microseconds: 100 } })");
  f.at(0);
  f.push(0);
  f.at(50);
  f.push(1);
  BatchDecision d = f.form();
  ASSERT_EQ(d.kind, BatchDecision::kWait);
  f.at(100);
  EXPECT_EQ(d.wake, f.now) << "wakes at the first deadline, before the delay ends";
  EXPECT_EQ(f.form().kind, BatchDecision::kWait);
  EXPECT_EQ(f.expired, (std::vector<int>{0}));
  EXPECT_TRUE(f.batch.empty());
  f.at(150);
  EXPECT_EQ(f.form().kind, BatchDecision::kNothing);
  EXPECT_EQ(f.expired, (std::vector<int>{1}));
  EXPECT_TRUE(f.q.empty());
}

TEST(Batcher, TimedOutRequestsWithDelayRunAfterTheOthers) {
  Fixture f(R"(name: "m" max_batch_size: 1 dynamic_batching { priority_levels: 2 default_priority_level: 1
    priority_queue_policy { key: 1 value: { timeout_action: DELAY default_timeout_microseconds: 100 } } })");
  f.at(0);
  f.push(0, 1, 1);
  f.push(1, 1, 2);
  f.at(60);
  f.push(2, 1, 1);
  f.at(120);  // 0 has timed out, 2 has not
  std::vector<int> order;
  while (f.form().kind == BatchDecision::kExecute) {
    EXPECT_TRUE(f.expired.empty());
    order.push_back(f.batch.front());
    f.at(1000);  // long past every deadline: the delayed 0 never expires again
  }
  EXPECT_EQ(order, (std::vector<int>{2, 0, 1})) << "DELAY: behind its level's live requests, ahead of level 2";
}

TEST(Batcher, RequestTimeoutsNeedAllowTimeoutOverride) {
  const BatchPolicy off = BatchPolicy::from_config(config(R"(name: "m" max_batch_size: 4 dynamic_batching {
    default_queue_policy { default_timeout_microseconds: 500 } })"));
  const BatchPolicy on = BatchPolicy::from_config(config(R"(name: "m" max_batch_size: 4 dynamic_batching {
    default_queue_policy { allow_timeout_override: true } })"));
  const SchedTime t{std::chrono::hours(1)};
  EXPECT_EQ(off.deadline(1, 10, t), t + microseconds(500)) << "the request's timeout is ignored";
  EXPECT_EQ(off.deadline(1, 0, t), t + microseconds(500));
  EXPECT_EQ(on.deadline(1, 10, t), t + microseconds(10));
  EXPECT_EQ(on.deadline(1, 0, t), SchedTime::max()) << "no default: never";

  Fixture f(R"(name: "m" max_batch_size: 4 dynamic_batching { max_queue_delay_microseconds: 1000
    default_queue_policy { allow_timeout_override: true } })");
  f.at(0);
  f.push(0, 1, 0, 10);
  f.push(1);
  f.at(10);
  EXPECT_EQ(f.form().kind, BatchDecision::kWait);
  EXPECT_EQ(f.expired, (std::vector<int>{0}));
}

TEST(Batcher, WithoutDynamicBatchingEachRequestRunsAlone) {
  Fixture f(R"(name: "m" max_batch_size: 8)");
  EXPECT_FALSE(f.q.policy().dynamic);
  f.push(0, 2);
  f.push(1, 1, 1, 5);  // priority and timeout mean nothing to the default scheduler
  f.push(2, 3);
  std::vector<int> order;
  while (f.form().kind == BatchDecision::kExecute) {
    ASSERT_EQ(f.batch.size(), 1u);
    order.push_back(f.batch.front());
  }
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
}

TEST(Batcher, TakeAllEmptiesTheQueueHighestLevelFirst) {
  Fixture f(R"(name: "m" max_batch_size: 4 dynamic_batching { priority_levels: 2 default_priority_level: 2 })");
  f.push(0);
  f.push(1, 1, 1);
  std::vector<int> all;
  f.q.take_all(all);
  EXPECT_EQ(all, (std::vector<int>{1, 0}));
  EXPECT_TRUE(f.q.empty());
}

TEST(Batcher, ConfigErrorsNameTheField) {
  try {
    BatchPolicy::from_config(config(R"(name: "m" max_batch_size: 4 dynamic_batching { preferred_batch_size: [8] })"));
    FAIL() << "a preferred size above max_batch_size was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.message(), "model 'm': dynamic_batching.preferred_batch_size 8 is outside 1..4");
  }
  EXPECT_THROW(BatchPolicy::from_config(config(R"(name: "m" dynamic_batching { })")), Error);
  EXPECT_THROW(BatchPolicy::from_config(config(R"(name: "m" max_batch_size: 4 dynamic_batching {
    priority_levels: 2 default_priority_level: 3 })")),
               Error);
  const BatchPolicy p = BatchPolicy::from_config(config(R"(name: "m" max_batch_size: 4
    dynamic_batching { preferred_batch_size: [4, 2, 4] })"));
  EXPECT_EQ(p.preferred, (std::vector<std::int64_t>{2, 4}));
}

}  // namespace
}  // namespace glassbox::serve
