// FakeEngine: a serve::Engine for the front ends' tests (serve/http, serve/grpc; test-only header; no LibTorch).
//
//   FakeEngine engine;                       // model "mlp", versions 1 and 2, echoes its inputs
//   engine.mode = FakeEngine::Mode::kHold;   // keep callbacks until complete_all()
//   HttpServer server(engine, options);      // or GrpcServer
//
// Models: "mlp" (versions "1", "2"; version 3 is NotFound), "down" (loaded, not ready); any other
// name is InvalidArgument "unknown model". Inference echoes: output i ("OUTPUT__i") is input i
// viewed as it is (same bytes, same owner), honouring the requested outputs. A model named
// "error_<Code>" (e.g. error_ResourceExhausted) fails with that code.
// Modes: kInline answers before infer() returns; kThread answers from the engine's own worker
// thread; kHold keeps (request, callback) pairs until complete_all()/fail_all().
// Thread safety: every member may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "glassbox/serve/engine/api.h"

namespace glassbox::serve::testing {

class FakeEngine : public Engine {
 public:
  enum class Mode { kInline, kThread, kHold };

  FakeEngine() : worker_([this] { work(); }) {}
  ~FakeEngine() override {
    {
      std::lock_guard lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  std::atomic<Mode> mode{Mode::kInline};
  std::atomic<bool> is_live{true};
  std::atomic<bool> is_ready{true};
  std::atomic<bool> record{true};  // keep every request in `seen` (off for load tests)

  ServerMetadata server_metadata() const override {
    ServerMetadata m;
    m.version = "0.6.0";
    m.extensions = {"binary_tensor_data", "statistics", "model_repository"};
    return m;
  }
  bool live() const override { return is_live; }
  bool ready() const override { return is_ready; }

  ModelMetadata model_metadata(const std::string& model, std::int64_t version) const override {
    check(model, version);
    ModelMetadata m;
    m.name = model;
    m.versions = {"1", "2"};
    m.platform = "pytorch_libtorch";
    m.inputs = {{"INPUT__0", DataType::kFp32, {-1, 4}}};
    m.outputs = {{"OUTPUT__0", DataType::kFp32, {-1, 4}}};
    return m;
  }
  bool model_ready(const std::string& model, std::int64_t version) const override {
    check(model, version);
    return model != "down";
  }
  std::string model_config_json(const std::string& model, std::int64_t version) const override {
    check(model, version);
    return "{\"name\":\"" + model + "\",\"max_batch_size\":8}";
  }

  void infer(InferRequest request, InferCallback done) override {
    std::unique_lock lock(mu_);
    ++infer_calls_;
    if (mode == Mode::kInline) {
      lock.unlock();
      done(answer(request));
      return;
    }
    held_.emplace_back(std::move(request), std::move(done));
    cv_.notify_all();
  }

  std::vector<ModelStats> statistics(const std::string& model, std::int64_t version) const override {
    if (!model.empty()) check(model, version);
    ModelStats s;
    s.name = model.empty() ? "mlp" : model;
    s.version = version ? std::to_string(version) : "1";
    s.inference_count = 7;
    s.execution_count = 3;
    s.success = {7, 7000};
    s.queue = {7, 700};
    return {s};
  }
  std::vector<IndexEntry> repository_index(bool ready_only) const override {
    std::lock_guard lock(mu_);
    last_index_ready_only = ready_only;
    std::vector<IndexEntry> out = {{"mlp", "1", "READY", ""}};
    if (!ready_only) out.push_back({"broken", "", "UNAVAILABLE", "no config.pbtxt"});
    return out;
  }
  StartupReport startup_report() const override {
    return {{"broken", "mlp"}, {"mlp"}, {{"broken", "", Error(ErrorCode::kNotFound, "no config.pbtxt")}}};
  }
  void load_model(const std::string& model, const std::string& config_json) override {
    std::lock_guard lock(mu_);
    loads.emplace_back(model, config_json);
  }
  void unload_model(const std::string& model) override {
    std::lock_guard lock(mu_);
    unloads.push_back(model);
  }
  void begin_shutdown() override { is_ready = false; }
  bool drain(std::chrono::milliseconds) override { return true; }

  // kHold: requests waiting for complete_all().
  std::size_t held() const {
    std::lock_guard lock(mu_);
    return held_.size();
  }
  // Blocks until `n` requests are held (at most 10 s); false on timeout.
  bool wait_held(std::size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return held_.size() >= n; });
  }
  // Answers every held request on the calling thread.
  void complete_all() {
    for (auto& [request, done] : take()) done(answer(request));
  }
  std::size_t infer_calls() const {
    std::lock_guard lock(mu_);
    return infer_calls_;
  }
  std::thread::id worker_id() const { return worker_.get_id(); }

  mutable bool last_index_ready_only = false;
  // Read these after the HTTP answer arrived (the engine wrote them before answering).
  std::vector<std::pair<std::string, std::string>> loads;
  std::vector<std::string> unloads;
  std::vector<InferRequest> seen;               // every request answered, in order
  std::vector<std::thread::id> answer_threads;  // the thread each answer ran on

 private:
  void check(const std::string& model, std::int64_t version) const {
    if (model != "mlp" && model != "down") {
      throw Error(ErrorCode::kInvalidArgument, "unknown model '" + model + "'",
                  "GET /v2/repository/index lists the models");
    }
    if (version > 2)
      throw Error(ErrorCode::kNotFound, "model '" + model + "' has no version " + std::to_string(version));
  }

  std::deque<std::pair<InferRequest, InferCallback>> take() {
    std::lock_guard lock(mu_);
    return std::exchange(held_, {});
  }

  InferOutcome answer(const InferRequest& request) {
    InferOutcome out;
    if (record) {
      std::lock_guard lock(mu_);
      seen.push_back(request);
      answer_threads.push_back(std::this_thread::get_id());
    }
    static const std::pair<const char*, ErrorCode> kCodes[] = {
        {"error_InvalidArgument", ErrorCode::kInvalidArgument},
        {"error_NotFound", ErrorCode::kNotFound},
        {"error_AlreadyExists", ErrorCode::kAlreadyExists},
        {"error_DataLoss", ErrorCode::kDataLoss},
        {"error_FailedPrecondition", ErrorCode::kFailedPrecondition},
        {"error_ResourceExhausted", ErrorCode::kResourceExhausted},
        {"error_Unavailable", ErrorCode::kUnavailable},
        {"error_Internal", ErrorCode::kInternal},
    };
    for (const auto& [name, code] : kCodes) {
      if (request.model == name) {
        out.error = Error(code, std::string("fake failure ") + name, "fake hint");
        return out;
      }
    }
    out.response.model = request.model;
    out.response.version = request.version ? request.version : 1;
    out.response.id = request.id;
    out.response.requested = request.outputs;
    for (std::size_t i = 0; i < request.inputs.size(); ++i) {
      Tensor t = request.inputs[i];
      t.name = "OUTPUT__" + std::to_string(i);
      bool wanted = request.outputs.empty();
      for (const RequestedOutput& r : request.outputs) wanted = wanted || r.name == t.name;
      if (wanted) out.response.outputs.push_back(std::move(t));
    }
    return out;
  }

  void work() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return quit_ || (mode == Mode::kThread && !held_.empty()); });
      if (quit_) return;
      auto items = std::exchange(held_, {});
      lock.unlock();
      for (auto& [request, done] : items) done(answer(request));
      lock.lock();
    }
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<InferRequest, InferCallback>> held_;
  std::size_t infer_calls_ = 0;
  bool quit_ = false;
  std::thread worker_;
};

}  // namespace glassbox::serve::testing
