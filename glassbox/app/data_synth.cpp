// glassbox data synth defects: a seeded synthetic industrial-defect image set.
// Tested by images_test.cpp (ImageWorkflow.SyntheticDefectsAreSeededImbalancedAndDated).
#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <opencv2/imgproc.hpp>

#include "glassbox/app/data.h"
#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/base/progress.h"
#include "glassbox/data/augment.h"
#include "glassbox/data/image.h"

namespace glassbox::app {

namespace fs = std::filesystem;

namespace {

// The classes and their shares (largest remainders give the exact counts).
struct DefectClass {
  const char* name;
  double share;
};
constexpr DefectClass kClasses[] = {{"ok", 0.32}, {"crack", 0.28}, {"rust", 0.22}, {"thread_damage", 0.18}};

std::vector<std::int64_t> class_counts(std::int64_t n) {
  std::vector<std::int64_t> out;
  std::vector<std::pair<double, std::size_t>> rest;
  std::int64_t taken = 0;
  for (std::size_t k = 0; k < std::size(kClasses); ++k) {
    const double exact = kClasses[k].share * static_cast<double>(n);
    out.push_back(static_cast<std::int64_t>(std::floor(exact)));
    taken += out.back();
    rest.emplace_back(exact - std::floor(exact), k);
  }
  std::stable_sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t i = 0; taken < n; ++i, ++taken) out[rest[i % rest.size()].second] += 1;
  return out;
}

cv::Point2f polar(cv::Point2f c, double r, double angle) {
  return {static_cast<float>(c.x + r * std::cos(angle)), static_cast<float>(c.y + r * std::sin(angle))};
}

// One part photographed against a backlight, drawn at 4x and reduced (so a 1-pixel line at 4x is a
// quarter-pixel crack), in RGB.
cv::Mat render(std::size_t kind, int size, data::AugmentRng& rng) {
  const int s4 = size * 4;
  const auto u = [&](double lo, double hi) { return rng.uniform(lo, hi); };
  // Backlight: a bright, slightly uneven field.
  cv::Mat img(s4, s4, CV_32FC3);
  const double glow = u(225, 245), tilt = u(-15, 15);
  for (int y = 0; y < s4; ++y)
    for (int x = 0; x < s4; ++x) {
      const float v = static_cast<float>(glow + tilt * (x - s4 / 2.0) / s4);
      img.at<cv::Vec3f>(y, x) = cv::Vec3f(v, v, v * 0.98f);
    }
  // The part: a brushed metal washer with a threaded bore.
  const cv::Point2f c(static_cast<float>(s4 / 2.0 + u(-0.06, 0.06) * s4),
                      static_cast<float>(s4 / 2.0 + u(-0.06, 0.06) * s4));
  const double outer = u(0.32, 0.40) * s4, bore = outer * u(0.38, 0.46);
  const double metal = u(105, 150);
  cv::Mat part(s4, s4, CV_32FC3, cv::Scalar::all(0));
  for (int y = 0; y < s4; ++y) {
    const double streak = 8.0 * std::sin(y * 0.9 + u(0, 0.2)) + u(-4, 4);  // brushed rows
    for (int x = 0; x < s4; ++x) {
      const float v = static_cast<float>(metal + streak);
      part.at<cv::Vec3f>(y, x) = cv::Vec3f(v, v, v * 1.02f);
    }
  }
  cv::Mat mask(s4, s4, CV_8U, cv::Scalar(0));
  cv::circle(mask, c, static_cast<int>(outer), cv::Scalar(255), cv::FILLED, cv::LINE_AA);
  cv::circle(mask, c, static_cast<int>(bore), cv::Scalar(0), cv::FILLED, cv::LINE_AA);
  part.copyTo(img, mask);
  // Threads: dark and light rings just outside the bore.
  const double pitch = u(5.0, 7.0);
  const int rings = 4;
  for (int r = 0; r < rings; ++r)
    cv::circle(img, c, static_cast<int>(bore + pitch * (r + 0.5)), cv::Scalar::all(metal - 45), 2, cv::LINE_AA);
  switch (kind) {
    case 1: {  // crack: a thin dark polyline from the rim inwards
      double a = u(0, 2 * M_PI);
      cv::Point2f p = polar(c, outer * u(0.85, 0.98), a);
      const int segments = 3 + static_cast<int>(rng.randint(0, 2));
      for (int k = 0; k < segments; ++k) {
        a += u(-0.5, 0.5);
        const cv::Point2f q = polar(c, std::max(bore + pitch * rings, outer * (0.9 - 0.12 * (k + 1))), a);
        cv::line(img, p, q, cv::Scalar::all(metal - u(55, 80)), 1 + static_cast<int>(rng.randint(0, 1)), cv::LINE_AA);
        p = q;
      }
      break;
    }
    case 2: {  // rust: orange-brown blotches
      const int spots = 2 + static_cast<int>(rng.randint(0, 3));
      for (int k = 0; k < spots; ++k) {
        const cv::Point2f at = polar(c, u(bore + pitch * rings, outer * 0.92), u(0, 2 * M_PI));
        cv::Mat blob = img.clone();
        cv::ellipse(blob, at,
                    cv::Size(static_cast<int>(u(4, 12) * size / 24.0), static_cast<int>(u(3, 9) * size / 24.0)),
                    u(0, 180), 0, 360, cv::Scalar(u(150, 180), u(70, 95), u(28, 45)), cv::FILLED, cv::LINE_AA);
        const double alpha = u(0.55, 0.85);
        cv::addWeighted(blob, alpha, img, 1 - alpha, 0, img);
      }
      break;
    }
    case 3: {  // damaged thread: a sector of the rings flattened
      const double a = u(0, 2 * M_PI), width = u(0.5, 1.1);
      std::vector<cv::Point> wedge;
      for (double t = a; t <= a + width; t += 0.05) wedge.push_back(polar(c, bore + pitch * (rings + 0.8), t));
      for (double t = a + width; t >= a; t -= 0.05) wedge.push_back(polar(c, bore * 0.98, t));
      cv::fillPoly(img, std::vector<std::vector<cv::Point>>{wedge}, cv::Scalar::all(metal + u(-10, 25)), cv::LINE_AA);
      break;
    }
    default: break;  // ok
  }
  // Over-exposure: a gain that clips the brightest areas, then sensor noise.
  const double gain = u(1.0, 1.35);
  img *= gain;
  cv::Mat small;
  cv::resize(img, small, cv::Size(size, size), 0, 0, cv::INTER_AREA);
  cv::Mat noise(size, size, CV_32FC3);
  for (int y = 0; y < size; ++y)
    for (int x = 0; x < size; ++x)
      for (int ch = 0; ch < 3; ++ch) noise.at<cv::Vec3f>(y, x)[ch] = static_cast<float>(3.0 * rng.normal());
  small += noise;
  cv::Mat out;
  small.convertTo(out, CV_8UC3);  // saturates at 0 and 255
  return out;
}

std::string iso_date(std::int64_t day_offset, const std::string& start) {
  std::tm t{};
  t.tm_year = std::stoi(start.substr(0, 4)) - 1900;
  t.tm_mon = std::stoi(start.substr(5, 2)) - 1;
  t.tm_mday = std::stoi(start.substr(8, 2)) + static_cast<int>(day_offset);
  t.tm_hour = 12;
  const std::time_t tt = timegm(&t);
  std::tm norm{};
  gmtime_r(&tt, &norm);
  return fmt::format("{:04d}-{:02d}-{:02d}", norm.tm_year + 1900, norm.tm_mon + 1, norm.tm_mday);
}

}  // namespace

