// Tested by mixup_test.cpp (against timm 1.0.31 through tests/reference/mixup_ref.py).
#include "glassbox/data/mixup.h"

#include <cmath>

#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::data {

void MixupOptions::visit(FieldVisitor& v) {
  v.field("mixup_alpha", mixup_alpha, "MixUp: lam ~ Beta(alpha, alpha); 0 turns it off (timm's --mixup, e.g. 0.2)");
  v.field("cutmix_alpha", cutmix_alpha, "CutMix: lam ~ Beta(alpha, alpha); 0 turns it off (timm's --cutmix, e.g. 1.0)");
  v.field("cutmix_minmax", cutmix_minmax, "CutMix box side ratios [min, max] instead of alpha (e.g. [0.2, 0.8])");
  v.field("prob", prob, "probability that a batch (pair, element) is mixed");
  v.field("switch_prob", switch_prob, "with MixUp and CutMix both on: probability of CutMix");
  v.choice("mode", mode, "batch (one draw per batch) | pair | elem (one per sample)");
  v.field("correct_lam", correct_lam, "CutMix: lam from the box's area after clipping to the image");
}

void MixupOptions::validate() const {
  GB_CHECK(mixup_alpha >= 0 && std::isfinite(mixup_alpha), InvalidArgument,
           "data.mixup.mixup_alpha must be >= 0, got " << mixup_alpha, "0 turns MixUp off; 0.2 is usual");
  GB_CHECK(cutmix_alpha >= 0 && std::isfinite(cutmix_alpha), InvalidArgument,
           "data.mixup.cutmix_alpha must be >= 0, got " << cutmix_alpha, "0 turns CutMix off; 1.0 is usual");
  GB_CHECK(cutmix_minmax.empty() || (cutmix_minmax.size() == 2 && cutmix_minmax[0] > 0 &&
                                     cutmix_minmax[0] < cutmix_minmax[1] && cutmix_minmax[1] <= 1),
           InvalidArgument, "data.mixup.cutmix_minmax must be [min, max] with 0 < min < max <= 1",
           "e.g. [0.2, 0.8], or leave it empty");
  GB_CHECK(prob >= 0 && prob <= 1, InvalidArgument, "data.mixup.prob must be in [0, 1], got " << prob, "e.g. 1.0");
  GB_CHECK(switch_prob >= 0 && switch_prob <= 1, InvalidArgument,
           "data.mixup.switch_prob must be in [0, 1], got " << switch_prob, "e.g. 0.5");
}

