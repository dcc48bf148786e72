// run_grpc_load: a closed loop of ModelInfer calls on grpc++'s generic stub (see grpc_load.h).
//
// Each calling thread owns a completion queue and a share of the call slots. A slot holds one call
// at a time: answered, it records the latency (inside the window) and sends the request again; a
// failed call waits 10 ms on an Alarm before it retries, so an unreachable server is not spun on.
#include "bench/grpc_load.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include <grpcpp/alarm.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "glassbox/base/error.h"
#include "glassbox/serve/grpc/proto/grpc_service.grpc.pb.h"

namespace glassbox::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kModelInfer = "/inference.GRPCInferenceService/ModelInfer";

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// lean: for the load, which neither retries nor sets deadlines.
std::shared_ptr<grpc::Channel> make_channel(const std::string& host, int port, bool lean) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own, not shared
  // Without the retry filter (which keeps a copy of each request) and the other optional filters
  // (deadlines among them) the client spends less of the CPU that the server shares.
  if (lean) {
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
    args.SetInt(GRPC_ARG_MINIMAL_STACK, 1);
  }

  return grpc::CreateCustomChannel(host + ":" + std::to_string(port), grpc::InsecureChannelCredentials(), args);
}

struct Slot {
  grpc::GenericStub* stub = nullptr;
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> call;
  grpc::ByteBuffer response;
  grpc::Status status;
  grpc::Alarm alarm;
  bool waiting = false;  // the tag's next event is the alarm
  Clock::time_point sent;
};

struct Figures {
  LatencyHistogram latency;
  std::uint64_t completed = 0, ok = 0, failed_window = 0, failed_total = 0, completed_total = 0, bytes = 0;
  std::map<int, std::uint64_t> codes;
  std::string first_failure;
};

void send(Slot& s, const grpc::ByteBuffer& request, grpc::CompletionQueue& cq) {
  s.context = std::make_unique<grpc::ClientContext>();
  s.response.Clear();
  s.sent = Clock::now();
  s.call = s.stub->PrepareUnaryCall(s.context.get(), kModelInfer, request, &cq);
  s.call->StartCall();
  s.call->Finish(&s.response, &s.status, &s);
}

