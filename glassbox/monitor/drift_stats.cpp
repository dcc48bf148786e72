// Tested by monitor_test (DriftReference.*: against scipy; DriftStats.*: errors and edge cases).
#include "glassbox/monitor/drift_stats.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>

#include "glassbox/base/error.h"

namespace glassbox::monitor {

namespace {

// `x` sorted: the input itself when it is sorted already (a kept reference sample, a window sorted
// once for its three tests), else a sorted copy in `storage`.
std::span<const double> sorted_view(std::span<const double> x, std::vector<double>& storage, const char* what) {
  GB_CHECK(!x.empty(), InvalidArgument, what << " is empty", "pass at least one value on each side");
  bool sorted = true, nan = std::isnan(x[0]);
  for (std::size_t i = 1; i < x.size(); ++i) {
    nan |= std::isnan(x[i]);
    sorted &= !(x[i] < x[i - 1]);
  }
  GB_CHECK(!nan, InvalidArgument, what << " holds NaN", "drop the non-finite values before testing");
  if (sorted) return x;
  storage.assign(x.begin(), x.end());
  std::sort(storage.begin(), storage.end());
  return storage;
}

// Pr(D >= h / n) for two samples of n each: 2 * sum_k (-1)^k C(2n, n - (k+1)h) / C(2n, n), in
// the nested form 2 * B0 (1 - B1 (1 - B2 (...))) where B_k is the ratio of consecutive terms,
// a product of h factors each below 1, so nothing overflows or cancels.
double prob_outside_square(std::int64_t n, std::int64_t h) {
  double p = 0.0;
  for (std::int64_t k = n / h; k >= 0; --k) {
    double ratio = 1.0;
    for (std::int64_t j = 0; j < h; ++j)
      ratio = static_cast<double>(n - k * h - j) * ratio / static_cast<double>(n + k * h + j + 1);
    p = ratio * (1.0 - p);
  }
  return 2.0 * p;
}

// Pr(D >= h / lcm(m, n)) for samples of m and n: the share of the monotone lattice paths from
// (0, 0) to (m, n) that leave the band |x n/g - y m/g| < h. b(x, y), the share of the paths to
// (x, y) that have left it, is 1 outside the band and inside follows
// b(x, y) = (x b(x-1, y) + y b(x, y-1)) / (x + y) (the binomial weights of the two
// predecessors). Carrying the share that left, not the one that stayed, keeps tiny p-values
// exact instead of the difference of two numbers near 1. One column at a time, over the band.
double prob_outside_band(std::int64_t m, std::int64_t n, std::int64_t g, std::int64_t h) {
  if (m < n) std::swap(m, n);  // symmetric; the columns run over the larger sample
  const std::int64_t mg = m / g, ng = n / g;
  std::vector<double> col(static_cast<std::size_t>(n + 1), 1.0);
  // Column x = 0: the paths straight up, inside while mg * y < h.
  for (std::int64_t y = 0; y <= n && mg * y < h; ++y) col[static_cast<std::size_t>(y)] = 0.0;
  // The band's rows move up with x (lo and hi never decrease): rows above it still hold their
  // initial 1, and only the rows it leaves are reset, so each column costs its band's height.
  std::int64_t prev_lo = 0;
  for (std::int64_t x = 1; x <= m; ++x) {
    // The rows inside the band at this column: ng x - h < mg y < ng x + h.
    const std::int64_t t = ng * x - h;
    const std::int64_t lo = t < 0 ? 0 : t / mg + 1;
    const std::int64_t hi = std::min<std::int64_t>(n, (ng * x + h - 1) / mg);
    if (hi < lo) return 1.0;  // the band has closed: every path leaves it
    for (std::int64_t y = prev_lo; y < lo; ++y) col[static_cast<std::size_t>(y)] = 1.0;
    prev_lo = lo;
    double below = 1.0;  // b(x, lo - 1): outside (its weight is 0 when lo = 0)
    for (std::int64_t y = lo; y <= hi; ++y) {
      const double left = col[static_cast<std::size_t>(y)];  // b(x - 1, y)
      below = (static_cast<double>(x) * left + static_cast<double>(y) * below) / static_cast<double>(x + y);
      col[static_cast<std::size_t>(y)] = below;
    }
  }
  return col[static_cast<std::size_t>(n)];
}

// The one-sided Smirnov tail Pr(D_n^+ >= d) = d sum_{j <= n(1-d)} C(n, j) (1 - d - j/n)^(n-j)
// (d + j/n)^(j-1), summed in log space from its largest term (exact, as scipy.special.smirnov).
double smirnov_sf(std::int64_t n, double d) {
  if (d <= 0) return 1.0;
  if (d >= 1) return 0.0;
  const double nn = static_cast<double>(n);
  const auto jmax = static_cast<std::int64_t>(std::floor(nn * (1.0 - d)));
  const double lg_n = std::lgamma(nn + 1.0), log_d = std::log(d);
  std::vector<double> logs;
  logs.reserve(static_cast<std::size_t>(jmax + 1));
  for (std::int64_t j = 0; j <= jmax; ++j) {
    const double jj = static_cast<double>(j), u = d + jj / nn;
    const double log_binom = lg_n - std::lgamma(jj + 1.0) - std::lgamma(nn - jj + 1.0);
    logs.push_back(log_binom + (nn - jj) * std::log1p(-u) + (jj - 1.0) * std::log(u) + log_d);
  }
  const double top = *std::max_element(logs.begin(), logs.end());
  if (!std::isfinite(top)) return 0.0;
  double sum = 0.0;
  for (double l : logs) sum += std::exp(l - top);
  return std::exp(top) * sum;
}

// log(n! / n^n).
double log_factorial_over_power(std::int64_t n) {
  const double nn = static_cast<double>(n);
  return std::lgamma(nn + 1.0) - nn * std::log(nn);
}

// Pr(D_n <= d) by Durbin's matrix: with n d = k - h (k an integer, 0 <= h < 1), it is
// n!/n^n times the (k, k) entry of H^n, H the (2k-1) x (2k-1) matrix of inverse factorials
// whose first column and last row carry the (1 - h^i)/i! corrections. The power is taken by
// squaring, the matrices rescaled by powers of two whose exponent is carried aside (Marsaglia,
// Tsang and Wang, 2003).
double durbin_cdf(std::int64_t n, double d) {
  if (d >= 1.0) return 1.0;
  const double nd = static_cast<double>(n) * d;
  if (nd <= 0.5) return 0.0;
  const auto k = static_cast<std::int64_t>(std::ceil(nd));
  const double h = static_cast<double>(k) - nd;
  const auto m = static_cast<std::size_t>(2 * k - 1);
  std::vector<double> inv_fact(m + 1, 1.0);
  for (std::size_t i = 1; i <= m; ++i) inv_fact[i] = inv_fact[i - 1] / static_cast<double>(i);
  using Matrix = std::vector<double>;  // row-major m x m
  Matrix hm(m * m, 0.0);
  for (std::size_t r = 0; r < m; ++r)
    for (std::size_t c = 0; c <= std::min(r + 1, m - 1); ++c) hm[r * m + c] = inv_fact[r + 1 - c];
  for (std::size_t r = 0; r < m; ++r) hm[r * m] = (1.0 - std::pow(h, static_cast<double>(r + 1))) * inv_fact[r + 1];
  for (std::size_t c = 0; c < m; ++c)
    hm[(m - 1) * m + c] = (1.0 - std::pow(h, static_cast<double>(m - c))) * inv_fact[m - c];
  hm[(m - 1) * m] = (1.0 - 2.0 * std::pow(h, static_cast<double>(m)) +
                     std::pow(std::max(2.0 * h - 1.0, 0.0), static_cast<double>(m))) *
                    inv_fact[m];
  auto multiply = [m](const Matrix& a, const Matrix& b) {
    Matrix out(m * m, 0.0);
    for (std::size_t r = 0; r < m; ++r)
      for (std::size_t t = 0; t < m; ++t) {
        const double v = a[r * m + t];
        if (v == 0.0) continue;
        for (std::size_t c = 0; c < m; ++c) out[r * m + c] += v * b[t * m + c];
      }
    return out;
  };
  auto rescale = [](Matrix& a, std::int64_t& exponent) {
    double top = 0.0;
    for (double v : a) top = std::max(top, std::abs(v));
    if (top > std::ldexp(1.0, 128)) {
      for (double& v : a) v = std::ldexp(v, -128);
      exponent += 128;
    }
  };
  Matrix power(m * m, 0.0);
  for (std::size_t i = 0; i < m; ++i) power[i * m + i] = 1.0;
  std::int64_t power_exp = 0, h_exp = 0;
  for (std::int64_t e = n; e > 0; e /= 2) {
    if (e % 2 != 0) {
      power = multiply(power, hm);
      power_exp += h_exp;
      rescale(power, power_exp);
    }
    if (e / 2 > 0) {
      hm = multiply(hm, hm);
      h_exp *= 2;
      rescale(hm, h_exp);
    }
  }
  const double entry = power[static_cast<std::size_t>(k - 1) * m + static_cast<std::size_t>(k - 1)];
  if (entry <= 0.0) return 0.0;
  return std::exp(std::log(entry) + static_cast<double>(power_exp) * std::log(2.0) + log_factorial_over_power(n));
}

// Pr(D_n >= x) by Pelz and Good's expansion K0(z) + K1(z)/sqrt(n) + K2(z)/n + K3(z)/n^1.5 at
// z = x sqrt(n), each K a theta-function series in q = exp(-pi^2 / (8 z^2)) over odd m.
double pelz_good_sf(std::int64_t n, double x) {
  const double pi2 = M_PI * M_PI, pi4 = pi2 * pi2, pi6 = pi4 * pi2, sqrt_2pi = std::sqrt(2.0 * M_PI);
  const double z = std::sqrt(static_cast<double>(n)) * x;
  const double z2 = z * z, z4 = z2 * z2, z6 = z4 * z2, z8 = z4 * z4;
  const double qlog = -pi2 / 8.0 / z2;
  if (qlog < -708.0) return 1.0;
  const double q = std::exp(qlog);
  const auto maxk = static_cast<std::int64_t>(std::ceil(16.0 * z / M_PI));
  double k_sum[4] = {0, 0, 0, 0};
  // sum_m c(m) q^(m^2) over odd m = 2k - 1, Horner-like: consecutive odd squares differ by 8k.
  for (std::int64_t k = maxk; k >= 1; --k) {
    const double mm = static_cast<double>(2 * k - 1), m2 = mm * mm, m4 = m2 * m2, m6 = m4 * m2;
    const double qp = std::pow(q, 8.0 * static_cast<double>(k));
    const double c[4] = {
        1.0, -z2 + pi2 / 4.0 * m2,
        6.0 * z6 + 2.0 * z4 + (2.0 * z4 - 5.0 * z2) * pi2 / 4.0 * m2 + pi4 * (1.0 - 2.0 * z2) / 16.0 * m4,
        -30.0 * z6 - 90.0 * z8 + pi2 * (135.0 * z4 - 96.0 * z6) / 4.0 * m2 +
            pi4 * (-60.0 * z2 + 212.0 * z4) / 16.0 * m4 + pi6 * (5.0 - 30.0 * z2) / 64.0 * m6};
    for (int i = 0; i < 4; ++i) k_sum[i] = k_sum[i] * qp + c[i];
  }
  const double denom[4] = {z, 6.0 * z4, 72.0 * z4 * z2 * z, 6480.0 * z8 * z2};
  for (int i = 0; i < 4; ++i) k_sum[i] = k_sum[i] * q * sqrt_2pi / denom[i];
  // The terms over every integer k for K2 and K3.
  const double q2 = std::exp(-pi2 / 2.0 / z2);
  double extra2 = 0.0, extra3 = 0.0;
  for (std::int64_t k = maxk; k >= 1; --k) {
    const double kk = static_cast<double>(k), k2 = kk * kk, qp = std::pow(q2, k2);
    extra2 += k2 * qp;
    extra3 += (3.0 * z2 - pi2 * k2) * k2 * qp;
  }
  k_sum[2] += extra2 * pi2 * sqrt_2pi / (-36.0 * z2 * z);
  k_sum[3] += extra3 * pi2 * sqrt_2pi / (216.0 * z6);
  const double sn = std::sqrt(static_cast<double>(n));
  return (1.0 - k_sum[0]) - k_sum[1] / sn - k_sum[2] / (sn * sn) - k_sum[3] / (sn * sn * sn);
}

// a log x - x - log Gamma(a): the log of the factor both expansions of gamma_q share.
double gamma_prefix(double a, double x) { return a * std::log(x) - x - std::lgamma(a); }

}  // namespace

KsResult ks_2samp(std::span<const double> a_in, std::span<const double> b_in, KsMethod method) {
  std::vector<double> a_store, b_store;
  const std::span<const double> a = sorted_view(a_in, a_store, "ks_2samp: the first sample");
  const std::span<const double> b = sorted_view(b_in, b_store, "ks_2samp: the second sample");
  const auto n1 = static_cast<std::int64_t>(a.size()), n2 = static_cast<std::int64_t>(b.size());
  // The two empirical CDFs at every value of either sample (right-continuous: ties counted).
  double max_diff = 0.0, min_diff = 0.0;
  std::size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    const double v = j >= b.size() || (i < a.size() && a[i] <= b[j]) ? a[i] : b[j];
    while (i < a.size() && a[i] <= v) ++i;
    while (j < b.size() && b[j] <= v) ++j;
    const double diff =
        static_cast<double>(i) / static_cast<double>(n1) - static_cast<double>(j) / static_cast<double>(n2);
    max_diff = std::max(max_diff, diff);
    min_diff = std::min(min_diff, diff);
  }
  KsResult r;
  r.statistic = std::clamp(std::max(max_diff, -min_diff), 0.0, 1.0);
  if (method == KsMethod::kAsymp || std::max(n1, n2) > 10000) {
    // Smirnov's limit: D of the one-sample test at the effective size m n / (m + n).
    const double big = static_cast<double>(std::max(n1, n2)), small = static_cast<double>(std::min(n1, n2));
    const auto en = static_cast<std::int64_t>(std::nearbyint(big * small / (big + small)));
    r.pvalue = kolmogorov_sf(en, r.statistic);
    r.method = "asymp";
    return r;
  }
  const std::int64_t g = std::gcd(n1, n2);
  const std::int64_t lcm = (n1 / g) * n2;
  const auto h = static_cast<std::int64_t>(std::nearbyint(r.statistic * static_cast<double>(lcm)));
  r.statistic = static_cast<double>(h) / static_cast<double>(lcm);
  r.method = "exact";
  if (h == 0) {
    r.pvalue = 1.0;
    return r;
  }
  const double p = n1 == n2 ? prob_outside_square(n1, h) : prob_outside_band(n1, n2, g, h);
  r.pvalue = std::clamp(p, 0.0, 1.0);
  return r;
}

