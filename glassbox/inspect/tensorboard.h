// TensorBoard event files: scalars, histograms, images, text and hyper-parameters that the real
// TensorBoard (and its Python EventAccumulator) reads.
//
//   glassbox::inspect::EventWriter tb("runs/a/tb");           // runs/a/tb/events.out.tfevents.*
//   tb.add_scalar("train/loss", 0.41, step);
//   tb.add_histogram("fc1.weight", model->fc1->weight, step);  // any device: one host copy
//   tb.add_image("inputs", batch, step);                       // [N,C,H,W] in [0,1]: one grid
//   tb.add_text("config", "```\nlr = 0.1\n```", 0);
//   tb.add_hparams({{"lr", 0.1}, {"optimizer", "adam"}, {"augment", true}}, {"val/accuracy"});
//   // ... `tensorboard --logdir runs`
//
// File format: TFRecord framing (uint64 little-endian length, masked CRC-32C of those 8 bytes,
// the serialized Event, masked CRC-32C of it). The first record is the file_version
// "brain.Event:2" event; every event carries wall_time (seconds) and step.
//
// Writing never interrupts training: records are buffered and handed to the OS at flush(),
// when 1 MiB has accumulated, every 2 s (a background thread) and in the destructor. After a
// write error (disk full, file system gone) one warning line naming the file goes to stderr
// and every later add_* is a no-op. Argument errors (a 2-channel image, bins < 1) still throw.
//
// Ownership: an EventWriter owns its file descriptor and its flusher thread; not copyable.
// Destroy it only after the threads that log to it are done.
// Thread safety: every member function may be called from any thread concurrently (one mutex
// guards the buffer and the file); encoding (PNG, histograms, protobuf) runs outside the lock.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <ATen/core/Tensor.h>

namespace glassbox::inspect {

// TensorBoard's HistogramProto. bucket[i] counts the values in [bucket_limit[i-1], bucket_limit[i])
// (the first bucket starts at min; the last limit is DBL_MAX, so max falls in the last bucket).
struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit;  // right edges, ascending, last one DBL_MAX
  std::vector<double> bucket;        // counts
  double nonfinite = 0;              // NaN / +-inf values left out of everything above (not written)
};

// Histogram of a tensor's finite values (any device, any real dtype; computed in float64 on
// the tensor's device, 4M values at a time, with one device->host copy): `bins` equal-width buckets between min and
// max. All values equal: a single bucket. Empty or all-non-finite: num = 0 and no buckets.
Histogram make_histogram(const at::Tensor& values, int bins = 30);

// A hyper-parameter value: a string, a number (any arithmetic type, stored as double) or a bool.
struct HParamValue {
  std::variant<std::string, double, bool> value;
  HParamValue(std::string s) : value(std::move(s)) {}    // NOLINT(google-explicit-constructor)
  HParamValue(const char* s) : value(std::string(s)) {}  // NOLINT(google-explicit-constructor)
  HParamValue(bool b) : value(b) {}                      // NOLINT(google-explicit-constructor)
  template <typename T, std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, bool>, int> = 0>
  HParamValue(T v) : value(static_cast<double>(v)) {}  // NOLINT(google-explicit-constructor)
};

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), continuing from `crc` (0 to start).
std::uint32_t crc32c(std::string_view data, std::uint32_t crc = 0);
// TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
std::uint32_t masked_crc32c(std::string_view data);
// One TFRecord: length, masked CRC of the length, `payload`, masked CRC of the payload.
std::string tfrecord(std::string_view payload);

class EventWriter {
 public:
  // Creates `dir` (if needed) and dir/events.out.tfevents.<unix seconds>.<hostname>.<pid>.<n>,
  // and writes the file_version event. Throws (with the path) when the file cannot be created.
  explicit EventWriter(const std::filesystem::path& dir);
  // Writes to exactly `file` (truncated; created if missing). For tests: "/dev/full".
  static std::unique_ptr<EventWriter> open_file_for_testing(const std::filesystem::path& file);
  // Writes the hparams session end (if add_hparams was called), flushes and closes.
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // Stored as float32 (TensorBoard's simple_value).
  void add_scalar(const std::string& tag, double value, std::int64_t step);
  void add_histogram(const std::string& tag, const Histogram& h, std::int64_t step);
  void add_histogram(const std::string& tag, const at::Tensor& values, std::int64_t step, int bins = 30);
  // `hwc`: height * width * channels bytes, rows contiguous; channels 1 (gray), 3 (RGB), 4 (RGBA).
  void add_image(const std::string& tag, const std::uint8_t* hwc, int height, int width, int channels,
                 std::int64_t step);
  // [H,W], [C,H,W] or a batch [N,C,H,W] (tiled into one grid, ceil(sqrt(N)) columns, 2-pixel
  // black padding, like torchvision's make_grid); C in {1,3,4}; floating point in [0,1]
  // (clamped, rounded to 0..255) or uint8; any device (one device->host copy).
  void add_image(const std::string& tag, const at::Tensor& image, std::int64_t step);
  // Markdown shown by the text plugin.
  void add_text(const std::string& tag, const std::string& markdown, std::int64_t step);
  // The hparams plugin: this run is one session with these hyper-parameters; `metric_tags` are
  // scalar tags (logged with add_scalar) shown against them. Writes the experiment and the
  // session start now, the session end (success, or failure when the writer is destroyed by an
  // exception unwinding) in the destructor. Call once per writer; every run of a log dir
  // should use the same hyper-parameter names and metric tags (TensorBoard shows the
  // experiment description of one arbitrary run).
  void add_hparams(const std::map<std::string, HParamValue>& hparams, const std::vector<std::string>& metric_tags);

  // Hands the buffered records to the OS (write(2); no fsync).
  void flush();
  const std::filesystem::path& path() const { return path_; }
  // True after a write error: nothing more is written.
  bool failed() const;

 private:
  struct ExactFile {};
  EventWriter(const std::filesystem::path& file, ExactFile);
  void start(const std::filesystem::path& file, bool exclusive);  // opens, writes file_version, starts flusher_
  void append(std::string record);                                // a framed record
  void flush_locked();                                            // mutex_ held
  void flusher_loop();

  std::filesystem::path path_;
  int fd_ = -1;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::string buffer_;
  bool failed_ = false;
  bool stopping_ = false;
  bool hparams_written_ = false;
  int uncaught_at_start_ = 0;  // std::uncaught_exceptions() when constructed
  std::thread flusher_;
};

}  // namespace glassbox::inspect
