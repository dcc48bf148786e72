// ModelRunner::Impl: the queue (batcher.h) under one mutex, the instance threads that form and run
// batches, the timeout thread, request splitting and in-order delivery (runner.h).
//
// Over 600 lines because the request's whole path (submit -> queue -> execute -> split outputs ->
// deliver) and its failure paths (refused, timed out, canceled, backend error) share the
// accounting that makes every callback run exactly once; split apart they would each need it.
#include "glassbox/serve/engine/runner.h"

#include <sys/prctl.h>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "glassbox/serve/engine/batcher.h"
#include "glassbox/serve/engine/classification.h"
#include "glassbox/serve/engine/stats.h"
#include "glassbox/serve/engine/validate.h"

namespace glassbox::serve {
namespace {

constexpr std::chrono::milliseconds kDestructorDrain{100};
constexpr const char* kSplitParameter = "glassbox.split_large_requests";

std::uint64_t ns_between(SchedTime from, SchedTime to) {
  return to > from ? static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count())
                   : 0;
}

bool split_option(const triton::ModelConfig& config, bool fallback) {
  const auto it = config.parameters().find(kSplitParameter);
  if (it == config.parameters().end()) return fallback;
  const std::string& v = it->second.string_value();
  GB_CHECK(v == "true" || v == "false", InvalidArgument,
           "model '" << config.name() << "': parameter " << kSplitParameter << " is \"" << v
                     << "\", expected \"true\" or \"false\"",
           std::string("set string_value to \"true\" or \"false\""));
  return v == "true";
}

int instance_count(const triton::ModelConfig& config) {
  int n = 0;
  for (const triton::ModelInstanceGroup& g : config.instance_group()) {
    GB_CHECK(g.count() >= 0, InvalidArgument, "model '" << config.name() << "': instance_group count is " << g.count(),
             std::string("use a count >= 1 (0 means 1)"));
    n += std::max(1, g.count());
  }
  return std::max(1, n);
}

// Rows [begin, end) of a tensor whose first axis is the batch: a view, no copy.
Tensor slice_rows(const Tensor& t, std::int64_t begin, std::int64_t end) {
  std::vector<std::int64_t> shape = t.shape;
  shape[0] = end - begin;
  const std::uint64_t per_row = static_cast<std::uint64_t>(element_count(std::span(t.shape).subspan(1)));
  std::size_t offset = 0, size = 0;
  if (t.datatype == DataType::kBytes) {  // validated: the elements parse
    offset = bytes_elements_size(t.bytes(), per_row * static_cast<std::uint64_t>(begin)).value_or(0);
    size =
        bytes_elements_size(t.bytes().subspan(offset), per_row * static_cast<std::uint64_t>(end - begin)).value_or(0);
  } else {
    const std::size_t row = per_row * element_size(t.datatype);
    offset = row * static_cast<std::size_t>(begin);
    size = row * static_cast<std::size_t>(end - begin);
  }
  return Tensor::view(t.name, t.datatype, std::move(shape), t.owner, t.data + offset, size);
}

// The config index of the output the profile reads the class scores from: by name, or the only
// one; -1 when there is none (the monitor then watches the inputs only).
int monitored_output_index(const RequestValidator& validator, const std::string& name) {
  const int i = validator.output_index(name);
  if (i >= 0) return i;
  return validator.output_count() == 1 ? 0 : -1;
}

void invoke(InferCallback& done, InferOutcome&& outcome) noexcept {
  try {
    done(std::move(outcome));
  } catch (...) {
    // A callback's failure is its own; the runner goes on (runner.h).
  }
}

// The shared state of a request split into chunks (one queue item each).
struct Gather {
  InferRequest request;  // the original (keeps the chunks' input bytes alive)
  InferCallback done;
  std::uint64_t seq = 0;
  std::mutex mu;
  std::size_t remaining = 0;
  std::vector<std::vector<Tensor>> outputs;  // per chunk, every config output
  std::optional<Error> error;                // the first one
  FailureReason reason = FailureReason::kOther;
  std::uint64_t queue_ns = ~std::uint64_t{0};  // until its first chunk ran
  ExecuteTimings compute;                      // summed over the chunks' batches
};

struct Job {
  InferRequest request;  // inputs in config order (a chunk's: views of the original's rows)
  InferCallback done;    // empty for chunks: the gather answers
  std::int64_t batch_size = 1;
  SchedTime enqueued{};
  std::uint64_t seq = 0;  // arrival order, for preserve_ordering
  std::shared_ptr<Gather> gather;
  std::size_t chunk = 0;
};

}  // namespace