namespace {

// Gamma(shape, 1): Marsaglia and Tsang's method; shape < 1 through Gamma(shape + 1) * U^(1/shape).
double sample_gamma(double shape, AugmentRng& rng) {
  if (shape < 1) {
    double u = rng.uniform();
    while (u <= 0) u = rng.uniform();
    return sample_gamma(shape + 1, rng) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x = 0, v = 0;
    do {
      x = rng.normal();
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = rng.uniform();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (u > 0 && std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

// timm's _params_per_batch / _params_per_elem for one decision.
MixDraw draw_one(const MixupOptions& o, double cut_alpha, AugmentRng& rng) {
  MixDraw d;
  if (!(rng.uniform() < o.prob)) return d;
  if (o.mixup_alpha > 0 && cut_alpha > 0) {
    d.cutmix = rng.uniform() < o.switch_prob;
    d.lam = sample_beta(d.cutmix ? cut_alpha : o.mixup_alpha, rng);
  } else if (o.mixup_alpha > 0) {
    d.lam = sample_beta(o.mixup_alpha, rng);
  } else {
    d.cutmix = true;
    d.lam = sample_beta(cut_alpha, rng);
  }
  d.mixed = d.lam != 1.0;
  d.final_lam = d.lam;
  return d;
}

// timm's cutmix_bbox_and_lam: the box from the draws, clipped, and the corrected lam.
void draw_box(MixDraw& d, std::int64_t h, std::int64_t w, const MixupOptions& o, AugmentRng& rng) {
  if (!o.cutmix_minmax.empty()) {
    const auto lo_h = static_cast<std::int64_t>(static_cast<double>(h) * o.cutmix_minmax[0]);
    const auto hi_h = static_cast<std::int64_t>(static_cast<double>(h) * o.cutmix_minmax[1]);
    const auto lo_w = static_cast<std::int64_t>(static_cast<double>(w) * o.cutmix_minmax[0]);
    const auto hi_w = static_cast<std::int64_t>(static_cast<double>(w) * o.cutmix_minmax[1]);
    GB_CHECK(hi_h > lo_h && hi_w > lo_w, InvalidArgument,
             "data.mixup.cutmix_minmax leaves no box size for " << h << "x" << w << " images",
             "widen cutmix_minmax or use cutmix_alpha");
    const std::int64_t cut_h = rng.randint(lo_h, hi_h - 1);
    const std::int64_t cut_w = rng.randint(lo_w, hi_w - 1);
    d.yl = rng.randint(0, h - cut_h);
    d.xl = rng.randint(0, w - cut_w);
    d.yh = d.yl + cut_h;
    d.xh = d.xl + cut_w;
    d.box_draws = {cut_h, cut_w, d.yl, d.xl};
  } else {
    const double ratio = std::sqrt(1.0 - d.lam);
    const auto cut_h = static_cast<std::int64_t>(static_cast<double>(h) * ratio);
    const auto cut_w = static_cast<std::int64_t>(static_cast<double>(w) * ratio);
    const std::int64_t cy = rng.randint(0, h - 1);
    const std::int64_t cx = rng.randint(0, w - 1);
    d.yl = std::clamp<std::int64_t>(cy - cut_h / 2, 0, h);
    d.yh = std::clamp<std::int64_t>(cy + (cut_h + 1) / 2, 0, h);
    d.xl = std::clamp<std::int64_t>(cx - cut_w / 2, 0, w);
    d.xh = std::clamp<std::int64_t>(cx + (cut_w + 1) / 2, 0, w);
    d.box_draws = {cy, cx};
  }
  if (o.correct_lam || !o.cutmix_minmax.empty())
    d.final_lam = 1.0 - static_cast<double>((d.yh - d.yl) * (d.xh - d.xl)) / static_cast<double>(h * w);
}

at::Tensor box_of(const at::Tensor& t, const MixDraw& d) {
  // t: [C, H, W] or [B, C, H, W]
  const std::int64_t hd = t.dim() - 2;
  return t.slice(hd, d.yl, d.yh).slice(hd + 1, d.xl, d.xh);
}

}  // namespace

double sample_beta(double a, AugmentRng& rng) {
  const double x = sample_gamma(a, rng);
  const double y = sample_gamma(a, rng);
  return x + y > 0 ? x / (x + y) : (rng.uniform() < 0.5 ? 0.0 : 1.0);
}

std::vector<MixDraw> mix_batch(Batch& b, const MixupOptions& o, AugmentRng& rng) {
  if (!o.enabled()) return {};
  at::Tensor& x = b.inputs;
  const std::int64_t n = x.size(0);
  const double cut_alpha = o.cutmix_minmax.empty() ? o.cutmix_alpha : 1.0;
  GB_CHECK(x.dim() == 4 || cut_alpha == 0, InvalidArgument,
           "CutMix needs image batches [B, C, H, W]; these inputs are " << x.sizes(),
           "set data.mixup.cutmix_alpha = 0 (MixUp works on any inputs)");
  const std::int64_t h = x.dim() == 4 ? x.size(2) : 0;
  const std::int64_t w = x.dim() == 4 ? x.size(3) : 0;
  std::vector<float> lam(static_cast<std::size_t>(n), 1.0f);
  std::vector<MixDraw> draws;
  if (o.mode == MixMode::kBatch) {
    MixDraw d = draw_one(o, cut_alpha, rng);
    if (d.mixed) {
      const at::Tensor partner = x.flip(0);
      if (d.cutmix) {
        draw_box(d, h, w, o, rng);
        box_of(x, d).copy_(box_of(partner, d));
      } else {
        x.mul_(d.lam).add_(partner.mul_(1.0 - d.lam));
      }
    }
    std::fill(lam.begin(), lam.end(), static_cast<float>(d.final_lam));
    draws.push_back(std::move(d));
  } else {
    // Per pair or per sample; lam in float32 as timm's numpy arrays hold it.
    const at::Tensor orig = x.clone();
    const bool pair = o.mode == MixMode::kPair;
    const std::int64_t count = pair ? n / 2 : n;
    for (std::int64_t i = 0; i < count; ++i) {
      MixDraw d = draw_one(o, cut_alpha, rng);
      draws.push_back(d);
    }
    for (std::int64_t i = 0; i < count; ++i) {
      MixDraw& d = draws[static_cast<std::size_t>(i)];
      const std::int64_t j = n - 1 - i;
      float l = static_cast<float>(d.lam);
      if (d.mixed) {
        if (d.cutmix) {
          draw_box(d, h, w, o, rng);
          box_of(x[i], d).copy_(box_of(orig[j], d));
          if (pair) box_of(x[j], d).copy_(box_of(orig[i], d));
          l = static_cast<float>(d.final_lam);
        } else {
          const float rest = 1.0f - l;
          x[i].copy_(orig[i] * l + orig[j] * rest);
          if (pair) x[j].copy_(orig[j] * l + orig[i] * rest);
        }
      }
      d.final_lam = l;
      lam[static_cast<std::size_t>(i)] = l;
      if (pair) lam[static_cast<std::size_t>(j)] = l;
    }
  }
  b.mix_lambda = torch::tensor(lam, torch::kFloat);
  return draws;
}

}  // namespace glassbox::data
