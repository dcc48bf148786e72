// augment: albumentations' transforms on OpenCV matrices, built from TransformSpecs.
//
//   Pipeline train = make_pipeline(options.train_transforms, "data.train_transforms");
//   Sample s{read_image("leaf.jpg", 3), {}};
//   AugmentRng rng(sample_seed(epoch_seed, index));   // every draw of one sample
//   train.run(s, rng);                                  // s.image: CV_8UC3, or CV_32FC3 after Normalize
//
// Semantics follow albumentations 2.0.8: the same names, parameters, defaults (including each
// transform's default p), the same parameter distributions, and pixel results equal to its
// apply() given the same drawn parameters (the functions of augment_ops.h). Geometric transforms
// move masks with the image (nearest-neighbour, fill_mask); pixel transforms leave masks alone.
// Images are 8-bit RGB (or gray) HWC until Normalize, which makes them float32.
// Randomness: one AugmentRng per sample, seeded from (seed, epoch, sample index), so a sample's
// augmentation does not depend on which worker thread handles it or in which batch it lands.
// The draws follow albumentations' distributions; the streams are glassbox's own (xoshiro256**).
// Thread safety: a built Pipeline is immutable; run() may be called from many threads at once,
// each with its own Sample and AugmentRng.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <opencv2/core/mat.hpp>

#include "glassbox/data/transform_spec.h"

namespace glassbox::data {

struct Sample {
  cv::Mat image;               // HWC, CV_8UC1/CV_8UC3 (CV_32F after Normalize)
  std::vector<cv::Mat> masks;  // HW (or HWC) label masks, moved with the image by geometric steps
};

// The random source of one sample (xoshiro256** seeded through splitmix64).
class AugmentRng {
 public:
  explicit AugmentRng(std::uint64_t seed);
  std::uint64_t next_u64();
  double uniform();                                        // [0, 1), 53 bits
  double uniform(double lo, double hi);                    // lo + (hi - lo) * uniform(), as random.uniform
  std::int64_t randint(std::int64_t lo, std::int64_t hi);  // inclusive both ends, as random.randint
  double normal();                                         // standard normal (Box-Muller)

 private:
  std::uint64_t s_[4];
  double spare_ = 0.0;
  bool has_spare_ = false;
};

// numpy's pairwise summation of float64 (np.sum): the transforms normalise kernels and grids with
// it so that their sums round as albumentations' do.
double numpy_sum(const double* a, std::size_t n);
// Python's int(x) (truncation toward zero, clamped to int) and round(x) (half to even).
int py_int(double x);
int py_round(double x);
// The mean over every pixel and channel of an 8-bit image, exact as numpy's.
double mean_u8(const cv::Mat& img);

// The seed of sample `index`'s draws in an epoch whose loader seed is `epoch_seed`.
std::uint64_t sample_seed(std::uint64_t epoch_seed, std::int64_t index);

// A step that keeps one rectangle of its input and reads no pixel outside it (RandomResizedCrop):
// the loader can then decode that rectangle alone (jpeg.h). region() draws, from the image's size,
// what apply() draws before it reads a pixel; apply_region() finishes the step on the rectangle's
// pixels. The two together give what apply() gives, bit for bit.
class RegionStep {
 public:
  virtual ~RegionStep() = default;
  virtual cv::Rect region(int height, int width, AugmentRng& rng) const = 0;
  virtual void apply_region(Sample& s) const = 0;  // s.image: the region's pixels; no masks
};

// A last step that can write its float32 result straight into CHW planes (Normalize): the loader
// then makes no HWC float image and no transposed copy of it. apply_planar() writes what apply()
// followed by an HWC -> CHW split gives: C planes of rows x cols floats at `out`. It draws nothing.
class PlanarStep {
 public:
  virtual ~PlanarStep() = default;
  virtual void apply_planar(const cv::Mat& img, float* out) const = 0;  // img: 8-bit HWC
};

// A built step. operator() decides with probability p (p >= 1: always, no draw; p <= 0: never,
// no draw; otherwise one uniform() < p), then draws its parameters and applies them.
class Transform {
 public:
  explicit Transform(double p) : p_(p) {}
  virtual ~Transform() = default;
  void operator()(Sample& s, AugmentRng& rng) const;
  double p() const { return p_; }
  // The step's name as in configs ("RandomResizedCrop").
  virtual std::string_view name() const = 0;
  // Draws and applies unconditionally (OneOf calls this on the child it picked).
  virtual void apply(Sample& s, AugmentRng& rng) const = 0;
  // The numbers one apply() on `s` would draw, in the order of albumentations' params (for the
  // distribution tests against it); empty for a step that draws nothing. Consumes rng as apply does.
  virtual std::vector<double> draw_params(const Sample& s, AugmentRng& rng) const { return {}; }
  // The step as a RegionStep or a PlanarStep, when it is one.
  virtual const RegionStep* region_step() const { return nullptr; }
  virtual const PlanarStep* planar_step() const { return nullptr; }

