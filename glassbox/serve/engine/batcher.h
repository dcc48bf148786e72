// The dynamic batcher's policy as a pure, clock-injected queue: Triton's dynamic batching (and its
// default one-request-at-a-time scheduler) without threads, so every decision is unit-testable
// with a fake clock. ModelRunner (runner.h) holds one BatchQueue under its mutex.
//
//   BatchQueue<Job> q(BatchPolicy::from_config(config));
//   q.push(ItemInfo{.batch_size = 2, .level = 1, .enqueued = now}, std::move(job));  // may throw
//   std::vector<Job> batch, expired;
//   BatchDecision d = q.form(now, batch, expired);   // answer `expired` ("Request timeout expired")
//   if (d.kind == BatchDecision::kExecute) run(batch);
//   else if (d.kind == BatchDecision::kWait) sleep_until(d.wake);   // or until the next push
//
// Semantics (Triton's dynamic_batch_scheduler.cc, GetDynamicBatch, 2.4x):
//   - Priority levels 1..priority_levels, 1 highest; FIFO within a level. Requests are examined
//     level by level, so higher levels always go first, and one batch may continue into the next
//     level when the higher one runs out (as Triton's cursor does).
//   - A batch grows request by request in that order and never exceeds max_batch_size. The first
//     request fixes the shape key; a request with another key ends the batch, which is then sent
//     at once: like Triton, the batcher never reorders past it (it would starve).
//   - preferred_batch_size (empty: {max_batch_size}, as Triton normalises it): if the examined
//     requests reach a preferred size, the largest preferred size reached is sent at once. If
//     adding the next request would pass the largest preferred size (or max_batch_size), the
//     batch cannot grow into a preferred size and what is there is sent at once.
//   - Otherwise the batch waits while its oldest request has waited less than
//     max_queue_delay_microseconds; when the delay is over everything examined (up to
//     max_batch_size) is sent. Delay 0: send what is there as soon as an instance asks.
//   - Queue policy per level (priority_queue_policy, else default_queue_policy):
//     max_queue_size (0 = unbounded) counts requests of that level; a push beyond it throws
//     ResourceExhausted "Exceeds maximum queue size". default_timeout_microseconds (0 = none),
//     replaced by the request's timeout_us when allow_timeout_override and timeout_us != 0 (the
//     request's timeout is ignored otherwise, as Triton does). A request whose deadline passes
//     while queued: REJECT -> handed back in `expired`; DELAY -> it stays, moved behind every
//     request of its level that has not timed out (still ahead of lower levels), and never
//     expires again.
//   - No dynamic_batching in the config: Triton's default scheduler: one level, no queue policy,
//     every request executes alone, FIFO.
//   - max_batch_size 0: a request has batch size 1 and every batch holds one request.
// Thread safety: none; the owner serialises calls (ModelRunner holds its mutex). Payloads are
// moved in and out; the queue owns them in between.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <utility>
#include <vector>

#include "glassbox/base/error.h"
#include "glassbox/export/model_config.h"

namespace glassbox::serve {

using SchedClock = std::chrono::steady_clock;
using SchedTime = SchedClock::time_point;

// Requests batch together only when their keys are equal: the non-batch shapes of the inputs
// whose config dims are variable (and which optional inputs are present). Empty when every
// input has fixed dims, so the common case allocates nothing.
struct ShapeKey {
  std::vector<std::int64_t> dims;
  bool operator==(const ShapeKey&) const = default;
};

enum class TimeoutAction { kReject, kDelay };

// One priority level's queue policy (Triton's ModelQueuePolicy).
struct QueuePolicy {
  TimeoutAction timeout_action = TimeoutAction::kReject;
  std::uint64_t default_timeout_us = 0;  // 0: requests never time out
  bool allow_timeout_override = false;   // a request's timeout_us (when != 0) replaces the default
  std::size_t max_queue_size = 0;        // requests of this level queued at once; 0: unbounded
};

// The scheduling part of a model config, normalised.
struct BatchPolicy {
  bool dynamic = false;                 // false: the default scheduler (one request at a time)
  std::int64_t max_batch_size = 0;      // the config's; batches hold at most max(1, this) elements
  std::vector<std::int64_t> preferred;  // ascending, unique, non-empty for dynamic batching
  std::uint64_t max_queue_delay_us = 0;
  std::uint32_t priority_levels = 1;      // >= 1
  std::uint32_t default_level = 1;        // 1..priority_levels
  std::vector<QueuePolicy> level_policy;  // [level - 1]
  bool preserve_ordering = false;