double kolmogorov_sf(std::int64_t n, double x) {
  GB_CHECK(n >= 1 && !std::isnan(x), InvalidArgument, "kolmogorov_sf(" << n << ", " << x << ") is undefined",
           "pass n >= 1 and a statistic in [0, 1]");
  if (x >= 1.0) return 0.0;
  if (x <= 0.0) return 1.0;
  const double nn = static_cast<double>(n), t = nn * x;
  auto clip = [](double p) { return std::clamp(p, 0.0, 1.0); };
  if (t <= 1.0) {  // Ruben and Gambino: Pr(D_n <= x) = n!/n^n (2t - 1)^n for 1/(2n) <= x <= 1/n
    if (t <= 0.5) return 1.0;
    return clip(1.0 - std::exp(log_factorial_over_power(n) + nn * std::log(2.0 * t - 1.0)));
  }
  if (t >= nn - 1.0) return clip(2.0 * std::pow(1.0 - x, nn));  // Ruben and Gambino, the other end
  if (x >= 0.5) return clip(2.0 * smirnov_sf(n, x));            // exact: the two tails cannot meet
  const double nx2 = t * x;
  if (n <= 140) {
    if (nx2 <= 4.0) return clip(1.0 - durbin_cdf(n, x));
    return clip(2.0 * smirnov_sf(n, x));
  }
  if (nx2 >= 370.0) return 0.0;
  if (nx2 >= 2.2) return clip(2.0 * smirnov_sf(n, x));
  if (nx2 >= 18.0) return 0.0;
  if (n <= 100000 && nn * std::pow(x, 1.5) <= 1.4) return clip(1.0 - durbin_cdf(n, x));
  return clip(pelz_good_sf(n, x));
}

