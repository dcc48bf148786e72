// ModelStreamInfer: a bidirectional stream of inference requests. Each request read is decoded
// and handed to the engine at once (the next read starts before it is answered); each answer is
// written as it completes (in completion order, carrying the request's id), one write at a time
// from a queue. A request that fails (decoding, validation, the model) is answered in-band with
// error_message and the stream stays open. The call finishes with OK once the client closed its
// side and every request was answered and written; a cancelled call (client gone, server
// shutdown) finishes as CANCELLED as soon as no write is outstanding, and answers arriving after
// that are dropped.
//
// Lifetime: gRPC deletes the reactor after OnDone; what the engine's callbacks reach is the
// shared State, which names the reactor only while the call is not finished (under its mutex).
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "glassbox/serve/grpc/codec.h"
#include "glassbox/serve/grpc/service.h"

namespace glassbox::serve {
namespace {

using inference::ModelInferRequest;
using inference::ModelStreamInferResponse;
using Reactor = grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse>;

class StreamCall;

struct StreamState {
  std::mutex mu;
  StreamCall* call = nullptr;  // null once the call finished
  std::deque<ModelStreamInferResponse> queue;
  ModelStreamInferResponse writing_now;  // the message of the outstanding write
  bool writing = false;
  bool reads_done = false;
  bool cancelled = false;
  std::size_t in_flight = 0;  // requests handed to the engine, not answered yet

  void answered(ModelStreamInferResponse r);
  // Starts the next write or finishes the call when nothing is left. Holds `mu`.
  void pump();
};

class StreamCall final : public Reactor {
 public:
  StreamCall(Engine& engine, std::optional<grpc::Status> refused)
      : engine_(engine), state_(std::make_shared<StreamState>()) {
    state_->call = this;
    if (refused) {
      state_->call = nullptr;
      Finish(std::move(*refused));
      return;
    }
    next_read();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      std::lock_guard lock(state_->mu);
      state_->reads_done = true;
      state_->pump();
      return;
    }
    std::shared_ptr<ModelInferRequest> request = std::move(reading_);
    {
      std::lock_guard lock(state_->mu);
      if (state_->call == nullptr || state_->cancelled) return;
      ++state_->in_flight;
    }
    next_read();
    handle(std::move(request));
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(state_->mu);
    state_->writing = false;
    if (!ok) state_->cancelled = true;  // the stream broke: nothing more can be written
    state_->pump();
  }

  void OnCancel() override {
    std::lock_guard lock(state_->mu);
    state_->cancelled = true;
    state_->pump();
  }

  void OnDone() override { delete this; }

 private:
  void next_read() {
    reading_ = std::make_shared<ModelInferRequest>();
    StartRead(reading_.get());
  }

  void handle(std::shared_ptr<ModelInferRequest> request) {
    InferRequest decoded;
    try {
      if (names_version_zero(request->model_version())) {
        throw explicit_version_zero(engine_, request->model_name());
      }
      decoded = decode_infer_request(*request, request);
    } catch (const Error& e) {
      state_->answered(error_response(*request, e.one_line()));
      return;
    } catch (const std::exception& e) {
      state_->answered(error_response(*request, std::string("internal error: ") + e.what()));
      return;
    }
    // A client that asked for empty final responses (Triton's decoupled protocol) reads the
    // triton_final_response flag: every answer here is the request's only and final one.
    const auto flag = request->parameters().find("triton_enable_empty_final_response");
    const bool mark_final = flag != request->parameters().end() && flag->second.bool_param();
    // The callback keeps only what it needs of the request (its names, for an error's answer).
    engine_.infer(std::move(decoded),
                  [state = state_, model = request->model_name(), version = request->model_version(),
                   id = request->id(), mark_final](InferOutcome out) {
                    ModelStreamInferResponse r;
                    if (out.error) {
                      r.set_error_message(out.error->one_line());
                      r.mutable_infer_response()->set_model_name(model);
                      r.mutable_infer_response()->set_model_version(version);
                      r.mutable_infer_response()->set_id(id);
                    } else {
                      try {
                        encode_infer_response(out.response, *r.mutable_infer_response());
                      } catch (const std::exception& e) {
                        r.Clear();
                        r.set_error_message(std::string("internal error: ") + e.what());
                        r.mutable_infer_response()->set_id(id);
                      }
                    }
                    if (mark_final)
                      (*r.mutable_infer_response()->mutable_parameters())["triton_final_response"].set_bool_param(true);
                    state->answered(std::move(r));
                  });
  }

  static ModelStreamInferResponse error_response(const ModelInferRequest& request, std::string message) {
    ModelStreamInferResponse r;
    r.set_error_message(std::move(message));
    r.mutable_infer_response()->set_model_name(request.model_name());
    r.mutable_infer_response()->set_model_version(request.model_version());
    r.mutable_infer_response()->set_id(request.id());
    return r;
  }

  friend struct StreamState;
  Engine& engine_;
  std::shared_ptr<StreamState> state_;
  std::shared_ptr<ModelInferRequest> reading_;
};

void StreamState::answered(ModelStreamInferResponse r) {
  std::lock_guard lock(mu);
  if (in_flight > 0) --in_flight;
  if (call == nullptr || cancelled) {
    pump();
    return;
  }
  queue.push_back(std::move(r));
  pump();
}

void StreamState::pump() {
  if (call == nullptr || writing) return;
  if (!cancelled && !queue.empty()) {
    writing_now = std::move(queue.front());
    queue.pop_front();
    writing = true;
    call->StartWrite(&writing_now);
    return;
  }
  if (cancelled || (reads_done && in_flight == 0 && queue.empty())) {
    StreamCall* c = std::exchange(call, nullptr);
    queue.clear();
    c->Finish(cancelled ? grpc::Status(grpc::StatusCode::CANCELLED, "the stream was cancelled") : grpc::Status::OK);
  }
}

}  // namespace

Reactor* start_stream(Engine& engine, std::optional<grpc::Status> refused) {
  return new StreamCall(engine, std::move(refused));
}

}  // namespace glassbox::serve