struct ModelRunner::Impl {
  Impl(const triton::ModelConfig& config, std::int64_t version, std::shared_ptr<Backend> backend,
       const RunnerOptions& options)
      : model(config.name()),
        version(version),
        backend(std::move(backend)),
        split(split_option(config, options.split_large_requests)),
        validator(config, split),
        labels(options.labels),
        queue(BatchPolicy::from_config(config)),
        stats(config.name(), version),
        monitor(options.monitor),
        monitored_output(monitor ? monitored_output_index(validator, monitor->reference().output) : -1),
        preserve(queue.policy().preserve_ordering) {
    GB_CHECK(this->backend != nullptr, InvalidArgument, "model '" << model << "': no backend",
             std::string("load the model's backend before starting its runner"));
  }

  const std::string model;
  const std::int64_t version;
  const std::shared_ptr<Backend> backend;
  const bool split;
  const RequestValidator validator;
  const std::map<std::string, std::vector<std::string>> labels;  // classification

  mutable std::mutex mu;
  std::condition_variable work_cv;     // instance threads: a request was queued, or stop
  std::condition_variable timeout_cv;  // the timeout thread
  std::condition_variable idle_cv;     // drain(): pending reached 0
  std::condition_variable started_cv;  // the constructor: an instance is ready or failed
  BatchQueue<Job> queue;
  StatsRecorder stats;
  const std::shared_ptr<monitor::ModelMonitor> monitor;  // null: not monitored
  const int monitored_output;                            // config index of the class scores, or -1
  std::size_t pending = 0;                               // accepted, not yet answered
  std::uint64_t next_seq = 0;
  bool closed = false;
  std::string why;
  bool stop = false;
  int started = 0;
  std::exception_ptr start_error;
  std::vector<std::thread> threads;

  // preserve_ordering: responses wait here until every earlier one is delivered.
  const bool preserve;
  std::mutex order_mu;
  std::map<std::uint64_t, std::pair<InferCallback, InferOutcome>> reorder;
  std::uint64_t next_delivery = 0;
  bool delivering = false;

  Error timeout_error() const {
    return Error(ErrorCode::kUnavailable, "Request timeout expired",
                 "the request waited in model '" + model + "''s queue past its timeout; retry, raise the timeout, " +
                     "or add instances");
  }
  Error canceled_error() const {
    std::lock_guard<std::mutex> lock(mu);
    return Error(ErrorCode::kUnavailable,
                 closed ? why : "model '" + model + "' version " + std::to_string(version) + " is draining",
                 std::string("retry the request later"));
  }

  // Runs `done` now, or, with preserve_ordering, once every earlier request has been answered.
  // Returns how many callbacks this call ran (each answers one pending request).
  std::size_t deliver(std::uint64_t seq, InferCallback& done, InferOutcome&& outcome) {
    if (!preserve) {
      invoke(done, std::move(outcome));
      return 1;
    }
    std::unique_lock<std::mutex> lock(order_mu);
    reorder.emplace(seq, std::make_pair(std::move(done), std::move(outcome)));
    if (delivering) return 0;  // the delivering thread will run it
    delivering = true;
    std::size_t n = 0;
    while (!reorder.empty() && reorder.begin()->first == next_delivery) {
      auto node = reorder.extract(reorder.begin());
      ++next_delivery;
      lock.unlock();
      invoke(node.mapped().first, std::move(node.mapped().second));
      ++n;
      lock.lock();
    }
    delivering = false;
    return n;
  }

  void answered(std::size_t n) {
    if (n == 0) return;
    std::lock_guard<std::mutex> lock(mu);
    pending -= n;
    if (pending == 0) idle_cv.notify_all();
  }

  InferResponse response(InferRequest& request, std::vector<Tensor>&& all) const {
    InferResponse r;
    r.model = model;
    r.version = version;
    r.id = std::move(request.id);
    if (request.outputs.empty()) {
      r.outputs = std::move(all);
    } else {
      r.outputs.reserve(request.outputs.size());
      for (const RequestedOutput& o : request.outputs) {
        Tensor& t = all[static_cast<std::size_t>(validator.output_index(o.name))];
        if (o.class_count == 0) {
          r.outputs.push_back(std::move(t));
          continue;
        }
        static const std::vector<std::string> kNoLabels;
        const auto it = labels.find(o.name);
        r.outputs.push_back(
            classify(t, o.class_count, it == labels.end() ? kNoLabels : it->second, validator.max_batch_size() > 0));
      }
    }
    r.requested = std::move(request.outputs);
    return r;
  }

