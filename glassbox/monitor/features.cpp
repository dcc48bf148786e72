// Tested by monitor_test (Features.*).
#include "glassbox/monitor/features.h"

#include <cmath>
#include <limits>

#include "glassbox/base/error.h"
#include "glassbox/monitor/image_stats.h"

namespace glassbox::monitor {

namespace {

const char* kind_name(InputKind k) { return k == InputKind::kImage ? "image" : "tabular"; }

}  // namespace

std::int64_t InputSpec::sample_size() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

void InputSpec::validate() const {
  const std::size_t rank = kind == InputKind::kImage ? 3 : 1;
  GB_CHECK(shape.size() == rank, InvalidArgument,
           "a monitored " << kind_name(kind) << " input has " << rank << " dimensions per sample, not " << shape.size(),
           kind == InputKind::kImage ? "images are [C, H, W]" : "feature vectors are [F]");
  for (std::int64_t d : shape)
    GB_CHECK(d > 0, InvalidArgument, "a monitored input's sample shape holds " << d,
             "monitoring needs fixed, positive sizes");
  const auto groups = static_cast<std::size_t>(shape[0]);
  for (const auto* v : {&mean, &std})
    GB_CHECK(v->empty() || v->size() == 1 || v->size() == groups, InvalidArgument,
             "normalisation with " << v->size() << " values for " << groups
                                   << (kind == InputKind::kImage ? " channels" : " features"),
             std::string("give none, one, or one per ") + (kind == InputKind::kImage ? "channel" : "feature"));
  for (double s : std) GB_CHECK(s > 0, InvalidArgument, "normalisation std " << s, "std must be positive");
  GB_CHECK(feature_names.empty() || (kind == InputKind::kTabular && feature_names.size() == groups), InvalidArgument,
           feature_names.size() << " feature names for " << groups << " features", "name each feature, or none");
}

nlohmann::json InputSpec::to_json() const {
  return {{"name", name}, {"kind", kind_name(kind)},       {"shape", shape}, {"mean", mean},
          {"std", std},   {"feature_names", feature_names}};
}

InputSpec InputSpec::from_json(const nlohmann::json& j) {
  InputSpec s;
  s.name = j.at("name").get<std::string>();
  const std::string kind = j.at("kind").get<std::string>();
  GB_CHECK(kind == "image" || kind == "tabular", InvalidArgument, "input kind '" << kind << "'",
           "the kinds are image and tabular");
  s.kind = kind == "image" ? InputKind::kImage : InputKind::kTabular;
  s.shape = j.at("shape").get<std::vector<std::int64_t>>();
  s.mean = j.at("mean").get<std::vector<double>>();
  s.std = j.at("std").get<std::vector<double>>();
  s.feature_names = j.at("feature_names").get<std::vector<std::string>>();
  s.validate();
  return s;
}

FeatureExtractor::FeatureExtractor(InputSpec spec) : spec_(std::move(spec)) {
  spec_.validate();
  channels_ = static_cast<std::size_t>(spec_.shape[0]);
  if (spec_.kind == InputKind::kTabular) {
    for (std::size_t f = 0; f < channels_; ++f) {
      names_.push_back(spec_.feature_names.empty() ? "f" + std::to_string(f) : spec_.feature_names[f]);
    }
    range_names_ = names_;
    return;
  }
  plane_ = static_cast<std::size_t>(spec_.shape[1] * spec_.shape[2]);
  if (channels_ > 1) {
    for (std::size_t c = 0; c < channels_; ++c) {
      names_.push_back("channel" + std::to_string(c) + "_mean");
      names_.push_back("channel" + std::to_string(c) + "_std");
    }
  }
  names_.push_back("brightness");
  names_.push_back("contrast");
  names_.push_back("gradient");
  for (std::size_t c = 0; c < channels_; ++c) range_names_.push_back("channel" + std::to_string(c));
}

double FeatureExtractor::unnormalise(double x, std::size_t group) const {
  const auto pick = [group](const std::vector<double>& v, double none) {
    return v.empty() ? none : v[v.size() == 1 ? 0 : group];
  };
  return x * pick(spec_.std, 1.0) + pick(spec_.mean, 0.0);
}

std::size_t FeatureExtractor::group_of(std::size_t index) const {
  return spec_.kind == InputKind::kTabular ? index : index / plane_;
}

void FeatureExtractor::extract(std::span<const double> sample, std::span<double> features,
                               std::span<const ValueRange> ranges, double tolerance, InputCounts& counts) const {
  GB_CHECK(sample.size() == static_cast<std::size_t>(spec_.sample_size()) && features.size() == names_.size(),
           InvalidArgument,
           "a sample of " << sample.size() << " values for " << features.size() << " features; the input holds "
                          << spec_.sample_size() << " values and " << names_.size() << " features",
           "pass one whole sample");
  const bool check_range = ranges.size() == range_names_.size();
  if (spec_.kind == InputKind::kImage && image_fast(sample, features, ranges, tolerance, counts)) return;
  counts.values += static_cast<std::int64_t>(sample.size());
  const auto count = [&](double v, std::size_t group) {
    if (!std::isfinite(v)) {
      ++counts.non_finite;
      return false;
    }
    if (check_range) {
      const ValueRange& r = ranges[group];
      const double slack = tolerance * (r.max - r.min);
      if (v < r.min - slack || v > r.max + slack) ++counts.out_of_range;
    }
    return true;
  };
  if (spec_.kind == InputKind::kTabular) {
    for (std::size_t f = 0; f < sample.size(); ++f) {
      const double v = unnormalise(sample[f], f);
      features[f] = count(v, f) ? v : std::numeric_limits<double>::quiet_NaN();
    }
    return;
  }
  double all_sum = 0, all_sq = 0;
  std::size_t all_n = 0;
  for (std::size_t c = 0; c < channels_; ++c) {
    double sum = 0, sq = 0;
    std::size_t n = 0;
    for (std::size_t i = c * plane_; i < (c + 1) * plane_; ++i) {
      const double v = unnormalise(sample[i], c);
      if (!count(v, c)) continue;
      sum += v;
      sq += v * v;
      ++n;
    }
    all_sum += sum;
    all_sq += sq;
    all_n += n;
    if (channels_ > 1) {
      const double nan = std::numeric_limits<double>::quiet_NaN();
      const double mean = n ? sum / static_cast<double>(n) : nan;
      features[2 * c] = mean;
      features[2 * c + 1] = n ? std::sqrt(std::max(0.0, sq / static_cast<double>(n) - mean * mean)) : nan;
    }
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double mean = all_n ? all_sum / static_cast<double>(all_n) : nan;
  features[names_.size() - 3] = mean;
  features[names_.size() - 2] =
      all_n ? std::sqrt(std::max(0.0, all_sq / static_cast<double>(all_n) - mean * mean)) : nan;
  // Gradient: the mean absolute difference of horizontally and vertically adjacent values (noise
  // raises it, blur lowers it).
  const auto h = static_cast<std::size_t>(spec_.shape[1]), w = static_cast<std::size_t>(spec_.shape[2]);
  double grad = 0;
  std::size_t pairs = 0;
  for (std::size_t c = 0; c < channels_; ++c) {
    const double* plane = sample.data() + c * plane_;
    const auto add = [&](double a, double b) {
      const double d = unnormalise(a, c) - unnormalise(b, c);
      if (std::isfinite(d)) {
        grad += std::abs(d);
        ++pairs;
      }
    };
    for (std::size_t y = 0; y < h; ++y)
      for (std::size_t x = 0; x < w; ++x) {
        if (x + 1 < w) add(plane[y * w + x + 1], plane[y * w + x]);
        if (y + 1 < h) add(plane[(y + 1) * w + x], plane[y * w + x]);
      }
  }
  features[names_.size() - 1] = pairs ? grad / static_cast<double>(pairs) : 0.0;
}

// Images with finite values only (nearly all): one pass per channel in the model's input space,
// the statistics then mapped to the data's units (x * std + mean is affine per channel) and the
// range checked against bounds mapped the other way. False (nothing counted) when a value is not
// finite: extract's general path handles the sample.
template <typename T>
bool FeatureExtractor::image_fast(std::span<const T> sample, std::span<double> features,
                                  std::span<const ValueRange> ranges, double tolerance, InputCounts& counts) const {
  const bool check_range = ranges.size() == range_names_.size();
  const auto h = static_cast<std::size_t>(spec_.shape[1]), w = static_cast<std::size_t>(spec_.shape[2]);
  const auto pick = [](const std::vector<double>& v, std::size_t c, double none) {
    return v.empty() ? none : v[v.size() == 1 ? 0 : c];
  };
  double all_sum = 0, all_sq = 0, grad = 0;
  std::int64_t out = 0;
  for (std::size_t c = 0; c < channels_; ++c) {
    const double sd = pick(spec_.std, c, 1.0), mu = pick(spec_.mean, c, 0.0);
    double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
    if (check_range) {
      const double slack = tolerance * (ranges[c].max - ranges[c].min);
      lo = (ranges[c].min - slack - mu) / sd;
      hi = (ranges[c].max + slack - mu) / sd;
    }
    ChannelSums cs;
    if (!channel_sums(sample.data() + c * plane_, h, w, lo, hi, cs)) return false;
    const double sum = cs.sum, sq = cs.sq, g = cs.grad;
    const std::int64_t outside = cs.outside;
    const auto n = static_cast<double>(plane_);
    const double mean_x = sum / n, var_x = std::max(0.0, sq / n - mean_x * mean_x);
    if (channels_ > 1) {  // the overall statistics are the last three features
      features[2 * c] = mean_x * sd + mu;
      features[2 * c + 1] = std::sqrt(var_x) * std::abs(sd);
    }
    // Sums of the values in the data's units: sum(x sd + mu), sum((x sd + mu)^2).
    all_sum += sum * sd + n * mu;
    all_sq += sd * sd * sq + 2 * sd * mu * sum + n * mu * mu;
    grad += std::abs(sd) * g;
    out += outside;
  }
  counts.values += static_cast<std::int64_t>(sample.size());
  counts.out_of_range += out;
  const auto n = static_cast<double>(sample.size());
  const double mean = all_sum / n;
  features[names_.size() - 3] = mean;
  features[names_.size() - 2] = std::sqrt(std::max(0.0, all_sq / n - mean * mean));
  const double pairs = static_cast<double>(channels_ * (h * (w - 1) + (h - 1) * w));
  features[names_.size() - 1] = pairs > 0 ? grad / pairs : 0.0;
  return true;
}

bool FeatureExtractor::extract_fp32(std::span<const float> sample, std::span<double> features,
                                    std::span<const ValueRange> ranges, double tolerance, InputCounts& counts) const {
  return spec_.kind == InputKind::kImage && sample.size() == static_cast<std::size_t>(spec_.sample_size()) &&
         features.size() == names_.size() && image_fast(sample, features, ranges, tolerance, counts);
}

std::vector<ValueRange> FeatureExtractor::observe_start() const {
  std::vector<ValueRange> out;
  for (const std::string& n : range_names_)
    out.push_back({n, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()});
  return out;
}

void FeatureExtractor::observe_ranges(std::span<const double> sample, std::vector<ValueRange>& ranges) const {
  GB_CHECK(ranges.size() == range_names_.size(), InvalidArgument,
           ranges.size() << " ranges for " << range_names_.size() << " range groups", "start with observe_start()");
  for (std::size_t i = 0; i < sample.size(); ++i) {
    const std::size_t g = group_of(i);
    const double v = unnormalise(sample[i], g);
    if (!std::isfinite(v)) continue;
    ranges[g].min = std::min(ranges[g].min, v);
    ranges[g].max = std::max(ranges[g].max, v);
  }
}

}  // namespace glassbox::monitor
