#include "glassbox/report/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "glassbox/report/html.h"
#include "glassbox/report/svg_internal.h"

namespace glassbox::report {

namespace svg_detail {

std::string c(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return std::string(buf) == "-0.0" ? "0.0" : buf;
}

std::string open(int width, int height, std::string_view label) {
  const std::string w = std::to_string(width), h = std::to_string(height);
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w + "\" height=\"" + h + "\" viewBox=\"0 0 " + w + " " +
         h + "\" role=\"img\" aria-label=\"" + escape(label) + "\">\n<rect width=\"" + w + "\" height=\"" + h +
         "\" fill=\"#ffffff\"/>\n";
}

std::string text(double x, double y, std::string_view s, std::string_view attrs) {
  std::string out = "<text x=\"" + c(x) + "\" y=\"" + c(y) + "\"";
  if (!attrs.empty()) out += " " + std::string(attrs);
  return out + ">" + escape(s) + "</text>\n";
}

std::string legend_entry(double x, double y, std::string_view color, bool dashed, Symbol symbol,
                         std::string_view label) {
  std::string out;
  if (symbol == Symbol::kSquare) {
    out += "<rect x=\"" + c(x) + "\" y=\"" + c(y - 9) + "\" width=\"16\" height=\"10\" fill=\"" + std::string(color) +
           "\"/>";
  }
  if (symbol == Symbol::kDot || symbol == Symbol::kLineDot) {
    out += "<circle cx=\"" + c(x + 9) + "\" cy=\"" + c(y - 4) + "\" r=\"3\" fill=\"" + std::string(color) + "\"/>";
  }
  if (symbol == Symbol::kLine || symbol == Symbol::kLineDot) {
    out += "<line x1=\"" + c(x) + "\" y1=\"" + c(y - 4) + "\" x2=\"" + c(x + 18) + "\" y2=\"" + c(y - 4) +
           "\" stroke=\"" + std::string(color) + "\" stroke-width=\"2.5\"" +
           (dashed ? " stroke-dasharray=\"5 3\"" : "") + "/>";
  }
  return out + text(x + 24, y, label, "font-size=\"11\" fill=\"#1a202c\"");
}

std::string shorten(std::string_view label, std::size_t max_chars) {
  if (max_chars < 2) return std::string(label);
  std::size_t chars = 0, i = 0, cut = std::string_view::npos;
  for (; i < label.size(); ++i) {
    if ((static_cast<unsigned char>(label[i]) & 0xC0) == 0x80) continue;  // continuation byte
    if (chars == max_chars - 1) cut = i;
    if (++chars > max_chars) return std::string(label.substr(0, cut)) + "\xE2\x80\xA6";
  }
  return std::string(label);
}

double text_width(std::string_view s, double size) {
  std::size_t chars = 0;
  for (char ch : s) chars += (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
  return static_cast<double>(chars) * size * 0.6;
}

}  // namespace svg_detail

using namespace svg_detail;

double nice_step(double span, int target_ticks) {
  if (!(span > 0) || !std::isfinite(span)) return 1;
  const double raw = span / std::max(1, target_ticks);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  const double nice = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
  return nice * mag;
}

Axis linear_axis(double lo, double hi, int target_ticks, bool snap) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (lo > hi) std::swap(lo, hi);
  if (hi - lo <= std::fabs(hi) * 1e-12) {
    const double d = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= d, hi += d;
  }
  Axis a;
  a.step = nice_step(hi - lo, target_ticks);
  const double eps = a.step * 1e-9;
  if (snap) {
    lo = std::floor(lo / a.step + 1e-9) * a.step;
    hi = std::ceil(hi / a.step - 1e-9) * a.step;
  }
  a.lo = lo, a.hi = hi;
  for (auto k = static_cast<std::int64_t>(std::ceil(lo / a.step - 1e-9)); k * a.step <= hi + eps; ++k) {
    const double v = static_cast<double>(k) * a.step;
    a.ticks.push_back(k == 0 ? 0.0 : v);
  }
  return a;
}

Axis log_axis(double lo, double hi) {
  if (!(lo > 0) || !std::isfinite(lo)) lo = 1;
  if (!(hi > 0) || !std::isfinite(hi)) hi = lo * 10;
  if (lo > hi) std::swap(lo, hi);
  auto lo10 = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
  auto hi10 = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
  if (hi10 <= lo10) hi10 = lo10 + 1;
  Axis a;
  a.log = true;
  a.lo = std::pow(10.0, lo10);
  a.hi = std::pow(10.0, hi10);
  const int decades = hi10 - lo10;
  const int every = decades > 8 ? (decades + 7) / 8 : 1;
  for (int k = lo10; k <= hi10; ++k) {
    if ((k - lo10) % every != 0) continue;
    const double base = std::pow(10.0, k);
    a.ticks.push_back(base);
    if (decades <= 2 && k < hi10) {
      a.ticks.push_back(2 * base);
      a.ticks.push_back(5 * base);
    }
  }
  return a;
}

bool spans_decades(double lo, double hi, double decades) {
  return lo > 0 && hi > 0 && std::isfinite(lo) && std::isfinite(hi) && std::log10(hi / lo) > decades;
}

std::string tick_label(double v, const Axis& axis) {
  if (axis.log) return format_number(v, 2);
  if (v == 0) return "0";
  const double biggest = std::max(std::fabs(axis.lo), std::fabs(axis.hi));
  if (axis.step < 1e-3 || biggest >= 1e6) {
    // Scientific, with as many digits as the step needs relative to the value's magnitude.
    // (0.0015 on a 5e-4 step needs 2: the leading digit's place minus the step's, plus one.)
    const int digits =
        static_cast<int>(std::floor(std::log10(std::fabs(v)) + 1e-9) - std::floor(std::log10(axis.step) + 1e-9)) + 1;
    return format_number(v, std::clamp(digits, 1, 6));
  }
  const int decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(axis.step) - 1e-9)));
  return format_fixed(v, decimals);
}

