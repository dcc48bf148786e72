#include "glassbox/train/inference.h"

#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/core/device.h"
#include "glassbox/nn/registry.h"
#include "glassbox/train/checkpoint.h"

namespace glassbox::train {

namespace fs = std::filesystem;

LoadedModel load_checkpoint_for_inference(const fs::path& checkpoint, const std::string& device) {
  GB_CHECK(!checkpoint.empty(), InvalidArgument, "no checkpoint given", "pass --checkpoint runs/NAME/checkpoints/last.ckpt");
  GB_CHECK(fs::exists(checkpoint), NotFound, "no checkpoint at " << checkpoint.string(), "pass --checkpoint runs/NAME/checkpoints/last.ckpt");
  Checkpoint ck = read_checkpoint(checkpoint);
  LoadedModel m;
  m.checkpoint = checkpoint;
  const fs::path abs = fs::absolute(checkpoint).lexically_normal();
  const fs::path ck_dir = abs.has_filename() ? abs : abs.parent_path();
  m.run_dir = ck_dir.parent_path().filename() == "checkpoints" ? ck_dir.parent_path().parent_path() : ck_dir.parent_path();
  GB_CHECK(ck.state.contains("config") && ck.state["config"].is_string(), DataLoss,
           "checkpoint " << checkpoint.string() << " carries no configuration (state.json has no \"config\")",
           "evaluate a checkpoint written by glassbox train");
  m.config = parse_run_config(ck.state["config"].get<std::string>(), checkpoint.string() + "/state.json", {});
  m.global_step = ck.state.value("global_step", std::int64_t{0});
  m.data = std::make_unique<StandardDataModule>(m.config.data);
  m.data->setup();
  m.info = m.data->info();
  m.model = nn::make_model(m.config.model, nn::ModelShape{m.info.sample_shape, m.info.num_classes});
  load_module_state(*m.model->module(), ck.model, ck.state.value("trainable_only", false));
  m.device = resolve_device(device);
  m.model->module()->to(m.device);
  m.model->module()->eval();
  m.outputs_probabilities = m.config.model.name == "mlp" && m.config.model.mlp.output == "softmax";
  return m;
}

std::shared_ptr<const data::Dataset> split_dataset(const LoadedModel& m, const std::string& split) {
  std::shared_ptr<const data::Dataset> ds;
  if (split == "test") {
    ds = m.data->test_dataset();
  } else if (split == "val") {
    ds = m.data->val_dataset();
  } else if (split == "train") {
    ds = m.data->train_dataset();
  } else {
    GB_CHECK(false, InvalidArgument, "unknown split '" << split << "'", "use --split test, val or train");
  }
  GB_CHECK(ds != nullptr && ds->size() > 0, NotFound, "the run has no " << split << " split",
           (split == "val" ? "its data.val_size is 0; use --split test" : "use --split test"));
  return ds;
}

at::Tensor predict_probabilities(LoadedModel& m, const data::Dataset& dataset, std::int64_t batch_size) {
  GB_CHECK(batch_size > 0, InvalidArgument, "batch size must be positive, got " << batch_size, "use e.g. 512");
  torch::NoGradGuard no_grad;
  m.model->module()->eval();
  std::vector<at::Tensor> parts;
  const std::int64_t n = dataset.size();
  for (std::int64_t start = 0; start < n; start += batch_size) {
    const at::Tensor idx = torch::arange(start, std::min(n, start + batch_size), torch::kLong);
    data::Batch b = dataset.get_batch(idx);
    at::Tensor out = m.model->forward(b.inputs.to(m.device));
    GB_CHECK(out.dim() == 2, FailedPrecondition, "the model's output has shape " << out.sizes() << ", not [batch, classes]",
             "evaluate a classification model");
    out = out.to(torch::kCPU, torch::kDouble);
    parts.push_back(m.outputs_probabilities ? out : torch::softmax(out, 1));
  }
  return parts.empty() ? torch::zeros({0, m.info.num_classes}, torch::kDouble) : torch::cat(parts);
}

}  // namespace glassbox::train