  // Answers a queued request with an error (through the reorder buffer).
  std::size_t answer_error(InferRequest& request, std::uint64_t seq, InferCallback& done, const Error& e,
                           FailureReason reason, SchedTime now) {
    stats.record_failure(reason, ns_between(request.received, now));
    InferOutcome out;
    out.response.model = model;
    out.response.version = version;
    out.response.id = std::move(request.id);
    out.error = e;
    return deliver(seq, done, std::move(out));
  }

  // Answers a job that will not run (timed out, canceled, or its batch failed).
  std::size_t fail(Job& job, const Error& e, FailureReason reason, SchedTime now) {
    if (job.gather) return chunk_done(job, nullptr, &e, reason, now, now, {});
    return answer_error(job.request, job.seq, job.done, e, reason, now);
  }

  // One chunk of a split request finished (outputs, or an error); the last one answers.
  std::size_t chunk_done(Job& job, std::vector<Tensor>* outputs, const Error* error, FailureReason reason,
                         SchedTime start, SchedTime now, const ExecuteTimings& timings) {
    Gather& g = *job.gather;
    {
      std::lock_guard<std::mutex> lock(g.mu);
      if (outputs != nullptr) {
        g.outputs[job.chunk] = std::move(*outputs);
        g.queue_ns = std::min(g.queue_ns, ns_between(job.enqueued, start));
        g.compute.input_ns += timings.input_ns;
        g.compute.infer_ns += timings.infer_ns;
        g.compute.output_ns += timings.output_ns;
      } else if (!g.error) {
        g.error = *error;
        g.reason = reason;
      }
      if (--g.remaining != 0) return 0;
    }
    if (!g.error) {
      try {
        std::vector<Tensor> joined = join(g.outputs);
        const RequestSample sample{ns_between(g.request.received, now), g.queue_ns};
        stats.record_successes(std::span(&sample, 1), g.compute);
        InferOutcome out;
        out.response = response(g.request, std::move(joined));
        return deliver(g.seq, g.done, std::move(out));
      } catch (const Error& e) {
        g.error = e;
        g.reason = FailureReason::kBackend;
      }
    }
    return answer_error(g.request, g.seq, g.done, *g.error, g.reason, now);
  }

  // Concatenates each output of the chunks along axis 0.
  std::vector<Tensor> join(const std::vector<std::vector<Tensor>>& chunks) const {
    std::vector<Tensor> joined;
    for (std::size_t k = 0; k < chunks.front().size(); ++k) {
      const Tensor& first = chunks.front()[k];
      std::vector<std::int64_t> shape = first.shape;
      std::string bytes;
      shape.at(0) = 0;
      for (const std::vector<Tensor>& c : chunks) {
        const Tensor& t = c[k];
        GB_CHECK(t.datatype == first.datatype && t.shape.size() == first.shape.size() &&
                     std::equal(t.shape.begin() + 1, t.shape.end(), first.shape.begin() + 1),
                 Internal,
                 "model '" << model << "' returned output '" << first.name << "' as " << datatype_name(first.datatype)
                           << shape_string(first.shape) << " and " << datatype_name(t.datatype) << shape_string(t.shape)
                           << " for chunks of one split request",
                 std::string("a model's outputs must keep their non-batch shape across batches"));
        shape[0] += t.shape[0];
        bytes.append(reinterpret_cast<const char*>(t.data), t.size);
      }
      joined.push_back(Tensor::owning(first.name, first.datatype, std::move(shape), std::move(bytes)));
    }
    return joined;
  }