std::string palette(std::size_t i) {
  static constexpr const char* kColors[] = {"#2b6cb0", "#dd6b20", "#2f855a", "#c53030", "#6b46c1",
                                            "#975a16", "#d53f8c", "#4a5568", "#b7791f", "#2c7a7b"};
  return kColors[i % 10];
}

namespace {

struct Pt {
  double x, y;
};

// Finite (and, on a log axis, positive) runs of a series, each thinned to its share of kMaxPoints.
std::vector<std::vector<Pt>> segments(const Series& s, bool log_y) {
  std::vector<std::vector<Pt>> segs(1);
  std::size_t total = 0;
  const std::size_t n = std::min(s.x.size(), s.y.size());
  for (std::size_t i = 0; i < n; ++i) {
    const double x = s.x[i], y = s.y[i];
    if (!std::isfinite(x) || !std::isfinite(y) || (log_y && y <= 0)) {
      if (!segs.back().empty()) segs.emplace_back();
      continue;
    }
    segs.back().push_back({x, y});
    ++total;
  }
  if (segs.back().empty()) segs.pop_back();
  if (total <= kMaxPoints) return segs;
  for (auto& seg : segs) {
    const std::size_t budget = std::max<std::size_t>(2, kMaxPoints * seg.size() / total);
    if (seg.size() <= budget) continue;
    const std::size_t buckets = std::max<std::size_t>(1, budget / 2);
    std::vector<Pt> out;
    for (std::size_t b = 0; b < buckets; ++b) {
      const std::size_t from = seg.size() * b / buckets, to = seg.size() * (b + 1) / buckets;
      if (from >= to) continue;
      std::size_t lo = from, hi = from;
      for (std::size_t i = from; i < to; ++i) {
        if (seg[i].y < seg[lo].y) lo = i;
        if (seg[i].y > seg[hi].y) hi = i;
      }
      out.push_back(seg[std::min(lo, hi)]);
      if (lo != hi) out.push_back(seg[std::max(lo, hi)]);
    }
    seg = std::move(out);
  }
  return segs;
}

}  // namespace

