#include "glassbox/monitor/drift_stats.h"

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "glassbox/base/error.h"
#include "glassbox/testing/testing.h"

namespace glassbox::monitor {
namespace {

using nlohmann::json;

// Relative agreement, with an absolute floor for values that are exactly 0 on one side.
void expect_close(double ours, double theirs, const std::string& what, double rel = 1e-9) {
  const double tol = rel * std::max(std::abs(theirs), 1e-300);
  EXPECT_LE(std::abs(ours - theirs), tol) << what << ": glassbox " << ours << ", scipy " << theirs;
}

std::vector<double> doubles(const json& j) { return j.get<std::vector<double>>(); }

// Every statistic against scipy 1.17 on seeded data: samples of 1 to 15 000 values (the exact and
// the asymptotic KS p-value), ties, equal and coprime sizes, identical and fully separated samples,
// a constant reference; kstwo.sf on each of its computing regimes.
TEST(DriftReference, EqualsScipy) {
  const json ref = json::parse(testing::run_python("tests/reference/drift_ref.py"));
  ASSERT_GE(ref["samples"].size(), 6u);
  for (const auto& [name, s] : ref["samples"].items()) {
    SCOPED_TRACE(name);
    const std::vector<double> a = doubles(s["a"]), b = doubles(s["b"]);
    const KsResult ks = ks_2samp(a, b);
    EXPECT_EQ(ks.method, s["ks_method"].get<std::string>());
    expect_close(ks.statistic, s["ks_statistic"].get<double>(), "KS statistic");
    expect_close(ks.pvalue, s["ks_pvalue"].get<double>(), "KS p-value");
    const KsResult swapped = ks_2samp(b, a);  // the two-sided test is symmetric
    EXPECT_EQ(swapped.statistic, ks.statistic);
    expect_close(swapped.pvalue, ks.pvalue, "KS p-value, samples swapped", 1e-12);
    expect_close(wasserstein_1d(a, b), s["wasserstein"].get<double>(), "Wasserstein");
    expect_close(wasserstein_normed(a, b), s["wasserstein_normed"].get<double>(), "normed Wasserstein");
  }
  for (const auto& k : ref["kolmogorov"]) {
    const auto n = k["n"].get<std::int64_t>();
    const double x = k["x"].get<double>();
    expect_close(kolmogorov_sf(n, x), k["sf"].get<double>(),
                 "kstwo.sf(" + std::to_string(x) + ", " + std::to_string(n) + ")");
  }
  ASSERT_GE(ref["tables"].size(), 6u);
  for (const auto& [name, t] : ref["tables"].items()) {
    SCOPED_TRACE(name);
    const Chi2Result r = chi2_contingency(t["table"].get<std::vector<std::vector<double>>>());
    EXPECT_EQ(r.dof, t["dof"].get<std::int64_t>());
    expect_close(r.statistic, t["statistic"].get<double>(), "chi-square statistic");
    expect_close(r.pvalue, t["pvalue"].get<double>(), "chi-square p-value");
  }
  ASSERT_GE(ref["distributions"].size(), 6u);
  for (const auto& [name, d] : ref["distributions"].items()) {
    SCOPED_TRACE(name);
    expect_close(jensenshannon(doubles(d["p"]), doubles(d["q"])), d["distance"].get<double>(), "Jensen-Shannon");
  }
}

// The incomplete gamma function behind chi2.sf, at values known in closed form: Q(1, x) = e^-x,
// Q(1/2, x) = erfc(sqrt(x)), on both sides of the series / continued-fraction switch.
TEST(DriftStats, GammaQMatchesClosedForms) {
  for (double x : {0.0, 1e-6, 0.3, 1.9, 2.1, 10.0, 50.0, 700.0}) {
    EXPECT_NEAR(gamma_q(1.0, x), std::exp(-x), 1e-15 * std::max(1.0, std::exp(-x))) << x;
    const double erfc = std::erfc(std::sqrt(x));
    EXPECT_LE(std::abs(gamma_q(0.5, x) - erfc), 1e-12 * std::max(erfc, 1e-300)) << x;
  }
}

// PSI on a case worked by hand, Evidently's way: the bins are the four values seen; the shares
// that are 0 become 1e-4 (the smallest non-zero share, 0.25, is above 1e-4).
TEST(DriftStats, PsiFollowsEvidentlysBinsAndZeroFill) {
  const std::vector<double> ref{1, 2, 2, 3}, cur{1, 1, 3, 4};
  const double expected =
      (0.25 - 0.5) * std::log(0.25 / 0.5) + (0.5 - 1e-4) * std::log(0.5 / 1e-4) + (1e-4 - 0.25) * std::log(1e-4 / 0.25);
  EXPECT_NEAR(psi(ref, cur), expected, 1e-12);  // 3 distinct reference values: one bin per value
  EXPECT_NEAR(psi(ref, cur, true), expected, 1e-12);
  // More than 20 distinct values: Sturges bins over both samples; the same sample gives 0, and
  // a window moved by a fifth of the range crosses Evidently's threshold of 0.1.
  std::vector<double> grid, moved;
  for (int i = 0; i < 100; ++i) {
    grid.push_back(i / 100.0);
    moved.push_back(i / 100.0 + 0.2);
  }
  EXPECT_EQ(psi(grid, grid), 0.0);
  EXPECT_GT(psi(grid, moved), 0.1);
}

TEST(DriftStats, BadInputIsNamed) {
  const std::vector<double> empty, one{1.0}, nan{1.0, std::nan("")};
  EXPECT_THROW(ks_2samp(empty, one), Error);
  EXPECT_THROW(ks_2samp(one, nan), Error);
  EXPECT_THROW(wasserstein_1d(one, empty), Error);
  try {
    chi2_contingency({{1, 0}, {2, 0}});
    FAIL() << "a column of zeros was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.one_line().find("expected frequency at row 0, column 1 is zero"), std::string::npos) << e.one_line();
  }
  EXPECT_THROW(chi2_contingency({{1, 2}, {3}}), Error);
  EXPECT_THROW(chi2_contingency({{1, -2}, {3, 4}}), Error);
  EXPECT_THROW(jensenshannon(one, std::vector<double>{1.0, 2.0}), Error);
  EXPECT_THROW(kolmogorov_sf(0, 0.5), Error);
}

}  // namespace
}  // namespace glassbox::monitor