  // The monitor's view of the batch's sampled requests (their bytes stay alive in `batch` and in
  // `owners` until the monitor copied them). Outputs are read before they are delivered.
  void observe(const std::vector<Job>& batch, const std::vector<std::vector<Tensor>>& outs, SchedTime end,
               std::vector<monitor::Offered>& offered, std::vector<std::shared_ptr<const void>>& owners) {
    const std::string& input_name = monitor->reference().input.name;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (!monitor->sample()) continue;
      const Job& j = batch[i];
      monitor::Offered r;
      const std::vector<Tensor>& in = j.request.inputs;
      for (const Tensor& t : in)
        if (t.name == input_name || in.size() == 1) r.input = monitor_bytes(t);
      if (monitored_output >= 0) {
        const Tensor& t = outs[i][static_cast<std::size_t>(monitored_output)];
        r.output = monitor_bytes(t);
        if (owners.empty() || owners.back() != t.owner) owners.push_back(t.owner);  // one per batch, usually
      }
      if (!j.gather) r.latency_ms = static_cast<double>(ns_between(j.request.received, end)) / 1e6;
      offered.push_back(r);
    }
  }

  // The instance thread's buffers, reused from batch to batch.
  struct Scratch {
    std::vector<BatchItem> items;
    std::vector<RequestSample> samples;
    std::vector<monitor::Offered> offered;
    std::vector<std::shared_ptr<const void>> owners;
  };

  // Executes one batch on `instance` and answers its requests; returns callbacks run.
  std::size_t run(ModelInstance& instance, std::vector<Job>& batch, Scratch& scratch) {
    std::vector<BatchItem>& items = scratch.items;
    std::vector<RequestSample>& samples = scratch.samples;
    items.clear();
    std::int64_t elements = 0;
    for (Job& j : batch) {
      items.push_back(BatchItem{&j.request.inputs, j.batch_size});
      elements += j.batch_size;
    }
    ExecuteTimings t;
    std::vector<std::vector<Tensor>> outs;
    std::optional<Error> error;
    const SchedTime start = SchedClock::now();
    try {
      outs = instance.execute(items, t);
      GB_CHECK(outs.size() == batch.size(), Internal,
               "model '" << model << "' version " << version << " returned outputs for " << outs.size()
                         << " requests, expected " << batch.size(),
               std::string("the backend must return one output list per batch item"));
      for (const std::vector<Tensor>& o : outs) {
        GB_CHECK(o.size() == validator.output_count(), Internal,
                 "model '" << model << "' version " << version << " returned " << o.size() << " outputs, expected "
                           << validator.output_count(),
                 std::string("the backend must return every output of the config"));
      }
    } catch (const Error& e) {
      error = e;
    } catch (const std::exception& e) {
      error = Error(ErrorCode::kInternal,
                    "model '" + model + "' version " + std::to_string(version) + " failed: " + e.what(),
                    std::string("see the model's error above"));
    } catch (...) {
      error = Error(ErrorCode::kInternal,
                    "model '" + model + "' version " + std::to_string(version) + " failed with an unknown exception",
                    std::string("check the model with glassbox eval --model"));
    }
    const SchedTime end = SchedClock::now();
    std::size_t n = 0;
    if (error) {
      for (Job& j : batch) n += fail(j, *error, FailureReason::kBackend, end);
      return n;
    }
    if (t.input_ns + t.infer_ns + t.output_ns == 0) t.infer_ns = ns_between(start, end);
    stats.record_execution(elements, t);
    samples.clear();
    for (const Job& j : batch) {
      if (!j.gather) samples.push_back({ns_between(j.request.received, end), ns_between(j.enqueued, start)});
    }
    if (!samples.empty()) stats.record_successes(samples, t);
    if (monitor) {
      try {
        observe(batch, outs, end, scratch.offered, scratch.owners);
      } catch (...) {  // out of memory: this batch goes unobserved, its answers go out
        scratch.offered.clear();
        scratch.owners.clear();
      }
    }
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Job& j = batch[i];
      if (j.gather) {
        n += chunk_done(j, &outs[i], nullptr, FailureReason::kOther, start, end, t);
      } else {
        InferOutcome out;
        out.response = response(j.request, std::move(outs[i]));
        n += deliver(j.seq, j.done, std::move(out));
      }
    }
    if (!scratch.offered.empty()) monitor->offer(scratch.offered);  // the clients have their answers
    scratch.offered.clear();
    scratch.owners.clear();
    return n;
  }

  void instance_main(int index) {
    // max_queue_delay_microseconds is often ~100 us: Linux's default 50 us timer slack would add
    // half of it to every timed wait. 1 us of slack keeps the delay what the config says.
    prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
    std::unique_ptr<ModelInstance> instance;
    try {
      instance = backend->create_instance(index);
      GB_CHECK(instance != nullptr, Internal, "model '" << model << "': the backend created no instance " << index,
               std::string("Backend::create_instance must return an instance or throw"));
      instance->warmup();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!start_error) start_error = std::current_exception();
      ++started;
      started_cv.notify_all();
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      ++started;
      started_cv.notify_all();
    }
    std::vector<Job> batch, expired;
    Scratch scratch;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu);
        for (;;) {
          if (stop) return;
          const BatchDecision d = queue.form(SchedClock::now(), batch, expired);
          if (d.kind == BatchDecision::kExecute || !expired.empty()) break;
          if (d.kind == BatchDecision::kWait && d.wake != SchedTime::max()) {
            work_cv.wait_until(lock, d.wake);
          } else {
            work_cv.wait(lock);
          }
        }
        if (!batch.empty() && !queue.empty()) work_cv.notify_one();  // another idle instance may start
      }
      std::size_t n = 0;
      try {
        for (Job& j : expired) n += fail(j, timeout_error(), FailureReason::kRejected, SchedClock::now());
        if (!batch.empty()) n += run(*instance, batch, scratch);
      } catch (const std::exception& e) {  // only allocation failures get here; keep the thread alive
        std::cerr << "glassbox serve: model '" << model << "' instance " << index << ": " << e.what() << "\n";
      }
      expired.clear();
      batch.clear();
      answered(n);
    }
  }

  // Answers requests whose deadline passes while every instance is busy.
  void timeout_main() {
    std::vector<Job> expired;
    std::unique_lock<std::mutex> lock(mu);
    while (!stop) {
      queue.expire(SchedClock::now(), expired);
      if (!expired.empty()) {
        lock.unlock();
        std::size_t n = 0;
        try {
          for (Job& j : expired) n += fail(j, timeout_error(), FailureReason::kRejected, SchedClock::now());
        } catch (const std::exception& e) {  // only allocation failures get here
          std::cerr << "glassbox serve: model '" << model << "' timeouts: " << e.what() << "\n";
        }
        expired.clear();
        answered(n);
        lock.lock();
        continue;
      }
      const SchedTime next = queue.next_deadline();
      if (next == SchedTime::max()) {
        timeout_cv.wait(lock);
      } else {
        timeout_cv.wait_until(lock, next);
      }
    }
  }

  // Answers a request refused before it was queued (no ordering: it never had a place).
  void refuse(InferRequest& request, InferCallback& done, const Error& e, FailureReason reason) {
    stats.record_failure(reason, ns_between(request.received, SchedClock::now()));
    InferOutcome out;
    out.response.model = model;
    out.response.version = version;
    out.response.id = std::move(request.id);
    out.error = e;
    invoke(done, std::move(out));
  }

  // Queues the jobs of one request (all or none); returns why not, if not.
  std::optional<std::pair<Error, FailureReason>> enqueue(std::span<Job> jobs, std::uint32_t level, SchedTime now,
                                                         SchedTime deadline, ShapeKey& key, Gather* gather) {
    std::lock_guard<std::mutex> lock(mu);
    if (closed) {
      return std::make_pair(Error(ErrorCode::kUnavailable, why, std::string("retry the request later")),
                            FailureReason::kCanceled);
    }
    try {
      queue.check_room(level, jobs.size());
    } catch (const Error& e) {
      return std::make_pair(e, FailureReason::kRejected);
    }
    const std::uint64_t seq = next_seq++;
    if (gather != nullptr) gather->seq = seq;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      jobs[i].seq = seq;
      ItemInfo info{jobs[i].batch_size, level, now, deadline, i + 1 == jobs.size() ? std::move(key) : key};
      queue.push(std::move(info), std::move(jobs[i]));  // cannot throw: room was checked
    }
    ++pending;
    return std::nullopt;
  }

  void submit(InferRequest request, InferCallback done) {
    RequestShape shape;
    try {
      shape = validator.validate(request);
    } catch (const Error& e) {
      refuse(request, done, e, FailureReason::kOther);
      return;
    } catch (const std::exception& e) {
      refuse(request, done, Error(ErrorCode::kInternal, std::string("validation failed: ") + e.what()),
             FailureReason::kOther);
      return;
    }
    const BatchPolicy& policy = queue.policy();  // immutable
    const std::uint32_t level = policy.level_of(request.priority);
    const std::int64_t limit = policy.batch_limit();
    const SchedTime now = SchedClock::now();
    const SchedTime deadline = policy.deadline(level, request.timeout_us, now);

    if (validator.max_batch_size() == 0 || shape.batch_size <= limit) {
      Job j;
      j.request = std::move(request);
      j.done = std::move(done);
      j.batch_size = shape.batch_size;
      j.enqueued = now;
      if (auto refused = enqueue(std::span(&j, 1), level, now, deadline, shape.key, nullptr)) {
        refuse(j.request, j.done, refused->first, refused->second);
        return;
      }
    } else {  // larger than max_batch_size: validated, so splitting is on
      auto gather = std::make_shared<Gather>();
      std::vector<Job> chunks;
      for (std::int64_t begin = 0; begin < shape.batch_size; begin += limit) {
        const std::int64_t end = std::min(shape.batch_size, begin + limit);
        Job& j = chunks.emplace_back();
        j.request.received = request.received;
        for (const Tensor& t : request.inputs) j.request.inputs.push_back(slice_rows(t, begin, end));
        j.batch_size = end - begin;
        j.enqueued = now;
        j.gather = gather;
        j.chunk = chunks.size() - 1;
      }
      gather->remaining = chunks.size();
      gather->outputs.resize(chunks.size());
      gather->request = std::move(request);  // before the chunks can run
      gather->done = std::move(done);
      if (auto refused = enqueue(chunks, level, now, deadline, shape.key, gather.get())) {
        refuse(gather->request, gather->done, refused->first, refused->second);
        return;
      }
    }
    work_cv.notify_one();
    if (deadline != SchedTime::max()) timeout_cv.notify_one();
  }
};