  static constexpr std::uint32_t kMaxPriorityLevels = 1024;

  // From config.dynamic_batching (or its absence). InvalidArgument naming the field for values the
  // batcher cannot use: preferred sizes outside 1..max_batch_size, dynamic batching with
  // max_batch_size 0, more than kMaxPriorityLevels levels, a default level outside 1..levels.
  static BatchPolicy from_config(const triton::ModelConfig& config);

  // The level of a request's priority: 0 (or anything above priority_levels) -> default_level.
  std::uint32_t level_of(std::uint32_t priority) const;
  // When a request queued at `enqueued` times out, or SchedTime::max() for never.
  SchedTime deadline(std::uint32_t level, std::uint64_t request_timeout_us, SchedTime enqueued) const;
  // The largest number of batch elements one execution receives.
  std::int64_t batch_limit() const { return std::max<std::int64_t>(1, max_batch_size); }
};

// What the batcher needs to know about a queued request.
struct ItemInfo {
  std::int64_t batch_size = 1;  // >= 1
  std::uint32_t level = 1;      // 1..priority_levels
  SchedTime enqueued{};
  SchedTime deadline = SchedTime::max();
  ShapeKey key;
};

struct BatchDecision {
  enum Kind { kNothing, kWait, kExecute };
  Kind kind = kNothing;  // kNothing: the queue is empty; wait for a push
  SchedTime wake{};      // kWait: call form() again at this time (or after the next push)
};

// `now + us`, saturating at SchedTime::max().
SchedTime saturating_add(SchedTime now, std::uint64_t us);

// Throws the queue-full error (ResourceExhausted "Exceeds maximum queue size").
[[noreturn]] void throw_queue_full(std::uint32_t level, std::size_t max_queue_size);

template <class Payload>
class BatchQueue {
 public:
  explicit BatchQueue(BatchPolicy policy) : policy_(std::move(policy)), levels_(policy_.priority_levels) {
    max_preferred_ = policy_.preferred.empty() ? policy_.batch_limit() : policy_.preferred.back();
  }

