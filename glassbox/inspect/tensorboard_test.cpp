#include "glassbox/inspect/tensorboard.h"

#include <unistd.h>

#include <cfloat>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/base/png.h"
#include "glassbox/inspect/proto/event.pb.h"
#include "glassbox/testing/testing.h"

namespace glassbox::inspect {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::uint64_t get_le(const std::string& s, std::size_t pos, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= std::uint64_t{static_cast<std::uint8_t>(s[pos + i])} << (8 * i);
  return v;
}

// Parses a whole event file, checking every length and CRC, independently of the writer.
std::vector<tb::Event> read_events(const fs::path& file) {
  const std::string data = read_file(file);
  std::vector<tb::Event> events;
  std::size_t pos = 0;
  while (pos < data.size()) {
    EXPECT_LE(pos + 12, data.size()) << "truncated header at " << pos;
    if (pos + 12 > data.size()) break;
    const std::uint64_t len = get_le(data, pos, 8);
    EXPECT_EQ(get_le(data, pos + 8, 4), masked_crc32c(std::string_view(data).substr(pos, 8)))
        << "length CRC at " << pos;
    EXPECT_LE(pos + 12 + len + 4, data.size()) << "truncated record at " << pos;
    if (pos + 12 + len + 4 > data.size()) break;
    const std::string_view payload = std::string_view(data).substr(pos + 12, len);
    EXPECT_EQ(get_le(data, pos + 12 + len, 4), masked_crc32c(payload)) << "data CRC at " << pos;
    tb::Event e;
    EXPECT_TRUE(e.ParseFromArray(payload.data(), static_cast<int>(payload.size())));
    events.push_back(std::move(e));
    pos += 12 + len + 4;
  }
  return events;
}

fs::path only_file(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) files.push_back(entry.path());
  EXPECT_EQ(files.size(), 1u);
  return files.empty() ? fs::path() : files[0];
}

// ---- CRC-32C and framing -------------------------------------------------------------------

TEST(TensorBoardCrc, KnownVectors) {
  EXPECT_EQ(crc32c(""), 0x00000000U);
  EXPECT_EQ(crc32c("123456789"), 0xE3069283U);
  EXPECT_EQ(crc32c("a"), 0xC1D04330U);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAU);    // RFC 3720 B.4
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43U);  // RFC 3720 B.4
  std::string ascending(32, '\0');
  for (int i = 0; i < 32; ++i) ascending[static_cast<std::size_t>(i)] = static_cast<char>(i);
  EXPECT_EQ(crc32c(ascending), 0x46DD794EU);                // RFC 3720 B.4
  EXPECT_EQ(crc32c("6789", crc32c("12345")), 0xE3069283U);  // continuation
}

TEST(TensorBoardCrc, MaskAndRecordLayout) {
  const std::uint32_t crc = 0xE3069283U;
  EXPECT_EQ(masked_crc32c("123456789"), ((crc >> 15) | (crc << 17)) + 0xa282ead8U);
  const std::string rec = tfrecord("hello");
  ASSERT_EQ(rec.size(), 8u + 4 + 5 + 4);
  EXPECT_EQ(get_le(rec, 0, 8), 5u);
  EXPECT_EQ(get_le(rec, 8, 4), masked_crc32c(rec.substr(0, 8)));
  EXPECT_EQ(rec.substr(12, 5), "hello");
  EXPECT_EQ(get_le(rec, 17, 4), masked_crc32c("hello"));
}

