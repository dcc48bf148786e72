// Drawing helpers shared by svg.cpp and svg_grid.cpp (not a public header of the module).
#pragma once

#include <string>
#include <string_view>

namespace glassbox::report::svg_detail {

// A coordinate with one decimal ("12.5").
std::string c(double v);
// <svg ...> with a white background rect; `label` becomes aria-label.
std::string open(int width, int height, std::string_view label);
// <text> at (x, y); `attrs` are extra attributes (already valid), `s` is escaped.
std::string text(double x, double y, std::string_view s, std::string_view attrs = {});
// A legend entry: its symbol, then the label.
enum class Symbol { kLine, kLineDot, kDot, kSquare };
std::string legend_entry(double x, double y, std::string_view color, bool dashed, Symbol symbol,
                         std::string_view label);
// The label shortened to at most `max_chars` characters (UTF-8 aware), "…" marking the cut.
std::string shorten(std::string_view label, std::size_t max_chars);
// Estimated width in pixels of `s` in a font of `size` px (average glyph width).
double text_width(std::string_view s, double size);

inline constexpr const char* kAxisColor = "#4a5568";
inline constexpr const char* kGridColor = "#e2e8f0";
inline constexpr const char* kTextColor = "#1a202c";

}  // namespace glassbox::report::svg_detail
