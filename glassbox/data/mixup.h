// mixup: MixUp and CutMix on a training batch, with timm's semantics (timm.data.Mixup).
//
//   [data.mixup]
//   mixup_alpha = 0.2      # > 0: MixUp, lam ~ Beta(alpha, alpha)
//   cutmix_alpha = 1.0     # > 0: CutMix; with both, switch_prob picks CutMix per batch
//
//   MixupOptions o; o.mixup_alpha = 0.2;
//   AugmentRng rng(seed);
//   mix_batch(batch, o, rng);   // batch.inputs mixed in place, batch.mix_lambda set
//
// Pairs are as timm's: sample i with sample B-1-i (the batch flipped). mode "batch" draws one lam
// (and one box) for the whole batch, "pair" one per pair, "elem" one per sample; a batch (or
// element) is mixed with probability prob. MixUp: x_i = lam x_i + (1 - lam) x_{B-1-i}. CutMix: a
// box of side sqrt(1 - lam) of the image's, centred at a uniform pixel and clipped to the image
// (or, with cutmix_minmax, sides drawn between min and max of the image's), is pasted from the
// partner; with correct_lam (or minmax) lam becomes the share of the image left unpasted. Every
// partner is taken from the batch before mixing. The targets are not touched: batch.mix_lambda
// carries lam per sample and the loss builds timm's soft targets from the original labels
// (nn::mixup_targets), so metrics still see the true labels. Unlike timm an odd batch is allowed
// (its middle sample is its own partner and stays as it is).
// Draws: uniform() for the prob and switch tests, Beta via two Gamma draws (Marsaglia-Tsang), and
// randint for the box centre, in timm's order; the same seed gives the same mix.
// Thread safety: free functions; the loader calls mix_batch from its workers.
#pragma once

#include <cstdint>
#include <vector>

#include "glassbox/base/config.h"
#include "glassbox/data/augment.h"
#include "glassbox/data/dataset.h"

namespace glassbox::data {

enum class MixMode { kBatch, kPair, kElem };
constexpr NameTable<MixMode, 3> enum_names(MixMode) {
  return {{{MixMode::kBatch, "batch"}, {MixMode::kPair, "pair"}, {MixMode::kElem, "elem"}}};
}
static_assert(is_complete_table(enum_names(MixMode{})));

struct MixupOptions {
  double mixup_alpha = 0.0;           // > 0 enables MixUp
  double cutmix_alpha = 0.0;          // > 0 enables CutMix
  std::vector<double> cutmix_minmax;  // [min, max] box side ratios; enables CutMix (alpha forced to 1, as timm)
  double prob = 1.0;                  // probability of mixing a batch (or pair, or element)
  double switch_prob = 0.5;           // with MixUp and CutMix both on: probability of CutMix
  MixMode mode = MixMode::kBatch;
  bool correct_lam = true;  // CutMix: lam from the clipped box's area

  bool enabled() const { return mixup_alpha > 0 || cutmix_alpha > 0 || !cutmix_minmax.empty(); }
  void visit(FieldVisitor& v);
  void validate() const;
};

// One draw from Beta(a, a) (a > 0).
double sample_beta(double a, AugmentRng& rng);

// One mixing decision (of the batch, a pair or a sample) as drawn, in timm's terms.
struct MixDraw {
  bool mixed = false;   // passed the prob test (lam != 1)
  bool cutmix = false;  // CutMix rather than MixUp
  double lam = 1.0;     // the Beta draw (before CutMix's correction)
  // CutMix's integer draws: the box centre (cy, cx); with cutmix_minmax the sides and the corner
  // (cut_h, cut_w, yl, xl).
  std::vector<std::int64_t> box_draws;
  std::int64_t yl = 0, yh = 0, xl = 0, xh = 0;  // the box pasted
  double final_lam = 1.0;                       // the lam the targets get
};

// Mixes batch.inputs ([B, C, H, W]; [B, F] for MixUp alone) in place and sets batch.mix_lambda;
// returns the draws (one per batch, pair or sample, as mode says).
std::vector<MixDraw> mix_batch(Batch& batch, const MixupOptions& o, AugmentRng& rng);

}  // namespace glassbox::data
