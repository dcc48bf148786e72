#include "glassbox/inspect/tensorboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <iostream>
#include <limits>

#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/png.h"
#include "glassbox/inspect/proto/event.pb.h"
#include "glassbox/inspect/proto/hparams.pb.h"

namespace glassbox::inspect {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kFlushBytes = std::size_t{1} << 20;
constexpr auto kFlushInterval = std::chrono::seconds(2);
constexpr int kMaxBins = 1 << 20;
constexpr std::int64_t kHistogramChunk = std::int64_t{1} << 22;
constexpr int kGridPadding = 2;

constexpr std::array<std::uint32_t, 256> make_crc_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1U) ? (c >> 1) ^ 0x82F63B78U : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<std::uint32_t, 256> kCrcTable = make_crc_table();

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xffU));
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  std::string h = buf;
  for (char& c : h)
    if (c == '/') c = '_';
  return h;
}

// The framed record of an event stamped now at `step`.
std::string record_of(tb::Event& event, std::int64_t step) {
  event.set_wall_time(now_seconds());
  event.set_step(step);
  return tfrecord(event.SerializeAsString());
}

tb::Summary::Value* new_value(tb::Event& event, const std::string& tag) {
  tb::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  return v;
}

// TensorBoard's hparams plugin expects an empty float tensor as the value of its tags.
void set_hparams_value(tb::Summary::Value* v, const tb::hparams::HParamsPluginData& data) {
  tb::SummaryMetadata* m = v->mutable_metadata();
  m->mutable_plugin_data()->set_plugin_name("hparams");
  m->mutable_plugin_data()->set_content(data.SerializeAsString());
  m->set_data_class(tb::DATA_CLASS_TENSOR);
  tb::TensorProto* t = v->mutable_tensor();
  t->set_dtype(tb::DT_FLOAT);
  t->mutable_tensor_shape()->add_dim()->set_size(0);
}

// [N,C,H,W] uint8 -> [C,H',W']: ceil(sqrt(N)) columns, kGridPadding black pixels around cells.
at::Tensor tile_grid(const at::Tensor& batch) {
  const std::int64_t n = batch.size(0), c = batch.size(1), h = batch.size(2), w = batch.size(3);
  if (n == 1) return batch[0];
  const auto cols = static_cast<std::int64_t>(std::ceil(std::sqrt(static_cast<double>(n))));
  const std::int64_t rows = (n + cols - 1) / cols;
  const std::int64_t p = kGridPadding;
  at::Tensor cells = at::constant_pad_nd(batch, {p, 0, p, 0}, 0);  // pad left and top of each image
  if (rows * cols > n) cells = at::cat({cells, at::zeros({rows * cols - n, c, h + p, w + p}, cells.options())});
  at::Tensor grid = cells.reshape({rows, cols, c, h + p, w + p})
                        .permute({2, 0, 3, 1, 4})
                        .reshape({c, rows * (h + p), cols * (w + p)});
  return at::constant_pad_nd(grid, {0, p, 0, p}, 0);  // close the right and bottom borders
}

}  // namespace

// ---- framing -------------------------------------------------------------------------------

std::uint32_t crc32c(std::string_view data, std::uint32_t crc) {
  crc = ~crc;
  for (const char ch : data) crc = kCrcTable[(crc ^ static_cast<std::uint8_t>(ch)) & 0xffU] ^ (crc >> 8);
  return ~crc;
}

std::uint32_t masked_crc32c(std::string_view data) {
  const std::uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8U;
}

std::string tfrecord(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 16);
  put_le(out, payload.size(), 8);
  put_le(out, masked_crc32c(out), 4);
  out.append(payload);
  put_le(out, masked_crc32c(payload), 4);
  return out;
}

// ---- histograms ----------------------------------------------------------------------------

