#include "glassbox/report/html.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace glassbox::report {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when the bytes there are not one.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  unsigned min = 0;
  if (b < 0x80) return 1;
  if ((b & 0xE0) == 0xC0)
    n = 2, min = 0x80;
  else if ((b & 0xF0) == 0xE0)
    n = 3, min = 0x800;
  else if ((b & 0xF8) == 0xF0)
    n = 4, min = 0x10000;
  else
    return 0;
  if (i + n > s.size()) return 0;
  unsigned cp = b & (0x7F >> n);
  for (std::size_t k = 1; k < n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (c & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

std::string trim_zeros(const std::string& s) {
  const auto e = s.find('e');
  std::string mant = e == std::string::npos ? s : s.substr(0, e);
  std::string exp = e == std::string::npos ? "" : s.substr(e);
  if (mant.find('.') != std::string::npos) {
    while (!mant.empty() && mant.back() == '0') mant.pop_back();
    if (!mant.empty() && mant.back() == '.') mant.pop_back();
  }
  if (!exp.empty()) {  // "e-05" -> "e-5", "e+06" -> "e6"
    std::string sign = exp.size() > 1 && (exp[1] == '-' || exp[1] == '+') ? exp.substr(1, 1) : "";
    std::string digits = exp.substr(1 + sign.size());
    while (digits.size() > 1 && digits[0] == '0') digits.erase(0, 1);
    exp = "e" + (sign == "-" ? sign : "") + digits;
  }
  if (mant == "-0") mant = "0";
  return mant + exp;
}

constexpr const char* kCss = R"css(
:root{--fg:#1a202c;--muted:#5a6472;--line:#d5dbe3;--bg:#ffffff;--soft:#f4f6f9;--accent:#2b6cb0}
*{box-sizing:border-box}
body{margin:0;font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--fg);background:var(--bg)}
header.top{padding:18px 28px;background:#1f2a3a;color:#fff}
header.top h1{margin:0;font-size:22px}
header.top p{margin:2px 0 0;color:#c7d0dc}
nav{background:var(--soft);border-bottom:1px solid var(--line);padding:6px 28px}
nav a{margin-right:16px;color:var(--accent);text-decoration:none}
main{max-width:1240px;margin:0 auto;padding:8px 28px 40px}
section{margin-top:26px}
h2{font-size:19px;border-bottom:2px solid var(--line);padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
table.tbl{border-collapse:collapse;margin:6px 0 10px}
table.tbl th,table.tbl td{border:1px solid var(--line);padding:3px 9px;text-align:left;vertical-align:top}
table.tbl th{background:var(--soft);font-weight:600}
table.tbl td.num,table.tbl th.num{text-align:right;font-variant-numeric:tabular-nums}
table.kv th{width:200px}
pre.config{background:var(--soft);border:1px solid var(--line);padding:10px;max-height:480px;overflow:auto;font-size:12px}
.note{color:var(--muted);font-style:italic}
.warn{background:#fff7e0;border-left:4px solid #d69e2e;padding:6px 10px;margin:8px 0}
.foot{color:var(--muted);font-size:12px}
figure.chart{margin:10px 14px 18px 0;display:inline-block;vertical-align:top;max-width:100%;overflow-x:auto}
figure.chart figcaption{color:var(--muted);font-size:12px;max-width:720px}
svg text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
.toggle input{margin:0 4px 0 0}
.toggle{font-size:12px;color:var(--muted)}
input.logswitch:checked~.lin{display:none}
input.logswitch:not(:checked)~.log{display:none}
.badge{display:inline-block;border-radius:9px;padding:0 8px;font-size:12px;font-weight:600;color:#fff}
.badge.error{background:#c53030}.badge.warning{background:#b7791f}.badge.info{background:#2b6cb0}.badge.other{background:#5a6472}
.flag{color:#c53030;font-weight:600}
.gallery{display:flex;flex-wrap:wrap;gap:12px;padding:8px;background:var(--soft);border-radius:6px}
.gallery .item{background:#fff;border:1px solid var(--line);border-radius:6px;padding:6px;width:236px;font-size:12px}
.gallery .imgs{display:flex;gap:4px}
.gallery img{width:110px;height:110px;object-fit:contain;image-rendering:pixelated;background:#000}
.gallery .ok{color:#2f855a;font-weight:600}.gallery .bad{color:#c53030;font-weight:600}
footer{color:var(--muted);font-size:12px;border-top:1px solid var(--line);margin-top:30px;padding-top:8px}
)css";

}  // namespace

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    switch (c) {
      case '&':
        out += "&amp;";
        ++i;
        continue;
      case '<':
        out += "&lt;";
        ++i;
        continue;
      case '>':
        out += "&gt;";
        ++i;
        continue;
      case '"':
        out += "&quot;";
        ++i;
        continue;
      case '\'':
        out += "&#39;";
        ++i;
        continue;
      default: break;
    }
    const std::size_t n = utf8_length(text, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string base64(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(bytes[i]) << 16) | (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                       static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    if (rest == 2) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string data_uri(std::string_view mime, std::string_view bytes) {
  return "data:" + std::string(mime) + ";base64," + base64(bytes);
}

std::string format_number(double v, int significant) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Inf" : "-Inf";
  if (v == 0) return "0";
  if (significant < 1) significant = 1;
  char buf[64];
  const double a = std::fabs(v);
  if (a >= 1e6 || a < 1e-3) {
    std::snprintf(buf, sizeof buf, "%.*e", significant - 1, v);
  } else {
    const int digits_before = static_cast<int>(std::floor(std::log10(a))) + 1;
    const int decimals = std::max(0, significant - digits_before);
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  }
  return trim_zeros(buf);
}

std::string format_fixed(double v, int decimals) {
  if (!std::isfinite(v)) return format_number(v);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", std::max(0, decimals), v);
  std::string s = buf;
  if (s.find_first_not_of("-0.") == std::string::npos && s[0] == '-') s.erase(0, 1);  // "-0.000"
  return s;
}

std::string format_count(std::int64_t n) {
  const std::uint64_t magnitude = n < 0 ? 0 - static_cast<std::uint64_t>(n) : static_cast<std::uint64_t>(n);
  const std::string digits = std::to_string(magnitude);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string format_percent(double fraction, int decimals) {
  if (!std::isfinite(fraction)) return format_number(fraction);
  return format_fixed(fraction * 100.0, decimals) + " %";
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return format_number(seconds) + " s";
  if (seconds < 60) return format_number(seconds, 3) + " s";
  const auto total = static_cast<std::int64_t>(std::llround(seconds));
  const std::int64_t h = total / 3600, m = (total % 3600) / 60, s = total % 60;
  if (h > 0) return std::to_string(h) + " h " + std::to_string(m) + " min";
  return std::to_string(m) + " min " + std::to_string(s) + " s";
}

std::string page(std::string_view title, std::string_view top, std::string_view main) {
  std::string out;
  out.reserve(main.size() + 8192);
  out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out +=
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; style-src "
      "'unsafe-inline'\">\n";
  out += "<link rel=\"icon\" href=\"data:,\">\n";
  out += "<title>" + escape(title) + "</title>\n<style>";
  out += kCss;
  out += "</style>\n</head>\n<body>\n";
  out += top;
  out += "\n<main>\n";
  out += main;
  out += "\n</main>\n</body>\n</html>\n";
  return out;
}

std::string note(std::string_view text) { return note_html(escape(text)); }

std::string note_html(std::string_view html) { return "<p class=\"note\">" + std::string(html) + "</p>\n"; }

}  // namespace glassbox::report