double wasserstein_1d(std::span<const double> u_in, std::span<const double> v_in) {
  std::vector<double> u_store, v_store;
  const std::span<const double> u = sorted_view(u_in, u_store, "wasserstein: the first sample");
  const std::span<const double> v = sorted_view(v_in, v_store, "wasserstein: the second sample");
  // scipy's sum over the merged sorted values of |F_u - F_v| times the gap to the next value,
  // walking both sorted samples at once (equal values add nothing).
  const double nu = static_cast<double>(u.size()), nv = static_cast<double>(v.size());
  double sum = 0.0;
  std::size_t i = 0, j = 0;
  while (i < u.size() || j < v.size()) {
    const double x = j >= v.size() || (i < u.size() && u[i] <= v[j]) ? u[i] : v[j];
    while (i < u.size() && u[i] <= x) ++i;
    while (j < v.size() && v[j] <= x) ++j;
    if (i == u.size() && j == v.size()) break;
    const double next = j >= v.size() || (i < u.size() && u[i] <= v[j]) ? u[i] : v[j];
    sum += std::abs(static_cast<double>(i) / nu - static_cast<double>(j) / nv) * (next - x);
  }
  return sum;
}

double wasserstein_normed(std::span<const double> reference, std::span<const double> current) {
  const double d = wasserstein_1d(reference, current);
  const double n = static_cast<double>(reference.size());
  const double mean = std::accumulate(reference.begin(), reference.end(), 0.0) / n;
  double ss = 0.0;
  for (double x : reference) ss += (x - mean) * (x - mean);
  return d / std::max(std::sqrt(ss / n), 0.001);
}

