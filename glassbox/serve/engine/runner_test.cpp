// ModelRunner with a fake backend whose executions block until the test releases them, so batches
// form deterministically: batch sizes, parallelism, priorities, splitting, statistics, timeouts,
// ordering, close/drain and destruction.
#include "glassbox/serve/engine/runner.h"

#include <cmath>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "glassbox/monitor/profile.h"

namespace glassbox::serve {
namespace {

using std::chrono::seconds;
constexpr auto kPatience = seconds(20);  // only reached when a test fails

triton::ModelConfig config(const std::string& text) {
  exporter::ParseConfigOptions o;
  o.validate = false;
  return exporter::parse_model_config(text, "test", o);
}

std::string le_floats(const std::vector<float>& v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}
std::vector<float> floats(const Tensor& t) {
  std::vector<float> v(t.size / 4);
  std::memcpy(v.data(), t.data, t.size);
  return v;
}

// What the fake instances do, shared with the test.
struct FakeState {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<std::int64_t>> batches;  // per execution: its items' batch sizes
  std::vector<float> first_values;                 // per execution: its first input value
  int started = 0, active = 0, max_active = 0, created = 0, warmed = 0;
  bool hold_all = false;             // executions wait for a ticket (or open())
  float hold_value = std::nanf("");  // ... or only those whose first value equals this
  int tickets = 0;
  std::string throw_message;  // execute() throws std::runtime_error(throw_message)
  int fail_create = -1;       // create_instance(fail_create) throws

  bool wait_started(int n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, kPatience, [&] { return started >= n; });
  }
  void release(int n) {
    std::lock_guard<std::mutex> lock(mu);
    tickets += n;
    cv.notify_all();
  }
  void hold() {
    std::lock_guard<std::mutex> lock(mu);
    hold_all = true;
  }
  void open() {
    std::lock_guard<std::mutex> lock(mu);
    hold_all = false;
    hold_value = std::nanf("");
    cv.notify_all();
  }
};

// Opens the gate when a test ends, so a failed test does not leave a runner's thread blocked.
struct OpenAtExit {
  std::shared_ptr<FakeState> s;
  ~OpenAtExit() { s->open(); }
};

// Input 0 is FP32 [b, n]; outputs: OUTPUT__0 = the input, OUTPUT__1 = each row's sum [b, 1].
class FakeInstance : public ModelInstance {
 public:
  explicit FakeInstance(std::shared_ptr<FakeState> s) : s_(std::move(s)) {}
  void warmup() override {
    std::lock_guard<std::mutex> lock(s_->mu);
    ++s_->warmed;
  }
  std::vector<std::vector<Tensor>> execute(std::span<const BatchItem> items, ExecuteTimings& timings) override {
    const float first = floats(items[0].inputs->at(0)).at(0);
    {
      std::unique_lock<std::mutex> lock(s_->mu);
      std::vector<std::int64_t> sizes;
      for (const BatchItem& i : items) sizes.push_back(i.batch_size);
      s_->batches.push_back(sizes);
      s_->first_values.push_back(first);
      ++s_->started;
      s_->max_active = std::max(s_->max_active, ++s_->active);
      s_->cv.notify_all();
      if (s_->hold_all || first == s_->hold_value) {
        s_->cv.wait(lock, [&] { return s_->tickets > 0 || (!s_->hold_all && first != s_->hold_value); });
        if (s_->tickets > 0) --s_->tickets;
      }
      --s_->active;
      if (!s_->throw_message.empty()) throw std::runtime_error(s_->throw_message);
    }
    timings.input_ns = 1000;
    timings.infer_ns = 2000;
    timings.output_ns = 3000;
    std::vector<std::vector<Tensor>> outs;
    for (const BatchItem& i : items) {
      const Tensor& in = i.inputs->at(0);
      const std::vector<float> v = floats(in);
      const std::size_t width = v.size() / static_cast<std::size_t>(i.batch_size);
      std::vector<float> sums;
      for (std::size_t r = 0; r < static_cast<std::size_t>(i.batch_size); ++r) {
        float sum = 0;
        for (std::size_t c = 0; c < width; ++c) sum += v[r * width + c];
        sums.push_back(sum);
      }
      outs.push_back({Tensor::owning("OUTPUT__0", DataType::kFp32, in.shape, le_floats(v)),
                      Tensor::owning("OUTPUT__1", DataType::kFp32, {i.batch_size, 1}, le_floats(sums))});
    }
    return outs;
  }