void run_queue(std::vector<Slot*> slots, const grpc::ByteBuffer& request, Clock::time_point window_start,
               Clock::time_point window_end, Figures& f) {
  grpc::CompletionQueue cq;
  for (Slot* s : slots) send(*s, request, cq);
  std::size_t active = slots.size();
  void* tag = nullptr;
  bool ok = false;
  while (active > 0 && cq.Next(&tag, &ok)) {
    Slot& s = *static_cast<Slot*>(tag);
    const Clock::time_point now = Clock::now();
    if (s.waiting) {  // the retry delay passed
      s.waiting = false;
    } else {
      const bool success = ok && s.status.ok();
      const bool in_window = now >= window_start && now <= window_end;
      ++f.completed_total;
      if (!success) ++f.failed_total;
      if (in_window) {
        ++f.completed;
        ++f.codes[success ? 0 : static_cast<int>(s.status.error_code())];
        if (success) {
          ++f.ok;
          f.bytes += s.response.Length();
          f.latency.record(std::chrono::duration_cast<std::chrono::nanoseconds>(now - s.sent).count());
        } else {
          ++f.failed_window;
        }
      }
      if (!success && f.first_failure.empty()) {
        f.first_failure = "gRPC " + std::to_string(static_cast<int>(s.status.error_code())) + ": " +
                          s.status.error_message().substr(0, 300);
      }
      if (!success && now < window_end) {
        s.waiting = true;
        s.alarm.Set(&cq, std::chrono::system_clock::now() + std::chrono::milliseconds(10), &s);
        continue;
      }
    }
    if (now >= window_end) {
      --active;
      continue;
    }
    send(s, request, cq);
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

// One ModelStreamInfer stream: `depth` requests in flight, one write outstanding at a time.
struct Stream {
  enum class Event { kStart, kWrite, kRead, kFinish };
  struct Tag {
    Stream* stream;
    Event event;
  };
  grpc::GenericStub* stub = nullptr;
  int depth = 1;
  grpc::ClientContext context;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call;
  grpc::ByteBuffer response;
  grpc::Status status;
  Tag start{this, Event::kStart}, write{this, Event::kWrite}, read{this, Event::kRead}, finish{this, Event::kFinish};
  std::deque<Clock::time_point> sent;  // in flight, oldest first
  int to_write = 0;                    // requests waiting for the write in progress
  bool writing = false;
  bool stopping = false;  // the window ended: no more writes; reading the rest
  bool closing = false;   // WritesDone sent
};

// Once the window ended and every answer is in: close the writing side (the server then finishes).
void stream_close(Stream& s) {
  if (!s.stopping || !s.sent.empty() || s.writing || s.closing) return;
  s.closing = true;
  s.writing = true;
  s.call->WritesDone(&s.write);
}

void stream_write(Stream& s, const grpc::ByteBuffer& request) {
  s.writing = true;
  --s.to_write;
  s.sent.push_back(Clock::now());
  s.call->Write(request, &s.write);
}

void run_streams(std::vector<Stream*> streams, const grpc::ByteBuffer& request, Clock::time_point window_start,
                 Clock::time_point window_end, Figures& f) {
  grpc::CompletionQueue cq;
  for (Stream* s : streams) {
    s->call = s->stub->PrepareCall(&s->context, "/inference.GRPCInferenceService/ModelStreamInfer", &cq);
    s->call->StartCall(&s->start);
  }
  std::size_t open = streams.size();
  void* tag = nullptr;
  bool ok = false;
  while (open > 0 && cq.Next(&tag, &ok)) {
    auto* t = static_cast<Stream::Tag*>(tag);
    Stream& s = *t->stream;
    const Clock::time_point now = Clock::now();
    switch (t->event) {
      case Stream::Event::kStart:
        if (!ok) {
          f.first_failure = "gRPC: the stream did not start";
          s.call->Finish(&s.status, &s.finish);
          break;
        }
        s.to_write = s.depth;
        stream_write(s, request);
        s.call->Read(&s.response, &s.read);
        break;
      case Stream::Event::kWrite:
        s.writing = false;
        if (!ok || s.closing) break;  // the stream broke (the read fails too), or WritesDone completed
        if (s.to_write > 0 && !s.stopping) stream_write(s, request);
        stream_close(s);
        break;
      case Stream::Event::kRead: {
        if (!ok) {  // closed by the server
          s.call->Finish(&s.status, &s.finish);
          break;
        }
        ++f.completed_total;
        const Clock::time_point sent = s.sent.empty() ? now : s.sent.front();
        if (!s.sent.empty()) s.sent.pop_front();
        // A ModelStreamInferResponse with error_message (field 1) set is a failed request.
        const bool failed = s.response.Length() > 0 && [&] {
          std::vector<grpc::Slice> slices;
          (void)s.response.Dump(&slices);
          return !slices.empty() && slices[0].size() > 0 && slices[0].begin()[0] == 0x0a;
        }();
        if (failed) ++f.failed_total;
        if (now >= window_start && now <= window_end) {
          ++f.completed;
          ++f.codes[failed ? 2 : 0];
          if (failed) {
            ++f.failed_window;
          } else {
            ++f.ok;
            f.bytes += s.response.Length();
            f.latency.record(std::chrono::duration_cast<std::chrono::nanoseconds>(now - sent).count());
          }
        }
        if (failed && f.first_failure.empty()) f.first_failure = "gRPC stream: an answer carried error_message";
        if (now >= window_end && !s.stopping) {
          s.stopping = true;
          s.to_write = 0;
        }
        if (!s.stopping) {
          ++s.to_write;
          if (!s.writing) stream_write(s, request);
        }
        stream_close(s);
        s.call->Read(&s.response, &s.read);  // fails once the server finished the call
        break;
      }
      case Stream::Event::kFinish:
        if (!s.status.ok() && f.first_failure.empty()) {
          f.first_failure = "gRPC " + std::to_string(static_cast<int>(s.status.error_code())) + ": " +
                            s.status.error_message().substr(0, 300);
        }
        --open;
        break;
    }
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

}  // namespace

void GrpcLoadOptions::validate() const {
  GB_CHECK(port > 0 && port < 65536, InvalidArgument, "gRPC load: port " << port << " is not a port",
           std::string("pass the server's --grpc-port"));
  GB_CHECK(concurrency >= 1 && channels >= 0 && threads >= 1 && threads <= 8, InvalidArgument,
           "gRPC load: concurrency >= 1, channels >= 0 and threads 1..8 needed",
           std::string("e.g. concurrency 32, threads 1"));
  GB_CHECK(seconds > 0 && warmup_seconds >= 0, InvalidArgument, "gRPC load: the window must be > 0 s",
           std::string("e.g. seconds 5"));
}

std::string grpc_infer_request(const InferSpec& spec, std::int64_t batch, std::uint64_t seed) {
  std::vector<std::int64_t> shape{batch};
  shape.insert(shape.end(), spec.dims.begin(), spec.dims.end());
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<float> values(static_cast<std::size_t>(n));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist;
  for (auto& v : values) v = dist(rng);
  inference::ModelInferRequest r;
  r.set_model_name(spec.model);
  auto* in = r.add_inputs();
  in->set_name(spec.input);
  in->set_datatype("FP32");
  for (auto d : shape) in->add_shape(d);
  r.add_outputs()->set_name(spec.output);
  r.add_raw_input_contents()->assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return r.SerializeAsString();
}

LoadResult run_grpc_load(const std::string& serialized_request, const GrpcLoadOptions& o) {
  o.validate();
  const int channel_count = o.channels > 0 ? o.channels : std::clamp((o.concurrency + 15) / 16, 1, o.streaming ? 8 : 4);
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs;
  for (int i = 0; i < channel_count; ++i) {
    channels.push_back(make_channel(o.host, o.port, true));
    GB_CHECK(channels.back()->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)),
             Unavailable, "gRPC load: cannot connect to " << o.host << ":" << o.port,
             std::string("start glassbox serve with --grpc-port, and check the port"));
    stubs.push_back(std::make_unique<grpc::GenericStub>(channels.back()));
  }
  grpc::Slice slice(serialized_request);
  const grpc::ByteBuffer request(&slice, 1);
  std::vector<Slot> slots(static_cast<std::size_t>(o.streaming ? 0 : o.concurrency));
  for (std::size_t i = 0; i < slots.size(); ++i) slots[i].stub = stubs[i % stubs.size()].get();
  // Streaming: one stream per channel, the calls in flight shared out among them.
  std::vector<std::unique_ptr<Stream>> streams;
  if (o.streaming) {
    for (int i = 0; i < std::min(channel_count, o.concurrency); ++i) {
      streams.push_back(std::make_unique<Stream>());
      streams.back()->stub = stubs[static_cast<std::size_t>(i)].get();
      streams.back()->depth = o.concurrency / std::min(channel_count, o.concurrency) +
                              (i < o.concurrency % std::min(channel_count, o.concurrency) ? 1 : 0);
    }
  }

  const Clock::time_point start = Clock::now();
  const auto window_start =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.warmup_seconds));
  const auto window_end =
      window_start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  const int threads = std::min(o.threads, o.streaming ? static_cast<int>(streams.size()) : o.concurrency);
  std::vector<Figures> figures(static_cast<std::size_t>(threads));
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    const auto step = static_cast<std::size_t>(threads);
    if (o.streaming) {
      std::vector<Stream*> mine;
      for (std::size_t i = static_cast<std::size_t>(t); i < streams.size(); i += step) mine.push_back(streams[i].get());
      workers.emplace_back(run_streams, std::move(mine), std::cref(request), window_start, window_end,
                           std::ref(figures[static_cast<std::size_t>(t)]));
      continue;
    }
    std::vector<Slot*> mine;
    for (std::size_t i = static_cast<std::size_t>(t); i < slots.size(); i += step) mine.push_back(&slots[i]);
    workers.emplace_back(run_queue, std::move(mine), std::cref(request), window_start, window_end,
                         std::ref(figures[static_cast<std::size_t>(t)]));
  }
  std::this_thread::sleep_until(window_start);
  const double cpu0 = cpu_seconds();
  std::this_thread::sleep_until(window_end);
  const double cpu1 = cpu_seconds();
  for (auto& w : workers) w.join();

  LoadResult r;
  r.seconds = std::chrono::duration<double>(window_end - window_start).count();
  r.cpu_seconds = cpu1 - cpu0;
  for (const Figures& f : figures) {
    r.completed += f.completed;
    r.ok += f.ok;
    r.transport_errors += f.failed_window;
    r.failed_total += f.failed_total;
    r.completed_total += f.completed_total;
    r.response_bytes += f.bytes;
    r.latency.merge(f.latency);
    for (const auto& [code, n] : f.codes) r.status_counts[code] += n;
    if (r.first_failure.empty()) r.first_failure = f.first_failure;
  }
  return r;
}

