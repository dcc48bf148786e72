// Tested by augment_test.cpp (framework, config, distributions) and the parity tests against
// albumentations (tests/data/albumentations_parity_test.py).
#include "glassbox/data/augment.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <opencv2/core.hpp>

#include "glassbox/base/error.h"
#include "glassbox/data/loader.h"

namespace glassbox::data {

// ---- randomness ---------------------------------------------------------------------------------

namespace {

std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

AugmentRng::AugmentRng(std::uint64_t seed) {
  std::uint64_t x = seed;
  for (auto& w : s_) {
    x += 0x9E3779B97F4A7C15ULL;
    w = splitmix64(x);
  }
}

std::uint64_t AugmentRng::next_u64() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double AugmentRng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double AugmentRng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

std::int64_t AugmentRng::randint(std::int64_t lo, std::int64_t hi) {
  if (hi <= lo) return lo;
  const auto n = static_cast<std::uint64_t>(hi - lo) + 1;
  // Rejection sampling: uniform over [0, n) without modulo bias.
  const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % n;
  std::uint64_t r = next_u64();
  while (r >= limit) r = next_u64();
  return lo + static_cast<std::int64_t>(r % n);
}

double AugmentRng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u = 0;
  while (u <= 0) u = uniform();
  const double v = uniform();
  const double r = std::sqrt(-2.0 * std::log(u));
  spare_ = r * std::sin(2 * M_PI * v);
  has_spare_ = true;
  return r * std::cos(2 * M_PI * v);
}

double numpy_sum(const double* a, std::size_t n) {
  // Blocks of up to 128 summed in 8 interleaved accumulators, larger ranges split in halves (a
  // multiple of 8), as numpy's pairwise_sum.
  if (n < 8) {
    double r = 0;
    for (std::size_t i = 0; i < n; ++i) r += a[i];
    return r;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    std::size_t i = 8;
    for (; i < n - n % 8; i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  std::size_t n2 = n / 2;
  n2 -= n2 % 8;
  return numpy_sum(a, n2) + numpy_sum(a + n2, n - n2);
}

int py_int(double x) {
  const double lim = static_cast<double>(std::numeric_limits<int>::max());
  return static_cast<int>(std::clamp(std::trunc(x), -lim, lim));
}

int py_round(double x) { return py_int(std::nearbyint(x)); }  // half to even in the default mode

double mean_u8(const cv::Mat& img) {
  const cv::Scalar s = cv::sum(img);
  double total = 0;
  for (int c = 0; c < img.channels(); ++c) total += s[c];
  return total / static_cast<double>(img.total() * static_cast<std::size_t>(img.channels()));
}

std::uint64_t sample_seed(std::uint64_t epoch_seed, std::int64_t index) {
  return splitmix64(epoch_seed ^ splitmix64(static_cast<std::uint64_t>(index) + 0x5851F42D4C957F2DULL));
}

void Transform::operator()(Sample& s, AugmentRng& rng) const {
  if (p_ <= 0) return;
  if (p_ < 1 && !(rng.uniform() < p_)) return;
  apply(s, rng);
}

// ---- parameters ---------------------------------------------------------------------------------

Params::Params(const TransformSpec& spec, std::string where) : spec_(spec), where_(std::move(where)) {}

void Params::require(bool ok, const std::string& key, const std::string& what, const std::string& hint) const {
  GB_CHECK(ok, InvalidArgument, where_ << ": " << spec_.name << "." << key << " " << what,
           hint.empty() ? "see docs/augmentation.md for its parameters" : hint);
}

double Params::number(const std::string& key) const {
  if (key == "p") return spec_.p;
  const auto it = spec_.reals.find(key);
  GB_CHECK(it != spec_.reals.end(), Internal, spec_.name << " has no number parameter " << key, "");
  require(std::isfinite(it->second), key, "must be a finite number");
  return it->second;
}

std::int64_t Params::integer(const std::string& key) const {
  const auto it = spec_.ints.find(key);
  GB_CHECK(it != spec_.ints.end(), Internal, spec_.name << " has no integer parameter " << key, "");
  return it->second;
}

const std::vector<double>& Params::list(const std::string& key) const {
  const auto it = spec_.numbers.find(key);
  GB_CHECK(it != spec_.numbers.end(), Internal, spec_.name << " has no list parameter " << key, "");
  for (double v : it->second) require(std::isfinite(v), key, "must hold finite numbers");
  return it->second;
}

std::pair<double, double> Params::range(const std::string& key, ScalarRange rule) const {
  const std::vector<double>& v = list(key);
  require(v.size() == 1 || v.size() == 2, key, fmt::format("must be one number or [lo, hi], got {} values", v.size()));
  if (v.size() == 2) {
    switch (rule) {
      case ScalarRange::kSymmetric: return {std::min(v[0], v[1]), std::max(v[0], v[1])};
      case ScalarRange::kBias1: return {1 + v[0], 1 + v[1]};
      default: return {v[0], v[1]};
    }
  }
  const double x = v[0];
  switch (rule) {
    case ScalarRange::kSymmetric: return {-std::abs(x), std::abs(x)};
    case ScalarRange::kOnePlus: return {1.0, x};
    case ScalarRange::kZeroPlus: return {0.0, x};
    case ScalarRange::kFixed: return {x, x};
    case ScalarRange::kBias1: return {1 - x, 1 + x};
    case ScalarRange::kJitter:
      require(x >= 0, key, fmt::format("must be >= 0, got {}", x));
      return {std::max(0.0, 1 - x), 1 + x};
    case ScalarRange::kFromThree: return {3.0, x};
  }
  return {x, x};
}

const std::string& Params::word(const std::string& key) const {
  const auto it = spec_.words.find(key);
  GB_CHECK(it != spec_.words.end(), Internal, spec_.name << " has no word parameter " << key, "");
  return it->second;
}

bool Params::flag(const std::string& key) const {
  const auto it = spec_.flags.find(key);
  GB_CHECK(it != spec_.flags.end(), Internal, spec_.name << " has no flag parameter " << key, "");
  return it->second;
}

// ---- composition --------------------------------------------------------------------------------

namespace {

class ComposeStep final : public Transform {
 public:
  ComposeStep(double p, std::vector<std::unique_ptr<Transform>> children)
      : Transform(p), children_(std::move(children)) {}
  std::string_view name() const override { return "Compose"; }
  void apply(Sample& s, AugmentRng& rng) const override {
    for (const auto& c : children_) (*c)(s, rng);
  }

 private:
  std::vector<std::unique_ptr<Transform>> children_;
};

// OneOf: picks one child with probability proportional to its p, then applies it without its
// own p draw (albumentations' force_apply); a child with p = 0 is never picked.
class OneOfStep final : public Transform {
 public:
  OneOfStep(double p, std::vector<std::unique_ptr<Transform>> children) : Transform(p), children_(std::move(children)) {
    double total = 0;
    for (const auto& c : children_) total += std::max(0.0, c->p());
    for (const auto& c : children_) weights_.push_back(total > 0 ? std::max(0.0, c->p()) / total : 0.0);
  }
  std::string_view name() const override { return "OneOf"; }
  void apply(Sample& s, AugmentRng& rng) const override {
    if (children_.empty()) return;
    const double u = rng.uniform();
    double acc = 0;
    for (std::size_t i = 0; i < children_.size(); ++i) {
      acc += weights_[i];
      if (u < acc || i + 1 == children_.size()) {
        if (weights_[i] > 0) children_[i]->apply(s, rng);
        return;
      }
    }
  }

 private:
  std::vector<std::unique_ptr<Transform>> children_;
  std::vector<double> weights_;
};

// SomeOf: n children chosen uniformly (without replacement unless `replace`), run in list order,
// each under its own p.
class SomeOfStep final : public Transform {
 public:
  SomeOfStep(double p, std::vector<std::unique_ptr<Transform>> children, std::int64_t n, bool replace)
      : Transform(p), children_(std::move(children)), n_(n), replace_(replace) {}
  std::string_view name() const override { return "SomeOf"; }
  void apply(Sample& s, AugmentRng& rng) const override {
    const auto k = static_cast<std::int64_t>(children_.size());
    if (k == 0) return;
    std::vector<std::int64_t> picked;
    if (replace_) {
      for (std::int64_t i = 0; i < n_; ++i) picked.push_back(rng.randint(0, k - 1));
    } else {
      std::vector<std::int64_t> all(static_cast<std::size_t>(k));
      std::iota(all.begin(), all.end(), 0);
      for (std::int64_t i = 0; i < std::min(n_, k); ++i) {  // partial Fisher-Yates
        const std::int64_t j = rng.randint(i, k - 1);
        std::swap(all[static_cast<std::size_t>(i)], all[static_cast<std::size_t>(j)]);
        picked.push_back(all[static_cast<std::size_t>(i)]);
      }
    }
    std::sort(picked.begin(), picked.end());
    for (std::int64_t i : picked) (*children_[static_cast<std::size_t>(i)])(s, rng);
  }

 private:
  std::vector<std::unique_ptr<Transform>> children_;
  std::int64_t n_;
  bool replace_;
};

std::vector<std::unique_ptr<Transform>> build_children(const Params& p) {
  std::vector<std::unique_ptr<Transform>> out;
  const auto& kids = p.spec().transforms;
  for (std::size_t i = 0; i < kids.size(); ++i)
    out.push_back(make_transform(kids[i], p.where() + ".transforms[" + std::to_string(i) + "]"));
  return out;
}

void add_composition(std::vector<TransformDef>& out) {
  out.push_back({"Compose",
                 "runs its steps in order",
                 1.0,
                 {},
                 [](const Params& p) { return std::make_unique<ComposeStep>(p.p(), build_children(p)); },
                 true});
  out.push_back({"OneOf",
                 "applies one of its steps, chosen with probability proportional to their p",
                 0.5,
                 {},
                 [](const Params& p) {
                   p.require(!p.spec().transforms.empty(), "transforms", "must list at least one step");
                   return std::make_unique<OneOfStep>(p.p(), build_children(p));
                 },
                 true});
  out.push_back({"SomeOf",
                 "applies n of its steps, chosen uniformly, in list order (each under its own p)",
                 1.0,
                 {{"n", ParamKind::kInt, {1}, "", false, {}, ScalarRange::kFixed, "how many steps to pick"},
                  {"replace", ParamKind::kFlag, {}, "", false, {}, ScalarRange::kFixed, "pick with replacement"}},
                 [](const Params& p) {
                   p.require(p.integer("n") >= 1, "n", fmt::format("must be >= 1, got {}", p.integer("n")));
                   return std::make_unique<SomeOfStep>(p.p(), build_children(p), p.integer("n"), p.flag("replace"));
                 },
                 true});
}

}  // namespace

const std::vector<TransformDef>& transform_registry() {
  static const std::vector<TransformDef> all = [] {
    std::vector<TransformDef> out;
    add_geometric_transforms(out);
    add_pixel_transforms(out);
    add_composition(out);
    return out;
  }();
  return all;
}

const TransformDef* find_transform(std::string_view name) {
  for (const auto& d : transform_registry())
    if (d.name == name) return &d;
  return nullptr;
}

std::vector<std::string> transform_names() {
  std::vector<std::string> out;
  for (const auto& d : transform_registry()) out.push_back(d.name);
  return out;
}

namespace {

TransformSpec step(std::string name, double p, std::map<std::string, std::vector<double>> numbers = {}) {
  TransformSpec s;
  s.name = std::move(name);
  s.p = p;
  s.numbers = std::move(numbers);
  return s;
}

}  // namespace

std::vector<std::string> preset_names() { return {"xray", "production_line", "satellite"}; }

std::vector<TransformSpec> preset_transforms(const std::string& name) {
  if (name == "xray")
    return {
        step("CLAHE", 0.5, {{"clip_limit", {1.0, 2.0}}}), step("Rotate", 0.5, {{"limit", {-15, 15}}}),
        step("ElasticTransform", 0.2),
        step("RandomBrightnessContrast", 0.3, {{"brightness_limit", {-0.1, 0.1}}, {"contrast_limit", {-0.1, 0.1}}})};
  if (name == "production_line")
    return {step("RandomBrightnessContrast", 0.5, {{"brightness_limit", {-0.1, 0.1}}, {"contrast_limit", {-0.1, 0.1}}}),
            step("MotionBlur", 0.3)};
  if (name == "satellite")
    return {step("RandomRotate90", 0.5), step("HorizontalFlip", 0.5), step("VerticalFlip", 0.5),
            step("RandomGamma", 0.5, {{"gamma_limit", {80, 120}}}), step("Solarize", 0.1)};
  const std::vector<std::string> names = preset_names();
  GB_THROW(InvalidArgument, "data.augment_preset = \"" << name << "\" is not one of: xray, production_line, satellite",
           "did you mean \"" + closest_match(name, names) + "\"?");
}

void TransformSpec::visit(FieldVisitor& v) {
  static const std::vector<std::string> names = transform_names();
  static const std::vector<std::string_view> allowed(names.begin(), names.end());
  v.choice("name", name, allowed, "the step's albumentations name, e.g. \"HorizontalFlip\"");
  const TransformDef* def = find_transform(name);
  if (def == nullptr) return;  // a writer visiting a spec built in code with a wrong name; make_transform says so
  if (p < 0) p = def->default_p;
  v.field("p", p, "probability of applying the step");
  for (const ParamDef& d : def->params) {
    switch (d.kind) {
      case ParamKind::kNumber:
        if (reals.count(d.name) == 0) reals[d.name] = d.number.empty() ? 0.0 : d.number[0];
        v.field(d.name, reals[d.name], d.doc);
        break;
      case ParamKind::kInt:
        if (ints.count(d.name) == 0) ints[d.name] = d.number.empty() ? 0 : static_cast<std::int64_t>(d.number[0]);
        v.field(d.name, ints[d.name], d.doc);
        break;
      case ParamKind::kRange:
      case ParamKind::kList:
        if (numbers.count(d.name) == 0) numbers[d.name] = d.number;
        v.field(d.name, numbers[d.name], d.doc);
        break;
      case ParamKind::kWord: {
        if (words.count(d.name) == 0) words[d.name] = d.word;
        const std::vector<std::string_view> choices(d.choices.begin(), d.choices.end());
        if (choices.empty())
          v.field(d.name, words[d.name], d.doc);
        else
          v.choice(d.name, words[d.name], choices, d.doc);
        break;
      }
      case ParamKind::kFlag:
        if (flags.count(d.name) == 0) flags[d.name] = d.flag;
        v.field(d.name, flags[d.name], d.doc);
        break;
    }
  }
  if (def->composite) v.list("transforms", transforms, "the steps it runs or chooses from");
}

std::unique_ptr<Transform> make_transform(const TransformSpec& spec, const std::string& where) {
  const TransformDef* def = find_transform(spec.name);
  if (def == nullptr) {
    const std::string near = closest_match(spec.name, transform_names());
    GB_THROW(InvalidArgument, where << ": unknown transform \"" << spec.name << "\"",
             near.empty() ? "see docs/augmentation.md for the transforms" : "did you mean \"" + near + "\"?");
  }
  TransformSpec full = spec;
  if (full.p < 0) full.p = def->default_p;
  for (const ParamDef& d : def->params) {  // defaults for keys a spec built in code left out
    switch (d.kind) {
      case ParamKind::kNumber: full.reals.try_emplace(d.name, d.number.empty() ? 0.0 : d.number[0]); break;
      case ParamKind::kInt:
        full.ints.try_emplace(d.name, d.number.empty() ? 0 : static_cast<std::int64_t>(d.number[0]));
        break;
      case ParamKind::kRange:
      case ParamKind::kList: full.numbers.try_emplace(d.name, d.number); break;
      case ParamKind::kWord: full.words.try_emplace(d.name, d.word); break;
      case ParamKind::kFlag: full.flags.try_emplace(d.name, d.flag); break;
    }
  }
  const Params params(full, where);
  params.require(std::isfinite(full.p) && full.p >= 0 && full.p <= 1, "p",
                 fmt::format("must be in [0, 1], got {}", full.p));
  return def->make(params);
}

Pipeline::Pipeline(std::vector<std::unique_ptr<Transform>> steps) {
  for (auto& s : steps) steps_.push_back(std::move(s));
}

void Pipeline::run(Sample& s, AugmentRng& rng) const { run_from(0, s, rng); }

void Pipeline::run_from(std::size_t first, Sample& s, AugmentRng& rng, std::size_t end) const {
  for (std::size_t i = first; i < std::min(end, steps_.size()); ++i) (*steps_[i])(s, rng);
}

const RegionStep* Pipeline::leading_region() const {
  if (steps_.empty() || steps_.front()->p() < 1) return nullptr;
  return steps_.front()->region_step();
}

const PlanarStep* Pipeline::trailing_planar() const {
  if (steps_.empty() || steps_.back()->p() < 1) return nullptr;
  return steps_.back()->planar_step();
}

Pipeline make_pipeline(const std::vector<TransformSpec>& specs, const std::string& where) {
  std::vector<std::unique_ptr<Transform>> steps;
  for (std::size_t i = 0; i < specs.size(); ++i)
    steps.push_back(make_transform(specs[i], where + "[" + std::to_string(i) + "]"));
  return Pipeline(std::move(steps));
}

}  // namespace glassbox::data
