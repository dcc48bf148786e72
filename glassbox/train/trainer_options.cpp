#include "glassbox/train/trainer_options.h"

#include <cmath>

#include "glassbox/base/error.h"

namespace glassbox::train {

void TrainerOptions::visit(FieldVisitor& v) {
  v.field("max_epochs", max_epochs, "stop after this many epochs (-1: unlimited)");
  v.field("max_steps", max_steps, "stop after this many optimiser steps (-1: unlimited)");
  v.field("max_time", max_time, "stop after this many seconds of training (0: unlimited)");
  v.field("val_check_interval", val_check_interval,
          "validate every fraction of an epoch (<= 1) or every N batches (> 1)");
  v.field("check_val_every_n_epoch", check_val_every_n_epoch, "validate every N epochs");
  v.field("limit_train_batches", limit_train_batches, "fraction (<= 1) or number (> 1) of training batches per epoch");
  v.field("limit_val_batches", limit_val_batches, "fraction or number of validation batches");
  v.field("limit_test_batches", limit_test_batches, "fraction or number of test batches");
  v.field("fast_dev_run", fast_dev_run, "run N batches of each loop as a smoke test (no checkpoints, no logs)");
  v.field("overfit_batches", overfit_batches, "train and validate on the same first batches (fraction or count)");
  v.field("num_sanity_val_steps", num_sanity_val_steps, "validation batches run before training starts");
  v.field("accumulate_grad_batches", accumulate_grad_batches, "batches per optimiser step");
  v.field("gradient_clip_val", gradient_clip_val, "clip gradients at this norm or value (0: off)");
  v.field("gradient_clip_auto_steps", gradient_clip_auto_steps,
          "K > 0: after K steps, clip at the 95th percentile of their unclipped gradient norms (0: off)");
  v.choice("gradient_clip_algorithm", gradient_clip_algorithm, "clip the total norm or each value");
  v.choice("precision", precision, "32-bit, bf16 autocast (CPU/CUDA) or fp16 autocast with a gradient scaler (CUDA)");
  v.field("deterministic", deterministic, "use deterministic algorithms only");
  v.field("seed", seed, "seed for weights, shuffling, dropout and augmentation");
  v.field("log_every_n_steps", log_every_n_steps, "log training metrics every N optimiser steps");
  v.field("freeze", freeze, "parameter name patterns to freeze, e.g. [\"features.*\"]");
  v.field("freeze_fraction", freeze_fraction,
          "freeze whole layers from the input side until this share of the parameters is frozen (e.g. 0.7; the "
          "head is never frozen); 0: off");
  v.field("freeze_blocks", freeze_blocks,
          "freeze the model's first N blocks: its stages that own parameters, in forward order (a ResNet's conv1, "
          "bn1, layer1.0, ...; a MobileNet's features.0, features.1, ...); 0: off");
  v.field("unfreeze_at_epoch", unfreeze_at_epoch,
          "the frozen layers join training at this epoch (Lightning's BackboneFinetuning), in an optimiser group of "
          "their own; -1: never");
  v.field("unfreeze_lr_ratio", unfreeze_lr_ratio, "their first learning rate, relative to the first group's");
  v.field("unfreeze_lr_multiplier", unfreeze_lr_multiplier, "their learning rate's factor at each later epoch");
  v.field("unfreeze_align", unfreeze_align, "never raise their learning rate above the first group's");
  v.field("channels_last", channels_last,
          "convolution weights and image batches in channels-last (NHWC) memory order, as torch.channels_last: "
          "faster convolutions on GPUs (tensor cores) and with oneDNN; the numbers are the same up to rounding");
  v.field("gradient_checkpointing", gradient_checkpointing,
          "keep only each block's input for the backward pass and run the block again there (zoo models with "
          "blocks): less memory, one more forward per step");
  v.field("frozen_bn_eval", frozen_bn_eval,
          "keep BatchNorm layers whose parameters are all frozen in eval mode (their running statistics fixed)");
  v.field("device", device, "cpu, cuda, cuda:N or auto");
  v.field("num_threads", num_threads, "intra-op CPU threads (0: LibTorch's default)");
  v.field("enable_progress_bar", enable_progress_bar, "show a progress bar (plain lines when not a terminal)");
  v.field("enable_model_summary", enable_model_summary, "print the model summary before training");
  v.field("enable_checkpointing", enable_checkpointing, "write checkpoints");
  v.choice("strategy", strategy,
           "auto (data-parallel when launched with several ranks), single, or ddp (DistributedDataParallel)");
  v.field("sync_batchnorm", sync_batchnorm, "data-parallel: BatchNorm statistics over all ranks' batches (SyncBN)");
  v.field("find_unused_parameters", find_unused_parameters,
          "data-parallel: allow parameters that get no gradient in a step (walks the graph every step)");
  v.field("ddp_broadcast_buffers", ddp_broadcast_buffers,
          "data-parallel: send rank 0's buffers (BatchNorm running statistics) to every rank before each forward");
  v.field("ddp_bucket_cap_mb", ddp_bucket_cap_mb, "data-parallel: gradient bucket size in MiB (the first is 1 MiB)");
  v.field("ddp_shared_memory", ddp_shared_memory,
          "data-parallel: CPU ranks on one machine average their gradients through shared memory (false: Gloo's "
          "TCP)");
  v.field("ddp_timeout", ddp_timeout,
          "data-parallel: seconds a rank waits for the others (rendezvous, collectives) before all stop");
  v.field("detect_anomaly", detect_anomaly, "LibTorch's autograd anomaly mode (slow; names the op producing NaN)");
}

void TrainerOptions::validate() const {
  GB_CHECK(freeze_fraction >= 0 && freeze_fraction < 1, InvalidArgument,
           "trainer.freeze_fraction must be in [0, 1), got " << freeze_fraction, "use e.g. 0.7, or 0 for none");
  GB_CHECK(freeze_blocks >= 0, InvalidArgument, "trainer.freeze_blocks must be >= 0, got " << freeze_blocks,
           "use e.g. 3, or 0 for none");
  GB_CHECK(unfreeze_at_epoch >= -1, InvalidArgument,
           "trainer.unfreeze_at_epoch must be >= 0 or -1, got " << unfreeze_at_epoch, "use e.g. 10, or -1 for never");
  GB_CHECK(unfreeze_at_epoch < 0 || !freeze.empty() || freeze_fraction > 0 || freeze_blocks > 0, InvalidArgument,
           "trainer.unfreeze_at_epoch = " << unfreeze_at_epoch << " but nothing is frozen",
           "freeze the backbone first: trainer.freeze_fraction, freeze_blocks or freeze");
  GB_CHECK(unfreeze_lr_ratio > 0 && std::isfinite(unfreeze_lr_ratio), InvalidArgument,
           "trainer.unfreeze_lr_ratio must be > 0, got " << unfreeze_lr_ratio, "use 0.1 (Lightning's default)");
  GB_CHECK(unfreeze_lr_multiplier > 0 && std::isfinite(unfreeze_lr_multiplier), InvalidArgument,
           "trainer.unfreeze_lr_multiplier must be > 0, got " << unfreeze_lr_multiplier,
           "use 1.5 (Lightning's default)");
  GB_CHECK(max_epochs >= -1 && max_epochs != 0, InvalidArgument,
           "trainer.max_epochs must be >= 1 or -1, got " << max_epochs, "use e.g. 10");
  GB_CHECK(max_steps >= -1 && max_steps != 0, InvalidArgument,
           "trainer.max_steps must be >= 1 or -1, got " << max_steps, "use -1 for no limit");
  GB_CHECK(max_time >= 0, InvalidArgument, "trainer.max_time must be >= 0 seconds, got " << max_time,
           "use 0 for no limit");
  GB_CHECK(!(max_epochs == -1 && max_steps == -1 && max_time == 0 && fast_dev_run == 0), InvalidArgument,
           "trainer.max_epochs, max_steps and max_time are all unlimited: training would never stop",
           "set trainer.max_epochs");
  GB_CHECK(val_check_interval > 0, InvalidArgument,
           "trainer.val_check_interval must be > 0, got " << val_check_interval, "use 1.0 (once per epoch)");
  GB_CHECK(check_val_every_n_epoch >= 1, InvalidArgument,
           "trainer.check_val_every_n_epoch must be >= 1, got " << check_val_every_n_epoch, "use 1");
  for (auto [name, val] :
       {std::pair{"limit_train_batches", limit_train_batches}, std::pair{"limit_val_batches", limit_val_batches},
        std::pair{"limit_test_batches", limit_test_batches}, std::pair{"overfit_batches", overfit_batches}}) {
    GB_CHECK(val >= 0 && std::isfinite(val), InvalidArgument, "trainer." << name << " must be >= 0, got " << val,
             "use a fraction <= 1 or a batch count");
    GB_CHECK(val <= 1.0 || std::floor(val) == val, InvalidArgument,
             "trainer." << name << " = " << val << " is neither a fraction <= 1 nor a whole number of batches",
             "use e.g. 0.25 or 100");
  }
  GB_CHECK(fast_dev_run >= 0, InvalidArgument, "trainer.fast_dev_run must be >= 0, got " << fast_dev_run,
           "use 0 (off) or e.g. 1");
  GB_CHECK(num_sanity_val_steps >= 0, InvalidArgument, "trainer.num_sanity_val_steps must be >= 0",
           "use 2 (Lightning's default) or 0");
  GB_CHECK(accumulate_grad_batches >= 1, InvalidArgument,
           "trainer.accumulate_grad_batches must be >= 1, got " << accumulate_grad_batches, "use 1");
  GB_CHECK(gradient_clip_val >= 0, InvalidArgument, "trainer.gradient_clip_val must be >= 0, got " << gradient_clip_val,
           "use 0 (off) or e.g. 1.0");
  GB_CHECK(gradient_clip_auto_steps >= 0, InvalidArgument,
           "trainer.gradient_clip_auto_steps must be >= 0, got " << gradient_clip_auto_steps,
           "use 0 (off) or e.g. 100");
  GB_CHECK(gradient_clip_auto_steps == 0 || (gradient_clip_val == 0 && gradient_clip_algorithm == ClipAlgorithm::kNorm),
           InvalidArgument,
           "trainer.gradient_clip_auto_steps chooses the clipping threshold itself, but gradient_clip_val = "
               << gradient_clip_val << " (algorithm \"" << name_of(gradient_clip_algorithm) << "\") is also set",
           "set gradient_clip_val = 0 and gradient_clip_algorithm = \"norm\", or gradient_clip_auto_steps = 0");
  GB_CHECK(log_every_n_steps >= 1, InvalidArgument, "trainer.log_every_n_steps must be >= 1, got " << log_every_n_steps,
           "use e.g. 50");
  GB_CHECK(ddp_bucket_cap_mb > 0 && ddp_bucket_cap_mb <= 4096, InvalidArgument,
           "trainer.ddp_bucket_cap_mb must be in (0, 4096], got " << ddp_bucket_cap_mb, "use 25 (the default)");
  GB_CHECK(ddp_timeout >= 1 && ddp_timeout <= 7 * 24 * 3600, InvalidArgument,
           "trainer.ddp_timeout must be between 1 s and a week, got " << ddp_timeout, "use 1800 (the default)");
  GB_CHECK(num_threads >= 0, InvalidArgument, "trainer.num_threads must be >= 0, got " << num_threads,
           "use 0 for the default");
  GB_CHECK(seed >= 0, InvalidArgument, "trainer.seed must be >= 0, got " << seed, "use e.g. 42");
}

std::int64_t resolve_batches(double value, std::int64_t total, const char* name) {
  if (value <= 1.0) {
    const auto n = static_cast<std::int64_t>(std::floor(value * static_cast<double>(total)));
    return value > 0 && n == 0 ? 1 : n;
  }
  (void)name;
  return std::min<std::int64_t>(static_cast<std::int64_t>(value), total);
}

}  // namespace glassbox::train
