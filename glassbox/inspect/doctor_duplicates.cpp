// The doctor's near-duplicate check across splits: evaluation samples that are not byte-identical
// to a training sample but nearly the same one (a re-saved or resized photo, a row with rounding
// noise). Image files are compared by thumbnails of the decoded pictures, rows (and images held
// as tensors) as the model sees them, both by distance. Each threshold is set against the data: the same test run
// within the training split gives the base rate that natural look-alikes reach. Tested in doctor_rules_test.cpp (the
// rule) and doctor_test.cpp (rows and image files).
#include <algorithm>
#include <cmath>
#include <unordered_set>

#include <opencv2/imgproc.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/data/image.h"
#include "glassbox/data/image_folder.h"
#include "glassbox/inspect/doctor_internal.h"

namespace glassbox::inspect::detail {

namespace {

constexpr std::int64_t kMaxTrain = 10000;    // training samples compared against
constexpr std::int64_t kMaxTarget = 1000;    // evaluation samples checked
constexpr std::int64_t kBaseQueries = 1000;  // training samples for the base rate

const data::ImageDataset* image_root(const data::Dataset& ds) {
  const data::Dataset* d = &ds;
  while (const auto* sub = dynamic_cast<const data::SubsetDataset*>(d)) d = sub->base().get();
  return dynamic_cast<const data::ImageDataset*>(d);
}

// Thumbnails of the decoded pictures: gray, 16x16 (area-averaged), with the mean removed and
// scaled to unit norm, so that a re-saved, resized, re-encoded or re-exposed copy lands next to
// its original whatever augmentation the loader applies.
at::Tensor thumbnails(const data::ImageDataset& images, const at::Tensor& files, std::int64_t n) {
  at::Tensor out = torch::zeros({n, 256}, torch::kFloat);
  const at::Tensor fi = files.contiguous();
  at::parallel_for(0, n, 16, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      float* row = out.data_ptr<float>() + i * 256;
      try {
        cv::Mat gray = data::read_image(images.files().at(static_cast<std::size_t>(fi.data_ptr<std::int64_t>()[i])), 1);
        cv::Mat small;
        cv::resize(gray, small, cv::Size(16, 16), 0, 0, cv::INTER_AREA);
        double mean = 0, sq = 0;
        for (int k = 0; k < 256; ++k) mean += small.at<std::uint8_t>(k / 16, k % 16);
        mean /= 256;
        for (int k = 0; k < 256; ++k) {
          row[k] = static_cast<float>(small.at<std::uint8_t>(k / 16, k % 16) - mean);
          sq += static_cast<double>(row[k]) * row[k];
        }
        const float norm = static_cast<float>(std::sqrt(std::max(sq, 1e-12)));
        for (int k = 0; k < 256; ++k) row[k] /= norm;
      } catch (const std::exception&) {
        for (int k = 0; k < 256; ++k) row[k] = static_cast<float>(i % 7 == k % 7) * 1e3f;  // unreadable: far away
      }
    }
  });
  return out;
}

}  // namespace

