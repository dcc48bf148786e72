// HTML building blocks of the glass-box report: escaping, base64 data: URIs, number formatting
// and the page skeleton (inline CSS only; no scripts, fonts or styles from elsewhere).
//
//   std::string body = "<p>" + report::escape(name) + "</p>";
//   body += "<img src=\"" + report::data_uri("image/png", png_bytes) + "\">";
//   std::string page = report::page("run quickstart", "<nav>...</nav>", body);
//
// The page carries a Content-Security-Policy that forbids every network load (only inline
// styles and data: images), so a report that tried to fetch something would show it in the
// browser console rather than silently depend on it.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace glassbox::report {

// Text or attribute value safe inside HTML/SVG: & < > " ' become entities. Invalid UTF-8 bytes
// are replaced by U+FFFD so that the page is always valid UTF-8.
std::string escape(std::string_view text);

// Standard base64 (RFC 4648, with padding).
std::string base64(std::string_view bytes);

// "data:<mime>;base64,<...>".
std::string data_uri(std::string_view mime, std::string_view bytes);

// Readable numbers: up to `significant` significant digits, trailing zeros trimmed; magnitudes
// >= 1e6 or < 1e-3 in scientific notation ("1.5e-05" -> "1.5e-5"). NaN/Inf as "NaN"/"Inf"/"-Inf".
std::string format_number(double v, int significant = 4);
// A fixed number of decimals: format_fixed(0.90381, 3) == "0.904".
std::string format_fixed(double v, int decimals);
// Thousands separated: 537354 -> "537,354".
std::string format_count(std::int64_t n);
// 0.9038 -> "90.38 %" (decimals after the point of the percentage).
std::string format_percent(double fraction, int decimals = 2);
// 49.17 -> "49.2 s", 754 -> "12 min 34 s", 7300 -> "2 h 1 min".
std::string format_duration(double seconds);

// The whole document: doctype, meta (charset, viewport, CSP, empty icon), <title>, the inline
// stylesheet, then `top` (page header and navigation) and the `main` content, both HTML.
std::string page(std::string_view title, std::string_view top, std::string_view main);

// A one-paragraph note (class "note"), text escaped.
std::string note(std::string_view text);
// The same with HTML content (already escaped by the caller).
std::string note_html(std::string_view html);

}  // namespace glassbox::report
