// Tested by monitor_test (Runtime.*) and, behind the server, by serve_engine_test and the CLI tests.
//
// Over 600 lines: the options table, the element decoders, the snapshot's JSON and the monitor's
// two threads' halves (offer and the loop) share the queued layout (Slot, Queued) that only this
// file knows; split apart, that layout would have to become public.
#include "glassbox/monitor/runtime.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>

#include "glassbox/base/error.h"
#include "glassbox/monitor/profile.h"

namespace glassbox::monitor {

namespace {

using Clock = std::chrono::steady_clock;

// How often the monitor's thread takes the observations queued since it last looked.
// Short enough that the queued bytes (two batches) stay in the processor's cache on a busy server.
constexpr std::chrono::milliseconds kBatchInterval{10};

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

double parse_number(const std::string& name, const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  GB_CHECK(used == text.size() && !text.empty() && std::isfinite(v), InvalidArgument,
           "monitor option " << name << " = '" << text << "' is not a number", "give a plain decimal number");
  return v;
}

std::int64_t parse_count(const std::string& name, const std::string& text) {
  const double v = parse_number(name, text);
  GB_CHECK(v == std::floor(v) && v >= 0 && v < 9.0e15, InvalidArgument,
           "monitor option " << name << " = '" << text << "' is not a whole number", "give a count such as 1000");
  return static_cast<std::int64_t>(v);
}

bool parse_bool(const std::string& name, const std::string& text) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  GB_THROW(InvalidArgument, "monitor option " << name << " = '" << text << "' is not a boolean", "give true or false");
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
  std::uint32_t bits = 0;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal
      const float v = std::ldexp(static_cast<float>(mant), -24);
      return sign ? -v : v;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

template <typename T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

std::size_t element_bytes(ElementType t) {
  switch (t) {
    case ElementType::kBool:
    case ElementType::kUint8:
    case ElementType::kInt8: return 1;
    case ElementType::kUint16:
    case ElementType::kInt16:
    case ElementType::kFp16:
    case ElementType::kBf16: return 2;
    case ElementType::kUint32:
    case ElementType::kInt32:
    case ElementType::kFp32: return 4;
    case ElementType::kUint64:
    case ElementType::kInt64:
    case ElementType::kFp64: return 8;
  }
  return 1;
}

template <typename T, typename F>
void convert(const std::uint8_t* p, std::span<double> out, F f) {
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = f(load<T>(p + i * sizeof(T)));
}

// Elements [first, first + out.size()) of the `type` values at `data` as doubles.
void read_elements(ElementType type, const std::uint8_t* data, std::size_t first, std::span<double> out) {
  const std::uint8_t* p = data + first * element_bytes(type);
  const auto same = [](auto v) { return static_cast<double>(v); };
  switch (type) {
    case ElementType::kBool: convert<std::uint8_t>(p, out, [](std::uint8_t v) { return v ? 1.0 : 0.0; }); break;
    case ElementType::kUint8: convert<std::uint8_t>(p, out, same); break;
    case ElementType::kInt8: convert<std::int8_t>(p, out, same); break;
    case ElementType::kUint16: convert<std::uint16_t>(p, out, same); break;
    case ElementType::kInt16: convert<std::int16_t>(p, out, same); break;
    case ElementType::kUint32: convert<std::uint32_t>(p, out, same); break;
    case ElementType::kInt32: convert<std::int32_t>(p, out, same); break;
    case ElementType::kUint64: convert<std::uint64_t>(p, out, same); break;
    case ElementType::kInt64: convert<std::int64_t>(p, out, same); break;
    case ElementType::kFp16:
      convert<std::uint16_t>(p, out, [](std::uint16_t v) { return double(half_to_float(v)); });
      break;
    case ElementType::kBf16:
      convert<std::uint16_t>(p, out,
                             [](std::uint16_t v) { return double(std::bit_cast<float>(std::uint32_t(v) << 16)); });
      break;
    case ElementType::kFp32: convert<float>(p, out, same); break;
    case ElementType::kFp64: convert<double>(p, out, same); break;
  }
}

std::size_t element_total(const RawTensor& t) {
  std::size_t n = 1;
  for (std::int64_t d : t.shape) n *= static_cast<std::size_t>(std::max<std::int64_t>(0, d));
  return n;
}

// numpy.percentile's default (linear between the closest ranks) of sorted values.
double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return -1;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

struct OptionRef {
  const char* name;
  enum Kind { kBool, kRate, kCount, kPositive, kProbability, kNonNegative } kind;
};

const std::vector<OptionRef>& option_table() {
  static const std::vector<OptionRef> t = {
      {"enabled", OptionRef::kBool},
      {"sample_rate", OptionRef::kRate},
      {"window_predictions", OptionRef::kCount},
      {"window_seconds", OptionRef::kPositive},
      {"keep_windows", OptionRef::kCount},
      {"queue_bytes", OptionRef::kCount},
      {"alpha", OptionRef::kProbability},
      {"min_wasserstein", OptionRef::kNonNegative},
      {"min_js", OptionRef::kNonNegative},
      {"range_tolerance", OptionRef::kNonNegative},
      {"top_features", OptionRef::kCount},
      {"confidence_ks", OptionRef::kProbability},
      {"confidence_windows", OptionRef::kCount},
      {"overconfident_std", OptionRef::kNonNegative},
      {"overconfident_windows", OptionRef::kCount},
      {"decay_mean", OptionRef::kProbability},
      {"decay_margin", OptionRef::kNonNegative},
      {"decay_windows", OptionRef::kCount},
      {"out_of_range_share", OptionRef::kProbability},
      {"latency_p99_ms", OptionRef::kPositive},
  };
  return t;
}

}  // namespace

void lower_thread_priority() {
  // SCHED_IDLE: the thread runs on processor time no other thread wants (Linux); where that is
  // refused, nice applies per thread on Linux.
  sched_param none{};
  if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &none) != 0)
    setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), kMonitorNice);
}

