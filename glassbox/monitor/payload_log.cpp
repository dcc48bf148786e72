// Tested by monitor_test (PayloadLog.*) and, behind the server, by serve_monitor.
#include "glassbox/monitor/payload_log.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <sstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"

namespace glassbox::monitor {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kNpyHeader = 128;  // magic + length + dict, so the shape can be rewritten in place

const char* descr_of(ElementType t) {
  switch (t) {
    case ElementType::kBool: return "|b1";
    case ElementType::kUint8: return "|u1";
    case ElementType::kInt8: return "|i1";
    case ElementType::kUint16: return "<u2";
    case ElementType::kInt16: return "<i2";
    case ElementType::kFp16: return "<f2";
    case ElementType::kBf16: return "<u2";
    case ElementType::kUint32: return "<u4";
    case ElementType::kInt32: return "<i4";
    case ElementType::kFp32: return "<f4";
    case ElementType::kUint64: return "<u8";
    case ElementType::kInt64: return "<i8";
    case ElementType::kFp64: return "<f8";
  }
  return "|u1";
}

std::string npy_header(const std::string& descr, std::int64_t rows, const std::vector<std::int64_t>& tail) {
  std::string shape = "(" + std::to_string(rows) + ",";
  for (std::size_t i = 0; i < tail.size(); ++i) shape += (i ? ", " : " ") + std::to_string(tail[i]);
  shape += ")";
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const std::size_t room = kNpyHeader - 10;
  if (dict.size() + 1 > room) throw std::runtime_error("tensor shape too long for the NPY header");
  dict.append(room - 1 - dict.size(), ' ');
  dict.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(room & 0xff));
  out.push_back(static_cast<char>(room >> 8));
  return out + dict;
}

void write_all(int fd, const void* data, std::size_t n, const fs::path& path) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "writing " + path.string());
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

void pwrite_all(int fd, const std::string& data, off_t at, const fs::path& path) {
  if (::pwrite(fd, data.data(), data.size(), at) != static_cast<ssize_t>(data.size()))
    throw std::system_error(errno, std::generic_category(), "writing " + path.string());
}

int open_new(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "creating " + path.string());
  return fd;
}

std::string file_name_of(const std::string& tensor) {
  std::string out;
  for (char c : tensor) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  return (out.empty() ? std::string("tensor") : out) + ".npy";
}

std::uint64_t dir_bytes(const fs::path& dir) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code ec2;
    const auto n = it->file_size(ec2);
    if (!ec2) total += n;
  }
  return total;
}

bool is_segment(const fs::path& p) {
  const std::string n = p.filename().string();
  return n.size() == 10 && n.rfind("seg-", 0) == 0 &&
         std::all_of(n.begin() + 4, n.end(), [](char c) { return c >= '0' && c <= '9'; });
}

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

std::uint64_t record_bytes(const PayloadRecord& r) {
  std::uint64_t n = 256;
  for (const auto* list : {&r.inputs, &r.outputs})
    for (const PayloadTensor& t : *list) n += t.data ? t.data->size : 0;
  return n;
}

}  // namespace

struct TensorFile {
  int fd = -1;
  fs::path path;
  std::string descr;
  std::vector<std::int64_t> tail;
  std::int64_t rows = 0;
};

struct PayloadLogger::Segment {
  fs::path dir;
  int jsonl = -1;
  std::map<std::string, TensorFile> tensors;
  std::uint64_t bytes = 0;
};

void PayloadLogOptions::validate() const {
  GB_CHECK(sample_rate > 0 && sample_rate <= 1, InvalidArgument, "payload log sample rate " << sample_rate,
           "give a share in (0, 1]");
  GB_CHECK(segment_bytes >= 4096 && max_bytes >= segment_bytes, InvalidArgument,
           "payload log segments of " << segment_bytes << " bytes under a cap of " << max_bytes,
           "give segments of at least 4 KiB and a cap of at least one segment");
}

