// A trained model back from its checkpoint, with the data it was trained on — or a TorchScript
// file saved by Python with its contract and a data configuration: what `glassbox eval` and
// `glassbox explain` start from.
//
//   LoadedModel m = load_checkpoint_for_inference("runs/quickstart/checkpoints/last.ckpt", "cpu");
//   at::Tensor probs = predict_probabilities(m, *m.data->test_dataset(), 512);   // [N, K] float64
//
//   ScriptSource s; s.model = "resnet.pt";          // contract: resnet.json beside it, or s.contract
//   s.data = parse_run_config(text, "quickstart", {}).data;   // where the samples come from
//   LoadedModel t = load_script_for_inference(s, "cpu");
//
// The checkpoint's state.json carries the run's configuration: the data module is set up from it
// (same files, same validation split, same normalisation) and the model built from it, then the
// weights are loaded (a checkpoint of another architecture is an error naming the tensors that do
// not fit) and the model put in evaluation mode. run_dir is the run directory the checkpoint
// lives in (<run>/checkpoints/<name>.ckpt), or the checkpoint's parent when it is elsewhere.
// A TorchScript file (docs/import.md): the model is an nn::ScriptModel; its contract
// (nn::ModelContract: the sidecar, the flags over it, or the flags alone) says what it expects.
// The data come from `data` (a config's [data] section) with the contract's preprocessing in
// place of the data's own normalisation: glassbox scales uint8 pixels to [0, 1] (IDX files and
// uint8 .npy arrays; other inputs as they are), so the contract's
//   input = (raw * scale - mean) / std
// becomes data.mean = mean * s / scale, data.std = std * s / scale with s = 1/255 or 1 (no
// mean/std: 0 and 1). The contract's labels become the class names, its num_classes the data's;
// its input shape must equal the data's sample shape (an InvalidArgument naming both);
// channel_order BGR reverses the channels of the (RGB) data before the model. run_dir is the
// model file's folder.
// Thread safety: one LoadedModel per thread.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include "glassbox/nn/contract.h"
#include "glassbox/nn/model.h"
#include "glassbox/train/datamodule.h"
#include "glassbox/train/run_config.h"

namespace glassbox::app {

struct LoadedModel {
  std::filesystem::path checkpoint;
  std::filesystem::path run_dir;
  train::RunConfig config;
  // The data, set up on first use by split_dataset() (a checkpoint needs none for export/predict).
  std::shared_ptr<train::StandardDataModule> data;
  train::DataInfo info;
  std::unique_ptr<nn::Model> model;
  c10::Device device = c10::Device(c10::kCPU);
  bool outputs_probabilities = false;         // the model ends in softmax (model.mlp.output = "softmax")
  TaskKind task = TaskKind::kClassification;  // the data's task, or the contract's
  std::int64_t global_step = 0;
  // A TorchScript model (checkpoint empty): its file, contract and where the contract came from
  // (the sidecar's path, with " + flags" when flags changed it, or "flags").
  std::filesystem::path model_file;
  nn::ModelContract contract;
  std::string contract_source;
  // A checkpoint's stored contract and scale (absent in checkpoints of older glassbox versions).
  bool has_stored_contract = false;
  // The training file is absent: the test split was read alone (train/val splits are refused).
  bool test_only = false;
  double scale = 1.0;