Histogram make_histogram(const at::Tensor& values, int bins) {
  GB_CHECK(bins >= 1 && bins <= kMaxBins, InvalidArgument,
           "histogram: bins must be between 1 and " << kMaxBins << ", got " << bins, "use e.g. 30 bins");
  GB_CHECK(values.defined(), InvalidArgument, "histogram: undefined tensor", "pass a tensor with values");
  GB_CHECK(!values.is_complex(), InvalidArgument, "histogram: complex tensor (" << values.scalar_type() << ")",
           "pass the real part, the imaginary part or the magnitude");
  Histogram h;
  const std::int64_t total = values.numel();
  if (total == 0) return h;

  // Fast path (the common case, every probe step): a floating tensor of finite values — a few
  // reductions and one histc, two small device->host copies.
  const at::Tensor flat_all = values.detach().reshape({-1});
  if (flat_all.is_floating_point() && total <= kHistogramChunk) {
    auto [mn, mx] = at::aminmax(flat_all);
    const at::Tensor xd = flat_all.to(at::kDouble);
    const at::Tensor st = at::stack({mn.to(at::kDouble), mx.to(at::kDouble), xd.sum(), xd.square().sum()}).to(at::kCPU);
    const double* m = st.data_ptr<double>();
    if (std::isfinite(m[0]) && std::isfinite(m[1])) {
      h.num = static_cast<double>(total);
      h.min = m[0];
      h.max = m[1];
      h.sum = m[2];
      h.sum_squares = m[3];
      if (h.min == h.max) {
        h.bucket_limit = {DBL_MAX};
        h.bucket = {h.num};
        return h;
      }
      const at::Tensor counts = at::histc(xd, bins, h.min, h.max).to(at::kCPU).contiguous();
      const double width = (h.max - h.min) / bins;
      h.bucket_limit.resize(static_cast<std::size_t>(bins));
      h.bucket.assign(counts.data_ptr<double>(), counts.data_ptr<double>() + bins);
      for (int i = 0; i + 1 < bins; ++i) h.bucket_limit[static_cast<std::size_t>(i)] = h.min + (i + 1) * width;
      h.bucket_limit.back() = DBL_MAX;
      return h;
    }
  }
  // Everything below stays on the tensor's device, in chunks of kHistogramChunk values (the
  // float64 temporaries stay bounded for large tensors) and without host synchronisation:
  // pass 1 accumulates min, max, count, sum and sum of squares of the finite values, pass 2
  // the bucket counts; `stats` is the one device->host copy.
  const double inf = std::numeric_limits<double>::infinity();
  const at::Tensor flat = values.detach().reshape({-1});
  const auto options = flat.options().dtype(at::kDouble);
  auto chunk = [&](std::int64_t start) {
    return flat.narrow(0, start, std::min(kHistogramChunk, total - start)).to(at::kDouble);
  };
  at::Tensor lo = at::full({}, inf, options), hi = at::full({}, -inf, options);
  at::Tensor num = at::zeros({}, options), sum = at::zeros({}, options), sum_squares = at::zeros({}, options);
  for (std::int64_t start = 0; start < total; start += kHistogramChunk) {
    const at::Tensor x = chunk(start);
    const at::Tensor finite = at::isfinite(x);
    const at::Tensor xf = at::where(finite, x, 0.0);
    lo = at::minimum(lo, at::where(finite, x, inf).min());
    hi = at::maximum(hi, at::where(finite, x, -inf).max());
    num = num + finite.sum(at::kDouble);
    sum = sum + xf.sum();
    sum_squares = sum_squares + (xf * xf).sum();
  }
  // Bucket of each value: floor((x - lo) * bins / range), max in the last bucket; all values
  // equal (range 0 -> NaN) in bucket 0; non-finite values in an extra bucket `bins`, dropped.
  const at::Tensor range = hi - lo;
  at::Tensor counts = at::zeros({bins + 1}, options);
  for (std::int64_t start = 0; start < total; start += kHistogramChunk) {
    const at::Tensor x = chunk(start);
    const at::Tensor bucket =
        at::floor((x - lo) * static_cast<double>(bins) / range).nan_to_num(0.0).clamp(0.0, bins - 1.0);
    const at::Tensor index = at::where(at::isfinite(x), bucket, static_cast<double>(bins)).to(at::kLong);
    counts.index_add_(0, index, at::ones({x.numel()}, options));
  }
  const at::Tensor stats = at::cat({at::stack({lo, hi, num, sum, sum_squares}), counts}).to(at::kCPU);
  const double* s = stats.data_ptr<double>();

  h.num = s[2];
  h.nonfinite = static_cast<double>(total) - h.num;
  if (h.num == 0) return h;
  h.min = s[0];
  h.max = s[1];
  h.sum = s[3];
  h.sum_squares = s[4];
  if (h.min == h.max) {
    h.bucket_limit = {DBL_MAX};
    h.bucket = {h.num};
    return h;
  }
  const double width = (h.max - h.min) / bins;
  h.bucket_limit.resize(static_cast<std::size_t>(bins));
  h.bucket.assign(s + 5, s + 5 + bins);
  for (int i = 0; i + 1 < bins; ++i) h.bucket_limit[static_cast<std::size_t>(i)] = h.min + (i + 1) * width;
  h.bucket_limit.back() = DBL_MAX;
  return h;
}

