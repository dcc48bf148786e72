// The #training section: curves from metrics.jsonl.
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <system_error>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/report/html.h"
#include "glassbox/report/report_internal.h"
#include "glassbox/report/svg.h"

namespace glassbox::report::detail {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One logged row: its step, whether it closes an epoch, and the values of the keys we chart.
struct Row {
  double step = kNaN;
  bool epoch_end = false;
  std::map<std::string, double, std::less<>> values;  // NaN: logged as null (non-finite)
};

const std::set<std::string, std::less<>> kCharted = {"train_loss", "val_loss", "test_loss", "train_acc",
                                                     "val_acc",    "test_acc", "lr",        "grad_norm"};
const std::set<std::string, std::less<>> kBookkeeping = {"step", "epoch", "epoch_end"};

struct Log {
  std::vector<Row> rows;
  std::set<std::string> other_keys;  // numeric keys logged but not charted
  std::size_t without_step = 0;
  bool truncated_tail = false;
};

Log read_log(const fs::path& path) {
  const std::string text = read_file(path);
  Log log;
  std::size_t pos = 0, line_no = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    const bool last_unterminated = end == std::string::npos;
    if (last_unterminated) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const JsonSource src{path.string() + ":" + std::to_string(line_no),
                         "each line of metrics.jsonl must be one JSON object, as glassbox train writes them"};
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      if (last_unterminated) {  // a write cut short by an interrupted run: keep what came before
        log.truncated_tail = true;
        break;
      }
      std::string what = e.what();
      if (const auto p = what.find("] "); p != std::string::npos) what.erase(0, p + 2);
      throw Error(ErrorCode::kDataLoss, src.file + ": bad JSON: " + what, src.hint);
    }
    const JsonView v(j, src);
    if (!v.is_object()) v.fail("must be a JSON object");
    Row row;
    if (auto s = v["step"].number())
      row.step = *s;
    else
      ++log.without_step;
    row.epoch_end = v["epoch_end"].boolean().value_or(false);
    for (const auto& [key, value] : v.items()) {
      if (kCharted.count(key)) {
        // null is how a non-finite value is logged: a gap in the curve.
        row.values[key] = value.present() ? *value.number() : kNaN;
      } else if (!kBookkeeping.count(key) && value.raw()->is_number()) {
        log.other_keys.insert(key);
      }
    }
    log.rows.push_back(std::move(row));
  }
  return log;
}

enum class Rows { kSteps, kEpochEnds, kAll };

// The (step, value) points of `key` over the chosen rows; a repeated step keeps the last value.
Series collect(const Log& log, std::string_view key, Rows which, std::string name, Series::Style style) {
  std::map<double, double> points;
  for (const Row& r : log.rows) {
    if (std::isnan(r.step)) continue;
    if ((which == Rows::kSteps && r.epoch_end) || (which == Rows::kEpochEnds && !r.epoch_end)) continue;
    const auto it = r.values.find(key);
    if (it != r.values.end()) points[r.step] = it->second;
  }
  Series s;
  s.name = std::move(name);
  s.style = style;
  for (const auto& [x, y] : points) s.x.push_back(x), s.y.push_back(y);
  return s;
}

std::size_t count_nonfinite(const std::vector<Series>& series) {
  std::size_t n = 0;
  for (const Series& s : series)
    for (double y : s.y) n += !std::isfinite(y);
  return n;
}

