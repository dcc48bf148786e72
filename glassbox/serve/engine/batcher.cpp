// The non-template part of the batcher: the policy read from a model config, deadlines, and the
// queue-full error. The queue itself is a template in batcher.h.
#include "glassbox/serve/engine/batcher.h"

#include <string>

namespace glassbox::serve {
namespace {

QueuePolicy queue_policy(const triton::ModelQueuePolicy& p) {
  QueuePolicy q;
  q.timeout_action =
      p.timeout_action() == triton::ModelQueuePolicy::DELAY ? TimeoutAction::kDelay : TimeoutAction::kReject;
  q.default_timeout_us = p.default_timeout_microseconds();
  q.allow_timeout_override = p.allow_timeout_override();
  q.max_queue_size = p.max_queue_size();
  return q;
}

}  // namespace

BatchPolicy BatchPolicy::from_config(const triton::ModelConfig& config) {
  BatchPolicy p;
  p.max_batch_size = config.max_batch_size();
  const std::string model = "model '" + config.name() + "'";
  GB_CHECK(p.max_batch_size >= 0, InvalidArgument, model << ": max_batch_size is " << p.max_batch_size,
           std::string("set max_batch_size to 0 (no batch axis) or a positive batch limit"));
  if (!config.has_dynamic_batching()) {
    p.level_policy.assign(1, QueuePolicy{});
    return p;
  }
  const triton::ModelDynamicBatching& b = config.dynamic_batching();
  GB_CHECK(p.max_batch_size > 0, InvalidArgument, model << ": dynamic_batching is set but max_batch_size is 0",
           std::string("set max_batch_size > 0 or remove dynamic_batching"));
  p.dynamic = true;
  for (std::int32_t size : b.preferred_batch_size()) {
    GB_CHECK(size >= 1 && size <= p.max_batch_size, InvalidArgument,
             model << ": dynamic_batching.preferred_batch_size " << size << " is outside 1.." << p.max_batch_size,
             std::string("use preferred sizes between 1 and max_batch_size"));
    p.preferred.push_back(size);
  }
  std::sort(p.preferred.begin(), p.preferred.end());
  p.preferred.erase(std::unique(p.preferred.begin(), p.preferred.end()), p.preferred.end());
  if (p.preferred.empty()) p.preferred.push_back(p.max_batch_size);  // Triton's normalisation
  p.max_queue_delay_us = b.max_queue_delay_microseconds();
  p.preserve_ordering = b.preserve_ordering();

  GB_CHECK(
      b.priority_levels() <= kMaxPriorityLevels, InvalidArgument,
      model << ": dynamic_batching.priority_levels is " << b.priority_levels() << ", more than " << kMaxPriorityLevels,
      std::string("use at most ") + std::to_string(kMaxPriorityLevels) + " priority levels");
  p.priority_levels = b.priority_levels() == 0 ? 1 : static_cast<std::uint32_t>(b.priority_levels());
  if (b.priority_levels() != 0) {
    GB_CHECK(b.default_priority_level() >= 1 && b.default_priority_level() <= b.priority_levels(), InvalidArgument,
             model << ": dynamic_batching.default_priority_level is " << b.default_priority_level() << ", outside 1.."
                   << b.priority_levels(),
             std::string("set default_priority_level between 1 and priority_levels"));
    p.default_level = static_cast<std::uint32_t>(b.default_priority_level());
  }
  const QueuePolicy fallback = queue_policy(b.default_queue_policy());  // all defaults when unset
  p.level_policy.assign(p.priority_levels, fallback);
  for (const auto& [level, policy] : b.priority_queue_policy()) {
    GB_CHECK(level >= 1 && level <= p.priority_levels && b.priority_levels() != 0, InvalidArgument,
             model << ": dynamic_batching.priority_queue_policy has level " << level << ", outside 1.."
                   << b.priority_levels(),
             std::string("key priority_queue_policy by levels 1..priority_levels"));
    p.level_policy[level - 1] = queue_policy(policy);
  }
  return p;
}

std::uint32_t BatchPolicy::level_of(std::uint32_t priority) const {
  return priority == 0 || priority > priority_levels ? default_level : priority;
}

SchedTime BatchPolicy::deadline(std::uint32_t level, std::uint64_t request_timeout_us, SchedTime enqueued) const {
  const QueuePolicy& q = level_policy[level - 1];
  std::uint64_t us = q.default_timeout_us;
  if (q.allow_timeout_override && request_timeout_us != 0) us = request_timeout_us;
  return us == 0 ? SchedTime::max() : saturating_add(enqueued, us);
}

SchedTime saturating_add(SchedTime now, std::uint64_t us) {
  const auto room = std::chrono::duration_cast<std::chrono::microseconds>(SchedTime::max() - now).count();
  if (room <= 0 || us >= static_cast<std::uint64_t>(room)) return SchedTime::max();
  return now + std::chrono::microseconds(static_cast<std::int64_t>(us));
}

void throw_queue_full(std::uint32_t level, std::size_t max_queue_size) {
  throw Error(ErrorCode::kResourceExhausted, "Exceeds maximum queue size",
              "priority level " + std::to_string(level) + " already queues its maximum of " +
                  std::to_string(max_queue_size) +
                  " requests; retry later, or raise max_queue_size in the model's "
                  "dynamic_batching queue policy");
}

}  // namespace glassbox::serve
