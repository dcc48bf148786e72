#include "glassbox/metrics/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::metrics {

namespace {
nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }
}  // namespace

nlohmann::json Calibration::to_json() const {
  nlohmann::json rel = nlohmann::json::array();
  for (const auto& b : bins)
    rel.push_back({{"lower", b.lower},
                   {"upper", b.upper},
                   {"count", b.count},
                   {"accuracy", num(b.accuracy)},
                   {"confidence", num(b.confidence)}});
  return {{"ece", ece},   {"ece_float64", ece_float64}, {"mce", mce}, {"bins", num_bins},
          {"norm", "l1"}, {"reliability", rel}};
}

Calibration calibration(const at::Tensor& probs, const at::Tensor& labels, std::int64_t num_bins) {
  GB_CHECK(probs.dim() == 2 && labels.dim() == 1 && probs.size(0) == labels.size(0), InvalidArgument,
           "calibration needs probabilities [N, K] and labels [N], got " << probs.sizes() << " and " << labels.sizes(),
           "pass one row per label");
  GB_CHECK(num_bins >= 1, InvalidArgument, "calibration needs at least one bin, got " << num_bins, "use 15");
  torch::NoGradGuard no_grad;
  const at::Tensor p = probs.to(torch::kCPU).to(torch::kDouble);
  const at::Tensor y = labels.to(torch::kCPU, torch::kLong);
  GB_CHECK(p.numel() == 0 || (p.min().item<double>() >= 0.0 && p.max().item<double>() <= 1.0), InvalidArgument,
           "calibration needs probabilities in [0, 1]", "apply softmax to the model's logits first");
  Calibration c;
  c.num_bins = num_bins;
  const auto [conf_d, pred] = p.max(1);
  const at::Tensor correct_b = pred.eq(y);

  // torchmetrics' computation, op for op (float32 confidences and accuracies).
  {
    const at::Tensor conf = conf_d.to(torch::kFloat), acc = correct_b.to(torch::kFloat);
    const at::Tensor edges = torch::linspace(0, 1, num_bins + 1, torch::TensorOptions().dtype(torch::kFloat));
    const at::Tensor idx = torch::bucketize(conf, edges, /*out_int32=*/false, /*right=*/true) - 1;
    const auto opts = torch::TensorOptions().dtype(torch::kFloat);
    at::Tensor count = torch::zeros({num_bins + 1}, opts).scatter_add_(0, idx, torch::ones_like(conf));
    at::Tensor conf_bin = torch::nan_to_num(torch::zeros({num_bins + 1}, opts).scatter_add_(0, idx, conf) / count);
    at::Tensor acc_bin = torch::nan_to_num(torch::zeros({num_bins + 1}, opts).scatter_add_(0, idx, acc) / count);
    const at::Tensor prop = count / count.sum();
    c.ece = conf.numel() == 0 ? 0.0 : torch::sum(torch::abs(acc_bin - conf_bin) * prop).item<double>();
  }

  // The same in double precision, and the bins for the diagram.
  const std::int64_t n = conf_d.numel();
  const double* cd = conf_d.contiguous().data_ptr<double>();
  const at::Tensor ok = correct_b.contiguous();
  const bool* okp = ok.data_ptr<bool>();
  std::vector<double> cnt(static_cast<std::size_t>(num_bins + 1), 0), csum(cnt.size(), 0), asum(cnt.size(), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = cd[i];
    auto b = static_cast<std::int64_t>(std::floor(v * static_cast<double>(num_bins)));
    b = std::clamp<std::int64_t>(b, 0, num_bins);
    // Floating-point floor may land one bin off at an exact edge: compare with the edge itself.
    while (b > 0 && v < static_cast<double>(b) / static_cast<double>(num_bins)) --b;
    while (b < num_bins && v >= static_cast<double>(b + 1) / static_cast<double>(num_bins)) ++b;
    cnt[static_cast<std::size_t>(b)] += 1;
    csum[static_cast<std::size_t>(b)] += v;
    asum[static_cast<std::size_t>(b)] += okp[i] ? 1.0 : 0.0;
  }
  for (std::size_t b = 0; b < cnt.size(); ++b) {
    if (cnt[b] == 0) continue;
    const double gap = std::abs(asum[b] / cnt[b] - csum[b] / cnt[b]);
    c.ece_float64 += cnt[b] / static_cast<double>(n) * gap;
    c.mce = std::max(c.mce, gap);
  }
  for (std::int64_t b = 0; b < num_bins; ++b) {
    ReliabilityBin rb;
    rb.lower = static_cast<double>(b) / static_cast<double>(num_bins);
    rb.upper = static_cast<double>(b + 1) / static_cast<double>(num_bins);
    double k = cnt[static_cast<std::size_t>(b)], cs = csum[static_cast<std::size_t>(b)],
           as = asum[static_cast<std::size_t>(b)];
    if (b == num_bins - 1) {  // the [1, 1] bin joins the last one
      k += cnt.back();
      cs += csum.back();
      as += asum.back();
    }
    rb.count = static_cast<std::int64_t>(k);
    rb.accuracy = k > 0 ? as / k : std::numeric_limits<double>::quiet_NaN();
    rb.confidence = k > 0 ? cs / k : std::numeric_limits<double>::quiet_NaN();
    c.bins.push_back(rb);
  }
  return c;
}

}  // namespace glassbox::metrics