 private:
  std::shared_ptr<FakeState> s_;
};

class FakeBackend : public Backend {
 public:
  explicit FakeBackend(std::shared_ptr<FakeState> s) : s_(std::move(s)) {}
  std::unique_ptr<ModelInstance> create_instance(int index) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    if (index == s_->fail_create) throw Error(ErrorCode::kInternal, "instance " + std::to_string(index) + " broke");
    ++s_->created;
    return std::make_unique<FakeInstance>(s_);
  }

 private:
  std::shared_ptr<FakeState> s_;
};

// Collects outcomes by request id.
struct Answers {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> order;
  std::map<std::string, InferOutcome> by_id;
  std::map<std::string, int> calls;

  InferCallback callback(const std::string& id) {
    return [this, id](InferOutcome o) {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(id);
      ++calls[id];
      by_id[id] = std::move(o);
      cv.notify_all();
    };
  }
  bool wait(std::size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, kPatience, [&] { return order.size() >= n; });
  }
  std::string error(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu);
    const InferOutcome& o = by_id.at(id);
    return o.error ? o.error->message() : "(no error)";
  }
};

// Rows of two floats: row r of request `first` is {first + 2r, first + 2r + 1}.
InferRequest request(const std::string& id, float first, std::int64_t batch = 1) {
  std::vector<float> v;
  for (std::int64_t i = 0; i < 2 * batch; ++i) v.push_back(first + static_cast<float>(i));
  InferRequest r;
  r.model = "m";
  r.id = id;
  r.inputs.push_back(Tensor::owning("INPUT__0", DataType::kFp32, {batch, 2}, le_floats(v)));
  return r;
}