PayloadLogger::PayloadLogger(PayloadLogOptions options) : options_(std::move(options)) {
  options_.validate();
  // Segments of earlier runs count toward the cap, oldest first.
  std::error_code ec;
  std::vector<std::pair<fs::file_time_type, fs::path>> found;
  for (auto it = fs::recursive_directory_iterator(options_.dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it.depth() == 2 && it->is_directory() && is_segment(it->path())) {
      std::error_code ec2;
      found.emplace_back(fs::last_write_time(it->path(), ec2), it->path());
      it.disable_recursion_pending();
      const std::string key = it->path().parent_path().parent_path().filename().string() + "/" +
                              it->path().parent_path().filename().string();
      const std::int64_t n = std::stoll(it->path().filename().string().substr(4));
      next_segment_[key] = std::max(next_segment_[key], n + 1);
    }
  }
  std::sort(found.begin(), found.end());
  for (const auto& [t, p] : found) {
    const std::uint64_t b = dir_bytes(p);
    closed_.emplace_back(p, b);
    stats_.bytes += b;
  }
  thread_ = std::thread([this] { loop(); });
}

PayloadLogger::~PayloadLogger() {
  {
    std::lock_guard lock(queue_mu_);
    stop_ = true;
  }
  queue_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& [key, s] : open_) close_segment(*s);
}

bool PayloadLogger::sample() {
  if (options_.sample_rate >= 1) return true;
  const std::uint64_t n = offered_.fetch_add(1, std::memory_order_relaxed);
  return std::floor(static_cast<double>(n + 1) * options_.sample_rate) >
         std::floor(static_cast<double>(n) * options_.sample_rate);
}

void PayloadLogger::offer(PayloadRecord record) noexcept {
  try {
    const std::uint64_t bytes = record_bytes(record);
    {
      std::lock_guard lock(queue_mu_);
      if (stop_ || (queued_bytes_ + bytes > options_.queue_bytes && !queue_.empty())) {
        std::lock_guard s(stats_mu_);
        ++stats_.dropped_queue;
        return;
      }
      queued_bytes_ += bytes;
      queue_.push_back(std::move(record));
    }
    // No wake-up: the writer takes what queued every 20 ms (a wake-up per request would cost a
    // context switch per request on a busy server).
  } catch (...) {
    std::lock_guard s(stats_mu_);
    ++stats_.dropped_queue;
  }
}

void PayloadLogger::flush() {
  std::unique_lock lock(queue_mu_);
  const std::uint64_t ticket = ++flush_requested_;
  queue_cv_.notify_all();
  flushed_cv_.wait(lock, [&] { return flush_done_ >= ticket || stop_; });
}

PayloadLogger::Stats PayloadLogger::stats() const {
  std::lock_guard lock(stats_mu_);
  return stats_;
}

void PayloadLogger::loop() {
  pthread_setname_np(pthread_self(), "gb-payload-log");
  lower_thread_priority();
  std::deque<PayloadRecord> batch;
  for (;;) {
    std::uint64_t ticket = 0;
    bool stopping = false;
    {
      std::unique_lock lock(queue_mu_);
      queue_cv_.wait_for(lock, std::chrono::milliseconds(20), [&] { return stop_ || flush_requested_ > flush_done_; });
      batch.swap(queue_);
      queued_bytes_ = 0;
      ticket = flush_requested_;
      stopping = stop_;
    }
    for (const PayloadRecord& r : batch) {
      try {
        write(r);
      } catch (const std::exception& e) {
        const std::string key = r.model + "/" + std::to_string(r.version);
        if (auto it = open_.find(key); it != open_.end()) {
          close_segment(*it->second);
          open_.erase(it);
        }
        std::lock_guard s(stats_mu_);
        ++stats_.dropped_error;
        if (stats_.last_error != e.what())
          std::clog << "serve: payload log: " << e.what() << " (records are dropped and counted until it works)\n";
        stats_.last_error = e.what();
      }
    }
    batch.clear();
    {
      std::lock_guard lock(queue_mu_);
      flush_done_ = std::max(flush_done_, ticket);
    }
    flushed_cv_.notify_all();
    if (stopping) return;
  }
}