ModelRunner::ModelRunner(const exporter::triton::ModelConfig& config, std::int64_t version,
                         std::shared_ptr<Backend> backend, const RunnerOptions& options)
    : impl_(std::make_unique<Impl>(config, version, std::move(backend), options)) {
  Impl& s = *impl_;
  const int instances = instance_count(config);
  bool timeouts = false;
  for (const QueuePolicy& p : s.queue.policy().level_policy) {
    timeouts = timeouts || p.default_timeout_us != 0 || p.allow_timeout_override;
  }
  auto stop_all = [&] {
    {
      std::lock_guard<std::mutex> lock(s.mu);
      s.stop = true;
    }
    s.work_cv.notify_all();
    s.timeout_cv.notify_all();
    for (std::thread& t : s.threads) t.join();
  };
  try {
    for (int i = 0; i < instances; ++i) s.threads.emplace_back([&s, i] { s.instance_main(i); });
  } catch (...) {
    stop_all();
    throw;
  }
  std::unique_lock<std::mutex> lock(s.mu);
  s.started_cv.wait(lock, [&] { return s.started == instances; });
  if (s.start_error) {
    lock.unlock();
    stop_all();
    std::rethrow_exception(s.start_error);
  }
  lock.unlock();
  if (timeouts) {
    try {
      s.threads.emplace_back([&s] { s.timeout_main(); });
    } catch (...) {
      stop_all();
      throw;
    }
  }
}

