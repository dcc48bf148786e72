// DiagnosticsOptions: the [diagnostics] section of a run — what glassbox's inspect module
// watches while the trainer runs (probes, TensorBoard, non-finite localisation).
//
//   [diagnostics]
//   probe_every_n_steps = 50     # per-layer activations, weights, gradients; 0: off
//   tensorboard = true           # events.out.tfevents.* in the run directory
//   nonfinite = "stop"           # stop | skip | continue | off
//
// The options live beside the other sections of RunConfig; the callbacks that implement them
// are in glassbox/inspect (which depends on train), installed by the command line.
// Thread safety: plain data.
#pragma once

#include <cstdint>
#include <string>

#include "glassbox/base/config.h"

namespace glassbox::train {

// On a NaN/Inf loss or gradient: localise it, then stop the run, skip the batch or go on; kOff
// does not watch.
enum class NonFiniteAction { kStop, kSkip, kContinue, kOff };
constexpr NameTable<NonFiniteAction, 4> enum_names(NonFiniteAction) {
  return {{{NonFiniteAction::kStop, "stop"},
           {NonFiniteAction::kSkip, "skip"},
           {NonFiniteAction::kContinue, "continue"},
           {NonFiniteAction::kOff, "off"}}};
}
static_assert(is_complete_table(enum_names(NonFiniteAction{})));

struct DiagnosticsOptions {
  std::int64_t probe_every_n_steps = 50;  // 0: no probes
  bool activations = true;                // record per-layer activation statistics on probe steps
  bool histograms = true;                 // TensorBoard histograms of weights, gradients, activations
  std::int64_t histogram_every_n_steps =
      1000;  // on the probe steps that are multiples of this (wandb.watch's log_freq)
  bool tensorboard = true;
  // The total gradient norm of every step (history, TensorBoard). Off: on logging and probe steps
  // (one extra pass over the gradients per step: ~5-15 % for small models on a CPU).
  bool grad_norm_every_step = false;
  NonFiniteAction nonfinite = NonFiniteAction::kStop;
  std::int64_t dead_after_probes = 5;  // a layer whose gradient std is 0 for this many probes is dead
  double grad_norm_low = 1e-2;         // the usual reading: below, the learning rate may be too small
  double grad_norm_high = 100.0;       // above, explosion is near
  std::int64_t images = 16;            // training inputs shown in TensorBoard at the start (0: none)

  void visit(FieldVisitor& v) {
    v.field("probe_every_n_steps", probe_every_n_steps, "per-layer statistics every N optimiser steps (0: off)");
    v.field("activations", activations, "record activation statistics of every layer on probe steps");
    v.field("histograms", histograms, "write TensorBoard histograms of weights, gradients and activations");
    v.field("histogram_every_n_steps", histogram_every_n_steps,
            "histograms on the probe steps that are multiples of N (they cost more than the probes)");
    v.field("tensorboard", tensorboard, "write TensorBoard event files into the run directory");
    v.field("grad_norm_every_step", grad_norm_every_step, "compute and log the total gradient norm at every step");
    v.choice("nonfinite", nonfinite,
             "on a NaN/Inf loss or gradient: localise it, then stop, skip the batch or continue");
    v.field("dead_after_probes", dead_after_probes,
            "probes with zero gradient std after which a layer is reported dead");
    v.field("grad_norm_low", grad_norm_low, "gradient norm below which the learning rate may be too small");
    v.field("grad_norm_high", grad_norm_high, "gradient norm above which explosion is near");
    v.field("images", images, "training inputs written to TensorBoard as an image grid at the start (0: none)");
  }
  void validate() const;
};

}  // namespace glassbox::train
