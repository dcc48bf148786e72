#include "glassbox/monitor/profile.h"

#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/testing/testing.h"

namespace glassbox::monitor {
namespace {

namespace fs = std::filesystem;

Reference small_reference() {
  Reference r;
  r.features.push_back(ReferenceSample::of("brightness", {0.5, 0.25, 0.75, 0.125}));
  r.features.push_back(ReferenceSample::of("contrast", {2.0, 1.0, 3.0}, 2));
  r.confidence = ReferenceSample::of("confidence", {0.9, 0.6, 0.99});
  r.predicted_share = {0.25, 0.75};
  r.predictions = 3;
  return r;
}

void expect_same(const ReferenceSample& a, const ReferenceSample& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.values, b.values);
  EXPECT_EQ(a.min, b.min);
  EXPECT_EQ(a.max, b.max);
  EXPECT_EQ(a.mean, b.mean);
  EXPECT_EQ(a.std, b.std);
  EXPECT_EQ(a.count, b.count);
}

// Written and read back bit for bit; numpy reads profile.npy as the samples one after another.
TEST(Profile, RoundTripsAndNumpyReadsTheSamples) {
  const fs::path dir = testing::temp_dir("profile_roundtrip");
  const Reference r = small_reference();
  write_reference(dir, r);
  const Reference back = read_reference(dir);
  ASSERT_EQ(back.features.size(), 2u);
  expect_same(back.features[0], r.features[0]);
  expect_same(back.features[1], r.features[1]);
  expect_same(back.confidence, r.confidence);
  EXPECT_EQ(back.predicted_share, r.predicted_share);
  EXPECT_EQ(back.predictions, 3);
  const std::string out = testing::run_python("tests/reference/print_npy.py", {(dir / "profile.npy").string()});
  EXPECT_EQ(out, "[0.125, 0.25, 0.5, 0.75, 1.0, 3.0, 0.6, 0.9, 0.99]\n");
}

TEST(Profile, DamagedFilesAreNamed) {
  const fs::path dir = testing::temp_dir("profile_damaged");
  auto code_of = [&] {
    try {
      read_reference(dir);
    } catch (const Error& e) {
      return std::make_pair(e.code(), e.one_line());
    }
    return std::make_pair(ErrorCode::kInternal, std::string("no error"));
  };
  auto [code, line] = code_of();
  EXPECT_EQ(code, ErrorCode::kNotFound) << line;
  write_reference(dir, small_reference());
  const std::string json_text = read_file(dir / "profile.json"), npy = read_file(dir / "profile.npy");
  write_file_atomic(dir / "profile.npy", npy.substr(0, npy.size() - 8));  // one value short
  std::tie(code, line) = code_of();
  EXPECT_EQ(code, ErrorCode::kDataLoss);
  EXPECT_NE(line.find("announces 9 values, the file holds 8"), std::string::npos) << line;
  write_file_atomic(dir / "profile.npy", npy);
  nlohmann::json j = nlohmann::json::parse(json_text);
  j["features"][1]["offset"] = 8;  // past the end
  write_file_atomic(dir / "profile.json", j.dump());
  std::tie(code, line) = code_of();
  EXPECT_EQ(code, ErrorCode::kDataLoss);
  EXPECT_NE(line.find("the sample of contrast"), std::string::npos) << line;
  j = nlohmann::json::parse(json_text);
  j["format"] = 99;
  write_file_atomic(dir / "profile.json", j.dump());
  std::tie(code, line) = code_of();
  EXPECT_EQ(code, ErrorCode::kFailedPrecondition) << line;
  write_file_atomic(dir / "profile.json", "{not json");
  std::tie(code, line) = code_of();
  EXPECT_EQ(code, ErrorCode::kDataLoss) << line;
}

}  // namespace
}  // namespace glassbox::monitor
