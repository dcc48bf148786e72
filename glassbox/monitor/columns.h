// Offline drift between two tables: a reference and a current data set, column by column, with
// the same statistics the server computes per window, and a per-column verdict chosen as
// Evidently's DataDriftPreset chooses it by default, so that the two can be compared:
//
//   reference of at most 1000 rows   numeric: KS p-value < 0.05; categorical: chi-square p < 0.05
//   more rows                        numeric: normed Wasserstein >= 0.1; categorical: Jensen-Shannon >= 0.1
//   categorical                      a column written as integers (no '.', 'e') with at most 10
//                                    distinct values in the current data
//
//   Columns ref = read_csv_columns("ref.csv", 2, progress);
//   Columns cur = read_csv_columns("cur.csv", 2, progress);
//   std::vector<ColumnDrift> d = compare_columns(ref, cur, {});
//
// CSV: a header of column names, then rows of numbers (empty fields and NaN are missing values,
// left out); read in parallel chunks with std::from_chars, values kept as float. Sorting uses a
// radix sort, every test walks the sorted values once, so a million rows a column take
// milliseconds. Torch-free. Thread safety: free functions.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace glassbox::monitor {

struct Columns {
  std::vector<std::string> names;
  std::vector<std::vector<float>> values;  // per column, its non-missing values
  std::vector<bool> integer_text;          // every field of the column was written as an integer
  std::int64_t rows = 0;
  std::int64_t missing = 0;
};

// Reads a CSV of numbers. `progress(bytes_done, bytes_total)` is called from time to time (may be
// empty). DataLoss naming the file, line and column for a field that is not a number or a row of
// another width; NotFound for a missing file.
Columns read_csv_columns(const std::filesystem::path& path, int threads,
                         const std::function<void(std::uint64_t, std::uint64_t)>& progress = {});

struct ColumnDrift {
  std::string name;
  bool categorical = false;
  std::int64_t reference_count = 0, current_count = 0;
  double ks_statistic = 0, ks_pvalue = 1;      // numeric columns
  double wasserstein_normed = 0, psi = 0;      // numeric columns
  double chi2_pvalue = 1, jensen_shannon = 0;  // categorical columns
  std::string stattest;                        // the verdict's test: "ks", "wasserstein", "chi2", "jensenshannon"
  double score = 0, threshold = 0;
  bool drifted = false;
  nlohmann::json to_json() const;
};

struct CompareOptions {
  int threads = 2;
  double ks_alpha = 0.05, wasserstein_threshold = 0.1, js_threshold = 0.1;
  std::int64_t small_reference = 1000;  // at most this many reference rows: p-value tests
  std::int64_t categorical_limit = 10;  // integer columns with at most this many values
};

// The columns both tables hold, in the reference's order. InvalidArgument when they share none.
std::vector<ColumnDrift> compare_columns(Columns& reference, Columns& current, const CompareOptions& options,
                                         const std::function<void(std::size_t, std::size_t)>& progress = {});

// Sorts floats ascending (NaN not allowed) with an LSD radix sort on their bit patterns.
void radix_sort(std::vector<float>& values);

}  // namespace glassbox::monitor