TEST(TensorBoardWriter, FileNameFirstEventAndFraming) {
  const fs::path dir = testing::temp_dir("tb_framing") / "nested" / "run";
  const double before = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  fs::path file;
  {
    EventWriter w(dir);
    file = w.path();
    for (int step = 0; step < 5; ++step) {
      w.add_scalar("loss", 1.0 / (step + 1), step);
      w.add_scalar("acc", step * 0.1, step);
    }
  }
  EXPECT_EQ(only_file(dir), file);
  const std::string name = file.filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  EXPECT_NE(name.find("." + std::to_string(::getpid()) + "."), std::string::npos) << name;

  const auto events = read_events(file);
  ASSERT_EQ(events.size(), 11u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  for (std::size_t i = 1; i < events.size(); ++i) {
    const tb::Event& e = events[i];
    const int step = static_cast<int>((i - 1) / 2);
    EXPECT_EQ(e.step(), step);
    EXPECT_GE(e.wall_time(), before - 1);
    EXPECT_LE(e.wall_time(), before + 600);
    ASSERT_EQ(e.summary().value_size(), 1);
    const auto& v = e.summary().value(0);
    EXPECT_EQ(v.tag(), i % 2 == 1 ? "loss" : "acc");
    EXPECT_EQ(v.simple_value(), i % 2 == 1 ? static_cast<float>(1.0 / (step + 1)) : static_cast<float>(step * 0.1));
  }
}

TEST(TensorBoardWriter, TwoWritersInOneDirGetDistinctFiles) {
  const fs::path dir = testing::temp_dir("tb_two");
  EventWriter a(dir);
  EventWriter b(dir);
  EXPECT_NE(a.path(), b.path());
}

TEST(TensorBoardWriter, UnusableDirectoryThrowsWithPath) {
  const fs::path dir = testing::temp_dir("tb_baddir");
  write_file_atomic(dir / "file", "x");
  try {
    EventWriter w(dir / "file" / "sub");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find((dir / "file").string()), std::string::npos) << e.message();
    EXPECT_FALSE(e.hint().empty());
  }
}

TEST(TensorBoardWriter, FlushesPeriodicallyWithoutFlushCalls) {
  const fs::path dir = testing::temp_dir("tb_periodic");
  EventWriter w(dir);
  const auto size0 = fs::file_size(w.path());
  EXPECT_GT(size0, 0u);  // the file_version record is written at once
  w.add_scalar("x", 1.0, 1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (fs::file_size(w.path()) == size0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_GT(fs::file_size(w.path()), size0);
  EXPECT_EQ(read_events(w.path()).size(), 2u);
}

TEST(TensorBoardWriter, ConcurrentWritersFromThreads) {
  const fs::path dir = testing::temp_dir("tb_threads");
  fs::path file;
  {
    EventWriter w(dir);
    file = w.path();
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&w, t] {
        for (int i = 0; i < 300; ++i) {
          w.add_scalar("thread" + std::to_string(t), i, i);
          if (i % 100 == 0) w.flush();
        }
      });
    }
    for (auto& th : threads) th.join();
  }
  const auto events = read_events(file);
  ASSERT_EQ(events.size(), 1u + 4 * 300);
  std::map<std::string, std::int64_t> next;
  for (std::size_t i = 1; i < events.size(); ++i) {
    const auto& v = events[i].summary().value(0);
    EXPECT_EQ(events[i].step(), next[v.tag()]++);  // each thread's records stay in order
  }
}