void PayloadLogger::close_segment(Segment& s) {
  if (s.jsonl >= 0) ::close(s.jsonl);
  for (auto& [name, t] : s.tensors)
    if (t.fd >= 0) ::close(t.fd);
  s.jsonl = -1;
  s.tensors.clear();
  closed_.emplace_back(s.dir, s.bytes);
}

void PayloadLogger::enforce_cap() {
  std::lock_guard lock(stats_mu_);
  while (stats_.bytes > options_.max_bytes && !closed_.empty()) {
    const auto [dir, bytes] = closed_.front();
    closed_.pop_front();
    std::error_code ec;
    fs::remove_all(dir, ec);
    stats_.bytes -= std::min(stats_.bytes, bytes);
    ++stats_.segments_deleted;
  }
}

void PayloadLogger::write(const PayloadRecord& r) {
  const std::string key = r.model + "/" + std::to_string(r.version);
  std::unique_ptr<Segment>& seg = open_[key];
  // A tensor whose sample shape changed starts a new segment (an NPY file holds one shape).
  const auto fits = [&](const Segment& s) {
    for (const auto* list : {&r.inputs, &r.outputs})
      for (const PayloadTensor& t : *list) {
        if (!t.data) continue;
        const auto it = s.tensors.find(t.name);
        if (it == s.tensors.end()) continue;
        const std::vector<std::int64_t> tail(t.shape.begin() + (t.shape.empty() ? 0 : 1), t.shape.end());
        if (it->second.tail != tail || it->second.descr != descr_of(t.data->type)) return false;
      }
    return true;
  };
  if (seg && (seg->bytes >= options_.segment_bytes || !fits(*seg))) {
    close_segment(*seg);
    seg.reset();
  }
  if (!seg) {
    seg = std::make_unique<Segment>();
    char name[16];
    std::snprintf(name, sizeof(name), "seg-%06lld", static_cast<long long>(next_segment_[key]++));
    seg->dir = options_.dir / r.model / std::to_string(r.version) / name;
    fs::create_directories(seg->dir);  // throws filesystem_error: counted by loop()
    seg->jsonl = open_new(seg->dir / "records.jsonl");
  }
  nlohmann::json line = {{"id", r.id},
                         {"seq", ++sequence_},
                         {"time", r.time > 0 ? r.time : unix_now()},
                         {"model", r.model},
                         {"version", std::to_string(r.version)},
                         {"latency_ms", r.latency_ms}};
  std::uint64_t written = 0;
  for (const auto& [list, key_name] : {std::pair{&r.inputs, "inputs"}, std::pair{&r.outputs, "outputs"}}) {
    nlohmann::json arr = nlohmann::json::array();
    for (const PayloadTensor& t : *list) {
      nlohmann::json e = {{"name", t.name}, {"datatype", t.datatype}, {"shape", t.shape}};
      if (t.data) {
        TensorFile& f = seg->tensors[t.name];
        const std::vector<std::int64_t> tail(t.shape.begin() + (t.shape.empty() ? 0 : 1), t.shape.end());
        const std::int64_t rows = t.shape.empty() ? 1 : t.shape[0];
        if (f.fd < 0) {
          f.path = seg->dir / file_name_of(t.name);
          f.descr = descr_of(t.data->type);
          f.tail = tail;
          f.fd = open_new(f.path);
          write_all(f.fd, npy_header(f.descr, 0, f.tail).data(), kNpyHeader, f.path);
          written += kNpyHeader;
        }
        write_all(f.fd, t.data->data, t.data->size, f.path);
        written += t.data->size;
        e["file"] = f.path.filename().string();
        e["rows"] = {f.rows, f.rows + rows};
        f.rows += rows;
        pwrite_all(f.fd, npy_header(f.descr, f.rows, f.tail), 0, f.path);
      }
      arr.push_back(std::move(e));
    }
    line[key_name] = std::move(arr);
  }
  const std::string text = line.dump() + "\n";
  write_all(seg->jsonl, text.data(), text.size(), seg->dir / "records.jsonl");
  written += text.size();
  seg->bytes += written;
  {
    std::lock_guard lock(stats_mu_);
    ++stats_.records;
    stats_.bytes += written;
  }
  enforce_cap();
}