double psi(std::span<const double> reference_in, std::span<const double> current_in, bool categorical) {
  std::vector<double> ref_store, cur_store;
  const std::span<const double> ref = sorted_view(reference_in, ref_store, "psi: the reference");
  const std::span<const double> cur = sorted_view(current_in, cur_store, "psi: the current sample");
  std::size_t n_distinct = 0;
  for (std::size_t i = 0; i < ref.size(); ++i)
    if (i == 0 || ref[i] != ref[i - 1]) ++n_distinct;
  std::vector<double> r_share, c_share;
  const double nr = static_cast<double>(ref.size()), nc = static_cast<double>(cur.size());
  if (!categorical && n_distinct > 20) {
    // numpy.histogram_bin_edges(both, "sturges"): width ptp / (log2(N) + 1), ceil(ptp / width)
    // equal bins from the minimum to the maximum, edges i * step + min (the last the maximum).
    const double lo = std::min(ref.front(), cur.front()), hi = std::max(ref.back(), cur.back());
    const double width = (hi - lo) / (std::log2(nr + nc) + 1.0);
    const auto bins = static_cast<std::size_t>(std::ceil((hi - lo) / width));
    std::vector<double> edges(bins + 1);
    const double step = (hi - lo) / static_cast<double>(bins);
    for (std::size_t i = 0; i < bins; ++i) edges[i] = static_cast<double>(i) * step + lo;
    edges[bins] = hi;
    // numpy.histogram: [e_i, e_i+1) for every bin but the last, which also holds its right edge.
    auto shares = [&](std::span<const double> v) {
      std::vector<double> out(bins);
      for (std::size_t b = 0; b < bins; ++b) {
        const auto from = std::lower_bound(v.begin(), v.end(), edges[b]);
        const auto to = b + 1 == bins ? std::upper_bound(v.begin(), v.end(), edges[b + 1])
                                      : std::lower_bound(v.begin(), v.end(), edges[b + 1]);
        out[b] = static_cast<double>(to - from) / static_cast<double>(v.size());
      }
      return out;
    };
    r_share = shares(ref);
    c_share = shares(cur);
  } else {
    // The distinct values of either side (both are sorted).
    std::vector<double> keys;
    std::set_union(ref.begin(), ref.end(), cur.begin(), cur.end(), std::back_inserter(keys));
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    for (double k : keys) {
      const auto count = [k](std::span<const double> v) {
        return static_cast<double>(std::upper_bound(v.begin(), v.end(), k) - std::lower_bound(v.begin(), v.end(), k));
      };
      r_share.push_back(count(ref) / nr);
      c_share.push_back(count(cur) / nc);
    }
  }
  auto fill_zeros = [](std::vector<double>& share) {
    double smallest = std::numeric_limits<double>::infinity();
    for (double x : share)
      if (x != 0) smallest = std::min(smallest, x);
    const double fill = smallest <= 1e-4 ? smallest / 1e6 : 1e-4;
    for (double& x : share)
      if (x == 0) x = fill;
  };
  fill_zeros(r_share);
  fill_zeros(c_share);
  double sum = 0.0;
  for (std::size_t b = 0; b < r_share.size(); ++b) sum += (r_share[b] - c_share[b]) * std::log(r_share[b] / c_share[b]);
  return sum;
}