TEST(TensorBoardWriter, DiskFullWarnsOnceAndNeverThrows) {
  ::testing::internal::CaptureStderr();
  {
    auto w = EventWriter::open_file_for_testing("/dev/full");
    EXPECT_TRUE(w->failed());  // the file_version record could not be written
    for (int step = 0; step < 100; ++step) {
      EXPECT_NO_THROW(w->add_scalar("loss", 0.5, step));
      EXPECT_NO_THROW(w->add_histogram("h", torch::randn({100}), step));
      EXPECT_NO_THROW(w->add_text("t", "text", step));
    }
    const std::uint8_t px[3] = {1, 2, 3};
    EXPECT_NO_THROW(w->add_image("img", px, 1, 1, 3, 0));
    EXPECT_NO_THROW(w->add_hparams({{"lr", 0.1}}, {"loss"}));
    EXPECT_NO_THROW(w->flush());
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  std::size_t lines = 0;
  for (char c : err) lines += c == '\n';
  EXPECT_EQ(lines, 1u) << err;
  EXPECT_NE(err.find("warning"), std::string::npos) << err;
  EXPECT_NE(err.find("/dev/full"), std::string::npos) << err;
}

TEST(TensorBoardWriter, ArgumentErrorsThrow) {
  const fs::path dir = testing::temp_dir("tb_args");
  EventWriter w(dir);
  const std::uint8_t px[8] = {};
  EXPECT_THROW(w.add_image("bad", px, 2, 2, 2, 0), Error);
  EXPECT_THROW(w.add_image("bad", torch::zeros({2, 4, 4}), 0), Error);            // 2 channels
  EXPECT_THROW(w.add_image("bad", torch::zeros({4}), 0), Error);                  // 1-d
  EXPECT_THROW(w.add_image("bad", torch::zeros({4, 4}, torch::kInt), 0), Error);  // int32
  EXPECT_THROW(w.add_histogram("bad", torch::zeros({4}), 0, 0), Error);           // bins = 0
  Histogram h;
  h.bucket = {1};
  EXPECT_THROW(w.add_histogram("bad", h, 0), Error);
  EXPECT_THROW(w.add_hparams({}, {}), Error);
  EXPECT_THROW(w.add_hparams({{"x", std::nan("")}}, {}), Error);
  w.add_hparams({{"x", 1}}, {});
  EXPECT_THROW(w.add_hparams({{"x", 1}}, {}), Error);  // once per writer
  EXPECT_FALSE(w.failed());
}

// ---- histograms ----------------------------------------------------------------------------

TEST(TensorBoardHistogram, SmallInputExact) {
  const double inf = std::numeric_limits<double>::infinity();
  const auto t = torch::tensor({1.0, 2.0, 3.0, 4.0, std::nan(""), inf, -inf, 2.5}, torch::kDouble);
  const Histogram h = make_histogram(t, 3);
  EXPECT_EQ(h.num, 5);
  EXPECT_EQ(h.nonfinite, 3);
  EXPECT_EQ(h.min, 1.0);
  EXPECT_EQ(h.max, 4.0);
  EXPECT_EQ(h.sum, 12.5);
  EXPECT_EQ(h.sum_squares, 1 + 4 + 9 + 16 + 6.25);
  ASSERT_EQ(h.bucket_limit.size(), 3u);
  EXPECT_EQ(h.bucket_limit[0], 2.0);
  EXPECT_EQ(h.bucket_limit[1], 3.0);
  EXPECT_EQ(h.bucket_limit[2], DBL_MAX);
  // [1,2): 1   [2,3): 2, 2.5   [3,4]: 3, 4
  EXPECT_EQ(h.bucket, (std::vector<double>{1, 2, 2}));
}

TEST(TensorBoardHistogram, DegenerateInputs) {
  const Histogram empty = make_histogram(torch::zeros({0}));
  EXPECT_EQ(empty.num, 0);
  EXPECT_TRUE(empty.bucket.empty());
  const Histogram nonfinite = make_histogram(torch::tensor({NAN, INFINITY}));
  EXPECT_EQ(nonfinite.num, 0);
  EXPECT_EQ(nonfinite.nonfinite, 2);
  EXPECT_TRUE(nonfinite.bucket.empty());
  const Histogram constant = make_histogram(torch::full({7}, -2.5), 10);
  EXPECT_EQ(constant.num, 7);
  EXPECT_EQ(constant.min, -2.5);
  EXPECT_EQ(constant.max, -2.5);
  EXPECT_EQ(constant.bucket, (std::vector<double>{7}));
  EXPECT_EQ(constant.bucket_limit, (std::vector<double>{DBL_MAX}));
  const Histogram ints = make_histogram(torch::arange(10, torch::kLong), 5);  // integer dtype
  EXPECT_EQ(ints.sum, 45);
  EXPECT_EQ(ints.bucket, (std::vector<double>{2, 2, 2, 2, 2}));
  EXPECT_THROW(make_histogram(at::Tensor()), Error);
  EXPECT_THROW(make_histogram(torch::zeros({2}, torch::kComplexFloat)), Error);
}

TEST(TensorBoardHistogram, MatchesHistcOnRandomData) {
  torch::manual_seed(3);
  const auto t = torch::randn({20000}) * 3 + 1;
  const Histogram h = make_histogram(t.to(torch::kHalf).to(torch::kFloat), 30);
  const auto x = t.to(torch::kHalf).to(torch::kDouble);
  const auto ref = torch::histc(x, 30, x.min().item<double>(), x.max().item<double>());
  double total = 0;
  for (double c : h.bucket) total += c;
  EXPECT_EQ(total, h.num);
  EXPECT_EQ(h.num, 20000);
  ASSERT_EQ(h.bucket.size(), 30u);
  for (int i = 0; i < 30; ++i) EXPECT_NEAR(h.bucket[i], ref[i].item<double>(), 2) << i;  // edge rounding only
  EXPECT_NEAR(h.sum, x.sum().item<double>(), 1e-6);
  EXPECT_NEAR(h.sum_squares, (x * x).sum().item<double>(), 1e-3);
  for (std::size_t i = 1; i < h.bucket_limit.size(); ++i) EXPECT_LT(h.bucket_limit[i - 1], h.bucket_limit[i]);
  const Histogram half = make_histogram(t.to(torch::kHalf), 30);  // half input directly
  EXPECT_EQ(half.bucket, h.bucket);
}

TEST(TensorBoardHistogram, LargeTensorInSeveralChunks) {
  const std::int64_t n = 9'000'007;  // more than two chunks of 4M values
  auto t = torch::arange(n, torch::kFloat);
  t[5] = NAN;
  t[n - 1] = -INFINITY;
  const Histogram h = make_histogram(t, 9);
  EXPECT_EQ(h.num, n - 2);
  EXPECT_EQ(h.nonfinite, 2);
  EXPECT_EQ(h.min, 0);
  EXPECT_EQ(h.max, n - 2);
  const double m = static_cast<double>(n - 2);  // values 0..n-2 without 5
  EXPECT_EQ(h.sum, m * (m + 1) / 2 - 5);
  EXPECT_NEAR(h.sum_squares, m * (m + 1) * (2 * m + 1) / 6 - 25, 1e-12 * h.sum_squares);
  double total = 0;
  for (double c : h.bucket) total += c;
  EXPECT_EQ(total, h.num);
  const double width = m / 9;  // bucket i holds floor(i * width) .. below (i + 1) * width
  for (int i = 0; i < 9; ++i) {
    const double first = std::ceil(i * width), next = i == 8 ? m + 1 : std::ceil((i + 1) * width);
    EXPECT_NEAR(h.bucket[static_cast<std::size_t>(i)], next - first - (first <= 5 && 5 < next ? 1 : 0), 1) << i;
  }
}

TEST(TensorBoardHistogram, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(5);
  auto t = torch::randn({100000});
  t[7] = NAN;
  t[9] = INFINITY;
  const Histogram cpu = make_histogram(t, 30);
  const Histogram gpu = make_histogram(t.to(torch::kCUDA), 30);
  EXPECT_EQ(gpu.num, cpu.num);
  EXPECT_EQ(gpu.nonfinite, 2);
  EXPECT_EQ(gpu.min, cpu.min);
  EXPECT_EQ(gpu.max, cpu.max);
  EXPECT_EQ(gpu.bucket, cpu.bucket);
  EXPECT_NEAR(gpu.sum, cpu.sum, 1e-9 * std::abs(cpu.sum_squares));
  EXPECT_NEAR(gpu.sum_squares, cpu.sum_squares, 1e-9 * cpu.sum_squares);
  // Images from the device too.
  const fs::path dir = testing::temp_dir("tb_cuda");
  fs::path file;
  {
    EventWriter w(dir);
    file = w.path();
    w.add_image("img", torch::rand({4, 3, 8, 8}, torch::kCUDA), 0);
  }
  EXPECT_EQ(read_events(file).size(), 2u);
}

// ---- images --------------------------------------------------------------------------------

TEST(TensorBoardImage, TensorImagesAreEncodedAsPng) {
  const fs::path dir = testing::temp_dir("tb_images");
  fs::path file;
  {
    EventWriter w(dir);
    file = w.path();
    w.add_image("clamped", torch::tensor({-0.5, 0.0, 0.5, 1.0, 1.5, 0.25}).reshape({1, 2, 3}), 3);
    w.add_image("u8", torch::arange(12, torch::kByte).reshape({3, 4}), 4);
  }
  const auto events = read_events(file);
  ASSERT_EQ(events.size(), 3u);
  const auto& a = events[1].summary().value(0).image();
  EXPECT_EQ(a.height(), 2);
  EXPECT_EQ(a.width(), 3);
  EXPECT_EQ(a.colorspace(), 1);
  const DecodedPng da = decode_png(a.encoded_image_string());
  EXPECT_EQ(da.pixels, (std::vector<std::uint8_t>{0, 0, 128, 255, 255, 64}));
  const DecodedPng db = decode_png(events[2].summary().value(0).image().encoded_image_string());
  EXPECT_EQ(db.width, 4);
  EXPECT_EQ(db.height, 3);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(db.pixels[static_cast<std::size_t>(i)], i);
}

// ---- the reference test: TensorBoard's own reader ------------------------------------------

std::vector<std::uint8_t> pattern(int n, int seed) {
  std::vector<std::uint8_t> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>((i * 29 + seed * 7) & 0xff);
  return v;
}

TEST(TensorBoardReference, TensorBoardReadsEverything) {
  const fs::path dir = testing::temp_dir("tb_reference");
  struct Scalar {
    std::string tag;
    std::int64_t step;
    double value;
  };
  const std::vector<Scalar> scalars = {
      {"train/loss", 0, 2.302585},
      {"train/loss", 1, 1.5},
      {"train/loss", 1000, 0.125},
      {"train/loss", std::int64_t{1} << 40, 1e-3},
      {"val/accuracy", 0, 0.1},
      {"val/accuracy", 1, 0.9375},
      {"val/loss", 1, -3.75},
      {"tiny", 7, 1e-30},
      {"tiny", 8, 1e-40 /* float32 subnormal */},
  };
  const auto hist_values = torch::tensor({-1.0, 0.0, 0.5, 1.0, 2.0, 3.0, 3.0, std::nan(""), HUGE_VAL, 7.0});
  const Histogram hist = make_histogram(hist_values, 4);
  const int gh = 5, gw = 4, rh = 3, rw = 6;
  const auto gray = pattern(gh * gw, 1);
  const auto rgb = pattern(rh * rw * 3, 2);
  const int bn = 5, bc = 3, bh = 4, bw = 6;
  const auto batch_bytes = torch::randint(0, 256, {bn, bc, bh, bw}, torch::kLong);
  const auto batch = batch_bytes.to(torch::kFloat) / 255.0;  // exact after *255 and rounding
  const std::string text = "# Notes\n**bold** and `code`, \xc3\xbc\nsecond line";

  fs::path file;
  {
    EventWriter w(dir);
    file = w.path();
    for (const auto& s : scalars) w.add_scalar(s.tag, s.value, s.step);
    w.add_histogram("weights", hist, 10);
    w.add_histogram("weights", torch::arange(6, torch::kFloat), 20, 3);
    w.add_image("gray", gray.data(), gh, gw, 1, 5);
    w.add_image("rgb", rgb.data(), rh, rw, 3, 6);
    w.add_image("batch", batch, 7);
    w.add_text("notes", text, 2);
    w.add_hparams({{"lr", 0.001}, {"optimizer", "adam"}, {"augment", true}, {"batch_size", 64}},
                  {"val/accuracy", "val/loss"});
  }
  const json out = json::parse(testing::run_python("tests/reference/tensorboard_read.py", {dir.string()}));
  SCOPED_TRACE(out.dump().substr(0, 2000));

  EXPECT_EQ(out["files"], json::array({file.filename().string()}));
  EXPECT_EQ(out["file_version"], 2.0);  // EventAccumulator parses "brain.Event:2"

  // Scalars: float32 values, int64 steps, in order, per tag.
  std::map<std::string, std::vector<const Scalar*>> by_tag;
  for (const auto& s : scalars) by_tag[s.tag].push_back(&s);
  ASSERT_EQ(out["scalars"].size(), by_tag.size());
  for (const auto& [tag, list] : by_tag) {
    const json& got = out["scalars"][tag];
    ASSERT_EQ(got.size(), list.size()) << tag;
    for (std::size_t i = 0; i < list.size(); ++i) {
      EXPECT_EQ(got[i]["step"].get<std::int64_t>(), list[i]->step) << tag;
      EXPECT_EQ(got[i]["value"].get<double>(), static_cast<double>(static_cast<float>(list[i]->value))) << tag;
    }
  }

  // Histograms.
  const json& hs = out["histograms"]["weights"];
  ASSERT_EQ(hs.size(), 2u);
  EXPECT_EQ(hs[0]["step"], 10);
  EXPECT_EQ(hs[0]["min"].get<double>(), -1.0);
  EXPECT_EQ(hs[0]["max"].get<double>(), 7.0);
  EXPECT_EQ(hs[0]["num"].get<double>(), 8.0);
  EXPECT_EQ(hs[0]["sum"].get<double>(), 15.5);
  EXPECT_EQ(hs[0]["sum_squares"].get<double>(), 1 + 0.25 + 1 + 4 + 9 + 9 + 49);
  // width 2: [-1,1): -1, 0, 0.5   [1,3): 1, 2   [3,5): 3, 3   [5,7]: 7
  EXPECT_EQ(hs[0]["bucket"], json::array({3.0, 2.0, 2.0, 1.0}));
  EXPECT_EQ(hs[0]["bucket_limit"], json::array({1.0, 3.0, 5.0, DBL_MAX}));
  EXPECT_EQ(hs[1]["step"], 20);
  EXPECT_EQ(hs[1]["bucket"], json::array({2.0, 2.0, 2.0}));
  // The TensorBoard server's view (data_compat migration): [left, right, count] with min/max ends.
  const json& served = out["served_histograms"]["weights"];
  ASSERT_EQ(served.size(), 2u);
  EXPECT_EQ(served[0]["buckets"], json::parse("[[-1,1,3],[1,3,2],[3,5,2],[5,7,1]]"));

  // Images, decoded by Pillow.
  const json& img = out["images"];
  ASSERT_EQ(img["gray"].size(), 1u);
  EXPECT_EQ(img["gray"][0]["step"], 5);
  EXPECT_EQ(img["gray"][0]["width"], gw);
  EXPECT_EQ(img["gray"][0]["height"], gh);
  EXPECT_EQ(img["gray"][0]["mode"], "L");
  EXPECT_EQ(img["gray"][0]["shape"], json::array({gh, gw}));
  EXPECT_EQ(img["gray"][0]["pixels"].get<std::vector<int>>(), std::vector<int>(gray.begin(), gray.end()));
  EXPECT_EQ(img["rgb"][0]["mode"], "RGB");
  EXPECT_EQ(img["rgb"][0]["shape"], json::array({rh, rw, 3}));
  EXPECT_EQ(img["rgb"][0]["pixels"].get<std::vector<int>>(), std::vector<int>(rgb.begin(), rgb.end()));
  // The batch: 3 columns x 2 rows of 4x6 cells, 2-pixel black padding.
  const int p = 2, cols = 3, rows = 2, gh2 = rows * (bh + p) + p, gw2 = cols * (bw + p) + p;
  std::vector<int> grid(static_cast<std::size_t>(gh2 * gw2 * bc), 0);
  const auto bb = batch_bytes.accessor<std::int64_t, 4>();
  for (int n = 0; n < bn; ++n)
    for (int c = 0; c < bc; ++c)
      for (int y = 0; y < bh; ++y)
        for (int x = 0; x < bw; ++x) {
          const int gy = p + (n / cols) * (bh + p) + y, gx = p + (n % cols) * (bw + p) + x;
          grid[static_cast<std::size_t>((gy * gw2 + gx) * bc + c)] = static_cast<int>(bb[n][c][y][x]);
        }
  EXPECT_EQ(img["batch"][0]["width"], gw2);
  EXPECT_EQ(img["batch"][0]["height"], gh2);
  EXPECT_EQ(img["batch"][0]["shape"], json::array({gh2, gw2, bc}));
  EXPECT_EQ(img["batch"][0]["pixels"].get<std::vector<int>>(), grid);

  // Text.
  ASSERT_EQ(out["texts"]["notes"].size(), 1u);
  EXPECT_EQ(out["texts"]["notes"][0]["step"], 2);
  EXPECT_EQ(out["texts"]["notes"][0]["text"], text);

  // Hyper-parameters, parsed with the hparams plugin's own protobufs.
  const json& hp = out["hparams"];
  const json& exp = hp["_hparams_/experiment"]["experiment"];
  std::map<std::string, std::string> types;
  for (const auto& info : exp["hparam_infos"]) types[info["name"]] = info["type"];
  EXPECT_EQ(types, (std::map<std::string, std::string>{{"augment", "DATA_TYPE_BOOL"},
                                                       {"batch_size", "DATA_TYPE_FLOAT64"},
                                                       {"lr", "DATA_TYPE_FLOAT64"},
                                                       {"optimizer", "DATA_TYPE_STRING"}}));
  EXPECT_EQ(exp["metric_infos"], json::parse(R"([{"name": {"tag": "val/accuracy"}}, {"name": {"tag": "val/loss"}}])"));
  EXPECT_EQ(hp["_hparams_/session_start_info"]["session_start_info"]["hparams"],
            json::parse(R"({"lr": 0.001, "optimizer": "adam", "augment": true, "batch_size": 64.0})"));
  EXPECT_EQ(hp["_hparams_/session_end_info"]["session_end_info"]["status"], "STATUS_SUCCESS");
  // TensorBoard's hparams backend lists the session with its values and metrics.
  const json& backend = out["hparams_backend"];
  EXPECT_EQ(backend["metric_tags"], json::array({"val/accuracy", "val/loss"}));
  ASSERT_EQ(backend["sessions"].size(), 1u);
  EXPECT_EQ(backend["sessions"][0]["status"], "STATUS_SUCCESS");
  EXPECT_EQ(backend["sessions"][0]["hparams"]["optimizer"], "adam");
  EXPECT_EQ(backend["sessions"][0]["hparams"]["augment"], true);
  EXPECT_EQ(backend["sessions"][0]["metrics"]["val/loss"], -3.75);
  EXPECT_EQ(backend["sessions"][0]["metrics"]["val/accuracy"], 0.9375);

  // Every tag lands in the plugin the TensorBoard server would show it with.
  const json& plugins = out["plugin_tags"];
  EXPECT_EQ(plugins["scalars"], json::array({"tiny", "train/loss", "val/accuracy", "val/loss"}));
  EXPECT_EQ(plugins["histograms"], json::array({"weights"}));
  EXPECT_EQ(plugins["images"], json::array({"batch", "gray", "rgb"}));
  EXPECT_EQ(plugins["text"], json::array({"notes"}));
  EXPECT_EQ(plugins["hparams"],
            json::array({"_hparams_/experiment", "_hparams_/session_end_info", "_hparams_/session_start_info"}));
}

}  // namespace
}  // namespace glassbox::inspect
