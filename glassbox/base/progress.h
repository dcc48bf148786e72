// Progress display for long loops. On a terminal: one line redrawn in place
// ("epoch 3/10 [=====>    ] 512/860 loss 0.412 41k samples/s ETA 0:07"); otherwise a plain
// line every `plain_interval_s` seconds, so logs stay readable.
//
//   ProgressBar bar(std::cerr, /*enabled=*/true);
//   bar.start("epoch 1/5", 860);
//   for (...) bar.update(step, "loss 0.41", samples_per_s);
//   bar.finish("val_loss 0.38");
//
// Thread safety: not thread-safe; drive from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>

namespace glassbox {

class ProgressBar {
 public:
  ProgressBar(std::ostream& out, bool enabled, double plain_interval_s = 10.0);
  // Forces terminal or plain mode (tests); by default decided by isatty(stderr).
  void set_terminal(bool terminal) { terminal_ = terminal; }

  void start(std::string label, std::int64_t total);
  // samples_per_s <= 0: the bar's own average since start().
  void update(std::int64_t done, const std::string& metrics, double samples_per_s);
  // What is counted ("samples" by default; shown as "12.3 samples/s").
  void set_unit(std::string unit) { unit_ = std::move(unit); }
  // The ETA shown by update() from now on (e.g. for the whole run rather than this bar); negative:
  // the bar's own estimate for its remaining items.
  void set_eta(double seconds) { eta_override_ = seconds; }
  // Ends the bar at `done` items (negative: all of them; a run stopped early ends where it stopped).
  void finish(const std::string& metrics, std::int64_t done = -1);

 private:
  std::ostream& out_;
  bool enabled_;
  bool terminal_;
  double plain_interval_s_;
  std::string label_;
  std::string unit_ = "samples";
  std::int64_t total_ = 0;
  double eta_override_ = -1.0;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point last_draw_;
  std::chrono::steady_clock::time_point last_plain_;
};

// "1:02:03" or "2:03".
std::string format_duration(double seconds);
// "41.2k" style.
std::string format_count(double value);

}  // namespace glassbox