// ---- EventWriter ---------------------------------------------------------------------------

EventWriter::EventWriter(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  GB_CHECK(!ec, InvalidArgument, "cannot create the TensorBoard log directory " << dir.string() << ": " << ec.message(),
           "choose a writable log directory");
  static std::atomic<std::uint64_t> counter{0};
  const auto seconds = static_cast<std::int64_t>(now_seconds());
  const std::string name = "events.out.tfevents." + std::to_string(seconds) + "." + hostname() + "." +
                           std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  start(dir / name, /*exclusive=*/true);
}

EventWriter::EventWriter(const fs::path& file, ExactFile) { start(file, /*exclusive=*/false); }

std::unique_ptr<EventWriter> EventWriter::open_file_for_testing(const fs::path& file) {
  return std::unique_ptr<EventWriter>(new EventWriter(file, ExactFile{}));
}

void EventWriter::start(const fs::path& file, bool exclusive) {
  path_ = file;
  uncaught_at_start_ = std::uncaught_exceptions();
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (exclusive ? O_EXCL : O_TRUNC);
  fd_ = ::open(file.c_str(), flags, 0644);
  GB_CHECK(fd_ >= 0, InvalidArgument,
           "cannot create the TensorBoard event file " << file.string() << ": " << std::strerror(errno),
           "choose a writable log directory with free space");
  tb::Event event;
  event.set_file_version("brain.Event:2");
  append(record_of(event, 0));
  flush();  // TensorBoard sees the run at once; a full disk is reported now
  flusher_ = std::thread([this] { flusher_loop(); });
}

EventWriter::~EventWriter() {
  try {
    if (hparams_written_ && !failed()) {
      tb::hparams::HParamsPluginData data;
      data.set_version(0);
      tb::hparams::SessionEndInfo* end = data.mutable_session_end_info();
      end->set_status(std::uncaught_exceptions() > uncaught_at_start_ ? tb::hparams::STATUS_FAILURE
                                                                      : tb::hparams::STATUS_SUCCESS);
      end->set_end_time_secs(now_seconds());
      tb::Event event;
      set_hparams_value(new_value(event, "_hparams_/session_end_info"), data);
      append(record_of(event, 0));
    }
  } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor must not throw; the file stays readable
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (flusher_.joinable()) flusher_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  flush_locked();
  if (fd_ >= 0 && ::close(fd_) != 0 && !failed_) {
    std::cerr << ("warning: TensorBoard: closing " + path_.string() + " failed: " + std::strerror(errno) +
                  "; its last events may be lost\n");
  }
  fd_ = -1;
}

bool EventWriter::failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_;
}

void EventWriter::append(std::string record) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_) return;
  if (buffer_.empty()) {
    buffer_ = std::move(record);
  } else {
    buffer_ += record;
  }
  if (buffer_.size() >= kFlushBytes) flush_locked();
}

void EventWriter::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  flush_locked();
}

