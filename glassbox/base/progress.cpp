#include "glassbox/base/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include <fmt/format.h>

namespace glassbox {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto s = static_cast<std::int64_t>(seconds + 0.5);
  const std::int64_t h = s / 3600;
  const std::int64_t m = (s / 60) % 60;
  s %= 60;
  if (h > 0) return fmt::format("{}:{:02}:{:02}", h, m, s);
  return fmt::format("{}:{:02}", m, s);
}

std::string format_count(double value) {
  if (value >= 1e6) return fmt::format("{:.1f}M", value / 1e6);
  if (value >= 1e3) return fmt::format("{:.1f}k", value / 1e3);
  return fmt::format("{:.0f}", value);
}

ProgressBar::ProgressBar(std::ostream& out, bool enabled, double plain_interval_s)
    : out_(out), enabled_(enabled), terminal_(::isatty(STDERR_FILENO) != 0), plain_interval_s_(plain_interval_s) {}

void ProgressBar::start(std::string label, std::int64_t total) {
  label_ = std::move(label);
  total_ = total;
  started_ = std::chrono::steady_clock::now();
  last_draw_ = started_ - std::chrono::seconds(1);
  last_plain_ = started_;
}

void ProgressBar::update(std::int64_t done, const std::string& metrics, double samples_per_s) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - started_).count();
  if (samples_per_s <= 0 && elapsed > 0) samples_per_s = static_cast<double>(done) / elapsed;
  const double eta = eta_override_ >= 0       ? eta_override_
                     : done > 0 && total_ > 0 ? elapsed * static_cast<double>(total_ - done) / static_cast<double>(done)
                                              : NAN;
  if (terminal_) {
    if (now - last_draw_ < std::chrono::milliseconds(100) && done != total_) return;
    last_draw_ = now;
    constexpr int kWidth = 24;
    const int filled = total_ > 0 ? static_cast<int>(kWidth * done / std::max<std::int64_t>(total_, 1)) : 0;
    std::string bar(static_cast<std::size_t>(filled), '=');
    if (filled < kWidth) bar += '>';
    bar.resize(kWidth, ' ');
    out_ << fmt::format("\r\033[K{} [{}] {}/{} {} {} {}/s ETA {}", label_, bar, done, total_, metrics,
                        format_count(samples_per_s), unit_, format_duration(eta))
         << std::flush;
  } else {
    if (std::chrono::duration<double>(now - last_plain_).count() < plain_interval_s_) return;
    last_plain_ = now;
    out_ << fmt::format("{} {}/{} {} {} {}/s ETA {}\n", label_, done, total_, metrics, format_count(samples_per_s),
                        unit_, format_duration(eta))
         << std::flush;
  }
}

void ProgressBar::finish(const std::string& metrics, std::int64_t done) {
  if (!enabled_) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  if (terminal_) out_ << "\r\033[K";
  out_ << fmt::format("{} {}/{} {} [{}]\n", label_, done < 0 ? total_ : done, total_, metrics, format_duration(elapsed))
       << std::flush;
}

}  // namespace glassbox