ModelRunner::~ModelRunner() {
  Impl& s = *impl_;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.closed) {
      s.closed = true;
      s.why = "model '" + s.model + "' version " + std::to_string(s.version) + " is unloading";
    }
  }
  drain(kDestructorDrain);
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.stop = true;
  }
  s.work_cv.notify_all();
  s.timeout_cv.notify_all();
  for (std::thread& t : s.threads) t.join();
}

void ModelRunner::submit(InferRequest request, InferCallback done) {
  impl_->submit(std::move(request), std::move(done));
}

std::size_t ModelRunner::pending() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->pending;
}

ModelStats ModelRunner::stats() const { return impl_->stats.snapshot(pending()); }

void ModelRunner::close(const std::string& why) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->closed = true;
  impl_->why = why;
}

bool ModelRunner::drain(std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  const std::uint64_t ms = static_cast<std::uint64_t>(std::max<std::int64_t>(0, timeout.count()));
  const SchedTime deadline =
      saturating_add(SchedClock::now(), std::min<std::uint64_t>(ms, ~std::uint64_t{0} / 1000) * 1000);
  std::vector<Job> left;
  {
    std::unique_lock<std::mutex> lock(s.mu);
    if (s.idle_cv.wait_until(lock, deadline, [&] { return s.pending == 0; })) return true;
    s.queue.take_all(left);
  }
  if (!left.empty()) {
    const Error e = s.canceled_error();
    std::size_t n = 0;
    for (Job& j : left) n += s.fail(j, e, FailureReason::kCanceled, SchedClock::now());
    s.answered(n);
  }
  std::lock_guard<std::mutex> lock(s.mu);
  return s.pending == 0;
}

}  // namespace glassbox::serve