void check_grpc_reply(const std::string& host, int port, const std::string& serialized_request, const InferSpec& spec,
                      std::int64_t batch) {
  auto stub = inference::GRPCInferenceService::NewStub(make_channel(host, port, false));
  inference::ModelInferRequest request;
  GB_CHECK(request.ParseFromString(serialized_request), Internal, "the benchmark's gRPC request does not parse",
           std::string("report this as a bug"));
  inference::ModelInferResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  const grpc::Status s = stub->ModelInfer(&context, request, &response);
  GB_CHECK(s.ok(), Internal,
           "glassbox serve (gRPC) answered " << static_cast<int>(s.error_code()) << " to an inference on '"
                                             << spec.model << "': " << s.error_message().substr(0, 300),
           std::string("the benchmark's request must be valid; check the server's log"));
  const std::size_t want = static_cast<std::size_t>(batch * spec.output_elements) * sizeof(float);
  GB_CHECK(response.outputs_size() == 1 && response.outputs(0).name() == spec.output &&
               response.raw_output_contents_size() == 1 && response.raw_output_contents(0).size() == want,
           Internal,
           "glassbox serve (gRPC) answered '" << spec.model << "' with " << response.outputs_size() << " outputs and "
                                              << response.raw_output_contents_size() << " raw contents",
           "expected " + spec.output + " with " + std::to_string(want) + " bytes");
}

}  // namespace glassbox::bench