  const BatchPolicy& policy() const { return policy_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // No request times out before this (SchedTime::max(): none will); it may be early.
  SchedTime next_deadline() const { return next_deadline_; }

  // Throws ResourceExhausted "Exceeds maximum queue size" unless `count` more requests fit in
  // `level`'s queue.
  void check_room(std::uint32_t level, std::size_t count) const {
    const std::size_t max = policy_.level_policy[level - 1].max_queue_size;
    const Level& l = levels_[level - 1];
    if (max != 0 && l.ready.size() + l.delayed.size() + count > max) throw_queue_full(level, max);
  }

  // Queues `payload` behind the requests of its level; throws (check_room) without touching
  // `payload` when the level is full.
  void push(ItemInfo info, Payload&& payload) {
    check_room(info.level, 1);
    next_deadline_ = std::min(next_deadline_, info.deadline);
    levels_[info.level - 1].ready.push_back(Entry{std::move(info), std::move(payload)});
    ++size_;
  }

  // Applies the timeout policy at `now`: REJECT requests are moved to `expired` (appended),
  // DELAY requests move behind their level. Cheap when no deadline has passed.
  void expire(SchedTime now, std::vector<Payload>& expired) {
    if (now < next_deadline_) return;
    next_deadline_ = SchedTime::max();
    for (std::size_t i = 0; i < levels_.size(); ++i) {
      Level& l = levels_[i];
      const bool delay = policy_.level_policy[i].timeout_action == TimeoutAction::kDelay;
      std::size_t kept = 0;
      for (std::size_t j = 0; j < l.ready.size(); ++j) {
        Entry& e = l.ready[j];
        if (e.info.deadline <= now) {
          if (delay) {
            e.info.deadline = SchedTime::max();
            l.delayed.push_back(std::move(e));
          } else {
            expired.push_back(std::move(e.payload));
            --size_;
          }
          continue;
        }
        next_deadline_ = std::min(next_deadline_, e.info.deadline);
        if (kept != j) l.ready[kept] = std::move(e);
        ++kept;
      }
      l.ready.erase(l.ready.begin() + static_cast<std::ptrdiff_t>(kept), l.ready.end());
    }
  }

  // Decides what an idle instance should do at `now` (see the semantics above). `batch` is
  // cleared and, for kExecute, filled in queue order; timed-out requests are appended to
  // `expired` whatever the decision.
  BatchDecision form(SchedTime now, std::vector<Payload>& batch, std::vector<Payload>& expired) {
    batch.clear();
    expire(now, expired);
    if (size_ == 0) return {};
    if (!policy_.dynamic || policy_.max_batch_size == 0) {
      take_front(1, batch);
      return {BatchDecision::kExecute, {}};
    }
    const std::int64_t limit = policy_.batch_limit();
    std::int64_t pending = 0;  // batch elements examined
    std::size_t count = 0;     // requests examined
    std::size_t best = 0;      // requests in the marked (preferred) prefix; 0: none
    bool send_now = false;
    SchedTime oldest = SchedTime::max();
    const ShapeKey* key = nullptr;
    visit([&](const Entry& e) {
      const std::int64_t b = std::max<std::int64_t>(1, e.info.batch_size);
      if (count == 0) {
        key = &e.info.key;
      } else {
        if (pending + b > max_preferred_ && best == 0) best = count;
        if (pending + b > limit || !(e.info.key == *key)) {
          send_now = true;
          return false;
        }
      }
      pending += b;
      ++count;
      oldest = std::min(oldest, e.info.enqueued);
      if (std::binary_search(policy_.preferred.begin(), policy_.preferred.end(), pending)) best = count;
      return true;
    });
    const SchedTime due = saturating_add(oldest, policy_.max_queue_delay_us);
    const bool delay_over = policy_.max_queue_delay_us != 0 && now >= due;
    if (best != 0 && !delay_over) {
      take_front(best, batch);
    } else if (send_now || pending >= max_preferred_ || delay_over || policy_.max_queue_delay_us == 0) {
      take_front(count, batch);
    } else {
      return {BatchDecision::kWait, std::min(due, next_deadline_)};
    }
    return {BatchDecision::kExecute, {}};
  }

  // Moves every queued payload to `out` (appended), highest level first.
  void take_all(std::vector<Payload>& out) {
    take_front(size_, out);
    next_deadline_ = SchedTime::max();
  }

 private:
  struct Entry {
    ItemInfo info;
    Payload payload;
  };
  struct Level {
    std::deque<Entry> ready;    // FIFO, not timed out
    std::deque<Entry> delayed;  // timed out with the DELAY action, FIFO
  };

  // Calls f(entry) in scheduling order until it returns false.
  template <class F>
  void visit(F&& f) {
    for (Level& l : levels_) {
      for (const Entry& e : l.ready)
        if (!f(e)) return;
      for (const Entry& e : l.delayed)
        if (!f(e)) return;
    }
  }

  void take_front(std::size_t n, std::vector<Payload>& out) {
    for (Level& l : levels_) {
      for (std::deque<Entry>* q : {&l.ready, &l.delayed}) {
        for (; n != 0 && !q->empty(); --n, --size_) {
          out.push_back(std::move(q->front().payload));
          q->pop_front();
        }
      }
      if (n == 0) return;
    }
  }

  BatchPolicy policy_;
  std::vector<Level> levels_;  // [level - 1]
  std::int64_t max_preferred_ = 1;
  std::size_t size_ = 0;
  SchedTime next_deadline_ = SchedTime::max();  // earliest deadline in any `ready` (may be early)
};

}  // namespace glassbox::serve