 private:
  double p_;
};

// The parameters a transform takes, for the config reader and for errors.
enum class ParamKind {
  kNumber,  // one number
  kInt,     // one integer
  kRange,   // one number or [lo, hi]; ParamDef::scalar says what one number means
  kList,    // any count of numbers (mean, std, fill per channel)
  kWord,    // a string from ParamDef::choices
  kFlag,    // true / false
};
// What a single number given for a kRange parameter means (albumentations' rules).
enum class ScalarRange {
  kSymmetric,  // v -> [-v, v]; [a, b] is sorted
  kOnePlus,    // v -> [1, v]
  kZeroPlus,   // v -> [0, v]
  kFixed,      // v -> [v, v]
  kBias1,      // v -> [1 - v, 1 + v]; [a, b] -> [1 + a, 1 + b] (ShiftScaleRotate's scale_limit)
  kJitter,     // v -> [max(0, 1 - v), 1 + v] (ColorJitter's brightness, contrast, saturation)
  kFromThree,  // v -> [3, v] (MotionBlur's blur_limit)
};

struct ParamDef {
  std::string name;
  ParamKind kind = ParamKind::kNumber;
  std::vector<double> number{};        // the default of numeric kinds
  std::string word{};                  // the default of kWord
  bool flag = false;                   // the default of kFlag
  std::vector<std::string> choices{};  // kWord's allowed values
  ScalarRange scalar = ScalarRange::kSymmetric;
  std::string doc{};
};

// The parameters of one spec, read with the transform's rules; errors name `where` and the key.
class Params {
 public:
  Params(const TransformSpec& spec, std::string where);
  double number(const std::string& key) const;
  std::int64_t integer(const std::string& key) const;
  std::pair<double, double> range(const std::string& key, ScalarRange rule) const;
  const std::vector<double>& list(const std::string& key) const;
  const std::string& word(const std::string& key) const;
  bool flag(const std::string& key) const;
  double p() const { return number("p"); }
  // InvalidArgument "<where>: <Name>.<key> <what>" unless ok.
  void require(bool ok, const std::string& key, const std::string& what, const std::string& hint = "") const;
  const std::string& where() const { return where_; }
  const TransformSpec& spec() const { return spec_; }

 private:
  const TransformSpec& spec_;
  std::string where_;
};

struct TransformDef {
  std::string name;
  std::string doc;
  double default_p = 0.5;
  std::vector<ParamDef> params;  // without p (added for every transform)
  std::function<std::unique_ptr<Transform>(const Params&)> make;
  bool composite = false;  // Compose, OneOf, SomeOf: children in `transforms`
};

// Every transform glassbox has, in documentation order; nullptr for an unknown name.
const std::vector<TransformDef>& transform_registry();
const TransformDef* find_transform(std::string_view name);

// The registries of each group (augment_geometric.cpp, augment_pixel.cpp, augment.cpp).
void add_geometric_transforms(std::vector<TransformDef>& out);
void add_pixel_transforms(std::vector<TransformDef>& out);

// Steps run in order (a Compose with p = 1).
class Pipeline {
 public:
  Pipeline() = default;
  explicit Pipeline(std::vector<std::unique_ptr<Transform>> steps);
  void run(Sample& s, AugmentRng& rng) const;
  // Steps [first, end): after a caller did steps()[0] as a leading_region(), or before it does the
  // last as a trailing_planar().
  void run_from(std::size_t first, Sample& s, AugmentRng& rng, std::size_t end = SIZE_MAX) const;
  // The first step when it is a RegionStep that always applies (p >= 1), else nullptr.
  const RegionStep* leading_region() const;
  // The last step when it is a PlanarStep that always applies (p >= 1), else nullptr.
  const PlanarStep* trailing_planar() const;
  std::size_t size() const { return steps_.size(); }
  bool empty() const { return steps_.empty(); }
  const std::vector<std::shared_ptr<const Transform>>& steps() const { return steps_; }

 private:
  std::vector<std::shared_ptr<const Transform>> steps_;
};

// Builds one step or a pipeline; `where` names the config list for errors
// ("data.train_transforms"), extended with "[i]" per step.
std::unique_ptr<Transform> make_transform(const TransformSpec& spec, const std::string& where);
Pipeline make_pipeline(const std::vector<TransformSpec>& specs, const std::string& where);

// Named training augmentations for three kinds of small image data sets (data.augment_preset):
//   xray:            CLAHE clip [1, 2] (p 0.5), Rotate +-15 deg (p 0.5), ElasticTransform (p 0.2),
//                    RandomBrightnessContrast +-0.1 (p 0.3)
//   production_line: RandomBrightnessContrast +-0.1 (p 0.5), MotionBlur (p 0.3)
//   satellite:       RandomRotate90, HorizontalFlip, VerticalFlip (p 0.5 each), RandomGamma 80-120
//                    (p 0.5), Solarize (p 0.1)
// Other parameters are albumentations' defaults. InvalidArgument with did-you-mean for other names.
std::vector<std::string> preset_names();
std::vector<TransformSpec> preset_transforms(const std::string& name);

}  // namespace glassbox::data