NearDuplicates find_near_duplicates(const std::string& split, const data::Dataset& train_ds, const at::Tensor& train_x,
                                    const at::Tensor& train_files, const std::vector<std::uint64_t>& train_hashes,
                                    const data::Dataset& target_ds, const at::Tensor& target_x,
                                    const at::Tensor& target_files, const std::vector<std::uint64_t>& target_hashes) {
  NearDuplicates nd;
  nd.split = split;
  const std::int64_t nt = std::min<std::int64_t>(static_cast<std::int64_t>(target_hashes.size()), kMaxTarget);
  const std::int64_t nr = std::min<std::int64_t>(static_cast<std::int64_t>(train_hashes.size()), kMaxTrain);
  const std::int64_t nb = std::min<std::int64_t>(nr, kBaseQueries);
  if (nt == 0 || nr < 20) return nd;
  // For each checked sample: its nearest training sample that is not byte-identical to it, and
  // whether that one is near. Base rate: the same for the first nb training samples, against
  // the others.
  std::vector<bool> near_target(static_cast<std::size_t>(nt)), near_base(static_cast<std::size_t>(nb));
  std::vector<std::int64_t> partner(static_cast<std::size_t>(nt), -1);
  const data::ImageDataset* train_images = image_root(train_ds);
  const data::ImageDataset* target_images = image_root(target_ds);
  const bool images = train_images != nullptr && target_images != nullptr;
  at::Tensor xr, xt;
  if (images) {
    xr = thumbnails(*train_images, train_files, nr);
    xt = thumbnails(*target_images, target_files, nt);
  } else {
    if (!train_x.defined() || !target_x.defined() || !train_x.is_floating_point()) return nd;
    // Images held as tensors: pooled to at most 16x16 per channel, as the baseline does, so that
    // the distances stay cheap (a copy stays next to its original after pooling).
    auto prepare = [](const at::Tensor& x, std::int64_t n) {
      at::Tensor v = torch::nan_to_num(x.slice(0, 0, n).to(torch::kFloat), 0, 0, 0);
      if (v.dim() == 4 && v.size(2) * v.size(3) > 256) v = torch::adaptive_avg_pool2d(v, {16, 16});
      return v.reshape({n, -1}).contiguous();
    };
    xr = prepare(train_x, nr);
    xt = prepare(target_x, nt);
    if (xr.size(1) != xt.size(1)) return nd;
  }
  {
    // Byte-identical pairs are the exact check's; here they are set apart.
    auto hashes_of = [](const std::vector<std::uint64_t>& h, std::int64_t n) {
      return torch::from_blob(const_cast<std::uint64_t*>(h.data()), {n}, torch::kLong).clone();
    };
    const at::Tensor hr = hashes_of(train_hashes, nr), ht = hashes_of(target_hashes, nt), hb = hr.slice(0, 0, nb);
    at::Tensor db = torch::cdist(xr.slice(0, 0, nb), xr);
    db.masked_fill_(hb.unsqueeze(1) == hr.unsqueeze(0), INFINITY);  // itself and its exact copies
    const at::Tensor base_nn = std::get<0>(db.min(1));
    const at::Tensor finite = torch::isfinite(base_nn);
    if (!finite.any().item<bool>()) return nd;
    // Near: closer than a tenth of the median nearest-neighbour distance within the training data.
    nd.threshold = 0.1 * base_nn.masked_select(finite).median().item<double>();
    nd.method = images ? "distance between 16x16 gray thumbnails of the decoded images (mean removed, unit "
                         "norm), below a tenth of the median nearest-neighbour distance within the training split"
                       : "distance between the inputs as the model sees them, below a tenth of the median "
                         "nearest-neighbour distance within the training split";
    at::Tensor dt = torch::cdist(xt, xr);
    dt.masked_fill_(ht.unsqueeze(1) == hr.unsqueeze(0), INFINITY);
    const auto [tmin, targ] = dt.min(1);
    for (std::int64_t i = 0; i < nt; ++i) {
      near_target[static_cast<std::size_t>(i)] = tmin[i].item<double>() <= nd.threshold;
      partner[static_cast<std::size_t>(i)] = targ[i].item<std::int64_t>();
    }
    for (std::int64_t i = 0; i < nb; ++i)
      near_base[static_cast<std::size_t>(i)] = base_nn[i].item<double>() <= nd.threshold;
  }
  nd.checked = nt;
  nd.base_checked = nb;
  for (std::int64_t i = 0; i < nt; ++i) {
    if (!near_target[static_cast<std::size_t>(i)]) continue;
    ++nd.found;
    if (nd.examples.size() < 6) {
      nd.examples.push_back(target_files[i].item<std::int64_t>());
      nd.train_examples.push_back(train_files[partner[static_cast<std::size_t>(i)]].item<std::int64_t>());
      if (images)
        nd.example_files.push_back(target_images->files().at(static_cast<std::size_t>(nd.examples.back())).name() +
                                   " ~ " +
                                   train_images->files().at(static_cast<std::size_t>(nd.train_examples.back())).name());
    }
  }
  nd.share = static_cast<double>(nd.found) / static_cast<double>(nt);
  nd.base_rate = static_cast<double>(std::count(near_base.begin(), near_base.end(), true)) / static_cast<double>(nb);
  return nd;
}

}  // namespace glassbox::inspect::detail