std::string line_chart(const LineChart& ch) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<std::vector<Pt>>> segs;
  double xmin = kInf, xmax = -kInf, ymin = kInf, ymax = -kInf;
  for (const Series& s : ch.series) {
    segs.push_back(segments(s, ch.log_y));
    for (const auto& seg : segs.back()) {
      for (const Pt& p : seg) {
        xmin = std::min(xmin, p.x), xmax = std::max(xmax, p.x);
        ymin = std::min(ymin, p.y), ymax = std::max(ymax, p.y);
      }
    }
  }
  const bool empty = xmin > xmax;
  if (empty) xmin = 0, xmax = 1, ymin = ch.log_y ? 1 : 0, ymax = ch.log_y ? 10 : 1;
  if (ch.x_min) xmin = *ch.x_min;
  if (ch.x_max) xmax = *ch.x_max;
  if (ch.y_min) ymin = *ch.y_min;
  if (ch.y_max) ymax = *ch.y_max;
  const Axis ax = linear_axis(xmin, xmax, 6, ch.x_min.has_value() && ch.x_max.has_value());
  const Axis ay = ch.log_y ? log_axis(ymin, ymax) : linear_axis(ymin, ymax, 5, true);

  // Margins: the y tick labels on the left, the legend on the right.
  double label_w = 0;
  for (double t : ay.ticks) label_w = std::max(label_w, text_width(tick_label(t, ay), 11));
  const double left = 30 + label_w + 6, top = ch.title.empty() ? 12 : 30, bottom = 44;
  std::vector<std::size_t> named;
  double legend_w = 0;
  for (std::size_t i = 0; i < ch.series.size(); ++i) {
    if (ch.series[i].name.empty()) continue;
    named.push_back(i);
    legend_w = std::max(legend_w, 34 + text_width(shorten(ch.series[i].name, 32), 11));
  }
  const double ph = ch.height - top - bottom;
  const auto rows = static_cast<std::size_t>(std::max(1.0, std::floor(ph / 17)));
  // Legend columns: as many as the entries need, at most 3, and never more than 40 % of the width.
  const auto fit = static_cast<std::size_t>(std::max(1.0, std::floor(0.4 * ch.width / std::max(1.0, legend_w))));
  const std::size_t cols = std::min<std::size_t>({3, fit, (named.size() + rows - 1) / rows});
  const double right = 14 + legend_w * static_cast<double>(cols);
  const double pw = std::max(80.0, ch.width - left - right);

  auto px = [&](double x) { return left + std::clamp((x - ax.lo) / (ax.hi - ax.lo), 0.0, 1.0) * pw; };
  auto py = [&](double y) {
    const double f = ay.log ? (std::log10(y) - std::log10(ay.lo)) / (std::log10(ay.hi) - std::log10(ay.lo))
                            : (y - ay.lo) / (ay.hi - ay.lo);
    return top + ph - std::clamp(f, 0.0, 1.0) * ph;
  };

  std::string out = open(ch.width, ch.height, ch.title.empty() ? ch.y_label : ch.title);
  if (!ch.title.empty()) out += text(left, 19, ch.title, "font-size=\"13\" font-weight=\"600\" fill=\"#1a202c\"");
  for (double t : ay.ticks) {
    const double y = py(t);
    out += "<line x1=\"" + c(left) + "\" y1=\"" + c(y) + "\" x2=\"" + c(left + pw) + "\" y2=\"" + c(y) +
           "\" stroke=\"" + kGridColor + "\"/>";
    out += text(left - 6, y + 4, tick_label(t, ay), "font-size=\"11\" text-anchor=\"end\" fill=\"#4a5568\"");
  }
  for (double t : ax.ticks) {
    const double x = px(t);
    out += "<line x1=\"" + c(x) + "\" y1=\"" + c(top + ph) + "\" x2=\"" + c(x) + "\" y2=\"" + c(top + ph + 5) +
           "\" stroke=\"" + kAxisColor + "\"/>";
    out += text(x, top + ph + 18, tick_label(t, ax), "font-size=\"11\" text-anchor=\"middle\" fill=\"#4a5568\"");
  }
  out += "<rect x=\"" + c(left) + "\" y=\"" + c(top) + "\" width=\"" + c(pw) + "\" height=\"" + c(ph) +
         "\" fill=\"none\" stroke=\"" + kAxisColor + "\"/>\n";
  out += text(left + pw / 2, ch.height - 8, ch.x_label, "font-size=\"12\" text-anchor=\"middle\" fill=\"#1a202c\"");
  const double ymid = top + ph / 2;
  out += text(14, ymid, ch.y_label + (ay.log ? " (log)" : ""),
              "font-size=\"12\" text-anchor=\"middle\" fill=\"#1a202c\" transform=\"rotate(-90 14 " + c(ymid) + ")\"");
  if (ch.diagonal && !ay.log) {
    const double a = std::max(ax.lo, ay.lo), b = std::min(ax.hi, ay.hi);
    if (b > a) {
      out += "<line x1=\"" + c(px(a)) + "\" y1=\"" + c(py(a)) + "\" x2=\"" + c(px(b)) + "\" y2=\"" + c(py(b)) +
             "\" stroke=\"#a0aec0\" stroke-dasharray=\"4 4\"/>\n";
    }
  }
  if (empty) out += text(left + pw / 2, ymid, "no data", "font-size=\"13\" text-anchor=\"middle\" fill=\"#718096\"");

  for (std::size_t i = 0; i < ch.series.size(); ++i) {
    const Series& s = ch.series[i];
    const std::string color = s.color.empty() ? palette(i) : s.color;
    const bool dashed = s.dashed || (s.color.empty() && i >= 10);
    std::size_t points = 0;
    for (const auto& seg : segs[i]) points += seg.size();
    const bool markers = s.style != Series::Style::kLine;
    const std::string r = points > 300 ? "1.5" : "3";
    out += "<g fill=\"" + color + "\">";
    if (s.style != Series::Style::kMarkers) {
      std::string d;
      for (const auto& seg : segs[i]) {
        for (std::size_t k = 0; k < seg.size(); ++k) {
          d += k == 0 ? 'M' : 'L';
          d += c(px(seg[k].x));
          d += ' ';
          d += c(py(seg[k].y));
        }
      }
      if (!d.empty()) {
        out += "<path d=\"" + d + "\" fill=\"none\" stroke=\"" + color +
               "\" stroke-width=\"1.8\" stroke-linejoin=\"round\"" + (dashed ? " stroke-dasharray=\"6 3\"" : "") + "/>";
      }
    }
    for (const auto& seg : segs[i]) {
      for (const Pt& p : seg) {
        if (markers || seg.size() == 1)
          out += "<circle cx=\"" + c(px(p.x)) + "\" cy=\"" + c(py(p.y)) + "\" r=\"" + r + "\"/>";
      }
    }
    out += "</g>\n";
  }

  // Legend: up to three columns to the right of the plot; what does not fit is summarised.
  const std::size_t capacity = rows * cols;
  for (std::size_t k = 0; k < named.size() && k < capacity; ++k) {
    const std::size_t column = k / rows;
    const double x = left + pw + 14 + legend_w * static_cast<double>(column);
    const double y = top + 12 + 17 * static_cast<double>(k % rows);
    if (k + 1 == capacity && named.size() > capacity) {
      out += text(x, y, "… and " + std::to_string(named.size() - k) + " more", "font-size=\"11\" fill=\"#4a5568\"");
      break;
    }
    const std::size_t i = named[k];
    const Series& s = ch.series[i];
    const Symbol sym = s.style == Series::Style::kLine      ? Symbol::kLine
                       : s.style == Series::Style::kMarkers ? Symbol::kDot
                                                            : Symbol::kLineDot;
    out += legend_entry(x, y, s.color.empty() ? palette(i) : s.color, s.dashed || (s.color.empty() && i >= 10), sym,
                        shorten(s.name, 32));
  }
  return out + "</svg>";
}

std::string compact_count(std::int64_t n) {
  const double a = std::fabs(static_cast<double>(n));
  if (a < 1000) return std::to_string(n);
  char buf[32];
  if (a < 1e6)
    std::snprintf(buf, sizeof buf, "%.*fk", a < 1e4 ? 1 : 0, static_cast<double>(n) / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.*fM", a < 1e7 ? 1 : 0, static_cast<double>(n) / 1e6);
  return buf;
}

}  // namespace glassbox::report