// The chart of the given series (those with points), or a note when none has any.
std::string chart(std::string_view name, std::string_view title, std::string_view y_label, std::vector<Series> series,
                  bool log_option, std::optional<double> y_min = {}, std::optional<double> y_max = {}) {
  std::vector<Series> kept;
  for (Series& s : series) {
    if (!s.x.empty()) kept.push_back(std::move(s));
  }
  if (kept.empty()) return note("No " + std::string(title) + " values in metrics.jsonl.");
  LineChart c;
  c.title = std::string(title);
  c.x_label = "step";
  c.y_label = std::string(y_label);
  c.width = 570;
  c.height = 300;
  c.y_min = y_min;
  c.y_max = y_max;
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (const Series& s : kept)
    for (double y : s.y)
      if (std::isfinite(y) && y > 0) lo = std::min(lo, y), hi = std::max(hi, y);
  for (std::size_t i = 0; i < kept.size(); ++i) {
    if (kept[i].color.empty()) kept[i].color = palette(i);
  }
  c.series = std::move(kept);
  std::string caption;
  if (const std::size_t bad = count_nonfinite(c.series); bad > 0) {
    caption =
        format_count(static_cast<std::int64_t>(bad)) + " non-finite value(s) (logged as null) are gaps in the curves.";
  }
  if (!log_option || !spans_decades(lo, hi, 2)) return figure(name, line_chart(c), escape(caption));
  // Values over more than two decades: a log scale first, linear a click away (CSS only).
  const std::string lin = line_chart(c);
  c.log_y = true;
  const std::string id = "log-" + std::string(name);
  std::string body = "<input type=\"checkbox\" class=\"logswitch\" id=\"" + id + "\" checked>";
  body += "<label class=\"toggle\" for=\"" + id + "\">log scale (values span " + format_number(std::log10(hi / lo), 2) +
          " decades)</label>\n";
  body += "<div class=\"log\">" + line_chart(c) + "</div>\n<div class=\"lin\">" + lin + "</div>";
  return figure(name, body, escape(caption));
}

}  // namespace

std::string training_section(const fs::path& run_dir) {
  const fs::path path = run_dir / "metrics.jsonl";
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return section("training", "Training curves", note("No metrics.jsonl in the run directory: no training curves."));
  }
  const Log log = read_log(path);
  if (log.rows.empty())
    return section("training", "Training curves", note("metrics.jsonl is empty: no training curves."));
  using Style = Series::Style;
  std::string body;
  std::vector<Series> loss;
  loss.push_back(collect(log, "train_loss", Rows::kSteps, "train_loss (step)", Style::kLine));
  loss.push_back(collect(log, "train_loss", Rows::kEpochEnds, "train_loss (epoch mean)", Style::kLineMarkers));
  loss.back().dashed = true;
  loss.push_back(collect(log, "val_loss", Rows::kAll, "val_loss", Style::kLineMarkers));
  loss.push_back(collect(log, "test_loss", Rows::kAll, "test_loss", Style::kMarkers));
  body += chart("loss", "loss", "loss", std::move(loss), false);

  std::vector<Series> acc;
  acc.push_back(collect(log, "train_acc", Rows::kSteps, "train_acc (step)", Style::kLine));
  acc.push_back(collect(log, "train_acc", Rows::kEpochEnds, "train_acc (epoch mean)", Style::kLineMarkers));
  acc.back().dashed = true;
  acc.push_back(collect(log, "val_acc", Rows::kAll, "val_acc", Style::kLineMarkers));
  acc.push_back(collect(log, "test_acc", Rows::kAll, "test_acc", Style::kMarkers));
  body += chart("accuracy", "accuracy", "accuracy", std::move(acc), false);

  // The learning rate is logged on step rows and repeated on epoch-end rows; prefer the former.
  Series lr = collect(log, "lr", Rows::kSteps, "lr", Style::kLine);
  if (lr.x.empty()) lr = collect(log, "lr", Rows::kAll, "lr", Style::kLine);
  body += chart("lr", "learning rate", "lr", {lr}, true);
  body += chart("grad_norm", "gradient norm", "grad_norm",
                {collect(log, "grad_norm", Rows::kAll, "grad_norm", Style::kLine)}, true);

  std::string notes;
  if (!log.other_keys.empty()) {
    std::string keys;
    for (const auto& k : log.other_keys) keys += (keys.empty() ? "" : ", ") + k;
    notes += "Also logged (not charted): " + keys + ". ";
  }
  if (log.without_step > 0)
    notes += format_count(static_cast<std::int64_t>(log.without_step)) + " row(s) without a step are not charted. ";
  if (log.truncated_tail)
    notes += "The last line of metrics.jsonl is incomplete (an interrupted write) and was ignored. ";
  const std::string intro = "<p class=\"foot\">" + format_count(static_cast<std::int64_t>(log.rows.size())) +
                            " rows from " + escape(path.string()) + "; the x axis is the optimiser step.</p>\n";
  return section("training", "Training curves", intro + body + (notes.empty() ? "" : note(notes)));
}

}  // namespace glassbox::report::detail
