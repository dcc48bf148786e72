#include "glassbox/data/csv.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include <torch/torch.h>

#include "glassbox/base/config.h"
#include "glassbox/base/error.h"
#include "glassbox/data/idx.h"

namespace glassbox::data {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Splits one line into fields; quoted fields may contain commas and "" escapes.
void split_fields(std::string_view line, std::vector<std::string>& out, const std::string& where) {
  out.clear();
  std::size_t i = 0;
  for (;;) {
    std::string field;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i < line.size() && line[i] == '"') {
      ++i;
      bool closed = false;
      while (i < line.size()) {
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field.push_back('"');
            i += 2;
            continue;
          }
          ++i;
          closed = true;
          break;
        }
        field.push_back(line[i++]);
      }
      GB_CHECK(closed, DataLoss, where << ": unterminated quoted field",
               "close the quote; fields spanning several lines are not supported");
      while (i < line.size() && line[i] != ',') {
        GB_CHECK(line[i] == ' ' || line[i] == '\t' || line[i] == '\r', DataLoss,
                 where << ": text after a closing quote", "quote the whole field");
        ++i;
      }
    } else {
      const std::size_t start = i;
      while (i < line.size() && line[i] != ',') ++i;
      field = std::string(trim(line.substr(start, i - start)));
    }
    out.push_back(std::move(field));
    if (i >= line.size()) break;
    ++i;  // the comma
  }
}

bool parse_double(std::string_view s, double* out) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

bool parse_label(std::string_view s, std::int64_t* out) {
  std::string_view t = s;
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);
  if (t.empty()) return false;
  const auto r = std::from_chars(t.data(), t.data() + t.size(), *out);
  if (r.ec == std::errc() && r.ptr == t.data() + t.size()) return true;
  double d = 0;
  if (!parse_double(s, &d) || !std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) return false;
  *out = static_cast<std::int64_t>(d);
  return true;
}

}  // namespace