  // What the model was loaded from: the checkpoint or the TorchScript file.
  std::string source() const { return model_file.empty() ? checkpoint.string() : model_file.string(); }
};

// The factor glassbox's data sources apply to raw values before normalising: 1/255 for uint8
// images (IDX files, uint8 .npy arrays; read from the .npy header only), 1 otherwise.
double data_scale(const data::DataOptions& d);

// A checkpoint's model, ready for inference. The checkpoint carries what inference needs (the
// data's sample shape, class names and normalisation, the model's contract), so nothing of the
// training data is read until a split is asked for (split_dataset). `data_overrides` ("data.KEY=
// value", e.g. data.root=/elsewhere) point the data at another place or another data set, which
// is then read with the checkpoint's own preprocessing (its mean/std); other keys (model.*,
// optim.*, ...) are refused: they would describe another model.
LoadedModel load_checkpoint_for_inference(const std::filesystem::path& checkpoint, const std::string& device = "cpu",
                                          const std::vector<std::string>& data_overrides = {});

// What a checkpoint stores about its data (state.json "data_info"), and back.
nlohmann::json data_info_to_json(const train::DataInfo& info, double scale);
train::DataInfo data_info_from_json(const nlohmann::json& j);

// The contract of a run's model: input shape, the data module's preprocessing (raw * scale, then
// mean/std), output kind and class names. `name` is the model's name in a repository.
nn::ModelContract contract_for(const train::RunConfig& config, const train::DataInfo& info, double scale,
                               bool outputs_probabilities, std::string name);
// The same for a loaded checkpoint (its stored contract when it has one).
nn::ModelContract contract_for_checkpoint(const LoadedModel& m);

// A TorchScript model described without a sidecar, or fields of its sidecar replaced (the CLI's
// --input-shape, --mean, --std, --scale, --labels, --num-classes, --output, --channel-order).
struct ContractFlags {
  std::vector<std::int64_t> input_shape;  // {C, H, W} or {F}
  std::vector<double> mean, std;          // one value, or one per channel
  double scale = 0;                       // 0: keep (no sidecar: 1/255 for images, 1 for features)
  std::filesystem::path labels;           // class names, one per line
  std::int64_t num_classes = 0;           // 0: keep (no sidecar: the labels' count, else the model's output width)
  std::string output_kind;                // logits | probabilities ("": keep; no sidecar: logits)
  std::string channel_order;              // gray | RGB | BGR ("": keep; no sidecar: gray for 1 channel, RGB for 3)
  bool empty() const;
};

struct ScriptSource {
  std::filesystem::path model;     // a torch.jit.save file
  std::filesystem::path contract;  // empty: <model path without extension>.json when it exists
  ContractFlags flags;
  train::DataModuleOptions data;  // where the samples come from (a config's [data] section)
};

// The sidecar (source.contract, or the one beside the model) with the flags applied, or the
// flags alone; validated. `model` answers num_classes when nothing else does (a probe with
// zeros of the input shape). *origin (optional) receives where it came from.
nn::ModelContract resolve_contract(const ScriptSource& source, nn::Model* model, std::string* origin = nullptr);

// with_data = false (predict on files): no data module; info comes from the contract alone.
LoadedModel load_script_for_inference(const ScriptSource& source, const std::string& device = "cpu",
                                      bool with_data = true);

// Which model a command works on, as the command line gives it: a checkpoint, or a TorchScript
// file with its contract (sidecar and/or flags) and a config whose [data] section gives the samples
// (default: the built-in quickstart config). `overrides` ("key=value"): with a checkpoint only
// data.* keys; with a TorchScript file any key of that config.
struct ModelSpec {
  std::filesystem::path checkpoint;
  std::filesystem::path model;
  std::filesystem::path contract;
  std::filesystem::path config;
  std::vector<std::string> overrides;
  ContractFlags flags;
};
// The TorchScript source a spec describes (an empty `model` for a checkpoint). InvalidArgument for
// both or neither of checkpoint and model, and for options that do not apply to the one given.
ScriptSource script_source(const ModelSpec& spec);

// The split by name: "test", "val" or "train" (an error names the ones that exist).
std::shared_ptr<const data::Dataset> split_dataset(LoadedModel& m, const std::string& split);

// The predictions of every sample of a dataset, in order, as [N, K] float64 on the CPU, by task:
// class probabilities (softmax of the logits, or the outputs themselves for a model that ends in
// softmax), label probabilities (a sigmoid each) or regression values (the outputs).
at::Tensor predict_outputs(LoadedModel& m, const data::Dataset& dataset, std::int64_t batch_size);
// predict_outputs of a classification model; InvalidArgument for other tasks.
at::Tensor predict_probabilities(LoadedModel& m, const data::Dataset& dataset, std::int64_t batch_size);

}  // namespace glassbox::app
