// The heat map and the binned bar chart of svg.h.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "glassbox/report/html.h"
#include "glassbox/report/svg.h"
#include "glassbox/report/svg_internal.h"

namespace glassbox::report {

using namespace svg_detail;

namespace {

// White to deep blue.
std::string shade_color(double s) {
  if (!std::isfinite(s)) s = 0;
  s = std::clamp(s, 0.0, 1.0);
  const auto mix = [s](double a, double b) { return static_cast<int>(std::lround(a + (b - a) * s)); };
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", mix(247, 22), mix(250, 62), mix(253, 128));
  return buf;
}

std::string cell_value(double v) {
  if (std::isfinite(v) && v == std::round(v) && std::fabs(v) < 1e15) return format_count(static_cast<std::int64_t>(v));
  return format_number(v, 3);
}

std::string rect(double x, double y, double w, double h, std::string_view attrs) {
  return "<rect x=\"" + c(x) + "\" y=\"" + c(y) + "\" width=\"" + c(std::max(0.0, w)) + "\" height=\"" +
         c(std::max(0.0, h)) + "\" " + std::string(attrs);
}

}  // namespace

std::string heat_map(const HeatMap& m) {
  const std::size_t nr = m.row_labels.size(), nc = m.col_labels.size();
  const double cs = std::clamp(std::floor(560.0 / static_cast<double>(std::max<std::size_t>({nr, nc, 1}))), 12.0, 48.0);
  std::vector<std::string> rl, cl;
  double row_w = 0, col_w = 0;
  for (const auto& s : m.row_labels) rl.push_back(shorten(s, 18)), row_w = std::max(row_w, text_width(rl.back(), 11));
  for (const auto& s : m.col_labels) cl.push_back(shorten(s, 18)), col_w = std::max(col_w, text_width(cl.back(), 11));
  std::size_t value_chars = 1;
  for (const auto& row : m.values)
    for (double v : row) value_chars = std::max(value_chars, cell_value(v).size());
  const double left = 30 + row_w + 8, top = m.title.empty() ? 12 : 32;
  const double gw = cs * static_cast<double>(nc), gh = cs * static_cast<double>(nr);
  const double bottom = col_w * 0.72 + 16 + 24;
  const double bar_x = left + gw + 18;
  const double right = 18 + 12 + 6 + std::max(text_width(m.shade_low, 11), text_width(m.shade_high, 11)) + 10;
  const int width = static_cast<int>(std::ceil(std::max(left + gw + right, left + text_width(m.title, 13) + 10)));
  const int height = static_cast<int>(std::ceil(top + gh + bottom));
  const double fs = std::min(12.0, (cs - 4) / (0.6 * static_cast<double>(value_chars)));

  std::string out = open(width, height, m.title);
  if (!m.title.empty()) out += text(left, 20, m.title, "font-size=\"13\" font-weight=\"600\" fill=\"#1a202c\"");
  for (std::size_t r = 0; r < nr; ++r) {
    const double y = top + cs * static_cast<double>(r);
    for (std::size_t k = 0; k < nc; ++k) {
      const double x = left + cs * static_cast<double>(k);
      const double v = r < m.values.size() && k < m.values[r].size() ? m.values[r][k] : 0.0;
      const double s = r < m.shade.size() && k < m.shade[r].size() ? m.shade[r][k] : 0.0;
      out += rect(x, y, cs, cs,
                  "fill=\"" + shade_color(s) + "\" stroke=\"#ffffff\"><title>" +
                      escape(m.y_label + " " + m.row_labels[r] + ", " + m.x_label + " " + m.col_labels[k] + ": " +
                             cell_value(v)) +
                      "</title></rect>");
      if (fs >= 7) {
        const std::string color = std::isfinite(s) && s > 0.55 ? "#ffffff" : "#1a202c";
        out += text(x + cs / 2, y + cs / 2 + fs * 0.36, cell_value(v),
                    "font-size=\"" + c(fs) + "\" text-anchor=\"middle\" fill=\"" + color + "\"");
      }
    }
    out += text(left - 6, y + cs / 2 + 4, rl[r], "font-size=\"11\" text-anchor=\"end\" fill=\"#1a202c\"");
  }
  for (std::size_t k = 0; k < nc; ++k) {
    const double x = left + cs * (static_cast<double>(k) + 0.5), y = top + gh + 12;
    out += text(
        x, y, cl[k],
        "font-size=\"11\" text-anchor=\"end\" fill=\"#1a202c\" transform=\"rotate(-45 " + c(x) + " " + c(y) + ")\"");
  }
  out += rect(left, top, gw, gh, "fill=\"none\" stroke=\"#4a5568\"/>\n");
  out += text(left + gw / 2, height - 8, m.x_label, "font-size=\"12\" text-anchor=\"middle\" fill=\"#1a202c\"");
  const double ymid = top + gh / 2;
  out += text(14, ymid, m.y_label,
              "font-size=\"12\" text-anchor=\"middle\" fill=\"#1a202c\" transform=\"rotate(-90 14 " + c(ymid) + ")\"");
  // The colour bar: ten steps from shade_high (top) to shade_low (bottom).
  for (int i = 0; i < 10; ++i) {
    out +=
        rect(bar_x, top + gh * i / 10.0, 12, gh / 10.0 + 0.5, "fill=\"" + shade_color(1.0 - (i + 0.5) / 10.0) + "\"/>");
  }
  out += rect(bar_x, top, 12, gh, "fill=\"none\" stroke=\"#4a5568\"/>\n");
  out += text(bar_x + 18, top + 10, m.shade_high, "font-size=\"11\" fill=\"#4a5568\"");
  out += text(bar_x + 18, top + gh, m.shade_low, "font-size=\"11\" fill=\"#4a5568\"");
  return out + "</svg>";
}

std::string bin_chart(const BinChart& ch) {
  const double left = 52, right = 16, top = 50, bottom = 66;
  const double pw = ch.width - left - right, ph = ch.height - top - bottom;
  const Axis a = linear_axis(0, 1, 5, true);
  auto px = [&](double x) { return left + std::clamp(x, 0.0, 1.0) * pw; };
  auto py = [&](double y) { return top + ph - std::clamp(y, 0.0, 1.0) * ph; };

  std::string out = open(ch.width, ch.height, ch.title);
  if (!ch.title.empty()) out += text(left, 19, ch.title, "font-size=\"13\" font-weight=\"600\" fill=\"#1a202c\"");
  out += legend_entry(left, 40, "#4c7fbf", false, Symbol::kSquare, ch.value_name);
  const double second = left + 40 + text_width(ch.value_name, 11);
  out += legend_entry(second, 40, "#f3a6a6", false, Symbol::kSquare, ch.reference_name);
  out += legend_entry(second + 40 + text_width(ch.reference_name, 11), 40, "#a0aec0", true, Symbol::kLine, "y = x");
  for (double t : a.ticks) {
    out += "<line x1=\"" + c(left) + "\" y1=\"" + c(py(t)) + "\" x2=\"" + c(left + pw) + "\" y2=\"" + c(py(t)) +
           "\" stroke=\"" + kGridColor + "\"/>";
    out += text(left - 6, py(t) + 4, tick_label(t, a), "font-size=\"11\" text-anchor=\"end\" fill=\"#4a5568\"");
    out += text(px(t), top + ph + 16, tick_label(t, a), "font-size=\"11\" text-anchor=\"middle\" fill=\"#4a5568\"");
  }
  out += "\n";
  double max_chars = 1;
  for (const auto& b : ch.bins) max_chars = std::max(max_chars, static_cast<double>(compact_count(b.count).size()));
  for (const auto& b : ch.bins) {
    const double x0 = px(b.lower), x1 = px(b.upper), w = x1 - x0;
    std::string tip =
        "[" + format_number(b.lower, 3) + ", " + format_number(b.upper, 3) + "): " + format_count(b.count) + " samples";
    if (b.value) tip += ", " + ch.value_name + " " + format_number(*b.value, 3);
    if (b.reference) tip += ", " + ch.reference_name + " " + format_number(*b.reference, 3);
    if (b.value && std::isfinite(*b.value)) {
      out += rect(x0 + 0.5, py(*b.value), w - 1, py(0) - py(*b.value),
                  "fill=\"#4c7fbf\" stroke=\"#ffffff\"><title>" + escape(tip) + "</title></rect>");
      if (b.reference && std::isfinite(*b.reference)) {
        const double ya = py(std::max(*b.value, *b.reference)), yb = py(std::min(*b.value, *b.reference));
        out += rect(x0 + 0.5, ya, w - 1, yb - ya,
                    "fill=\"#f3a6a6\" fill-opacity=\"0.55\" stroke=\"#c53030\" stroke-width=\"0.8\"><title>" +
                        escape(tip) + "</title></rect>");
      }
    }
    const double fs = std::min(10.0, (w - 2) / (0.6 * max_chars));
    if (fs >= 6) {
      out += text(x0 + w / 2, top + ph + 32, compact_count(b.count),
                  "font-size=\"" + c(fs) + "\" text-anchor=\"middle\" fill=\"#4a5568\"");
    }
  }
  out += "<line x1=\"" + c(px(0)) + "\" y1=\"" + c(py(0)) + "\" x2=\"" + c(px(1)) + "\" y2=\"" + c(py(1)) +
         "\" stroke=\"#718096\" stroke-dasharray=\"5 4\"/>\n";
  out += rect(left, top, pw, ph, "fill=\"none\" stroke=\"#4a5568\"/>\n");
  out += text(left - 6, top + ph + 32, "n", "font-size=\"10\" text-anchor=\"end\" fill=\"#4a5568\"");
  out += text(left + pw / 2, ch.height - 8, ch.x_label, "font-size=\"12\" text-anchor=\"middle\" fill=\"#1a202c\"");
  const double ymid = top + ph / 2;
  out += text(14, ymid, ch.y_label,
              "font-size=\"12\" text-anchor=\"middle\" fill=\"#1a202c\" transform=\"rotate(-90 14 " + c(ymid) + ")\"");
  return out + "</svg>";
}

}  // namespace glassbox::report