CsvTable parse_csv(std::string_view text, const std::string& source, const std::string& label_column) {
  if (text.size() >= 3 && std::memcmp(text.data(), "\xEF\xBB\xBF", 3) == 0) text.remove_prefix(3);
  std::size_t pos = 0;
  std::int64_t line_no = 0;
  std::string_view line;
  // The next non-blank line; false at the end of the text.
  auto next_line = [&]() {
    while (pos < text.size()) {
      std::size_t end = text.find('\n', pos);
      if (end == std::string_view::npos) end = text.size();
      line = text.substr(pos, end - pos);
      pos = end + 1;
      ++line_no;
      if (!trim(line).empty()) return true;
    }
    return false;
  };
  GB_CHECK(next_line(), DataLoss, source << ": empty CSV file (no header row)",
           "the first line must name the columns, e.g. x1,x2,label");
  std::vector<std::string> header;
  split_fields(line, header, source + ":" + std::to_string(line_no));
  std::int64_t label_idx = -1;
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] == label_column) {
      GB_CHECK(label_idx < 0, DataLoss,
               source << ":" << line_no << ": the label column '" << label_column << "' appears twice in the header",
               "rename one of the columns");
      label_idx = static_cast<std::int64_t>(i);
    }
  }
  if (label_idx < 0) {
    std::string names;
    for (std::size_t i = 0; i < header.size() && i < 20; ++i) names += (i ? ", " : "") + header[i];
    if (header.size() > 20) names += ", ...";
    const std::string near = closest_match(label_column, header);
    GB_THROW(NotFound,
             source << ":" << line_no << ": no label column '" << label_column << "' in the header (columns: " << names
                    << ")",
             near.empty() ? std::string("set data.label_column to the name of the label column")
                          : "did you mean '" + near + "'? set data.label_column");
  }
  const std::size_t ncols = header.size();
  const std::size_t nfeat = ncols - 1;
  GB_CHECK(nfeat >= 1, DataLoss,
           source << ":" << line_no << ": no feature columns besides the label '" << label_column << "'",
           "add at least one numeric feature column");
  CsvTable table;
  for (std::size_t i = 0; i < ncols; ++i)
    if (static_cast<std::int64_t>(i) != label_idx) table.feature_names.push_back(header[i]);

  std::vector<float> features;
  std::vector<std::int64_t> labels;
  std::vector<std::string> fields;
  std::unordered_map<std::string, std::int64_t> name_ids;  // text labels, by first appearance
  std::string first_number;  // the first numeric label and its line, for the error on a mixed column
  std::string first_name;    // the first text label and its line
  while (next_line()) {
    const std::string where = source + ":" + std::to_string(line_no);
    split_fields(line, fields, where);
    GB_CHECK(fields.size() == ncols, DataLoss,
             where << ": expected " << ncols << " fields as in the header, found " << fields.size(),
             "every row needs one value per header column");
    for (std::size_t i = 0; i < ncols; ++i) {
      const std::string& f = fields[i];
      if (static_cast<std::int64_t>(i) == label_idx) {
        GB_CHECK(!f.empty(), DataLoss, where << ": column " << i + 1 << " ('" << header[i] << "'): empty label",
                 "every row needs a class label");
        double number = 0;
        const bool is_number = parse_double(f, &number);
        std::string& first_other = is_number ? first_name : first_number;
        if (!first_other.empty()) {
          GB_THROW(InvalidArgument,
                   where << ": column " << i + 1 << " ('" << header[i] << "'): label '" << f << "' is a "
                         << (is_number ? "number" : "name") << " but label " << first_other << " is a "
                         << (is_number ? "name" : "number"),
                   "use either integer labels 0..K-1 or class names in the whole label column");
        }
        std::string& first_mine = is_number ? first_number : first_name;
        if (first_mine.empty()) first_mine = "'" + f + "' (line " + std::to_string(line_no) + ")";
        if (is_number) {
          std::int64_t y = 0;
          GB_CHECK(parse_label(f, &y), DataLoss,
                   where << ": column " << i + 1 << " ('" << header[i] << "'): label '" << f << "' is not an integer",
                   "class labels must be integers 0..K-1 (or class names)");
          labels.push_back(y);
        } else {
          // A name: its index in order of first appearance for now, sorted at the end.
          auto it = name_ids.try_emplace(f, static_cast<std::int64_t>(name_ids.size())).first;
          labels.push_back(it->second);
        }
      } else {
        double v = 0;
        GB_CHECK(parse_double(f, &v), DataLoss,
                 where << ": column " << i + 1 << " ('" << header[i]
                       << "'): " << (f.empty() ? std::string("empty cell") : "'" + f + "' is not a number"),
                 "feature columns must be numeric; encode categories as numbers and fill missing values");
        features.push_back(static_cast<float>(v));
      }
    }
  }
  if (!name_ids.empty()) {
    // Text labels: sorted names, each label its name's index.
    table.label_names.reserve(name_ids.size());
    for (const auto& entry : name_ids) table.label_names.push_back(entry.first);
    std::sort(table.label_names.begin(), table.label_names.end());
    std::vector<std::int64_t> sorted_index(name_ids.size());
    for (std::size_t k = 0; k < table.label_names.size(); ++k)
      sorted_index[static_cast<std::size_t>(name_ids.at(table.label_names[k]))] = static_cast<std::int64_t>(k);
    for (std::int64_t& y : labels) y = sorted_index[static_cast<std::size_t>(y)];
  }
  const auto n = static_cast<std::int64_t>(labels.size());
  table.features = at::empty({n, static_cast<std::int64_t>(nfeat)}, at::kFloat);
  table.labels = at::empty({n}, at::kLong);
  if (n > 0) {
    std::memcpy(table.features.data_ptr<float>(), features.data(), features.size() * sizeof(float));
    std::memcpy(table.labels.data_ptr<std::int64_t>(), labels.data(), labels.size() * sizeof(std::int64_t));
  }
  return table;
}

CsvTable read_csv(const std::filesystem::path& path, const std::string& label_column) {
  const std::string text = read_file_maybe_gzip(path);
  return parse_csv(text, path.string(), label_column);
}

