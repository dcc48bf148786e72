#include "glassbox/train/logger.h"

#include <sstream>

#include "glassbox/base/files.h"

namespace glassbox::train {

MetricsLogger::MetricsLogger(std::filesystem::path dir) : dir_(std::move(dir)) {
  if (dir_.empty()) return;
  std::filesystem::create_directories(dir_);
  // A resumed run appends: earlier rows stay in metrics.jsonl and are carried into metrics.csv.
  const auto path = dir_ / "metrics.jsonl";
  if (std::filesystem::exists(path)) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!row.is_object()) continue;  // a line cut short by a crash is skipped, not fatal
      for (auto it = row.begin(); it != row.end(); ++it)
        if (known_.insert(it.key()).second) columns_.push_back(it.key());
      rows_.push_back(std::move(row));
    }
    rows_at_last_csv_ = rows_.size();
  }
  jsonl_.open(path, std::ios::app);
}

void MetricsLogger::log(const nlohmann::json& row) {
  rows_.push_back(row);
  for (const auto& sink : sinks_) sink(row);
  bool new_column = false;
  for (auto it = row.begin(); it != row.end(); ++it) {
    if (known_.insert(it.key()).second) {
      columns_.push_back(it.key());
      new_column = true;
    }
  }
  if (jsonl_.is_open()) {
    jsonl_ << row.dump() << "\n";
    jsonl_.flush();
  }
  if (new_column || rows_.size() - rows_at_last_csv_ >= 100) flush_csv();
}

void MetricsLogger::drop_after(std::int64_t step) {
  std::vector<nlohmann::json> kept;
  for (auto& r : rows_) {
    const bool past = r.contains("step") && r["step"].is_number() && r["step"].get<std::int64_t>() > step;
    if (past || r.contains("test_loss") || r.contains("test_acc")) continue;
    kept.push_back(std::move(r));
  }
  if (kept.size() == rows_.size()) return;
  rows_ = std::move(kept);
  if (dir_.empty()) return;
  std::string text;
  for (const auto& r : rows_) text += r.dump() + "\n";
  jsonl_.close();
  write_file_atomic(dir_ / "metrics.jsonl", text);
  jsonl_.open(dir_ / "metrics.jsonl", std::ios::app);
  flush_csv();
}

void MetricsLogger::flush_csv() {
  if (dir_.empty()) return;
  std::ostringstream os;
  for (std::size_t i = 0; i < columns_.size(); ++i) os << (i ? "," : "") << columns_[i];
  os << "\n";
  for (const auto& r : rows_) {
    for (std::size_t i = 0; i < columns_.size(); ++i) {
      if (i) os << ",";
      auto it = r.find(columns_[i]);
      if (it == r.end() || it->is_null()) continue;
      if (it->is_string())
        os << it->get<std::string>();
      else
        os << it->dump();
    }
    os << "\n";
  }
  write_file_atomic(dir_ / "metrics.csv", os.str());
  rows_at_last_csv_ = rows_.size();
}

}  // namespace glassbox::train