std::size_t NpyArray::row_elements() const {
  std::size_t n = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) n *= static_cast<std::size_t>(shape[i]);
  return n;
}

NpyArray read_npy(const fs::path& path) {
  const std::string bytes = read_file(path);
  const auto bad = [&](const std::string& why) {
    GB_THROW(DataLoss, path.string() << " is not a payload log tensor: " << why,
             "point at a folder glassbox serve "
             "--payload-log wrote");
  };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) bad("no NPY header");
  const std::size_t len =
      static_cast<unsigned char>(bytes[8]) | (static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  if (bytes.size() < 10 + len) bad("the header is cut short");
  const std::string header = bytes.substr(10, len);
  NpyArray a;
  bool known = false;
  for (ElementType t : {ElementType::kBool, ElementType::kUint8, ElementType::kInt8, ElementType::kUint16,
                        ElementType::kInt16, ElementType::kFp16, ElementType::kUint32, ElementType::kInt32,
                        ElementType::kFp32, ElementType::kUint64, ElementType::kInt64, ElementType::kFp64}) {
    if (header.find(std::string("'descr': '") + descr_of(t) + "'") != std::string::npos) {
      a.type = t;
      known = true;
      break;
    }
  }
  if (!known) bad("an element type it does not read");
  const auto open = header.find("'shape': (");
  if (open == std::string::npos) bad("no shape");
  std::size_t i = open + 10;
  while (i < header.size() && header[i] != ')') {
    if (std::isdigit(static_cast<unsigned char>(header[i]))) {
      std::size_t used = 0;
      a.shape.push_back(std::stoll(header.substr(i), &used));
      i += used;
    } else {
      ++i;
    }
  }
  std::size_t elements = 1;
  for (std::int64_t d : a.shape) elements *= static_cast<std::size_t>(d);
  std::size_t width = 1;
  switch (a.type) {
    case ElementType::kUint16:
    case ElementType::kInt16:
    case ElementType::kFp16:
    case ElementType::kBf16: width = 2; break;
    case ElementType::kUint32:
    case ElementType::kInt32:
    case ElementType::kFp32: width = 4; break;
    case ElementType::kUint64:
    case ElementType::kInt64:
    case ElementType::kFp64: width = 8; break;
    default: width = 1;
  }
  if (bytes.size() - 10 - len < elements * width) bad("fewer values than its shape says");
  a.data = bytes.substr(10 + len, elements * width);
  return a;
}

std::vector<PayloadLine> read_payload_log(const fs::path& dir) {
  GB_CHECK(fs::is_directory(dir), NotFound, "payload log folder " << dir.string() << " does not exist",
           "pass the folder given to glassbox serve --payload-log (or a model's folder in it)");
  std::vector<std::pair<std::pair<fs::path, std::string>, fs::path>> segments;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it)
    if (it->is_directory() && is_segment(it->path()) && fs::exists(it->path() / "records.jsonl"))
      segments.push_back({{it->path().parent_path(), it->path().filename().string()}, it->path()});
  std::sort(segments.begin(), segments.end());
  std::vector<PayloadLine> out;
  for (const auto& [key, seg] : segments) {
    std::istringstream in(read_file(seg / "records.jsonl"));
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      try {
        out.push_back({seg, nlohmann::json::parse(line)});
      } catch (const nlohmann::json::exception&) {
        // A line cut short by a crash or a full disk: the records before it still count.
      }
    }
  }
  return out;
}

}  // namespace glassbox::monitor