CsvTable parse_csv_targets(std::string_view text, const std::string& source,
                           const std::vector<std::string>& target_columns) {
  const CsvText t = parse_csv_text(text, source);
  std::vector<std::size_t> target_idx;
  for (const auto& name : target_columns) {
    const std::size_t c = t.column(name, source, "data.target_columns");
    GB_CHECK(std::find(target_idx.begin(), target_idx.end(), c) == target_idx.end(), InvalidArgument,
             "data.target_columns names '" << name << "' twice", "list each target column once");
    target_idx.push_back(c);
  }
  CsvTable table;
  std::vector<std::size_t> feature_idx;
  for (std::size_t i = 0; i < t.header.size(); ++i) {
    if (std::find(target_idx.begin(), target_idx.end(), i) != target_idx.end()) continue;
    feature_idx.push_back(i);
    table.feature_names.push_back(t.header[i]);
  }
  GB_CHECK(!feature_idx.empty(), DataLoss, source << ": no feature columns besides the targets",
           "add at least one numeric feature column");
  const auto n = static_cast<std::int64_t>(t.rows.size());
  table.features = at::empty({n, static_cast<std::int64_t>(feature_idx.size())}, at::kFloat);
  table.targets = at::empty({n, static_cast<std::int64_t>(target_idx.size())}, at::kFloat);
  float* fx = table.features.data_ptr<float>();
  float* fy = table.targets.data_ptr<float>();
  const auto cell = [&](std::size_t r, std::size_t c, const char* what) {
    const std::string& f = t.rows[r][c];
    double v = 0;
    GB_CHECK(parse_double(f, &v), DataLoss,
             source << ":" << t.lines[r] << ": column " << c + 1 << " ('" << t.header[c]
                    << "'): " << (f.empty() ? std::string("empty cell") : "'" + f + "' is not a number"),
             std::string(what) + " columns must be numeric; fill missing values");
    return static_cast<float>(v);
  };
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    for (std::size_t j = 0; j < feature_idx.size(); ++j) *fx++ = cell(r, feature_idx[j], "feature");
    for (std::size_t j = 0; j < target_idx.size(); ++j) *fy++ = cell(r, target_idx[j], "target");
  }
  return table;
}

CsvTable read_csv_targets(const std::filesystem::path& path, const std::vector<std::string>& target_columns) {
  return parse_csv_targets(read_file_maybe_gzip(path), path.string(), target_columns);
}

CsvText parse_csv_text(std::string_view text, const std::string& source) {
  if (text.size() >= 3 && std::memcmp(text.data(), "\xEF\xBB\xBF", 3) == 0) text.remove_prefix(3);
  CsvText out;
  std::size_t pos = 0;
  std::int64_t line_no = 0;
  std::vector<std::string> fields;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (trim(line).empty()) continue;
    const std::string where = source + ":" + std::to_string(line_no);
    split_fields(line, fields, where);
    if (out.header.empty()) {
      out.header = fields;
      continue;
    }
    GB_CHECK(fields.size() == out.header.size(), DataLoss,
             where << ": " << fields.size() << " fields, but the header has " << out.header.size(),
             "give every row one field per column (quote fields that contain commas)");
    out.rows.push_back(fields);
    out.lines.push_back(line_no);
  }
  GB_CHECK(!out.header.empty(), DataLoss, source << ": empty CSV file (no header row)",
           "the first line must name the columns, e.g. file_name,label");
  return out;
}

std::size_t CsvText::column(const std::string& name, const std::string& source, const std::string& key) const {
  const auto it = std::find(header.begin(), header.end(), name);
  if (it != header.end()) return static_cast<std::size_t>(it - header.begin());
  const std::string near = closest_match(name, header);
  GB_THROW(NotFound, source << ": no column '" << name << "' in the header",
           near.empty() ? "set " + key + " to one of the header's columns" : "did you mean '" + near + "'? set " + key);
}

}  // namespace glassbox::data