void read_elements_for_compare(const RawTensor& t, std::size_t first, std::span<double> out) {
  read_elements(t.type, t.data, first, out);
}

const std::vector<std::string>& MonitorOptions::options() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const OptionRef& o : option_table()) out.emplace_back(o.name);
    return out;
  }();
  return names;
}

void MonitorOptions::set(const std::string& name, const std::string& value) {
  const auto it =
      std::find_if(option_table().begin(), option_table().end(), [&](const OptionRef& o) { return name == o.name; });
  if (it == option_table().end()) {
    std::string all;
    for (const std::string& n : options()) all += (all.empty() ? "" : ", ") + n;
    GB_THROW(InvalidArgument, "unknown monitor option '" << name << "'", "the options are " + all);
  }
  if (it->kind == OptionRef::kBool) {
    enabled = parse_bool(name, value);
    return;
  }
  const double v = parse_number(name, value);
  switch (it->kind) {
    case OptionRef::kRate:
      GB_CHECK(v > 0 && v <= 1, InvalidArgument, "monitor option " << name << " = " << value,
               "give a share in (0, 1]: 1 observes every request");
      break;
    case OptionRef::kCount:
      parse_count(name, value);
      GB_CHECK(v >= 1, InvalidArgument, "monitor option " << name << " = " << value, "give a count of at least 1");
      break;
    case OptionRef::kPositive:
      GB_CHECK(v > 0, InvalidArgument, "monitor option " << name << " = " << value, "give a positive number");
      break;
    case OptionRef::kProbability:
      GB_CHECK(v > 0 && v < 1, InvalidArgument, "monitor option " << name << " = " << value,
               "give a number between 0 and 1");
      break;
    case OptionRef::kNonNegative:
      GB_CHECK(v >= 0, InvalidArgument, "monitor option " << name << " = " << value, "give a number >= 0");
      break;
    case OptionRef::kBool: break;
  }
  const std::string n = name;
  const auto count = static_cast<std::int64_t>(v);
  if (n == "sample_rate")
    sample_rate = v;
  else if (n == "window_predictions")
    window_predictions = count;
  else if (n == "window_seconds")
    window_seconds = v;
  else if (n == "keep_windows")
    keep_windows = static_cast<std::size_t>(count);
  else if (n == "queue_bytes")
    queue_bytes = static_cast<std::size_t>(count);
  else if (n == "alpha")
    drift.alpha = v;
  else if (n == "min_wasserstein")
    drift.min_wasserstein = v;
  else if (n == "min_js")
    drift.min_js = v;
  else if (n == "range_tolerance")
    drift.range_tolerance = v;
  else if (n == "top_features")
    drift.top_features = static_cast<std::size_t>(count);
  else if (n == "confidence_ks")
    alarms.confidence_ks = v;
  else if (n == "confidence_windows")
    alarms.confidence_windows = static_cast<int>(count);
  else if (n == "overconfident_std")
    alarms.overconfident_std = v;
  else if (n == "overconfident_windows")
    alarms.overconfident_windows = static_cast<int>(count);
  else if (n == "decay_mean")
    alarms.decay_mean = v;
  else if (n == "decay_margin")
    alarms.decay_margin = v;
  else if (n == "decay_windows")
    alarms.decay_windows = static_cast<int>(count);
  else if (n == "out_of_range_share")
    alarms.out_of_range_share = v;
  else if (n == "latency_p99_ms")
    alarms.latency_p99_ms = v;
}