Chi2Result chi2_contingency(const std::vector<std::vector<double>>& table) {
  GB_CHECK(!table.empty() && !table[0].empty(), InvalidArgument, "chi2_contingency: the table is empty",
           "pass rows x columns of counts");
  const std::size_t rows = table.size(), cols = table[0].size();
  std::vector<double> row_sum(rows, 0.0), col_sum(cols, 0.0);
  double total = 0.0;
  for (std::size_t r = 0; r < rows; ++r) {
    GB_CHECK(table[r].size() == cols, InvalidArgument,
             "chi2_contingency: row " << r << " has " << table[r].size() << " columns, row 0 " << cols,
             "pass a rectangular table");
    for (std::size_t c = 0; c < cols; ++c) {
      const double x = table[r][c];
      GB_CHECK(std::isfinite(x) && x >= 0, InvalidArgument,
               "chi2_contingency: the count at row " << r << ", column " << c << " is " << x,
               "pass finite, non-negative counts");
      row_sum[r] += x;
      col_sum[c] += x;
      total += x;
    }
  }
  Chi2Result out;
  out.dof = static_cast<std::int64_t>(rows * cols) - static_cast<std::int64_t>(rows + cols) + 1;
  out.expected.resize(rows * cols);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) {
      const double e = row_sum[r] * col_sum[c] / total;
      GB_CHECK(e > 0, InvalidArgument,
               "chi2_contingency: the expected frequency at row " << r << ", column " << c << " is zero",
               "drop the rows and columns whose counts are all zero");
      out.expected[r * cols + c] = e;
    }
  if (out.dof == 0) return out;  // statistic 0, p-value 1
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) {
      const double e = out.expected[r * cols + c];
      double o = table[r][c];
      if (out.dof == 1) {  // Yates: move each count towards its expectation by at most 0.5
        const double diff = e - o;
        o += std::min(0.5, std::abs(diff)) * (diff > 0 ? 1.0 : diff < 0 ? -1.0 : 0.0);
      }
      out.statistic += (o - e) * (o - e) / e;
    }
  out.pvalue = gamma_q(static_cast<double>(out.dof) / 2.0, out.statistic / 2.0);
  return out;
}

