// Inline SVG charts for the glass-box report: axes with "nice" ticks (1, 2 or 5 x 10^k, or
// decades on a log axis), line/marker charts with legends, a heat map with numbers in the
// cells, and a binned bar chart (the reliability diagram). Output is an <svg> element string
// that needs no script, font or stylesheet from outside.
//
//   LineChart c;
//   c.title = "loss"; c.x_label = "step"; c.y_label = "loss";
//   c.series.push_back({"train_loss", steps, losses});
//   std::string svg = line_chart(c);              // "<svg ...>...</svg>"
//
//   Axis a = linear_axis(0.13, 2.31);             // lo 0, hi 2.5, ticks 0 0.5 ... 2.5
//   Axis l = log_axis(8e-9, 2e-3);                // 1e-9 ... 1e-2, ticks at decades
//
// Every chart draws its own title and axis labels; text passes through escape(). Non-finite
// values are gaps (lines break there); on a log axis values <= 0 are gaps too. Long series are
// thinned to at most kMaxPoints points per series, keeping each bucket's extremes.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace glassbox::report {

// One axis: its ends (after widening to ticks, when snapped) and its tick positions.
struct Axis {
  double lo = 0;
  double hi = 1;
  bool log = false;
  double step = 0;            // linear axes: the tick step; log axes: 0
  std::vector<double> ticks;  // ascending, within [lo, hi]
};

// 1, 2 or 5 x 10^k closest to span / target_ticks.
double nice_step(double span, int target_ticks);
// A linear axis over [lo, hi]; `snap` widens the ends to multiples of the step. An empty or
// degenerate range (lo == hi) is widened around the value.
Axis linear_axis(double lo, double hi, int target_ticks = 5, bool snap = true);
// A log10 axis over [lo, hi] (both > 0): ends at whole decades; ticks at decades (every n-th
// one when there are many), with 2 and 5 in between when the range spans at most two decades.
Axis log_axis(double lo, double hi);
// Whether positive values from lo to hi span more than `decades` powers of ten.
bool spans_decades(double lo, double hi, double decades);
// The label of a tick: as many decimals as the step needs ("0.25" is never "0.250000").
std::string tick_label(double v, const Axis& axis);

// Colour of the i-th series (10 distinguishable colours, then again with dashes).
std::string palette(std::size_t i);

constexpr std::size_t kMaxPoints = 1500;

struct Series {
  enum class Style { kLine, kLineMarkers, kMarkers };
  Series() = default;
  Series(std::string label, std::vector<double> xs, std::vector<double> ys, Style s = Style::kLine)
      : name(std::move(label)), x(std::move(xs)), y(std::move(ys)), style(s) {}
  std::string name;       // the legend entry (empty: not in the legend)
  std::vector<double> x;  // same length as y
  std::vector<double> y;
  Style style = Style::kLine;
  std::string color;  // empty: palette(index)
  bool dashed = false;
};

struct LineChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<Series> series;
  bool log_y = false;
  std::optional<double> x_min, x_max, y_min, y_max;  // fixed ends; otherwise from the data
  bool diagonal = false;                             // draw y = x as a reference
  int width = 720;
  int height = 320;
};
std::string line_chart(const LineChart& chart);

struct HeatMap {
  std::string title;
  std::string x_label;  // columns
  std::string y_label;  // rows
  std::vector<std::string> row_labels;
  std::vector<std::string> col_labels;
  std::vector<std::vector<double>> values;  // [rows][cols], printed in the cells
  std::vector<std::vector<double>> shade;   // [rows][cols] in [0, 1]: the cell colour
  std::string shade_low = "0";              // colour-bar end labels
  std::string shade_high = "1";
};
// Cells are at most 48 px and at least 12 px; numbers are left out of cells too small to hold
// them (each cell's <title> still carries row, column and value).
std::string heat_map(const HeatMap& map);

// Bars over [lower, upper) intervals of a [0, 1] x axis, with a second value per bin drawn as a
// band from the bar's top to it (the reliability diagram: bar = accuracy, band = the gap to the
// mean confidence), the diagonal, and each bin's count under the axis.
struct BinChart {
  struct Bin {
    double lower = 0;
    double upper = 0;
    std::int64_t count = 0;
    std::optional<double> value;      // bar height in [0, 1]
    std::optional<double> reference;  // the band's other end in [0, 1]
  };
  std::string title;
  std::string x_label;
  std::string y_label;
  std::string value_name = "value";
  std::string reference_name = "reference";
  std::vector<Bin> bins;
  int width = 560;
  int height = 420;
};
std::string bin_chart(const BinChart& chart);

// 950 -> "950", 9512 -> "9.5k", 1234567 -> "1.2M".
std::string compact_count(std::int64_t n);

}  // namespace glassbox::report
