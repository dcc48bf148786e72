// Axis ticks and the SVG charts.
#include "glassbox/report/svg.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <gtest/gtest.h>

namespace glassbox::report {
namespace {

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

// The d attributes of all <path> elements, concatenated.
std::string path_data(const std::string& svg) {
  std::string out;
  for (auto p = svg.find("<path d=\""); p != std::string::npos; p = svg.find("<path d=\"", p + 1)) {
    const auto from = p + 9;
    out += svg.substr(from, svg.find('"', from) - from);
  }
  return out;
}

void expect_ticks(const Axis& a, const std::vector<double>& want) {
  ASSERT_EQ(a.ticks.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(a.ticks[i], want[i], std::fabs(want[i]) * 1e-9 + 1e-15) << i;
}

TEST(Svg, NiceStepsAreOneTwoOrFiveTimesAPowerOfTen) {
  EXPECT_DOUBLE_EQ(nice_step(10, 5), 2);
  EXPECT_DOUBLE_EQ(nice_step(1, 5), 0.2);
  EXPECT_DOUBLE_EQ(nice_step(7000, 6), 1000);
  EXPECT_DOUBLE_EQ(nice_step(2.18, 5), 0.5);
  EXPECT_NEAR(nice_step(0.013, 5), 0.002, 1e-15);
  EXPECT_DOUBLE_EQ(nice_step(0, 5), 1);  // degenerate
  for (double span : {0.0031, 0.77, 3.0, 42.0, 999.0, 123456.0}) {
    const double s = nice_step(span, 5);
    const double m = s / std::pow(10.0, std::floor(std::log10(s) + 1e-12));
    EXPECT_TRUE(std::fabs(m - 1) < 1e-9 || std::fabs(m - 2) < 1e-9 || std::fabs(m - 5) < 1e-9) << span << " -> " << s;
    EXPECT_GE(span / s, 2);
    EXPECT_LE(span / s, 14);
  }
}

TEST(Svg, LinearAxisSnapsToTicks) {
  const Axis a = linear_axis(0.13, 2.31, 5);
  EXPECT_DOUBLE_EQ(a.step, 0.5);
  EXPECT_DOUBLE_EQ(a.lo, 0);
  EXPECT_DOUBLE_EQ(a.hi, 2.5);
  expect_ticks(a, {0, 0.5, 1, 1.5, 2, 2.5});
  const Axis s = linear_axis(50, 6450, 6, false);  // unsnapped: ends stay, ticks inside
  EXPECT_DOUBLE_EQ(s.lo, 50);
  EXPECT_DOUBLE_EQ(s.hi, 6450);
  expect_ticks(s, {1000, 2000, 3000, 4000, 5000, 6000});
  const Axis neg = linear_axis(-0.7, 0.3, 5);
  expect_ticks(neg, {-0.8, -0.6, -0.4, -0.2, 0, 0.2, 0.4});
  EXPECT_EQ(neg.ticks[4], 0.0);  // exactly zero, not 1e-17
  const Axis d = linear_axis(3, 3);
  EXPECT_LT(d.lo, 3);
  EXPECT_GT(d.hi, 3);
  EXPECT_GE(d.ticks.size(), 2u);
}

TEST(Svg, LogAxisUsesDecades) {
  const Axis a = log_axis(8e-9, 2e-3);
  EXPECT_TRUE(a.log);
  EXPECT_NEAR(a.lo, 1e-9, 1e-24);
  EXPECT_NEAR(a.hi, 1e-2, 1e-17);
  expect_ticks(a, {1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2});
  expect_ticks(log_axis(0.5, 20), {0.1, 1, 10, 100});
  expect_ticks(log_axis(0.3, 4), {0.1, 0.2, 0.5, 1, 2, 5, 10});
  EXPECT_LE(log_axis(1e-20, 1).ticks.size(), 11u);  // many decades: every n-th
  EXPECT_TRUE(spans_decades(1e-6, 1e-2, 2));
  EXPECT_FALSE(spans_decades(0.1, 5, 2));
  EXPECT_FALSE(spans_decades(0, 5, 2));
}

TEST(Svg, TickLabelsAreReadable) {
  const Axis a = linear_axis(0, 1, 5);
  std::vector<std::string> labels;
  for (double t : a.ticks) labels.push_back(tick_label(t, a));
  EXPECT_EQ(labels, (std::vector<std::string>{"0", "0.2", "0.4", "0.6", "0.8", "1.0"}));
  const Axis b = linear_axis(0.1, 0.3, 5);
  EXPECT_EQ(tick_label(b.ticks[3], b), "0.25");
  const Axis c = linear_axis(0, 7000, 6);
  EXPECT_EQ(tick_label(3000, c), "3000");
  const Axis l = log_axis(1e-6, 1e-2);
  EXPECT_EQ(tick_label(1e-5, l), "1e-5");
  EXPECT_EQ(tick_label(0.01, l), "0.01");
  const Axis tiny = linear_axis(0, 5e-5, 5);
  EXPECT_EQ(tick_label(2e-5, tiny), "2e-5");
  // A learning-rate axis 0..0.002 in steps of 5e-4: every label distinct (0.0015 was "0.002").
  const Axis lr = linear_axis(0, 0.002, 5);
  std::vector<std::string> lr_labels;
  for (double t : lr.ticks) lr_labels.push_back(tick_label(t, lr));
  EXPECT_EQ(std::set<std::string>(lr_labels.begin(), lr_labels.end()).size(), lr_labels.size())
      << ::testing::PrintToString(lr_labels);
  EXPECT_EQ(compact_count(950), "950");
  EXPECT_EQ(compact_count(9512), "9.5k");
  EXPECT_EQ(compact_count(95123), "95k");
  EXPECT_EQ(compact_count(1234567), "1.2M");
}

TEST(Svg, LineChartHasAxesLegendAndEscapedText) {
  LineChart c;
  c.title = "loss <train>";
  c.x_label = "step";
  c.y_label = "loss";
  c.series.push_back({"train & val", {1, 2, 3, 4}, {1.0, 0.8, NAN, 0.5}});
  c.series.push_back({"test", {4}, {0.6}, Series::Style::kMarkers});
  const std::string svg = line_chart(c);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 6), "</svg>");
  EXPECT_NE(svg.find("loss &lt;train&gt;"), std::string::npos);
  EXPECT_NE(svg.find(">train &amp; val</text>"), std::string::npos);
  EXPECT_NE(svg.find(">test</text>"), std::string::npos);
  EXPECT_EQ(count(svg, "<path d=\"M"), 1u);
  EXPECT_EQ(count(path_data(svg), "M"), 2u) << "the NaN splits the line into two runs";
  EXPECT_GE(count(svg, "<circle"), 2u);                   // the lone point after the gap, and the test marker
  EXPECT_NE(svg.find(">0.6</text>"), std::string::npos);  // a y tick
}

TEST(Svg, LogChartSkipsNonPositiveValues) {
  LineChart c;
  c.y_label = "lr";
  c.log_y = true;
  c.series.push_back({"lr", {1, 2, 3, 4}, {1e-2, 1e-4, 0.0, 1e-6}});
  const std::string svg = line_chart(c);
  EXPECT_NE(svg.find("lr (log)"), std::string::npos);
  EXPECT_NE(svg.find(">1e-6</text>"), std::string::npos);
  EXPECT_NE(svg.find(">0.01</text>"), std::string::npos);
  EXPECT_EQ(count(svg, "<circle"), 1u);  // the 1e-6 point is alone after the gap
}

TEST(Svg, LongSeriesAreThinnedButKeepTheirExtremes) {
  Series s{"noise", {}, {}};
  for (int i = 0; i < 100000; ++i) s.x.push_back(i), s.y.push_back(std::sin(i * 0.01));
  s.y[54321] = 50;  // a spike must survive thinning
  LineChart c;
  c.series.push_back(s);
  const std::string svg = line_chart(c);
  EXPECT_LE(count(path_data(svg), "L"), kMaxPoints + 10);
  EXPECT_GE(count(path_data(svg), "L"), kMaxPoints / 2);
  EXPECT_NE(svg.find(">50</text>"), std::string::npos) << "the y axis reaches the spike";
  EXPECT_LT(svg.size(), 40000u);
}

TEST(Svg, EmptyChartSaysNoData) {
  LineChart c;
  c.series.push_back({"nothing", {1, 2}, {NAN, NAN}});
  EXPECT_NE(line_chart(c).find("no data"), std::string::npos);
}

TEST(Svg, HeatMapPrintsCountsAndLabels) {
  HeatMap h;
  h.x_label = "predicted";
  h.y_label = "true";
  h.row_labels = h.col_labels = {"cat & dog", "bird"};
  h.values = {{1234, 3}, {0, 7}};
  h.shade = {{0.99, 0.01}, {0.0, 1.0}};
  const std::string svg = heat_map(h);
  EXPECT_NE(svg.find(">1,234</text>"), std::string::npos);
  EXPECT_NE(svg.find(">7</text>"), std::string::npos);
  EXPECT_NE(svg.find(">cat &amp; dog</text>"), std::string::npos);
  EXPECT_NE(svg.find("<title>true bird, predicted cat &amp; dog: 0</title>"), std::string::npos);
  EXPECT_EQ(count(svg, "<title>"), 4u);
  // 100 classes: cells too small for numbers, tooltips stay.
  HeatMap big;
  for (int i = 0; i < 100; ++i) big.row_labels.push_back("c" + std::to_string(i));
  big.col_labels = big.row_labels;
  big.values.assign(100, std::vector<double>(100, 12345));
  big.shade.assign(100, std::vector<double>(100, 0.5));
  const std::string s2 = heat_map(big);
  EXPECT_EQ(s2.find(">12,345</text>"), std::string::npos);
  EXPECT_EQ(count(s2, "<title>"), 10000u);
}

TEST(Svg, BinChartDrawsBarsBandsAndCounts) {
  BinChart b;
  b.value_name = "accuracy";
  b.reference_name = "gap";
  b.bins = {{0.0, 0.5, 0, std::nullopt, std::nullopt}, {0.5, 1.0, 9512, 0.7, 0.8}};
  const std::string svg = bin_chart(b);
  EXPECT_NE(svg.find(">9.5k</text>"), std::string::npos);
  EXPECT_EQ(count(svg, "fill=\"#4c7fbf\" stroke"), 1u);  // one bar: the empty bin has none
  EXPECT_EQ(count(svg, "fill=\"#f3a6a6\" fill-opacity"), 1u);
  EXPECT_NE(svg.find("stroke-dasharray=\"5 4\""), std::string::npos);  // the diagonal
}

}  // namespace
}  // namespace glassbox::report
