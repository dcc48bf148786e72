// Tested by image_folder_test.cpp (ImagePreprocessing.*) and, end to end, by tests/serve/image_platform_test.py.
#include "glassbox/data/image_preprocessing.h"

#include <opencv2/core.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/data/image.h"

namespace glassbox::data {

namespace {

std::vector<double> numbers_or(const TransformSpec& s, const std::string& key, std::vector<double> fallback) {
  const auto it = s.numbers.find(key);
  return it == s.numbers.end() || it->second.empty() ? fallback : it->second;
}

}  // namespace

std::optional<Standardization> standardization_of(const std::vector<TransformSpec>& transforms) {
  if (transforms.empty() || transforms.back().name != "Normalize") return std::nullopt;
  const TransformSpec& n = transforms.back();
  const auto mode = n.words.find("normalization");
  if (mode != n.words.end() && mode->second != "standard") return std::nullopt;
  if (n.p >= 0 && n.p < 1) return std::nullopt;  // a Normalize applied at random is not a constant
  Standardization s;
  const auto max = n.reals.find("max_pixel_value");
  s.scale = 1.0 / (max != n.reals.end() && max->second > 0 ? max->second : 255.0);
  s.mean = numbers_or(n, "mean", {0.485, 0.456, 0.406});
  s.std = numbers_or(n, "std", {0.229, 0.224, 0.225});
  return s;
}

ImagePreprocessing image_preprocessing_of(const DataOptions& d, std::int64_t channels) {
  ImagePreprocessing p;
  p.channels = channels;
  p.transforms = d.eval_transforms;
  if (standardization_of(p.transforms)) p.transforms.pop_back();
  return p;
}

nlohmann::json to_json(const ImagePreprocessing& p) {
  nlohmann::json steps = nlohmann::json::array();
  for (const TransformSpec& s : p.transforms) {
    TransformSpec copy = s;
    steps.push_back(glassbox::to_json(visit_fn(copy)));
  }
  return {{"channels", p.channels}, {"transforms", steps}};
}

ImagePreprocessing image_preprocessing_from_json(const nlohmann::json& j, const std::string& source) {
  GB_CHECK(j.is_object() && j.contains("channels") && j["channels"].is_number_integer() && j.contains("transforms") &&
               j["transforms"].is_array(),
           InvalidArgument, source << ": preprocessing.image must be {\"channels\": 1 or 3, \"transforms\": [...]}",
           "write the contract with glassbox export");
  ImagePreprocessing p;
  p.channels = j["channels"].get<std::int64_t>();
  GB_CHECK(p.channels == 1 || p.channels == 3, InvalidArgument,
           source << ": preprocessing.image.channels is " << p.channels, "use 1 (gray) or 3 (RGB)");
  for (std::size_t i = 0; i < j["transforms"].size(); ++i) {
    TransformSpec s;
    glassbox::from_json(j["transforms"][i], source + ": preprocessing.image.transforms[" + std::to_string(i) + "]",
                        visit_fn(s));
    p.transforms.push_back(std::move(s));
  }
  make_pipeline(p.transforms, source + ": preprocessing.image.transforms");  // every parameter checked now
  return p;
}

std::optional<cv::Matx23d> source_affine(const cv::Mat& image, const Pipeline& pipeline) {
  // Masks holding 1 + x and 1 + y (0 is what padding fills in): float32 is exact to 2^24.
  cv::Mat xs(image.rows, image.cols, CV_32F), ys(image.rows, image.cols, CV_32F);
  for (int y = 0; y < image.rows; ++y)
    for (int x = 0; x < image.cols; ++x) {
      xs.at<float>(y, x) = static_cast<float>(x + 1);
      ys.at<float>(y, x) = static_cast<float>(y + 1);
    }
  Sample s{image.clone(), {xs, ys}};
  AugmentRng rng(0);
  pipeline.run(s, rng);
  const cv::Mat& mx = s.masks.at(0);
  const cv::Mat& my = s.masks.at(1);
  // Least squares for x_in = a x + b y + c (and y_in), over the pixels that come from the image.
  cv::Matx33d ata = cv::Matx33d::zeros();
  cv::Vec3d atx(0, 0, 0), aty(0, 0, 0);
  int used = 0;
  for (int y = 0; y < mx.rows; ++y)
    for (int x = 0; x < mx.cols; ++x) {
      const float sx = mx.at<float>(y, x), sy = my.at<float>(y, x);
      if (sx < 0.5f || sy < 0.5f) continue;
      const cv::Vec3d r(x, y, 1.0);
      ata += r * r.t();
      atx += r * static_cast<double>(sx - 1);
      aty += r * static_cast<double>(sy - 1);
      ++used;
    }
  if (used < 3 || std::abs(cv::determinant(ata)) < 1e-9) return std::nullopt;
  const cv::Matx33d inv = ata.inv();
  const cv::Vec3d ax = inv * atx, ay = inv * aty;
  return cv::Matx23d(ax[0], ax[1], ax[2], ay[0], ay[1], ay[2]);
}

ImagePreprocessor::ImagePreprocessor(ImagePreprocessing p)
    : spec_(std::move(p)), pipeline_(make_pipeline(spec_.transforms, "preprocessing.image.transforms")) {}

at::Tensor ImagePreprocessor::operator()(std::string_view bytes, const std::string& name) const {
  return (*this)(decode_image(bytes, name, static_cast<int>(spec_.channels)));
}

at::Tensor ImagePreprocessor::operator()(cv::Mat image) const {
  Sample s{std::move(image), {}};
  AugmentRng rng(0);  // eval transforms are deterministic; the seed is never drawn from
  pipeline_.run(s, rng);
  if (s.image.depth() == CV_8U) return image_to_tensor(s.image);
  cv::Mat f = s.image.isContinuous() ? s.image : s.image.clone();
  return torch::from_blob(f.data, {f.rows, f.cols, f.channels()}, torch::kFloat).permute({2, 0, 1}).clone();
}

}  // namespace glassbox::data