void MonitorOptions::validate() const {
  GB_CHECK(sample_rate > 0 && sample_rate <= 1, InvalidArgument, "monitor sample rate " << sample_rate,
           "give a share in (0, 1]");
  GB_CHECK(window_predictions >= 1, InvalidArgument, "monitor windows of " << window_predictions << " predictions",
           "give at least 1");
  GB_CHECK(window_seconds > 0, InvalidArgument, "monitor windows of " << window_seconds << " s",
           "give a positive duration");
  GB_CHECK(drift.alpha > 0 && drift.alpha < 1, InvalidArgument, "monitor alpha " << drift.alpha,
           "give a level between 0 and 1");
}

nlohmann::json WindowRecord::to_json() const {
  nlohmann::json j = report.to_json();
  j["index"] = index;
  j["start"] = start;
  j["end"] = end;
  j["requests"] = requests;
  j["latency_ms"] = {{"p50", latency_p50_ms}, {"p99", latency_p99_ms}, {"max", latency_max_ms}};
  return j;
}

nlohmann::json MonitorSnapshot::to_json() const {
  nlohmann::json windows_json = nlohmann::json::array(), alarms_json = nlohmann::json::array();
  for (const WindowRecord& w : windows) windows_json.push_back(w.to_json());
  for (const Alarm& a : alarms) alarms_json.push_back(a.to_json());
  return {{"model", model},
          {"version", std::to_string(version)},
          {"features", features},
          {"classes", classes},
          {"totals",
           {{"requests", requests_total},
            {"predictions", predictions_total},
            {"dropped", dropped_total},
            {"unreadable", unreadable_total},
            {"windows", windows_total},
            {"input_values", input_values_total},
            {"out_of_range", out_of_range_total},
            {"non_finite", non_finite_total},
            {"current_window", current_window}}},
          {"alarms_raised", alarms_raised},
          {"options",
           {{"sample_rate", options.sample_rate},
            {"window_predictions", options.window_predictions},
            {"window_seconds", options.window_seconds},
            {"alpha", options.drift.alpha}}},
          {"windows", windows_json},
          {"alarms", alarms_json}};
}

ModelMonitor::ModelMonitor(std::string model, std::int64_t version, Reference reference, MonitorOptions options)
    : model_(std::move(model)),
      version_(version),
      reference_(std::move(reference)),
      options_(options),
      extractor_(reference_.input.name.empty() ? std::nullopt
                                               : std::optional<FeatureExtractor>(FeatureExtractor(reference_.input))),
      window_(reference_.features.size(), reference_.predicted_share.size()),
      alarms_(options.alarms) {
  options_.validate();
  sample_rate_.store(options_.sample_rate);
  GB_CHECK(!extractor_ || extractor_->names().size() == reference_.features.size(), InvalidArgument,
           "the profile of model '" << model_ << "' version " << version_ << " lists " << reference_.features.size()
                                    << " features; its input makes " << extractor_->names().size(),
           "export the model again to rewrite its profile");
  state_.model = model_;
  state_.version = version_;
  state_.options = options_;
  for (const ReferenceSample& f : reference_.features) state_.features.push_back(f.name);
  state_.classes = reference_.classes;
  for (const std::string& k : AlarmTracker::kinds()) state_.alarms_raised[k] = 0;
  thread_ = std::thread([this] { loop(); });
}

