// Payload logging: sampled requests and responses of a served model written to disk, so that
// what the model saw can be looked at, replayed, and joined with labels that arrive later (by the
// request id).
//
//   PayloadLogger log({.dir = "payloads"});
//   if (log.sample()) log.offer(record);   // on the request's completion; never blocks, never throws
//
// Layout: DIR/<model>/<version>/<segment>/ with records.jsonl (one line per request: id, sequence
// number, Unix time, latency, and for each tensor its name, datatype, shape, file and rows) and one
// NPY file per tensor name (<name>.npy: the requests' rows one after another; numpy.load reads it,
// its header kept current after every append). A segment closes once it holds `segment_bytes`;
// the oldest segments are deleted once all of them hold more than `max_bytes` (only segments this
// logger writes: <segment> is `seg-NNNNNN`). BYTES tensors are recorded in records.jsonl without
// their data; BF16 is stored as its raw 16-bit patterns (<u2).
// Failures never reach the request: a full hand-off queue, a folder that cannot be made, a full
// disk or any other write error drops the record and counts it (Stats), and the logger tries again
// with a fresh segment on the next record.
// Torch-free. Thread safety: every member may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "glassbox/monitor/runtime.h"

namespace glassbox::monitor {

struct PayloadLogOptions {
  std::filesystem::path dir;  // empty: off
  double sample_rate = 1.0;
  std::uint64_t segment_bytes = 64ull << 20;
  std::uint64_t max_bytes = 1ull << 30;
  std::uint64_t queue_bytes = 64ull << 20;  // records waiting for the writer, at most
  void validate() const;                    // InvalidArgument naming the option
};

struct PayloadTensor {
  std::string name;
  std::string datatype;  // KServe's name ("FP32", "BYTES", ...)
  std::vector<std::int64_t> shape;
  std::optional<RawTensor> data;  // none: not stored (BYTES)
};

struct PayloadRecord {
  std::string model;
  std::int64_t version = 0;
  std::string id;   // the request's id ("" when the client sent none)
  double time = 0;  // Unix time of the response
  double latency_ms = -1;
  std::vector<PayloadTensor> inputs, outputs;
};

// A tensor file of a payload log as it is on disk (NPY 1.0, C order).
struct NpyArray {
  ElementType type = ElementType::kFp32;
  std::vector<std::int64_t> shape;
  std::string data;  // the values' bytes
  std::int64_t rows() const { return shape.empty() ? 1 : shape[0]; }
  std::size_t row_elements() const;
};
// DataLoss naming the file for anything but a little-endian NPY 1.0 array of a type a payload log
// writes.
NpyArray read_npy(const std::filesystem::path& path);
// The records of a payload log folder (DIR, DIR/<model> or DIR/<model>/<version>): every
// segment's records.jsonl line, oldest segment first, with the segment's folder.
struct PayloadLine {
  std::filesystem::path segment;
  nlohmann::json record;
};
std::vector<PayloadLine> read_payload_log(const std::filesystem::path& dir);

class PayloadLogger {
 public:
  explicit PayloadLogger(PayloadLogOptions options);
  ~PayloadLogger();
  PayloadLogger(const PayloadLogger&) = delete;
  PayloadLogger& operator=(const PayloadLogger&) = delete;

  bool sample();
  void offer(PayloadRecord record) noexcept;
  // Writes everything queued.
  void flush();

  struct Stats {
    std::int64_t records = 0;           // written
    std::int64_t dropped_queue = 0;     // the writer was behind
    std::int64_t dropped_error = 0;     // a write failed (full disk, unwritable folder, ...)
    std::uint64_t bytes = 0;            // in the segments on disk now
    std::int64_t segments_deleted = 0;  // by the size cap
    std::string last_error;
  };
  Stats stats() const;
  const PayloadLogOptions& options() const { return options_; }

 private:
  struct Segment;
  void loop();
  void write(const PayloadRecord& r);
  void close_segment(Segment& s);
  void enforce_cap();

  const PayloadLogOptions options_;
  std::atomic<std::uint64_t> offered_{0};
  mutable std::mutex queue_mu_;
  std::condition_variable queue_cv_, flushed_cv_;
  std::deque<PayloadRecord> queue_;
  std::uint64_t queued_bytes_ = 0, flush_requested_ = 0, flush_done_ = 0;
  bool stop_ = false;

  // The writer thread's own state.
  std::map<std::string, std::unique_ptr<Segment>> open_;  // "model/version" -> its open segment
  std::map<std::string, std::int64_t> next_segment_;
  std::deque<std::pair<std::filesystem::path, std::uint64_t>> closed_;  // oldest first, with sizes
  std::int64_t sequence_ = 0;

  mutable std::mutex stats_mu_;
  Stats stats_;
  std::thread thread_;
};

}  // namespace glassbox::monitor