std::string model_text(const std::string& scheduling, int instances = 1, int max_batch_size = 8) {
  return R"(name: "m" max_batch_size: )" + std::to_string(max_batch_size) + R"(
    input [{ name: "INPUT__0" data_type: TYPE_FP32 dims: [2] }]
    output [{ name: "OUTPUT__0" data_type: TYPE_FP32 dims: [2] }, { name: "OUTPUT__1" data_type: TYPE_FP32 dims: [1] }]
    instance_group [{ count: )" +
         std::to_string(instances) + " kind: KIND_CPU }]\n" + scheduling;
}

struct Rig {
  explicit Rig(const std::string& text, RunnerOptions options = {})
      : state(std::make_shared<FakeState>()),
        runner(config(text), 1, std::make_shared<FakeBackend>(state), options),
        gate{state} {}
  std::shared_ptr<FakeState> state;
  Answers answers;
  ModelRunner runner;
  OpenAtExit gate;  // destroyed before the runner

  void submit(const std::string& id, float first, std::int64_t batch = 1) {
    runner.submit(request(id, first, batch), answers.callback(id));
  }
};

// A monitored version: each answered batch's requests reach the monitor (inputs, class scores,
// latency), and a paused monitor sees none.
TEST(Runner, AMonitoredVersionHandsItsAnsweredRequestsToTheMonitor) {
  monitor::InputSpec in;
  in.name = "INPUT__0";
  in.shape = {2};
  monitor::ReferenceBuilder b(in, "OUTPUT__0", true, {"a", "b"});
  for (int i = 0; i < 50; ++i) {
    const double x[2] = {static_cast<double>(i), i + 1.0};
    b.add(x, x, -1);
  }
  monitor::MonitorOptions mo;
  mo.window_seconds = 3600;
  auto mon = std::make_shared<monitor::ModelMonitor>("m", 1, b.build(), mo);
  Rig rig(model_text("dynamic_batching { preferred_batch_size: [4] }"), RunnerOptions{.monitor = mon});
  rig.state->hold();
  rig.submit("r0", 0);
  ASSERT_TRUE(rig.state->wait_started(1));
  rig.submit("r1", 10, 3);  // three samples in one request
  rig.submit("r2", 20);
  rig.state->open();
  ASSERT_TRUE(rig.answers.wait(3));
  ASSERT_TRUE(rig.runner.drain(std::chrono::milliseconds(kPatience)));
  mon->flush();  // closes the open window
  monitor::MonitorSnapshot s = mon->snapshot();
  EXPECT_EQ(s.requests_total, 3);
  EXPECT_EQ(s.predictions_total, 5);
  EXPECT_EQ(s.input_values_total, 10);
  ASSERT_EQ(s.windows.size(), 1u);
  EXPECT_EQ(s.windows[0].report.predictions, 5);
  EXPECT_EQ(s.windows[0].requests, 3);  // each with its latency
  EXPECT_GE(s.windows[0].latency_p50_ms, 0.0);
  // OUTPUT__0 is [v, v + 1] for an input [v, v + 1]: class "b" every time.
  EXPECT_EQ(s.windows[0].report.predicted_share, (std::vector<double>{0.0, 1.0}));

  mon->set_sample_rate(0);
  rig.submit("r3", 30);
  ASSERT_TRUE(rig.answers.wait(4));
  ASSERT_TRUE(rig.runner.drain(std::chrono::milliseconds(kPatience)));
  mon->flush();
  EXPECT_EQ(mon->snapshot().requests_total, 3) << "paused: not observed";
}

TEST(Runner, BatchesUnderLoadFollowThePolicy) {
  Rig rig(model_text("dynamic_batching { preferred_batch_size: [4] }"));
  rig.state->hold();
  rig.submit("r0", 0);
  ASSERT_TRUE(rig.state->wait_started(1));
  for (int i = 1; i <= 6; ++i) rig.submit("r" + std::to_string(i), 10.f * i);
  EXPECT_EQ(rig.runner.pending(), 7u);
  rig.state->open();
  ASSERT_TRUE(rig.answers.wait(7));
  EXPECT_EQ(rig.state->batches, (std::vector<std::vector<std::int64_t>>{{1}, {1, 1, 1, 1}, {1, 1}}))
      << "one alone while the instance was free; then the preferred 4; then what was left (delay 0)";
  const InferOutcome& r3 = rig.answers.by_id.at("r3");
  ASSERT_FALSE(r3.error) << r3.error->one_line();
  EXPECT_EQ(r3.response.id, "r3");
  EXPECT_EQ(r3.response.model, "m");
  EXPECT_EQ(r3.response.version, 1);
  ASSERT_EQ(r3.response.outputs.size(), 2u);
  EXPECT_EQ(floats(r3.response.outputs[0]), (std::vector<float>{30, 31}));
  EXPECT_EQ(floats(r3.response.outputs[1]), (std::vector<float>{61}));

  ASSERT_TRUE(rig.runner.drain(std::chrono::milliseconds(kPatience)));  // the last callbacks have returned
  const ModelStats s = rig.runner.stats();
  EXPECT_EQ(s.name, "m");
  EXPECT_EQ(s.version, "1");
  EXPECT_EQ(s.success.count, 7u);
  EXPECT_EQ(s.queue.count, 7u);
  EXPECT_EQ(s.compute_input.count, 7u);
  EXPECT_EQ(s.compute_infer.count, 7u);
  EXPECT_EQ(s.compute_output.count, 7u);
  EXPECT_EQ(s.compute_infer.ns, 7u * 2000) << "each request adds its batch's duration";
  EXPECT_EQ(s.inference_count, 7u);
  EXPECT_EQ(s.execution_count, 3u);
  ASSERT_EQ(s.batch_stats.size(), 3u);
  EXPECT_EQ(s.batch_stats[0].batch_size, 1);
  EXPECT_EQ(s.batch_stats[1].batch_size, 2);
  EXPECT_EQ(s.batch_stats[2].batch_size, 4);
  EXPECT_EQ(s.batch_stats[2].compute_output.count, 1u);
  EXPECT_EQ(s.batch_stats[2].compute_output.ns, 3000u);
  EXPECT_GT(s.last_inference_ms, 0u);
  EXPECT_EQ(s.fail.count, 0u);
  EXPECT_EQ(s.failures.at("BACKEND"), 0u);
  EXPECT_EQ(s.request_seconds.count, 7u);
  EXPECT_EQ(s.queue_seconds.count, 7u);
  EXPECT_EQ(s.compute_seconds.count, 7u);
  EXPECT_EQ(s.compute_seconds.cumulative.front(), 7u) << "6 us of compute is in the first bucket (50 us)";
  EXPECT_EQ(s.pending, 0u);
}

TEST(Runner, InstanceCountIsParallelExecutions) {
  Rig rig(model_text("", 2));  // no dynamic_batching: one request per execution
  EXPECT_EQ(rig.state->created, 2);
  EXPECT_EQ(rig.state->warmed, 2);
  rig.state->hold();
  for (int i = 0; i < 3; ++i) rig.submit("r" + std::to_string(i), float(i), 2);
  ASSERT_TRUE(rig.state->wait_started(2));
  EXPECT_EQ(rig.state->active, 2);
  EXPECT_EQ(rig.runner.pending(), 3u);
  rig.state->open();
  ASSERT_TRUE(rig.answers.wait(3));
  EXPECT_EQ(rig.state->max_active, 2);
  EXPECT_EQ(rig.state->batches.size(), 3u);
  for (const auto& b : rig.state->batches) EXPECT_EQ(b, (std::vector<std::int64_t>{2}));
  EXPECT_EQ(rig.runner.stats().inference_count, 6u);
}

TEST(Runner, HigherPriorityRunsFirst) {
  Rig rig(model_text("dynamic_batching { priority_levels: 2 default_priority_level: 2 }", 1, 1));
  rig.state->hold();
  rig.submit("a", 1);
  ASSERT_TRUE(rig.state->wait_started(1));
  rig.submit("b", 2);  // default level 2
  InferRequest c = request("c", 3);
  c.priority = 1;
  rig.runner.submit(std::move(c), rig.answers.callback("c"));
  rig.state->open();
  ASSERT_TRUE(rig.answers.wait(3));
  EXPECT_EQ(rig.state->first_values, (std::vector<float>{1, 3, 2}));
}

TEST(Runner, SplitsLargeRequestsAndJoinsTheOutputsInOrder) {
  const std::string text = model_text("dynamic_batching { }", 1, 4) +
                           R"(parameters { key: "glassbox.split_large_requests" value: { string_value: "true" } })";
  Rig rig(text);
  rig.submit("big", 0, 10);
  ASSERT_TRUE(rig.answers.wait(1));
  const InferOutcome& o = rig.answers.by_id.at("big");
  ASSERT_FALSE(o.error) << o.error->one_line();
  EXPECT_EQ(rig.state->batches, (std::vector<std::vector<std::int64_t>>{{4}, {4}, {2}}));
  ASSERT_EQ(o.response.outputs.size(), 2u);
  EXPECT_EQ(o.response.outputs[0].shape, (std::vector<std::int64_t>{10, 2}));
  std::vector<float> want, sums;
  for (int i = 0; i < 20; ++i) want.push_back(float(i));
  for (int r = 0; r < 10; ++r) sums.push_back(float(4 * r + 1));
  EXPECT_EQ(floats(o.response.outputs[0]), want);
  EXPECT_EQ(o.response.outputs[1].shape, (std::vector<std::int64_t>{10, 1}));
  EXPECT_EQ(floats(o.response.outputs[1]), sums);
  const ModelStats s = rig.runner.stats();
  EXPECT_EQ(s.success.count, 1u);
  EXPECT_EQ(s.queue.count, 1u);
  EXPECT_EQ(s.compute_infer.count, 1u);
  EXPECT_EQ(s.compute_infer.ns, 3u * 2000) << "the chunks' batches add up";
  EXPECT_EQ(s.inference_count, 10u);
  EXPECT_EQ(s.execution_count, 3u);

  Rig off(model_text("dynamic_batching { }", 1, 4));
  off.submit("big", 0, 10);
  ASSERT_TRUE(off.answers.wait(1));
  EXPECT_EQ(off.answers.error("big"), "inference request batch-size must be <= 4 for 'm', got 10");
  EXPECT_TRUE(off.state->batches.empty());
  EXPECT_EQ(off.runner.stats().failures.at("OTHER"), 1u);

  Rig on(model_text("dynamic_batching { }", 1, 4), RunnerOptions{.split_large_requests = true});
  on.submit("big", 0, 5);
  ASSERT_TRUE(on.answers.wait(1));
  EXPECT_EQ(on.answers.error("big"), "(no error)");
}

TEST(Runner, ASplitRequestFailsOnceWithTheFirstError) {
  Rig rig(model_text("dynamic_batching { }", 1, 4), RunnerOptions{.split_large_requests = true});
  rig.state->throw_message = "boom";
  rig.submit("big", 0, 9);
  ASSERT_TRUE(rig.answers.wait(1));
  EXPECT_EQ(rig.answers.error("big"), "model 'm' version 1 failed: boom");
  EXPECT_EQ(rig.state->batches.size(), 3u);
  ASSERT_EQ(rig.runner.drain(std::chrono::milliseconds(kPatience)), true);
  EXPECT_EQ(rig.answers.calls.at("big"), 1);
  EXPECT_EQ(rig.runner.stats().failures.at("BACKEND"), 1u);
}

TEST(Runner, BackendExceptionsFailEveryRequestOfTheBatch) {
  Rig rig(model_text("dynamic_batching { preferred_batch_size: [2] }"));
  rig.state->hold();
  rig.state->throw_message = "out of cheese";
  rig.submit("a", 0);
  ASSERT_TRUE(rig.state->wait_started(1));
  rig.submit("b", 1);
  rig.submit("c", 2);
  rig.state->open();
  ASSERT_TRUE(rig.answers.wait(3));
  for (const char* id : {"a", "b", "c"}) {
    EXPECT_EQ(rig.answers.error(id), "model 'm' version 1 failed: out of cheese");
    EXPECT_EQ(rig.answers.by_id.at(id).error->code(), ErrorCode::kInternal);
  }
  const ModelStats s = rig.runner.stats();
  EXPECT_EQ(s.failures.at("BACKEND"), 3u);
  EXPECT_EQ(s.fail.count, 3u);
  EXPECT_EQ(s.success.count, 0u);
  EXPECT_EQ(s.execution_count, 0u);
}

TEST(Runner, QueueFullIsRefusedAtOnce) {
  Rig rig(model_text("dynamic_batching { default_queue_policy { max_queue_size: 1 } }", 1, 1));
  rig.state->hold();
  rig.submit("a", 0);
  ASSERT_TRUE(rig.state->wait_started(1));
  rig.submit("b", 1);
  rig.submit("c", 2);  // answered inline
  ASSERT_EQ(rig.answers.order.size(), 1u);
  EXPECT_EQ(rig.answers.error("c"), "Exceeds maximum queue size");
  EXPECT_EQ(rig.answers.by_id.at("c").error->code(), ErrorCode::kResourceExhausted);
  rig.state->open();
  ASSERT_TRUE(rig.answers.wait(3));
  EXPECT_EQ(rig.answers.error("b"), "(no error)");
  EXPECT_EQ(rig.runner.stats().failures.at("REJECTED"), 1u);
}

TEST(Runner, ARequestThatTimesOutWhileQueuedIsRejected) {
  Rig rig(model_text("dynamic_batching { default_queue_policy { allow_timeout_override: true } }"));
  rig.state->hold();
  rig.submit("a", 0);
  ASSERT_TRUE(rig.state->wait_started(1));
  InferRequest b = request("b", 1);
  b.timeout_us = 1;
  rig.runner.submit(std::move(b), rig.answers.callback("b"));
  ASSERT_TRUE(rig.answers.wait(1)) << "answered while the only instance is still busy";
  EXPECT_EQ(rig.answers.error("b"), "Request timeout expired");
  EXPECT_EQ(rig.answers.by_id.at("b").error->code(), ErrorCode::kUnavailable);
  rig.state->open();
  ASSERT_TRUE(rig.answers.wait(2));
  EXPECT_EQ(rig.state->started, 1) << "the timed-out request never ran";
  EXPECT_EQ(rig.runner.stats().failures.at("REJECTED"), 1u);
}

TEST(Runner, PreserveOrderingDeliversInArrivalOrder) {
  Rig rig(model_text("dynamic_batching { preserve_ordering: true }", 2));
  rig.state->hold_value = 1;
  rig.submit("a", 1);  // held on one instance
  ASSERT_TRUE(rig.state->wait_started(1));
  rig.submit("b", 2);  // runs on the other
  ASSERT_TRUE(rig.state->wait_started(2));
  rig.submit("c", 3);  // starts only after that instance has handed b over
  ASSERT_TRUE(rig.state->wait_started(3));
  {
    std::lock_guard<std::mutex> lock(rig.answers.mu);
    EXPECT_TRUE(rig.answers.order.empty()) << "b and c wait for a";
  }
  rig.state->open();
  ASSERT_TRUE(rig.answers.wait(3));
  EXPECT_EQ(rig.answers.order, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(Runner, CloseAndDrainAnswerEveryRequestOnce) {
  Rig rig(model_text("dynamic_batching { }", 1, 1));
  rig.state->hold();
  rig.submit("a", 0);
  ASSERT_TRUE(rig.state->wait_started(1));
  rig.submit("b", 1);
  rig.submit("c", 2);
  rig.runner.close("server is shutting down");
  rig.submit("d", 3);
  EXPECT_EQ(rig.answers.error("d"), "server is shutting down");
  EXPECT_EQ(rig.answers.by_id.at("d").error->code(), ErrorCode::kUnavailable);
  EXPECT_FALSE(rig.runner.drain(std::chrono::milliseconds(0))) << "a is still executing";
  EXPECT_EQ(rig.answers.error("b"), "server is shutting down");
  EXPECT_EQ(rig.answers.error("c"), "server is shutting down");
  EXPECT_EQ(rig.runner.pending(), 1u);
  rig.state->open();
  EXPECT_TRUE(rig.runner.drain(std::chrono::milliseconds(kPatience)));
  EXPECT_EQ(rig.answers.error("a"), "(no error)");
  EXPECT_EQ(rig.answers.calls, (std::map<std::string, int>{{"a", 1}, {"b", 1}, {"c", 1}, {"d", 1}}));
  const ModelStats s = rig.runner.stats();
  EXPECT_EQ(s.failures.at("CANCELED"), 3u);
  EXPECT_EQ(s.success.count, 1u);
  EXPECT_EQ(s.pending, 0u);
}

TEST(Runner, DestructionAnswersWhatIsQueued) {
  Answers answers;
  auto state = std::make_shared<FakeState>();
  {
    ModelRunner runner(config(model_text("dynamic_batching { }", 1, 1)), 3, std::make_shared<FakeBackend>(state));
    state->hold();
    runner.submit(request("a", 0), answers.callback("a"));
    ASSERT_TRUE(state->wait_started(1));
    runner.submit(request("b", 1), answers.callback("b"));
    state->open();  // a finishes; b runs, or is canceled if the destructor's drain ends first
  }
  EXPECT_EQ(answers.calls, (std::map<std::string, int>{{"a", 1}, {"b", 1}}));
  const std::string b = answers.error("b");
  EXPECT_TRUE(b == "(no error)" || b == "model 'm' version 3 is unloading") << b;
}

TEST(Runner, AnInstanceThatFailsToStartFailsTheRunner) {
  auto state = std::make_shared<FakeState>();
  state->fail_create = 1;
  try {
    ModelRunner runner(config(model_text("", 2)), 1, std::make_shared<FakeBackend>(state));
    FAIL() << "the runner started without instance 1";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "instance 1 broke");
  }
  EXPECT_THROW(ModelRunner(config(model_text(R"(parameters { key: "glassbox.split_large_requests" value: {
                 string_value: "yes" } })")),
                           1, std::make_shared<FakeBackend>(state)),
               Error);
}

TEST(Runner, RequestedOutputsComeBackInRequestOrderAndInvalidRequestsInline) {
  Rig rig(model_text("dynamic_batching { }"));
  InferRequest r = request("r", 5);
  r.outputs = {{"OUTPUT__1", true}, {"OUTPUT__0", false}};
  rig.runner.submit(std::move(r), rig.answers.callback("r"));
  ASSERT_TRUE(rig.answers.wait(1));
  const InferResponse& resp = rig.answers.by_id.at("r").response;
  ASSERT_EQ(resp.outputs.size(), 2u);
  EXPECT_EQ(resp.outputs[0].name, "OUTPUT__1");
  EXPECT_EQ(resp.outputs[1].name, "OUTPUT__0");
  ASSERT_EQ(resp.requested.size(), 2u);
  EXPECT_TRUE(resp.requested[0].binary);

  InferRequest bad = request("bad", 0);
  bad.inputs[0].datatype = DataType::kInt32;
  rig.runner.submit(std::move(bad), rig.answers.callback("bad"));
  EXPECT_EQ(rig.answers.error("bad"),
            "inconsistent data type for input 'INPUT__0' for model 'm'. Expected FP32, got INT32")
      << "answered inline";
  EXPECT_EQ(rig.runner.stats().failures.at("OTHER"), 1u);
}

}  // namespace
}  // namespace glassbox::serve