ModelMonitor::~ModelMonitor() {
  {
    std::lock_guard lock(queue_mu_);
    stop_ = true;
  }
  queue_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool ModelMonitor::sample() {
  const double r = sample_rate_.load(std::memory_order_relaxed);
  if (r >= 1) return true;
  const std::uint64_t n = offered_.fetch_add(1, std::memory_order_relaxed);
  return std::floor(static_cast<double>(n + 1) * r) > std::floor(static_cast<double>(n) * r);
}

namespace {

// Each queued tensor starts 16-byte aligned (operator new aligns to 16), so the fast paths read it
// in place.
std::size_t padded(std::size_t n) { return (n + 15) & ~std::size_t{15}; }

}  // namespace

void ModelMonitor::reserve_queue(std::size_t bytes) {
  Batch& b = queue_;
  if (b.used + bytes <= b.capacity) return;
  const std::size_t capacity =
      std::max(b.used + bytes, std::min(options_.queue_bytes, std::max<std::size_t>(2 * b.capacity, 64u << 10)));
  std::unique_ptr<std::uint8_t[]> grown(new std::uint8_t[capacity]);
  if (b.used > 0) std::memcpy(grown.get(), b.bytes.get(), b.used);
  b.bytes = std::move(grown);
  b.capacity = capacity;
}

bool ModelMonitor::queue_features(const TensorBytes& input, Slot& slot) {
  if (!extractor_ || input.type != ElementType::kFp32 || input.size != input.elements * sizeof(float) ||
      reinterpret_cast<std::uintptr_t>(input.data) % alignof(float) != 0)
    return false;
  const auto sample_size = static_cast<std::size_t>(extractor_->spec().sample_size());
  if (input.elements == 0 || input.elements % sample_size != 0) return false;
  const std::size_t samples = input.elements / sample_size, features = reference_.features.size();
  const std::size_t record = sizeof(InputCounts) + features * sizeof(double);
  Batch& b = queue_;
  reserve_queue(padded(samples * record));
  std::uint8_t* out = b.bytes.get() + b.used;
  const auto* x = reinterpret_cast<const float*>(input.data);
  for (std::size_t i = 0; i < samples; ++i) {
    InputCounts counts;
    auto* f = reinterpret_cast<double*>(out + i * record + sizeof(InputCounts));
    if (!extractor_->extract_fp32({x + i * sample_size, sample_size}, {f, features}, reference_.ranges,
                                  options_.drift.range_tolerance, counts))
      return false;  // a value that is not finite: the monitor's thread takes the general path
    std::memcpy(out + i * record, &counts, sizeof counts);
  }
  slot = {true, true, input.type, input.elements, b.used, samples * record};
  b.used += padded(samples * record);
  return true;
}

void ModelMonitor::offer(std::span<const Offered> requests) noexcept {
  std::lock_guard lock(queue_mu_);
  for (const Offered& r : requests) {
    Batch& b = queue_;
    const std::size_t start = b.used, count = b.requests.size();
    try {
      // The raw bytes' size bounds what the request takes (its features are smaller).
      const std::size_t bytes = (r.input ? padded(r.input->size) : 0) + (r.output ? padded(r.output->size) : 0);
      if (stop_ || (b.used + bytes > options_.queue_bytes && b.used > 0)) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      Queued q;
      q.latency_ms = r.latency_ms;
      const auto put = [&](const TensorBytes& t, Slot& slot) {
        reserve_queue(padded(t.size));
        slot = {true, false, t.type, t.elements, b.used, t.size};
        if (t.size > 0) std::memcpy(b.bytes.get() + b.used, t.data, t.size);
        b.used += padded(t.size);
      };
      // An image's features are extracted here, while its pixels are in this thread's cache: a
      // few hundred nanoseconds, where copying them for the monitor's thread to read cold took
      // longer than the extraction itself.
      if (r.input && !queue_features(*r.input, q.input)) put(*r.input, q.input);
      if (r.output) put(*r.output, q.output);
      b.requests.push_back(q);
    } catch (...) {
      b.used = start;
      b.requests.resize(count);
      dropped_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // No wake-up: the thread takes what queued every kBatchInterval (a wake-up per batch would cost
  // a context switch per batch on a busy server).
}

void ModelMonitor::offer(const Observation& o) noexcept {
  const auto bytes = [](const RawTensor& t) { return TensorBytes{t.type, t.data, t.size, element_total(t)}; };
  Offered r;
  if (o.input) r.input = bytes(*o.input);
  if (o.output) r.output = bytes(*o.output);
  r.latency_ms = o.latency_ms;
  offer(std::span(&r, 1));
}

void ModelMonitor::flush() {
  std::unique_lock lock(queue_mu_);
  const std::uint64_t ticket = ++flush_requested_;
  queue_cv_.notify_all();
  flushed_cv_.wait(lock, [&] { return flush_done_ >= ticket || stop_; });
}

void ModelMonitor::set_sample_rate(double rate) {
  GB_CHECK(rate >= 0 && rate <= 1, InvalidArgument, "sample_rate " << rate << " is outside [0, 1]",
           std::string("give a share of the requests in [0, 1] (0 pauses the monitor)"));
  sample_rate_.store(rate, std::memory_order_relaxed);
}

MonitorSnapshot ModelMonitor::snapshot() const {
  std::lock_guard lock(state_mu_);
  MonitorSnapshot s = state_;
  s.options.sample_rate = sample_rate_.load(std::memory_order_relaxed);
  s.dropped_total = dropped_.load(std::memory_order_relaxed);
  return s;
}

void ModelMonitor::loop() {
  pthread_setname_np(pthread_self(), "gb-monitor");  // as top -H and perf show it
  lower_thread_priority();
  Batch batch;
  for (;;) {
    std::uint64_t flush_ticket = 0;
    bool stopping = false;
    {
      std::unique_lock lock(queue_mu_);
      const auto ready = [&] { return stop_ || flush_requested_ > flush_done_; };
      auto deadline = Clock::now() + kBatchInterval;
      if (window_.size() > 0)
        deadline = std::min(deadline, window_started_ + std::chrono::duration_cast<Clock::duration>(
                                                            std::chrono::duration<double>(options_.window_seconds)));
      queue_cv_.wait_until(lock, deadline, ready);
      std::swap(batch, queue_);
      if (flush_requested_ > flush_done_) flush_ticket = flush_requested_;
      stopping = stop_;
    }
    for (const Queued& q : batch.requests) {
      try {
        process(q, batch.bytes.get());
      } catch (const std::exception&) {
        std::lock_guard lock(state_mu_);
        ++state_.unreadable_total;
      }
    }
    batch.requests.clear();
    batch.used = 0;
    const bool timed_out =
        window_.size() > 0 && Clock::now() - window_started_ >= std::chrono::duration<double>(options_.window_seconds);
    if (timed_out || (flush_ticket > 0 && window_.size() > 0)) close_window();
    {
      std::lock_guard lock(state_mu_);
      state_.current_window = window_.size();
    }
    if (flush_ticket > 0) {
      std::lock_guard lock(queue_mu_);
      flush_done_ = std::max(flush_done_, flush_ticket);
      flushed_cv_.notify_all();
    }
    if (stopping) {
      std::lock_guard lock(queue_mu_);
      flush_done_ = flush_requested_;
      flushed_cv_.notify_all();
      return;
    }
  }
}

void ModelMonitor::process(const Queued& q, const std::uint8_t* bytes) {
  // Samples in the request: from the input when monitored, else from the output.
  std::size_t samples = 0;
  std::size_t sample_size = 0;
  const std::uint8_t* input = bytes + q.input.offset;
  const std::uint8_t* output = bytes + q.output.offset;
  if (extractor_ && q.input.present) {
    sample_size = static_cast<std::size_t>(extractor_->spec().sample_size());
    const std::size_t total = q.input.elements;
    GB_CHECK(total % sample_size == 0 && (q.input.extracted || q.input.size == total * element_bytes(q.input.type)),
             InvalidArgument, "an input of " << total << " values",
             "the profile's samples hold " + std::to_string(sample_size));
    samples = total / sample_size;
  }
  const std::size_t classes = reference_.predicted_share.size();
  bool with_output = false;
  if (q.output.present && classes > 0) {
    const std::size_t total = q.output.elements;
    if (total % classes == 0 && q.output.size == total * element_bytes(q.output.type)) {
      if (samples == 0) samples = total / classes;
      with_output = total / classes == samples;
    }
  }
  if (samples == 0) return;
  std::unique_lock lock(state_mu_);  // the totals; snapshot() only copies
  ++state_.requests_total;
  if (q.latency_ms >= 0) latencies_.push_back(q.latency_ms);
  sample_.resize(sample_size);
  features_.resize(reference_.features.size());
  probs_.resize(classes);
  for (std::size_t i = 0; i < samples; ++i) {
    if (window_.size() == 0) {
      window_started_ = Clock::now();
      window_start_ = unix_now();
    }
    const std::size_t record = sizeof(InputCounts) + features_.size() * sizeof(double);
    if (extractor_ && q.input.extracted) {  // offer() extracted them
      InputCounts counts;
      std::memcpy(&counts, input + i * record, sizeof counts);
      std::memcpy(features_.data(), input + i * record + sizeof counts, features_.size() * sizeof(double));
      window_.count_inputs(counts);
      state_.input_values_total += counts.values;
      state_.out_of_range_total += counts.out_of_range;
      state_.non_finite_total += counts.non_finite;
    } else if (extractor_ && q.input.present) {
      InputCounts counts;
      bool fast = false;
      if (q.input.type == ElementType::kFp32) {  // the bytes may sit at any offset: aligned for the fast path
        const std::uint8_t* p = input + i * sample_size * sizeof(float);
        if (reinterpret_cast<std::uintptr_t>(p) % alignof(float) == 0)
          fast = extractor_->extract_fp32({reinterpret_cast<const float*>(p), sample_size}, features_,
                                          reference_.ranges, options_.drift.range_tolerance, counts);
      }
      if (!fast) {
        read_elements(q.input.type, input, i * sample_size, sample_);
        extractor_->extract(sample_, features_, reference_.ranges, options_.drift.range_tolerance, counts);
      }
      window_.count_inputs(counts);
      state_.input_values_total += counts.values;
      state_.out_of_range_total += counts.out_of_range;
      state_.non_finite_total += counts.non_finite;
    } else {
      std::fill(features_.begin(), features_.end(), std::numeric_limits<double>::quiet_NaN());
    }
    double confidence = std::numeric_limits<double>::quiet_NaN(), entropy = confidence;
    std::int64_t predicted = -1;
    if (with_output) {
      read_elements(q.output.type, output, i * classes, probs_);
      const Scored sc = score(probs_, reference_.output_logits);
      if (sc.predicted >= 0) {
        predicted = sc.predicted;
        confidence = sc.confidence;
        entropy = sc.entropy;
      }
    }
    window_.add(features_, confidence, entropy, predicted);
    ++state_.predictions_total;
    if (window_.size() >= options_.window_predictions) {
      lock.unlock();
      close_window();
      lock.lock();
    }
  }
}

void ModelMonitor::close_window() {
  WindowRecord rec;
  try {
    rec.report = compare(reference_, window_, options_.drift);
  } catch (const std::exception& e) {
    std::clog << "serve: model '" << model_ << "' version " << version_ << ": a monitoring window failed: " << e.what()
              << "\n";
    window_.clear();
    latencies_.clear();
    return;
  }
  std::sort(latencies_.begin(), latencies_.end());
  rec.requests = static_cast<std::int64_t>(latencies_.size());
  rec.latency_p50_ms = percentile(latencies_, 0.5);
  rec.latency_p99_ms = percentile(latencies_, 0.99);
  rec.latency_max_ms = latencies_.empty() ? -1 : latencies_.back();
  rec.start = window_start_;
  rec.end = unix_now();
  const std::vector<Alarm> before = alarms_.active();
  alarms_.update(rec.report, rec.latency_p99_ms, rec.end);
  window_.clear();
  latencies_.clear();
  std::lock_guard lock(state_mu_);
  rec.index = ++state_.windows_total;
  for (const Alarm& a : alarms_.active()) {
    const bool was = std::any_of(before.begin(), before.end(), [&](const Alarm& b) { return b.kind == a.kind; });
    if (!was) ++state_.alarms_raised[a.kind];
  }
  state_.alarms = alarms_.active();
  state_.windows.push_back(std::move(rec));
  while (state_.windows.size() > options_.keep_windows) state_.windows.erase(state_.windows.begin());
}

}  // namespace glassbox::monitor
