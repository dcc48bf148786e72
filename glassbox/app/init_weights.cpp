// Tested by nn_test (Pretrained.*, ZooReference.*: the loader) and cli_test
// (Export.ZooFromTorchvisionWeightsEqualsTorchvision: init_from through a config).
#include "glassbox/app/init_weights.h"

#include "glassbox/base/error.h"
#include "glassbox/core/safetensors.h"
#include "glassbox/train/checkpoint.h"

namespace glassbox::app {

namespace fs = std::filesystem;

void apply_gradient_checkpointing(nn::Model& model, bool on) {
  GB_CHECK(model.set_gradient_checkpointing(on), InvalidArgument,
           "trainer.gradient_checkpointing: model " << model.name() << " has no blocks to checkpoint",
           "use a zoo model with blocks (resnet*, mobilenet_v3_*, efficientnet_*, vit_*) or set it to false");
}

nn::InitReport load_initial_weights(torch::nn::Module& module, const nn::ModelOptions& options) {
  const fs::path from = options.init_from;
  const bool strict = options.init_strict;
  GB_CHECK(fs::exists(from), NotFound, "model.init_from: no checkpoint or safetensors file at " << from.string(),
           "pass a checkpoint directory (runs/NAME/checkpoints/last.ckpt) or a .safetensors file");
  if (fs::is_directory(from)) {
    const train::Checkpoint c = train::read_checkpoint(from);
    return nn::load_pretrained(
        module, c.model.tensors,
        {.strict = strict, .trainable_only = c.state.value("trainable_only", false), .load_head = options.init_head});
  }
  GB_CHECK(from.extension() == ".safetensors", InvalidArgument,
           "model.init_from: " << from.string() << " is not a .safetensors file or a checkpoint directory",
           "convert a PyTorch .pth once in Python: safetensors.torch.save_file(torch.load(path), "
           "\"weights.safetensors\") (docs/models.md)");
  return nn::load_pretrained(module, load_safetensors(from).tensors,
                             {.strict = strict, .load_head = options.init_head});
}

}  // namespace glassbox::app
