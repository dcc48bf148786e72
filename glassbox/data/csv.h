// CSV tables of numeric features with a label column of integers or of class names.
//
//   CsvTable t = read_csv("train.csv", "label");
//   // t.features:      [N, F] float32 (every column but the label, in file order)
//   // t.feature_names: the header's names of those columns
//   // t.labels:        [N] int64
//
// Labels: when every label cell is a number, each must be an integer and is taken as it is
// (label_names stays empty). When every label cell is text that is not a number (e.g. "setosa"),
// the distinct values sorted by their bytes (the order of Python's sorted() and of scikit-learn's
// LabelEncoder) become label_names, and each label is its index in them (0..K-1).
// A column mixing numbers and names is an error naming one of each.
//
// Format: a header row of column names, then one row per sample, fields separated by commas
// (double-quoted fields may contain commas; "" is a quote). Blank lines are skipped, CRLF line
// endings and a UTF-8 byte-order mark are accepted, surrounding spaces are trimmed. A gzip file
// (magic 1f 8b) is decompressed first. Errors name the file, the line and the column: a
// non-numeric or empty cell, a non-integer label, a row with the wrong number of fields, a
// missing label column (with the closest column name as a hint), a header without features, an
// empty label.
// Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>

namespace glassbox::data {

struct CsvTable {
  at::Tensor features;                     // [N, F] float32
  at::Tensor labels;                       // [N] int64
  std::vector<std::string> feature_names;  // F names, in file order
  std::vector<std::string> label_names;    // text labels: their sorted distinct values; else empty
  at::Tensor targets;                      // read_csv_targets: [N, T] float32 (labels stays undefined)
};

CsvTable read_csv(const std::filesystem::path& path, const std::string& label_column);

// Real-valued targets (regression, or 0/1 multi-label columns): the named columns become
// `targets` [N, T] float32 in the order given, every other column a feature. Errors name the file,
// the line and the column (a missing column with the closest name, a non-numeric or empty cell).
CsvTable read_csv_targets(const std::filesystem::path& path, const std::vector<std::string>& target_columns);
CsvTable parse_csv_targets(std::string_view text, const std::string& source,
                           const std::vector<std::string>& target_columns);

// A CSV table as text (e.g. an image folder's metadata.csv): the header's names, then the rows,
// each with as many fields as the header, and the line each row came from (for messages).
struct CsvText {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::int64_t> lines;
  // The position of `column` in the header; NotFound naming `source` and the closest name if absent.
  std::size_t column(const std::string& column, const std::string& source, const std::string& key) const;
};
CsvText parse_csv_text(std::string_view text, const std::string& source);

// Parses CSV text; `source` names it in error messages.
CsvTable parse_csv(std::string_view text, const std::string& source, const std::string& label_column);

}  // namespace glassbox::data
