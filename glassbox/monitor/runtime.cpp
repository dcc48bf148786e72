// Tested by monitor_test (Runtime.*) and, behind the server, by serve_engine_test and the CLI tests.
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
constexpr std::chrono::milliseconds kBatchInterval{20};

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

// Elements [first, first + out.size()) of `t` as doubles.
void read_elements(const RawTensor& t, std::size_t first, std::span<double> out) {
  const std::uint8_t* p = t.data + first * element_bytes(t.type);
  const auto same = [](auto v) { return static_cast<double>(v); };
  switch (t.type) {
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
  read_elements(t, first, out);
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
  if (options_.sample_rate >= 1) return true;
  const std::uint64_t n = offered_.fetch_add(1, std::memory_order_relaxed);
  const double r = options_.sample_rate;
  return std::floor(static_cast<double>(n + 1) * r) > std::floor(static_cast<double>(n) * r);
}

void ModelMonitor::offer(Observation observation) noexcept {
  try {
    const std::size_t bytes =
        (observation.input ? observation.input->size : 0) + (observation.output ? observation.output->size : 0);
    {
      std::lock_guard lock(queue_mu_);
      if (stop_ || (queued_bytes_ + bytes > options_.queue_bytes && !queue_.empty())) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      queued_bytes_ += bytes;
      queue_.push_back(std::move(observation));
    }
    // No wake-up: the thread takes what queued every kBatchInterval (a wake-up per request would
    // cost a context switch per request on a busy server).
  } catch (...) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
  }
}

void ModelMonitor::flush() {
  std::unique_lock lock(queue_mu_);
  const std::uint64_t ticket = ++flush_requested_;
  queue_cv_.notify_all();
  flushed_cv_.wait(lock, [&] { return flush_done_ >= ticket || stop_; });
}

MonitorSnapshot ModelMonitor::snapshot() const {
  std::lock_guard lock(state_mu_);
  MonitorSnapshot s = state_;
  s.dropped_total = dropped_.load(std::memory_order_relaxed);
  return s;
}

void ModelMonitor::loop() {
  lower_thread_priority();
  std::deque<Observation> batch;
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
      batch.swap(queue_);
      queued_bytes_ = 0;
      if (flush_requested_ > flush_done_) flush_ticket = flush_requested_;
      stopping = stop_;
    }
    for (const Observation& o : batch) {
      try {
        process(o);
      } catch (const std::exception&) {
        std::lock_guard lock(state_mu_);
        ++state_.unreadable_total;
      }
    }
    batch.clear();
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

void ModelMonitor::process(const Observation& o) {
  // Samples in the request: from the input when monitored, else from the output.
  std::size_t samples = 0;
  std::size_t sample_size = 0;
  if (extractor_ && o.input) {
    sample_size = static_cast<std::size_t>(extractor_->spec().sample_size());
    const std::size_t total = element_total(*o.input);
    GB_CHECK(total % sample_size == 0 && o.input->size == total * element_bytes(o.input->type), InvalidArgument,
             "an input of " << total << " values", "the profile's samples hold " + std::to_string(sample_size));
    samples = total / sample_size;
  }
  const std::size_t classes = reference_.predicted_share.size();
  bool with_output = false;
  if (o.output && classes > 0) {
    const std::size_t total = element_total(*o.output);
    if (total % classes == 0 && o.output->size == total * element_bytes(o.output->type)) {
      if (samples == 0) samples = total / classes;
      with_output = total / classes == samples;
    }
  }
  if (samples == 0) return;
  std::unique_lock lock(state_mu_);  // the totals; snapshot() only copies
  ++state_.requests_total;
  if (o.latency_ms >= 0) latencies_.push_back(o.latency_ms);
  sample_.resize(sample_size);
  features_.resize(reference_.features.size());
  probs_.resize(classes);
  for (std::size_t i = 0; i < samples; ++i) {
    if (window_.size() == 0) {
      window_started_ = Clock::now();
      window_start_ = unix_now();
    }
    if (extractor_ && o.input) {
      InputCounts counts;
      const bool fast =
          o.input->type == ElementType::kFp32 &&
          extractor_->extract_fp32({reinterpret_cast<const float*>(o.input->data) + i * sample_size, sample_size},
                                   features_, reference_.ranges, options_.drift.range_tolerance, counts);
      if (!fast) {
        read_elements(*o.input, i * sample_size, sample_);
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
      read_elements(*o.output, i * classes, probs_);
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
