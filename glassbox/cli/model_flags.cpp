// The flags `glassbox eval`, `glassbox explain` and `glassbox predict` share to name a model: a
// checkpoint (--checkpoint, with --set data.KEY=... for other data) or a TorchScript file
// (--model, its contract, CONFIG for the data, the contract flags).
#include "glassbox/cli/model_flags.h"

#include <CLI/CLI.hpp>

namespace glassbox::cli {

void add_model_options(CLI::App& cmd, const std::shared_ptr<ModelArgs>& a) {
  cmd.add_option("--checkpoint", a->spec.checkpoint,
                 "checkpoint directory, e.g. runs/quickstart/checkpoints/last.ckpt");
  cmd.add_option("--model", a->spec.model,
                 "a TorchScript file saved by Python (torch.jit.save) or by glassbox export, instead of --checkpoint");
  cmd.add_option("--contract", a->spec.contract, "its contract (default: model.json beside model.pt; docs/import.md)");
  cmd.add_option("config", a->spec.config,
                 "with --model: TOML config whose [data] section gives the samples (default: the built-in quickstart, "
                 "Fashion-MNIST)");
  cmd.add_option(
      "--set", a->spec.overrides,
      "with --checkpoint: point it at other data, e.g. --set data.root=DIR (data.* keys only); with --model: "
      "override a key of CONFIG (repeatable)");
  cmd.add_option("--input-shape", a->spec.flags.input_shape,
                 "with --model: one sample's shape, e.g. 1,28,28 or 3,32,32 or 20 (features)")
      ->delimiter(',');
  cmd.add_option("--mean", a->spec.flags.mean,
                 "with --model: normalisation mean after --scale, one value or one per channel, e.g. 0.286")
      ->delimiter(',');
  cmd.add_option("--std", a->spec.flags.std, "with --model: normalisation std after --scale, e.g. 0.353")
      ->delimiter(',');
  cmd.add_option("--scale", a->spec.flags.scale,
                 "with --model: raw value multiplier before mean/std (default 1/255 for images, 1 for features)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--labels", a->labels, "with --model: class names, one per line");
  cmd.add_option("--num-classes", a->spec.flags.num_classes,
                 "with --model: output width (default: the labels' count, else the model's)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--output-kind", a->spec.flags.output_kind, "with --model: logits | probabilities")
      ->check(CLI::IsMember({"logits", "probabilities"}));
  cmd.add_option("--channel-order", a->spec.flags.channel_order,
                 "with --model: gray | RGB | BGR | none (BGR reverses the data's RGB channels)")
      ->check(CLI::IsMember({"gray", "RGB", "BGR", "none"}));
}

app::ModelSpec ModelArgs::to_spec() const {
  app::ModelSpec s = spec;
  s.flags.labels = labels;
  return s;
}

}  // namespace glassbox::cli
