#include "glassbox/monitor/columns.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/monitor/drift_stats.h"
#include "glassbox/testing/testing.h"

namespace glassbox::monitor {
namespace {

namespace fs = std::filesystem;

TEST(Columns, RadixSortOrdersLikeStdSort) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0, 1000);
  std::vector<float> v(100000);
  for (float& x : v) x = d(rng);
  v[5] = -0.0f;
  v[6] = 0.0f;
  v[7] = std::numeric_limits<float>::infinity();
  v[8] = -std::numeric_limits<float>::infinity();
  std::vector<float> want = v;
  std::sort(want.begin(), want.end());
  radix_sort(v);
  for (std::size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], want[i]) << i;
}

// A CSV pair read in two chunks: the values, missing fields, integer columns; the verdicts follow
// the reference's size as Evidently's defaults do.
TEST(Columns, ReadsCsvAndChoosesTheTestsBySize) {
  const fs::path dir = testing::temp_dir("columns_csv");
  std::mt19937 rng(9);
  std::normal_distribution<double> d(0, 1);
  std::string ref = "a,b,level\n", cur = "a,b,level\n";
  for (int i = 0; i < 3000; ++i) {
    ref += std::to_string(d(rng)) + "," + std::to_string(d(rng)) + "," + std::to_string(i % 4) + "\n";
    cur += std::to_string(d(rng) + 0.5) + "," + (i % 100 == 0 ? std::string("") : std::to_string(d(rng))) + "," +
           std::to_string(i % 3 == 0 ? 3 : i % 2) + "\n";
  }
  write_file_atomic(dir / "ref.csv", ref);
  write_file_atomic(dir / "cur.csv", cur);
  Columns r = read_csv_columns(dir / "ref.csv", 2);
  Columns c = read_csv_columns(dir / "cur.csv", 2);
  ASSERT_EQ(r.names, (std::vector<std::string>{"a", "b", "level"}));
  EXPECT_EQ(r.rows, 3000);
  EXPECT_EQ(c.missing, 30);
  EXPECT_EQ(c.values[1].size(), 2970u);
  EXPECT_FALSE(r.integer_text[0]);
  EXPECT_TRUE(r.integer_text[2]);
  const std::vector<double> a_ref(r.values[0].begin(), r.values[0].end()),
      a_cur(c.values[0].begin(), c.values[0].end());
  const std::vector<ColumnDrift> drift = compare_columns(r, c, {});
  ASSERT_EQ(drift.size(), 3u);
  EXPECT_EQ(drift[0].stattest, "wasserstein");
  EXPECT_TRUE(drift[0].drifted);
  EXPECT_NEAR(drift[0].wasserstein_normed, wasserstein_normed(a_ref, a_cur), 1e-12);
  EXPECT_NEAR(drift[0].ks_statistic, ks_2samp(a_ref, a_cur).statistic, 1e-12);
  EXPECT_FALSE(drift[1].drifted);
  EXPECT_TRUE(drift[2].categorical);
  EXPECT_EQ(drift[2].stattest, "jensenshannon");
  EXPECT_TRUE(drift[2].drifted);  // 4 levels evenly, then mostly 1 and 3
}

TEST(Columns, BadCsvIsNamedWithItsLine) {
  const fs::path dir = testing::temp_dir("columns_bad");
  write_file_atomic(dir / "bad.csv", "a,b\n1,2\n3,x\n");
  try {
    read_csv_columns(dir / "bad.csv", 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.one_line().find("bad.csv:3"), std::string::npos) << e.one_line();
    EXPECT_NE(e.one_line().find("'x'"), std::string::npos) << e.one_line();
  }
  write_file_atomic(dir / "short.csv", "a,b\n1,2\n3\n");
  EXPECT_THROW(read_csv_columns(dir / "short.csv", 2), Error);
  EXPECT_THROW(read_csv_columns(dir / "missing.csv", 2), Error);
}

}  // namespace
}  // namespace glassbox::monitor
