// MetricsLogger: metrics.jsonl (one JSON object per logged step or epoch, appended and flushed)
// and metrics.csv (the same rows as a table, rewritten atomically whenever a new column appears
// and at the end).
//
//   MetricsLogger log("runs/a");            // empty path: a logger that records in memory only
//   log.log({{"step", 50}, {"train_loss", 0.41}});
//
// Thread safety: not thread-safe.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace glassbox::train {

class MetricsLogger {
 public:
  explicit MetricsLogger(std::filesystem::path dir = {});
  void log(const nlohmann::json& row);
  void flush_csv();
  // Forgets the rows past `step` and the rows of a finished fit's test (a resumed run goes on
  // from that step: its rows replace them), rewriting metrics.jsonl and metrics.csv atomically.
  void drop_after(std::int64_t step);
  // Every logged row is also handed to each sink (e.g. a TensorBoard writer), in order.
  void add_sink(std::function<void(const nlohmann::json&)> sink) { sinks_.push_back(std::move(sink)); }
  const std::vector<nlohmann::json>& rows() const { return rows_; }

 private:
  std::filesystem::path dir_;
  std::ofstream jsonl_;
  std::vector<nlohmann::json> rows_;
  std::vector<std::string> columns_;
  std::set<std::string> known_;
  std::size_t rows_at_last_csv_ = 0;
  std::vector<std::function<void(const nlohmann::json&)>> sinks_;
};

}  // namespace glassbox::train