void EventWriter::flush_locked() {
  if (failed_ || buffer_.empty() || fd_ < 0) return;
  std::size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string reason = n < 0 ? std::strerror(errno) : "nothing written";
      failed_ = true;
      buffer_.clear();
      buffer_.shrink_to_fit();
      std::cerr << ("warning: TensorBoard: writing " + path_.string() + " failed (" + reason +
                    "); no further events are written to it, training continues (free disk space for the next run)\n");
      return;
    }
    done += static_cast<std::size_t>(n);
  }
  buffer_.clear();
}

void EventWriter::flusher_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, kFlushInterval, [this] { return stopping_; });
    flush_locked();
  }
}

void EventWriter::add_scalar(const std::string& tag, double value, std::int64_t step) {
  if (failed()) return;
  tb::Event event;
  new_value(event, tag)->set_simple_value(static_cast<float>(value));
  append(record_of(event, step));
}

void EventWriter::add_histogram(const std::string& tag, const Histogram& h, std::int64_t step) {
  GB_CHECK(
      h.bucket_limit.size() == h.bucket.size(), InvalidArgument,
      "histogram " << tag << ": " << h.bucket_limit.size() << " bucket limits but " << h.bucket.size() << " counts",
      "give one right edge per bucket (make_histogram does)");
  if (failed()) return;
  tb::Event event;
  tb::HistogramProto* p = new_value(event, tag)->mutable_histo();
  p->set_min(h.min);
  p->set_max(h.max);
  p->set_num(h.num);
  p->set_sum(h.sum);
  p->set_sum_squares(h.sum_squares);
  p->mutable_bucket_limit()->Add(h.bucket_limit.begin(), h.bucket_limit.end());
  p->mutable_bucket()->Add(h.bucket.begin(), h.bucket.end());
  append(record_of(event, step));
}

void EventWriter::add_histogram(const std::string& tag, const at::Tensor& values, std::int64_t step, int bins) {
  if (failed()) return;
  add_histogram(tag, make_histogram(values, bins), step);
}

void EventWriter::add_image(const std::string& tag, const std::uint8_t* hwc, int height, int width, int channels,
                            std::int64_t step) {
  if (failed()) return;
  std::string png = encode_png(hwc, width, height, channels);  // validates the shape
  tb::Event event;
  tb::Summary::Image* image = new_value(event, tag)->mutable_image();
  image->set_height(height);
  image->set_width(width);
  image->set_colorspace(channels);
  image->set_encoded_image_string(std::move(png));
  append(record_of(event, step));
}

void EventWriter::add_image(const std::string& tag, const at::Tensor& image, std::int64_t step) {
  GB_CHECK(image.defined() && image.dim() >= 2 && image.dim() <= 4, InvalidArgument,
           "image " << tag << ": expected [H,W], [C,H,W] or [N,C,H,W], got "
                    << (image.defined() ? image.sizes() : c10::IntArrayRef{}),
           "reshape the tensor to channels-first");
  const bool floating = at::isFloatingType(image.scalar_type());
  GB_CHECK(floating || image.scalar_type() == at::kByte, InvalidArgument,
           "image " << tag << ": dtype " << image.scalar_type() << " is neither floating point nor uint8",
           "pass floats in [0,1] or uint8 pixels");
  if (failed()) return;
  at::Tensor t = image.detach();
  if (t.dim() == 2) t = t.unsqueeze(0);
  if (t.dim() == 3) t = t.unsqueeze(0);
  const std::int64_t c = t.size(1);
  GB_CHECK(c == 1 || c == 3 || c == 4, InvalidArgument,
           "image " << tag << ": " << c << " channels in " << image.sizes(),
           "use 1 (gray), 3 (RGB) or 4 (RGBA) channels, channels first");
  GB_CHECK(t.size(0) > 0 && t.size(2) > 0 && t.size(3) > 0, InvalidArgument,
           "image " << tag << ": empty image " << image.sizes(), "pass at least one pixel");
  if (floating) t = (t.to(at::kFloat).nan_to_num(0.0).clamp(0.0, 1.0) * 255.0).round().to(at::kByte);
  const at::Tensor hwc = tile_grid(t).permute({1, 2, 0}).contiguous().to(at::kCPU);
  GB_CHECK(hwc.size(0) <= std::numeric_limits<int>::max() && hwc.size(1) <= std::numeric_limits<int>::max(),
           InvalidArgument, "image " << tag << ": " << hwc.sizes() << " is too large",
           "log a smaller image or fewer images");
  add_image(tag, hwc.data_ptr<std::uint8_t>(), static_cast<int>(hwc.size(0)), static_cast<int>(hwc.size(1)),
            static_cast<int>(hwc.size(2)), step);
}

