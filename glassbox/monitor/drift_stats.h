// Two-sample statistics for drift: how far a window of served inputs or outputs is from the
// reference profile of the training data. Each follows the implementation practitioners check
// against, to the last digits (monitor_test's DriftReference.* compares within 1e-9 relative):
//
//   ks_2samp         scipy.stats.ks_2samp (two-sided, method="auto"): the statistic, and the
//                    p-value from the exact null distribution (lattice-path counting) up to 10 000
//                    values a side, else from the one-sample distribution of D at the effective
//                    size m n / (m + n) (kolmogorov_sf, as scipy.stats.kstwo.sf)
//   wasserstein_1d   scipy.stats.wasserstein_distance; wasserstein_normed divides by the
//                    reference's standard deviation (at least 0.001), as Evidently's
//                    "wasserstein" drift test
//   psi              the population stability index as Evidently 0.7's "psi" drift test computes
//                    it (Sturges bins over both samples; empty bins filled with a tiny share)
//   chi2_contingency scipy.stats.chi2_contingency (Pearson, Yates' correction when dof = 1)
//   jensenshannon    scipy.spatial.distance.jensenshannon (the distance: the square root of the
//                    divergence, natural logarithm)
//
//   KsResult r = ks_2samp(reference_values, window_values);
//   if (r.pvalue < 0.05 / n_features) ...   // Bonferroni over the features
//
// Torch-free; allocates sorted copies, a lattice column and the Durbin matrices. Thread safety: pure
// functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace glassbox::monitor {

struct KsResult {
  double statistic = 0;  // sup |F_a - F_b|, the two empirical CDFs
  double pvalue = 1;     // two-sided
  std::string method;    // "exact" or "asymp"
};

// Two-sided two-sample Kolmogorov-Smirnov test. Samples must be non-empty and free of NaN
// (InvalidArgument otherwise). As scipy's method="auto": exact when neither sample exceeds
// 10 000 values (and the exact computation succeeds), else asymptotic.
// kAuto: scipy's "auto" (exact up to 10 000 values a side); kAsymp: scipy's "asymp" (Smirnov's
// limit at any size: what a server uses on every window, where the exact count costs milliseconds).
enum class KsMethod { kAuto, kAsymp };
KsResult ks_2samp(std::span<const double> a, std::span<const double> b, KsMethod method = KsMethod::kAuto);

// Pr(D_n >= x) for the two-sided one-sample Kolmogorov-Smirnov statistic D_n (scipy.stats.kstwo.sf):
// exact where it is cheap (Ruben-Gambino's end formulas, twice the one-sided Smirnov tail, the
// Durbin matrix as Marsaglia, Tsang and Wang compute it), Pelz and Good's expansion for large n.
double kolmogorov_sf(std::int64_t n, double x);

// The first Wasserstein distance between the two empirical distributions.
double wasserstein_1d(std::span<const double> u, std::span<const double> v);
// wasserstein_1d(reference, current) / max(std(reference), 0.001) (population std).
double wasserstein_normed(std::span<const double> reference, std::span<const double> current);

// PSI = sum_b (r_b - c_b) ln(r_b / c_b) over the shares r (reference) and c (current) of each
// bin. A numerical feature whose reference holds more than 20 distinct values is binned as
// numpy's histogram with bins="sturges" over both samples together; otherwise (or with
// `categorical`) each distinct value is a bin. A share of 0 becomes 1e-4, or the smallest non-zero
// share / 1e6 when that is at most 1e-4. Evidently's threshold for drift: PSI >= 0.1.
double psi(std::span<const double> reference, std::span<const double> current, bool categorical = false);

struct Chi2Result {
  double statistic = 0;
  double pvalue = 1;
  std::int64_t dof = 0;
  std::vector<double> expected;  // row-major, as the table
};

// Pearson's chi-square test of independence on a rows x cols table of counts (row-major). With
// one degree of freedom Yates' continuity correction applies (scipy's correction=True, the
// default). InvalidArgument for a ragged or negative table or a zero expected frequency (a row
// or column of zeros: drop it first).
Chi2Result chi2_contingency(const std::vector<std::vector<double>>& table);

// The Jensen-Shannon distance between two distributions (each normalised to sum 1 first).
double jensenshannon(std::span<const double> p, std::span<const double> q);

// Regularised upper incomplete gamma function Q(a, x) = Gamma(a, x) / Gamma(a); chi2.sf(x, k) is
// Q(k / 2, x / 2).
double gamma_q(double a, double x);

}  // namespace glassbox::monitor