double jensenshannon(std::span<const double> p, std::span<const double> q) {
  GB_CHECK(p.size() == q.size() && !p.empty(), InvalidArgument,
           "jensenshannon: distributions of " << p.size() << " and " << q.size() << " values",
           "pass two distributions over the same classes");
  const double sp = std::accumulate(p.begin(), p.end(), 0.0), sq = std::accumulate(q.begin(), q.end(), 0.0);
  GB_CHECK(sp > 0 && sq > 0, InvalidArgument, "jensenshannon: a distribution sums to zero",
           "pass counts or probabilities with a positive sum");
  auto rel_entr = [](double x, double y) {
    if (x > 0 && y > 0) return x * std::log(x / y);
    if (x == 0 && y >= 0) return 0.0;
    return std::numeric_limits<double>::infinity();
  };
  double left = 0.0, right = 0.0;
  for (std::size_t k = 0; k < p.size(); ++k) {
    const double a = p[k] / sp, b = q[k] / sq, m = (a + b) / 2.0;
    left += rel_entr(a, m);
    right += rel_entr(b, m);
  }
  return std::sqrt((left + right) / 2.0);
}

double gamma_q(double a, double x) {
  GB_CHECK(a > 0 && x >= 0, InvalidArgument, "gamma_q(" << a << ", " << x << ") is undefined", "pass a > 0 and x >= 0");
  if (x == 0) return 1.0;
  if (x < a + 1.0) {
    // P(a, x) by its series x^a e^-x / Gamma(a+1) * sum x^k / ((a+1)...(a+k)); Q = 1 - P.
    double term = 1.0 / a, sum = term;
    for (int k = 1; k < 100000; ++k) {
      term *= x / (a + k);
      sum += term;
      if (std::abs(term) < std::abs(sum) * 1e-17) break;
    }
    return 1.0 - sum * std::exp(gamma_prefix(a, x));
  }
  // Q(a, x) by its continued fraction (modified Lentz).
  const double tiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, f = d;
  for (int k = 1; k < 100000; ++k) {
    const double an = -k * (k - a);
    b += 2.0;
    d = an * d + b;
    if (std::abs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::abs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double delta = d * c;
    f *= delta;
    if (std::abs(delta - 1.0) < 1e-17) break;
  }
  return std::exp(gamma_prefix(a, x)) * f;
}

}  // namespace glassbox::monitor
