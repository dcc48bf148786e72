// TrainerOptions: the loop's knobs, with PyTorch Lightning's names and meanings.
//
//   [trainer]
//   max_epochs = 10
//   precision = "bf16-mixed"
//   gradient_clip_val = 1.0
//
// Fractions vs counts (as in Lightning): val_check_interval and limit_*_batches / overfit_batches
// are a fraction of an epoch when <= 1.0 and a number of batches when > 1.
// Thread safety: plain data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "glassbox/base/config.h"

namespace glassbox::train {

enum class ClipAlgorithm { kNorm, kValue };
constexpr NameTable<ClipAlgorithm, 2> enum_names(ClipAlgorithm) {
  return {{{ClipAlgorithm::kNorm, "norm"}, {ClipAlgorithm::kValue, "value"}}};
}
static_assert(is_complete_table(enum_names(ClipAlgorithm{})));

// Lightning's names: "32" (float32), "bf16-mixed" and "16-mixed" (autocast with a GradScaler).
enum class PrecisionMode { k32, kBf16Mixed, k16Mixed };
constexpr NameTable<PrecisionMode, 3> enum_names(PrecisionMode) {
  return {
      {{PrecisionMode::k32, "32"}, {PrecisionMode::kBf16Mixed, "bf16-mixed"}, {PrecisionMode::k16Mixed, "16-mixed"}}};
}
static_assert(is_complete_table(enum_names(PrecisionMode{})));

// "auto": data-parallel when launched as one of several ranks (glassbox train --nproc, torchrun),
// one process otherwise; "ddp": always through the data-parallel path (also with one rank).
enum class Strategy { kAuto, kSingle, kDdp };
constexpr NameTable<Strategy, 3> enum_names(Strategy) {
  return {{{Strategy::kAuto, "auto"}, {Strategy::kSingle, "single"}, {Strategy::kDdp, "ddp"}}};
}
static_assert(is_complete_table(enum_names(Strategy{})));

struct TrainerOptions {
  std::int64_t max_epochs = 10;  // -1: unlimited (then max_steps or max_time must stop)
  std::int64_t max_steps = -1;   // optimiser steps; -1: unlimited
  double max_time = 0;           // seconds of training; 0: unlimited
  double val_check_interval = 1.0;
  std::int64_t check_val_every_n_epoch = 1;
  double limit_train_batches = 1.0;
  double limit_val_batches = 1.0;
  double limit_test_batches = 1.0;
  std::int64_t fast_dev_run = 0;  // n > 0: n batches of every loop, no checkpoints or logs
  double overfit_batches = 0.0;   // > 0: train and validate on the same first batches, unshuffled
  std::int64_t num_sanity_val_steps = 2;
  std::int64_t accumulate_grad_batches = 1;
  double gradient_clip_val = 0.0;  // 0: no clipping
  // > 0: clip at the 95th percentile of the unclipped gradient norms of the first K steps (the
  // practitioners' automatic threshold); needs gradient_clip_val = 0 and the "norm" algorithm.
  std::int64_t gradient_clip_auto_steps = 0;
  ClipAlgorithm gradient_clip_algorithm = ClipAlgorithm::kNorm;
  PrecisionMode precision = PrecisionMode::k32;
  bool deterministic = false;
  std::int64_t seed = 42;
  std::int64_t log_every_n_steps = 50;
  std::vector<std::string> freeze;  // parameter-name patterns (glob: "features.*") to freeze
  double freeze_fraction = 0.0;     // freeze whole layers from the input side until this share of parameters
  std::int64_t freeze_blocks = 0;   // freeze the model's first N blocks (its stages with parameters)
  bool frozen_bn_eval = true;       // BatchNorm layers whose parameters are all frozen stay in eval mode
  // Lightning's BackboneFinetuning: the layers frozen above join training at this epoch, as a new
  // optimiser group at unfreeze_lr_ratio x group 0's lr, multiplied by unfreeze_lr_multiplier each
  // later epoch (capped at group 0's lr with unfreeze_align). -1: they stay frozen.
  std::int64_t unfreeze_at_epoch = -1;
  double unfreeze_lr_ratio = 0.1;
  double unfreeze_lr_multiplier = 1.5;
  bool unfreeze_align = true;
  bool channels_last = false;           // 4-d weights and image batches in NHWC memory order
  bool gradient_checkpointing = false;  // recompute each block in backward instead of keeping activations
  std::string device = "auto";          // cpu | cuda | cuda:N | auto
  std::int64_t num_threads = 0;         // intra-op threads; 0: LibTorch's default
  bool enable_progress_bar = true;
  bool enable_model_summary = true;
  bool enable_checkpointing = true;
  bool detect_anomaly = false;
  // Data-parallel training (PyTorch's DistributedDataParallel on c10d: Gloo on CPU, NCCL on CUDA).
  Strategy strategy = Strategy::kAuto;
  bool sync_batchnorm = false;          // BatchNorm statistics over the global batch (SyncBatchNorm)
  bool find_unused_parameters = false;  // parameters without a gradient in a step are allowed
  bool ddp_broadcast_buffers = true;    // rank 0's buffers (BatchNorm statistics) sent before each forward
  double ddp_bucket_cap_mb = 25.0;      // gradient bucket size (the first bucket: 1 MiB)
  bool ddp_shared_memory = true;        // CPU ranks on one machine average gradients in shared memory
  double ddp_timeout = 1800.0;          // seconds a rank may wait for another (rendezvous, collectives)

  void visit(FieldVisitor& v);
  void validate() const;
};

// Resolves a Lightning-style "fraction or count" against `total` batches.
std::int64_t resolve_batches(double value, std::int64_t total, const char* name);

}  // namespace glassbox::train
