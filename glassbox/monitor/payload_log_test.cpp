#include "glassbox/monitor/payload_log.h"

#include <sys/resource.h>

#include <csignal>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/testing/testing.h"

namespace glassbox::monitor {
namespace {

namespace fs = std::filesystem;

PayloadTensor fp32(const std::string& name, std::int64_t rows, std::int64_t cols, float first) {
  auto v = std::make_shared<std::vector<float>>();
  for (std::int64_t i = 0; i < rows * cols; ++i) v->push_back(first + static_cast<float>(i));
  PayloadTensor t;
  t.name = name;
  t.datatype = "FP32";
  t.shape = {rows, cols};
  RawTensor r;
  r.type = ElementType::kFp32;
  r.shape = t.shape;
  r.data = reinterpret_cast<const std::uint8_t*>(v->data());
  r.size = v->size() * sizeof(float);
  r.owner = v;
  t.data = r;
  return t;
}

PayloadRecord record(int i) {
  PayloadRecord r;
  r.model = "m";
  r.version = 1;
  r.id = "req-" + std::to_string(i);
  r.latency_ms = 1.5;
  r.inputs.push_back(fp32("INPUT__0", 2, 8, static_cast<float>(100 * i)));
  r.outputs.push_back(fp32("OUTPUT__0", 2, 3, static_cast<float>(-i)));
  PayloadTensor text;
  text.name = "TEXT";
  text.datatype = "BYTES";
  text.shape = {2};
  r.inputs.push_back(text);
  return r;
}

std::vector<fs::path> segments(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir / "m" / "1")) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::uint64_t bytes_under(const fs::path& dir) {
  std::uint64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) n += e.file_size();
  return n;
}

// Records land in segments of about segment_bytes; past max_bytes the oldest segments go, the
// newest records stay; numpy reads every tensor file with as many rows as records.jsonl says.
TEST(PayloadLog, RotatesAndKeepsUnderItsCap) {
  const fs::path dir = testing::temp_dir("payload_rotate");
  {
    PayloadLogger log({.dir = dir, .segment_bytes = 4096, .max_bytes = 16384});
    for (int i = 0; i < 200; ++i) log.offer(record(i));
    log.flush();
    const auto st = log.stats();
    EXPECT_EQ(st.records, 200);
    EXPECT_EQ(st.dropped_error, 0);
    EXPECT_GT(st.segments_deleted, 0);
    EXPECT_EQ(st.bytes, bytes_under(dir));
    EXPECT_LE(st.bytes, 16384u);
  }
  const auto segs = segments(dir);
  ASSERT_GE(segs.size(), 3u);
  EXPECT_EQ(segs.front().filename().string().substr(0, 4), "seg-");
  std::vector<std::string> lines;
  {
    std::istringstream in(read_file(segs.back() / "records.jsonl"));
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  ASSERT_FALSE(lines.empty());
  const auto last = nlohmann::json::parse(lines.back());
  EXPECT_EQ(last["id"], "req-199");
  EXPECT_EQ(last["inputs"][1]["name"], "TEXT");
  EXPECT_FALSE(last["inputs"][1].contains("file"));  // BYTES: described, not stored
  const auto rows = last["inputs"][0]["rows"];
  EXPECT_EQ(rows[1].get<int>() - rows[0].get<int>(), 2);
  // numpy reads the segment's input file: 2 rows a record, the last record's values at its rows.
  const std::string values =
      testing::run_python("tests/reference/print_npy.py", {(segs.back() / "INPUT__0.npy").string()});
  const auto parsed = nlohmann::json::parse(values);
  ASSERT_EQ(parsed.size(), 2 * lines.size());
  EXPECT_EQ(parsed[rows[0].get<std::size_t>()][0], 19900.0);
  EXPECT_EQ(parsed.back().size(), 8u);
}

// A folder that cannot be made: every record is dropped and counted, nothing throws.
TEST(PayloadLog, AnUnwritableFolderDropsAndCounts) {
  const fs::path base = testing::temp_dir("payload_unwritable");
  write_file_atomic(base / "a-file", "not a folder");
  PayloadLogger log({.dir = base / "a-file" / "logs"});
  for (int i = 0; i < 5; ++i) log.offer(record(i));
  log.flush();
  const auto st = log.stats();
  EXPECT_EQ(st.records, 0);
  EXPECT_EQ(st.dropped_error, 5);
  EXPECT_FALSE(st.last_error.empty());
}

// A full disk, as the kernel reports it when a file may not grow (RLIMIT_FSIZE: EFBIG): the records
// that fit are written, the rest are dropped and counted; once there is room again, writing resumes.
TEST(PayloadLog, AFullDiskDegradesToCountedDrops) {
  const fs::path dir = testing::temp_dir("payload_full");
  PayloadLogger log({.dir = dir, .segment_bytes = 1 << 20, .max_bytes = 1 << 24});
  rlimit before{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &before), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = before;
  small.rlim_cur = 3000;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  for (int i = 0; i < 100; ++i) log.offer(record(i));
  log.flush();
  setrlimit(RLIMIT_FSIZE, &before);
  std::signal(SIGXFSZ, old_handler);
  auto st = log.stats();
  EXPECT_GT(st.records, 0);
  EXPECT_GT(st.dropped_error, 0);
  EXPECT_EQ(st.records + st.dropped_error, 100);
  log.offer(record(100));
  log.flush();
  EXPECT_EQ(log.stats().records, st.records + 1);
}

TEST(PayloadLog, BadOptionsAreNamed) {
  EXPECT_THROW(PayloadLogger({.dir = "x", .sample_rate = 0}), Error);
  EXPECT_THROW(PayloadLogger({.dir = "x", .segment_bytes = 10}), Error);
  EXPECT_THROW(PayloadLogger({.dir = "x", .segment_bytes = 1 << 20, .max_bytes = 1 << 10}), Error);
}

}  // namespace
}  // namespace glassbox::monitor
