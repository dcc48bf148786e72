// Tested by monitor_test (Columns.*) and, against Evidently, by monitor_compare_evidently.
#include "glassbox/monitor/columns.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <thread>

#include "glassbox/base/error.h"
#include "glassbox/monitor/drift_stats.h"

namespace glassbox::monitor {

namespace fs = std::filesystem;

namespace {

// A read-only mapping of a whole file.
class Mapped {
 public:
  explicit Mapped(const fs::path& path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    GB_CHECK(fd_ >= 0, NotFound, "cannot open " << path.string() << ": " << std::strerror(errno),
             "pass an existing CSV file");
    struct stat st {};
    ::fstat(fd_, &st);
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
      GB_CHECK(p != MAP_FAILED, DataLoss, "cannot read " << path.string() << ": " << std::strerror(errno),
               "check the file");
      data_ = static_cast<const char*>(p);
      ::madvise(p, size_, MADV_SEQUENTIAL);
    }
  }
  ~Mapped() {
    if (data_) ::munmap(const_cast<char*>(data_), size_);
    if (fd_ >= 0) ::close(fd_);
  }
  Mapped(const Mapped&) = delete;
  Mapped& operator=(const Mapped&) = delete;
  std::string_view view() const { return {data_, size_}; }

 private:
  int fd_ = -1;
  const char* data_ = nullptr;
  std::size_t size_ = 0;
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '"')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '"' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

struct Chunk {
  std::vector<std::vector<float>> values;
  std::vector<bool> integer_text;
  std::int64_t rows = 0, missing = 0;
  std::string error;            // the first problem, without its line number
  std::int64_t error_line = 0;  // the line within the chunk (0-based)
};

void parse_chunk(std::string_view text, std::size_t columns, Chunk& c, std::atomic<std::uint64_t>& done) {
  c.values.assign(columns, {});
  c.integer_text.assign(columns, true);
  std::size_t pos = 0, reported = 0;
  std::int64_t line = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view row = text.substr(pos, end - pos);
    pos = end + 1;
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    if (row.empty()) {
      ++line;
      continue;
    }
    std::size_t col = 0, start = 0;
    while (true) {
      const std::size_t comma = row.find(',', start);
      const std::string_view field =
          trim(row.substr(start, comma == std::string_view::npos ? row.size() - start : comma - start));
      if (col >= columns) {
        c.error = "a row of more than " + std::to_string(columns) + " fields";
        c.error_line = line;
        return;
      }
      if (field.empty() || field == "nan" || field == "NaN" || field == "NA") {
        ++c.missing;
      } else {
        float v = 0;
        const char* first = field.data();
        if (*first == '+') ++first;
        const auto [ptr, ec] = std::from_chars(first, field.data() + field.size(), v);
        if (ec != std::errc() || ptr != field.data() + field.size() || std::isnan(v)) {
          if (!(ec == std::errc() && std::isnan(v))) {
            c.error =
                "column " + std::to_string(col + 1) + " holds '" + std::string(field.substr(0, 40)) + "', not a number";
            c.error_line = line;
            return;
          }
          ++c.missing;
        } else {
          c.values[col].push_back(v);
          if (c.integer_text[col] && field.find_first_of(".eE") != std::string_view::npos) c.integer_text[col] = false;
        }
      }
      ++col;
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (col != columns) {
      c.error = "a row of " + std::to_string(col) + " fields; the header names " + std::to_string(columns);
      c.error_line = line;
      return;
    }
    ++c.rows;
    ++line;
    if (pos - reported > (8u << 20)) {
      done += pos - reported;
      reported = pos;
    }
  }
  done += text.size() - std::min(text.size(), reported);
}

std::uint32_t key_of(float f) {
  const auto b = std::bit_cast<std::uint32_t>(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

std::vector<double> sorted_doubles(std::vector<float>& v) {
  radix_sort(v);
  return {v.begin(), v.end()};
}

// Evidently's chi-square: the current counts against the reference's shares scaled to the
// current size, over the values either side holds.
double chi2_pvalue_against_reference(const std::map<float, double>& ref, const std::map<float, double>& cur,
                                     double n_ref, double n_cur) {
  std::map<float, std::pair<double, double>> both;
  for (const auto& [k, n] : ref) both[k].first = n;
  for (const auto& [k, n] : cur) both[k].second = n;
  if (both.size() < 2) return 1.0;
  double chi2 = 0;
  for (const auto& [k, rc] : both) {
    const double expected = rc.first * n_cur / n_ref;
    if (expected <= 0) return 0.0;  // a value the reference never had: scipy's infinite statistic
    chi2 += (rc.second - expected) * (rc.second - expected) / expected;
  }
  return gamma_q(static_cast<double>(both.size() - 1) / 2.0, chi2 / 2.0);
}

}  // namespace

void radix_sort(std::vector<float>& values) {
  const std::size_t n = values.size();
  if (n < 2) return;
  std::vector<std::uint32_t> a(n), b(n);
  // The three 11-bit digits' histograms in one pass; a digit every key shares is skipped.
  std::vector<std::size_t> count(3 * 2048, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t k = key_of(values[i]);
    a[i] = k;
    ++count[k & 0x7ff];
    ++count[2048 + ((k >> 11) & 0x7ff)];
    ++count[4096 + (k >> 22)];
  }
  for (int pass = 0; pass < 3; ++pass) {
    std::size_t* c = count.data() + pass * 2048;
    if (std::any_of(c, c + 2048, [n](std::size_t x) { return x == n; })) continue;
    std::size_t sum = 0;
    for (std::size_t d = 0; d < 2048; ++d) {
      const std::size_t here = c[d];
      c[d] = sum;
      sum += here;
    }
    const int shift = pass * 11;
    for (std::uint32_t k : a) b[c[(k >> shift) & 0x7ff]++] = k;
    a.swap(b);
  }
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t k = a[i];
    values[i] = std::bit_cast<float>((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
  }
}

Columns read_csv_columns(const fs::path& path, int threads,
                         const std::function<void(std::uint64_t, std::uint64_t)>& progress) {
  const Mapped file(path);
  const std::string_view all = file.view();
  const std::size_t header_end = std::min(all.find('\n'), all.size());
  GB_CHECK(header_end > 0, DataLoss, path.string() << " has no header line", "write the column names first");
  Columns out;
  {
    std::string_view header = all.substr(0, header_end);
    std::size_t start = 0;
    while (true) {
      const std::size_t comma = header.find(',', start);
      out.names.emplace_back(
          trim(header.substr(start, comma == std::string_view::npos ? header.size() - start : comma - start)));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
  }
  const std::string_view body = header_end < all.size() ? all.substr(header_end + 1) : std::string_view();
  const std::size_t parts = static_cast<std::size_t>(std::clamp(threads, 1, 64));
  std::vector<std::string_view> pieces;
  std::size_t from = 0;
  for (std::size_t p = 0; p < parts && from < body.size(); ++p) {
    std::size_t to = p + 1 == parts ? body.size() : std::max(from, body.size() * (p + 1) / parts);
    if (to < body.size()) {
      const std::size_t nl = body.find('\n', to);
      to = nl == std::string_view::npos ? body.size() : nl + 1;
    }
    pieces.push_back(body.substr(from, to - from));
    from = to;
  }
  std::vector<Chunk> chunks(pieces.size());
  std::atomic<std::uint64_t> done{0};
  std::atomic<std::size_t> finished{0};
  std::vector<std::thread> workers;
  for (std::size_t i = 0; i < pieces.size(); ++i)
    workers.emplace_back([&, i] {
      parse_chunk(pieces[i], out.names.size(), chunks[i], done);
      ++finished;
    });
  for (int tick = 0; finished.load() < pieces.size(); ++tick) {
    if (progress && tick % 10 == 0) progress(done.load(), body.size());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (std::thread& t : workers) t.join();
  if (progress) progress(body.size(), body.size());
  std::int64_t lines_before = 0;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    if (!chunks[i].error.empty())
      GB_THROW(DataLoss, path.string() << ":" << lines_before + chunks[i].error_line + 2 << ": " << chunks[i].error,
               "write one number per field, as many fields as the header names");
    lines_before += std::count(pieces[i].begin(), pieces[i].end(), '\n');
  }
  out.values.assign(out.names.size(), {});
  out.integer_text.assign(out.names.size(), true);
  for (std::size_t c = 0; c < out.names.size(); ++c) {
    std::size_t total = 0;
    for (const Chunk& ch : chunks) total += ch.values[c].size();
    out.values[c].reserve(total);
    for (Chunk& ch : chunks) {
      out.values[c].insert(out.values[c].end(), ch.values[c].begin(), ch.values[c].end());
      ch.values[c] = {};
      out.integer_text[c] = out.integer_text[c] && ch.integer_text[c];
    }
  }
  for (const Chunk& ch : chunks) {
    out.rows += ch.rows;
    out.missing += ch.missing;
  }
  return out;
}

nlohmann::json ColumnDrift::to_json() const {
  nlohmann::json j = {{"name", name},
                      {"type", categorical ? "cat" : "num"},
                      {"reference_count", reference_count},
                      {"current_count", current_count},
                      {"stattest", stattest},
                      {"score", score},
                      {"threshold", threshold},
                      {"drifted", drifted}};
  if (categorical) {
    j["chi2_pvalue"] = chi2_pvalue;
    j["jensen_shannon"] = jensen_shannon;
  } else {
    j["ks_statistic"] = ks_statistic;
    j["ks_pvalue"] = ks_pvalue;
    j["wasserstein_normed"] = wasserstein_normed;
    j["psi"] = psi;
  }
  return j;
}

std::vector<ColumnDrift> compare_columns(Columns& reference, Columns& current, const CompareOptions& o,
                                         const std::function<void(std::size_t, std::size_t)>& progress) {
  std::vector<std::pair<std::size_t, std::size_t>> pairs;  // reference column, current column
  for (std::size_t r = 0; r < reference.names.size(); ++r) {
    const auto it = std::find(current.names.begin(), current.names.end(), reference.names[r]);
    if (it != current.names.end()) pairs.emplace_back(r, static_cast<std::size_t>(it - current.names.begin()));
  }
  GB_CHECK(!pairs.empty(), InvalidArgument, "the reference and the current data share no column",
           "compare tables with the same column names");
  std::vector<ColumnDrift> out(pairs.size());
  std::vector<std::string> errors(pairs.size());
  std::atomic<std::size_t> next{0}, done{0};
  const auto work = [&] {
    for (std::size_t i = next++; i < pairs.size(); i = next++) {
      try {
        std::vector<float>& ref = reference.values[pairs[i].first];
        std::vector<float>& cur = current.values[pairs[i].second];
        ColumnDrift& d = out[i];
        d.name = reference.names[pairs[i].first];
        d.reference_count = static_cast<std::int64_t>(ref.size());
        d.current_count = static_cast<std::int64_t>(cur.size());
        GB_CHECK(!ref.empty() && !cur.empty(), InvalidArgument, "column " << d.name << " has no value on one side",
                 "drop the empty column");
        const std::vector<double> r = sorted_doubles(ref), c = sorted_doubles(cur);
        std::map<float, double> cur_counts, ref_counts;
        bool few = reference.integer_text[pairs[i].first] && current.integer_text[pairs[i].second];
        for (std::size_t k = 0; few && k < c.size();
             k = static_cast<std::size_t>(std::upper_bound(c.begin(), c.end(), c[k]) - c.begin())) {
          cur_counts[static_cast<float>(c[k])] = static_cast<double>(std::upper_bound(c.begin(), c.end(), c[k]) -
                                                                     std::lower_bound(c.begin(), c.end(), c[k]));
          few = static_cast<std::int64_t>(cur_counts.size()) <= o.categorical_limit;
        }
        d.categorical = few;
        const bool small = static_cast<std::int64_t>(reference.rows) <= o.small_reference;
        if (d.categorical) {
          for (std::size_t k = 0; k < r.size();) {
            const auto hi = std::upper_bound(r.begin() + static_cast<std::ptrdiff_t>(k), r.end(), r[k]);
            ref_counts[static_cast<float>(r[k])] = static_cast<double>(hi - r.begin()) - static_cast<double>(k);
            k = static_cast<std::size_t>(hi - r.begin());
          }
          d.chi2_pvalue = chi2_pvalue_against_reference(ref_counts, cur_counts, static_cast<double>(r.size()),
                                                        static_cast<double>(c.size()));
          std::map<float, std::pair<double, double>> both;
          for (const auto& [k, n] : ref_counts) both[k].first = n / static_cast<double>(r.size());
          for (const auto& [k, n] : cur_counts) both[k].second = n / static_cast<double>(c.size());
          std::vector<double> p, q;
          for (const auto& [k, pq] : both) {
            p.push_back(pq.first);
            q.push_back(pq.second);
          }
          d.jensen_shannon = jensenshannon(p, q);
          if (small) {
            d.stattest = "chi2";
            d.score = d.chi2_pvalue;
            d.threshold = o.ks_alpha;
            d.drifted = d.chi2_pvalue < o.ks_alpha;
          } else {
            d.stattest = "jensenshannon";
            d.score = d.jensen_shannon;
            d.threshold = o.js_threshold;
            d.drifted = d.jensen_shannon >= o.js_threshold;
          }
        } else {
          const KsResult ks = ks_2samp(r, c);
          d.ks_statistic = ks.statistic;
          d.ks_pvalue = ks.pvalue;
          d.wasserstein_normed = wasserstein_normed(r, c);
          d.psi = psi(r, c);
          if (small) {
            d.stattest = "ks";
            d.score = d.ks_pvalue;
            d.threshold = o.ks_alpha;
            d.drifted = d.ks_pvalue <= o.ks_alpha;
          } else {
            d.stattest = "wasserstein";
            d.score = d.wasserstein_normed;
            d.threshold = o.wasserstein_threshold;
            d.drifted = d.wasserstein_normed >= o.wasserstein_threshold;
          }
        }
        std::vector<float>().swap(ref);  // the memory goes as the columns are done
        std::vector<float>().swap(cur);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
      ++done;
    }
  };
  std::vector<std::thread> workers;
  for (int t = 1; t < std::max(1, o.threads); ++t) workers.emplace_back(work);
  std::thread reporter;
  std::atomic<bool> finished{false};
  if (progress)
    reporter = std::thread([&] {
      for (int tick = 0; !finished.load(); ++tick) {
        if (tick % 10 == 0) progress(done.load(), pairs.size());
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  work();
  for (std::thread& t : workers) t.join();
  finished = true;
  if (reporter.joinable()) reporter.join();
  if (progress) progress(pairs.size(), pairs.size());
  for (std::size_t i = 0; i < errors.size(); ++i)
    GB_CHECK(errors[i].empty(), InvalidArgument, "column " << reference.names[pairs[i].first] << ": " << errors[i],
             "check the column's values");
  return out;
}

}  // namespace glassbox::monitor