void EventWriter::add_text(const std::string& tag, const std::string& markdown, std::int64_t step) {
  if (failed()) return;
  tb::Event event;
  tb::Summary::Value* v = new_value(event, tag);
  tb::SummaryMetadata* m = v->mutable_metadata();
  tb::TextPluginData plugin;
  plugin.set_version(0);
  m->mutable_plugin_data()->set_plugin_name("text");
  m->mutable_plugin_data()->set_content(plugin.SerializeAsString());
  m->set_data_class(tb::DATA_CLASS_TENSOR);
  tb::TensorProto* t = v->mutable_tensor();
  t->set_dtype(tb::DT_STRING);
  t->mutable_tensor_shape();  // no dims: a scalar
  t->add_string_val(markdown);
  append(record_of(event, step));
}

void EventWriter::add_hparams(const std::map<std::string, HParamValue>& hparams,
                              const std::vector<std::string>& metric_tags) {
  GB_CHECK(!hparams.empty(), InvalidArgument, "add_hparams: no hyper-parameters", "pass at least one name and value");
  for (const auto& [name, v] : hparams) {
    const double* d = std::get_if<double>(&v.value);
    GB_CHECK(d == nullptr || std::isfinite(*d), InvalidArgument,
             "hyper-parameter " << name << " is not finite (" << *d << ")", "log a finite number or a string");
  }
  const double now = now_seconds();

  tb::hparams::HParamsPluginData experiment;
  experiment.set_version(0);
  tb::hparams::Experiment* e = experiment.mutable_experiment();
  e->set_time_created_secs(now);
  tb::hparams::HParamsPluginData start;
  start.set_version(0);
  tb::hparams::SessionStartInfo* s = start.mutable_session_start_info();
  s->set_start_time_secs(now);
  for (const auto& [name, v] : hparams) {
    tb::hparams::HParamInfo* info = e->add_hparam_infos();
    info->set_name(name);
    google::protobuf::Value& value = (*s->mutable_hparams())[name];
    if (const auto* str = std::get_if<std::string>(&v.value)) {
      info->set_type(tb::hparams::DATA_TYPE_STRING);
      value.set_string_value(*str);
    } else if (const auto* num = std::get_if<double>(&v.value)) {
      info->set_type(tb::hparams::DATA_TYPE_FLOAT64);
      value.set_number_value(*num);
    } else {
      info->set_type(tb::hparams::DATA_TYPE_BOOL);
      info->mutable_domain_discrete()->add_values()->set_bool_value(false);
      info->mutable_domain_discrete()->add_values()->set_bool_value(true);
      value.set_bool_value(std::get<bool>(v.value));
    }
  }
  for (const std::string& tag : metric_tags) e->add_metric_infos()->mutable_name()->set_tag(tag);

  tb::Event experiment_event;
  set_hparams_value(new_value(experiment_event, "_hparams_/experiment"), experiment);
  tb::Event start_event;
  set_hparams_value(new_value(start_event, "_hparams_/session_start_info"), start);
  std::string records = record_of(experiment_event, 0) + record_of(start_event, 0);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    GB_CHECK(!hparams_written_, FailedPrecondition, "add_hparams called twice on " << path_.string(),
             "log one set of hyper-parameters per run (one EventWriter per run directory)");
    hparams_written_ = true;
  }
  append(std::move(records));
}

}  // namespace glassbox::inspect