SynthOutcome synth_defects(const SynthRequest& r) {
  GB_CHECK(!r.out.empty(), InvalidArgument, "no output folder given", "pass --out DIR");
  GB_CHECK(r.images >= 4 && r.images <= 1000000, InvalidArgument, "--images must be in 4..1000000, got " << r.images,
           "e.g. --images 800");
  GB_CHECK(r.size >= 16 && r.size <= 1024, InvalidArgument, "--size must be in 16..1024 pixels, got " << r.size,
           "e.g. --size 96");
  GB_CHECK(r.days >= 1, InvalidArgument, "--days must be >= 1, got " << r.days, "e.g. --days 240");
  GB_CHECK(r.start.size() == 10 && r.start[4] == '-' && r.start[7] == '-', InvalidArgument,
           "--start must be a date YYYY-MM-DD, got '" << r.start << "'", "e.g. --start 2025-01-06");
  std::error_code ec;
  GB_CHECK(!fs::exists(r.out, ec), AlreadyExists, r.out.string() << " already exists",
           "choose a new folder; glassbox does not write into an existing one");
  SynthOutcome o;
  o.out = r.out;
  const std::vector<std::int64_t> counts = class_counts(r.images);
  // The sequence of classes, shuffled, so capture dates do not follow the class.
  std::vector<std::size_t> kinds;
  for (std::size_t k = 0; k < counts.size(); ++k) kinds.insert(kinds.end(), static_cast<std::size_t>(counts[k]), k);
  data::AugmentRng order(data::sample_seed(static_cast<std::uint64_t>(r.seed), -2));
  for (std::size_t i = kinds.size(); i > 1; --i)
    std::swap(kinds[i - 1], kinds[static_cast<std::size_t>(order.randint(0, static_cast<std::int64_t>(i) - 1))]);
  const fs::path built = temp_sibling(r.out);
  fs::create_directories(built);
  try {
    for (const auto& c : kClasses) fs::create_directories(built / c.name);
    std::string csv = "file_name,label,captured\n";
    std::vector<std::int64_t> seen(counts.size(), 0);
    ProgressBar bar(std::cerr, r.images > 2000);
    bar.start("drawing", r.images);
    for (std::size_t i = 0; i < kinds.size(); ++i) {
      const std::size_t k = kinds[i];
      data::AugmentRng rng(data::sample_seed(static_cast<std::uint64_t>(r.seed), static_cast<std::int64_t>(i)));
      const cv::Mat img = render(k, static_cast<int>(r.size), rng);
      const std::string name = fmt::format("{}/{}-{:06d}.png", kClasses[k].name, kClasses[k].name, seen[k]++);
      const std::string bytes = data::encode_png(img);
      std::ofstream f(built / name, std::ios::binary);
      f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      GB_CHECK(f.good(), ResourceExhausted, "cannot write " << (built / name).string(), "check the free disk space");
      // Capture dates spread evenly over the period, in order of i (a production log).
      const std::int64_t day = static_cast<std::int64_t>(i) * r.days / static_cast<std::int64_t>(kinds.size());
      csv += fmt::format("{},{},{}\n", name, kClasses[k].name, iso_date(day, r.start));
      bar.update(static_cast<std::int64_t>(i + 1), "", 0.0);
    }
    bar.finish(fmt::format("{} images", r.images));
    std::ofstream(built / "metadata.csv") << csv;
    replace_dir_atomic(built, r.out);
  } catch (...) {
    fs::remove_all(built, ec);
    throw;
  }
  for (std::size_t k = 0; k < counts.size(); ++k) o.per_class[kClasses[k].name] = counts[k];
  o.first_date = iso_date(0, r.start);
  o.last_date = iso_date(
      (static_cast<std::int64_t>(kinds.size()) - 1) * r.days / static_cast<std::int64_t>(kinds.size()), r.start);
  return o;
}

}  // namespace glassbox::app
