#include "glassbox/train/inference.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/core/device.h"
#include "glassbox/data/source.h"
#include "glassbox/nn/registry.h"
#include "glassbox/nn/script_model.h"
#include "glassbox/train/checkpoint.h"

namespace glassbox::train {

namespace fs = std::filesystem;

namespace {

std::string shape_text(const std::vector<std::int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

std::vector<std::string> read_labels(const fs::path& path) {
  GB_CHECK(fs::is_regular_file(path), NotFound, "no labels file " << path.string(),
           "give --labels FILE with one class name per line");
  std::istringstream in(read_file(path));
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    const auto a = line.find_first_not_of(" \t\r");
    if (a == std::string::npos) continue;
    out.push_back(line.substr(a, line.find_last_not_of(" \t\r") - a + 1));
  }
  GB_CHECK(!out.empty(), InvalidArgument, "labels file " << path.string() << " holds no names",
           "write one class name per line");
  return out;
}

}  // namespace

double data_scale(const data::DataOptions& d) {
  if (d.format == "mnist") return 1.0 / 255.0;
  if (d.format != "npy") return 1.0;
  const fs::path x = fs::path(d.train_x).is_absolute() ? fs::path(d.train_x) : fs::path(d.root) / d.train_x;
  std::ifstream in(x, std::ios::binary);
  std::string head(512, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  return head.find("u1'") != std::string::npos ? 1.0 / 255.0 : 1.0;  // '|u1' (also '<u1' / '>u1')
}

namespace {

// The contract a glassbox export embeds in the TorchScript archive (extra/contract.json), if any.
std::optional<nn::ModelContract> embedded_contract(const fs::path& model) {
  torch::jit::ExtraFilesMap extra{{"contract.json", ""}};
  try {
    torch::jit::load(model.string(), c10::Device(c10::kCPU), extra);
  } catch (const std::exception&) {
    return std::nullopt;  // load_script_model reports what is wrong with the file
  }
  if (extra["contract.json"].empty()) return std::nullopt;
  return nn::parse_contract(extra["contract.json"], model.string() + ":extra/contract.json");
}

std::string default_channel_order(const std::vector<std::int64_t>& shape) {
  if (shape.size() == 1) return "none";
  return shape[0] == 1 ? "gray" : shape[0] == 3 ? "RGB" : "none";
}

}  // namespace

bool ContractFlags::empty() const {
  return input_shape.empty() && mean.empty() && std.empty() && scale == 0 && labels.empty() && num_classes == 0 &&
         output_kind.empty() && channel_order.empty();
}

nn::ModelContract resolve_contract(const ScriptSource& s, nn::Model* model, std::string* origin) {
  fs::path sidecar = s.contract;
  if (sidecar.empty()) {
    fs::path beside = s.model;
    beside.replace_extension(".json");
    // A model repository (glassbox export --format repository): NAME/<version>/model.pt with NAME/contract.json.
    const fs::path version = fs::absolute(s.model).lexically_normal().parent_path();
    const std::string v = version.filename().string();
    const fs::path repo_contract = version.parent_path() / "contract.json";
    if (fs::is_regular_file(beside)) {
      sidecar = beside;
    } else if (!v.empty() && std::all_of(v.begin(), v.end(), [](unsigned char ch) { return std::isdigit(ch) != 0; }) &&
               fs::is_regular_file(repo_contract)) {
      sidecar = repo_contract;
    }
  }
  const ContractFlags& f = s.flags;
  nn::ModelContract c;
  std::string from;
  std::optional<nn::ModelContract> embedded;
  if (sidecar.empty() && fs::is_regular_file(s.model)) embedded = embedded_contract(s.model);
  if (!sidecar.empty()) {
    c = nn::read_contract(sidecar);
    from = sidecar.string() + (f.empty() ? "" : " + flags");
  } else if (embedded) {
    c = *embedded;
    from = s.model.string() + ":extra/contract.json" + (f.empty() ? "" : " + flags");
  } else {
    fs::path beside = s.model;
    beside.replace_extension(".json");
    GB_CHECK(!f.input_shape.empty(), InvalidArgument,
             "no contract for " << s.model.string() << " (no " << beside.filename().string()
                                << " beside it, no --contract, no --input-shape)",
             "write " + beside.string() +
                 " (docs/import.md) or describe the input with --input-shape 1,28,28 [--mean M --std S --labels FILE]");
    from = "flags";
    c.architecture = "torchscript";
    c.name = s.model.stem().string();
    c.layout = f.input_shape.size() == 1 ? "NC" : "NCHW";
    c.scale = c.layout == "NC" ? 1.0 : 1.0 / 255.0;
    c.channel_order = default_channel_order(f.input_shape);
  }
  if (!f.input_shape.empty()) {
    c.input_shape = f.input_shape;
    c.layout = f.input_shape.size() == 1 ? "NC" : "NCHW";
    // The channel order follows a new channel count unless --channel-order says otherwise.
    if (c.layout == "NC" || f.input_shape[0] != 3 || (c.channel_order != "RGB" && c.channel_order != "BGR"))
      c.channel_order = default_channel_order(f.input_shape);
  }
  if (!f.mean.empty()) c.mean = f.mean;
  if (!f.std.empty()) c.std = f.std;
  if (f.scale != 0) c.scale = f.scale;
  if (!f.output_kind.empty()) c.output_kind = f.output_kind;
  if (!f.channel_order.empty()) c.channel_order = f.channel_order;
  if (!f.labels.empty()) {
    c.labels = read_labels(f.labels);
    if (f.num_classes == 0 && c.num_classes <= 0) c.num_classes = static_cast<std::int64_t>(c.labels.size());
  }
  if (f.num_classes != 0) c.num_classes = f.num_classes;
  if (c.num_classes <= 0 && model != nullptr && !c.input_shape.empty()) {
    // Nothing says how many classes: ask the model (one sample of zeros, evaluation mode).
    std::vector<std::int64_t> shape{1};
    shape.insert(shape.end(), c.input_shape.begin(), c.input_shape.end());
    torch::NoGradGuard no_grad;
    nn::EvalModeScope eval(*model->module());
    const at::Tensor out = model->forward(torch::zeros(shape));
    c.num_classes = out.size(1);
  }
  try {
    c.validate();
  } catch (const Error& e) {
    throw Error(e.code(), from + ": " + e.message(), e.hint());
  }
  if (origin != nullptr) *origin = from;
  return c;
}

LoadedModel load_script_for_inference(const ScriptSource& s, const std::string& device) {
  GB_CHECK(!s.model.empty(), InvalidArgument, "no model given", "pass --model model.pt (a torch.jit.save file)");
  nn::ScriptModelOptions so;
  so.name = s.model.stem().string();
  std::unique_ptr<nn::ScriptModel> model = nn::load_script_model(s.model, so);
  LoadedModel m;
  m.model_file = s.model;
  m.run_dir = fs::absolute(s.model).lexically_normal().parent_path();
  // NAME/<version>/model.pt of a model repository: outputs go beside the versions, not into one
  // (the next export of that version replaces its folder).
  if (const std::string v = m.run_dir.filename().string();
      !v.empty() && std::all_of(v.begin(), v.end(), [](unsigned char ch) { return std::isdigit(ch) != 0; }) &&
      fs::is_regular_file(m.run_dir.parent_path() / "config.pbtxt"))
    m.run_dir = m.run_dir.parent_path();
  m.contract = resolve_contract(s, model.get(), &m.contract_source);
  const nn::ModelContract& c = m.contract;
  if (!c.name.empty()) so.name = c.name;
  so.sample_shape = c.input_shape;
  so.num_classes = c.num_classes;
  so.flip_channels = c.channel_order == "BGR";
  model = std::make_unique<nn::ScriptModel>(model->script(), so);  // the same TorchScript module, with the contract

  // The data, preprocessed as the contract says.
  m.config.data = s.data;
  data::DataOptions& d = m.config.data.source;
  const double ratio = [&] {
    const double ds = data_scale(d);
    return std::abs(ds - c.scale) <= 1e-6 * ds ? 1.0 : ds / c.scale;
  }();
  d.normalize = true;
  d.mean.clear();
  d.std.clear();
  for (double v : (c.mean.empty() ? std::vector<double>{0.0} : c.mean)) d.mean.push_back(v * ratio);
  for (double v : (c.std.empty() ? std::vector<double>{1.0} : c.std)) d.std.push_back(v * ratio);
  if (d.mean.size() != d.std.size()) {  // one mean for all channels with per-channel stds, or the reverse
    const std::size_t n = std::max(d.mean.size(), d.std.size());
    d.mean.resize(n, d.mean.back());
    d.std.resize(n, d.std.back());
  }
  // The contract's statistics are in the model's channel order; the data module normalises the
  // data's (RGB) channels before ScriptModel reverses them for a BGR model.
  if (c.channel_order == "BGR") {
    std::reverse(d.mean.begin(), d.mean.end());
    std::reverse(d.std.begin(), d.std.end());
  }
  d.num_classes = c.num_classes;
  if (!c.labels.empty()) d.class_names = c.labels;
  m.config.model.name = "torchscript";
  const auto check_shape = [&](const std::vector<std::int64_t>& data_shape) {
    GB_CHECK(data_shape == c.input_shape, InvalidArgument,
             "the model expects inputs of shape " << shape_text(c.input_shape) << " (" << m.contract_source
                                                  << "), the data's samples have shape " << shape_text(data_shape)
                                                  << " (" << d.format << " data in " << d.root << ")",
             "point the [data] section (CONFIG or --set data.root=...) at the data the model was trained on, or fix "
             "input.shape");
  };
  m.data = std::make_unique<StandardDataModule>(m.config.data);
  try {
    m.data->setup();
  } catch (const Error& e) {
    // Per-channel statistics for another channel count fail in the data first: name the shapes.
    if (e.code() != ErrorCode::kInvalidArgument || e.message().find("data.mean has") == std::string::npos) throw;
    data::DataOptions plain = d;
    plain.normalize = false;
    plain.mean.clear();
    plain.std.clear();
    check_shape(data::load_splits(plain).sample_shape);
    throw;
  }
  m.info = m.data->info();
  check_shape(m.info.sample_shape);
  m.model = std::move(model);
  m.device = resolve_device(device);
  m.model->module()->to(m.device);
  m.model->module()->eval();
  m.outputs_probabilities = c.output_kind == "probabilities";
  return m;
}

LoadedModel load_checkpoint_for_inference(const fs::path& checkpoint, const std::string& device) {
  GB_CHECK(!checkpoint.empty(), InvalidArgument, "no checkpoint given",
           "pass --checkpoint runs/NAME/checkpoints/last.ckpt");
  GB_CHECK(fs::exists(checkpoint), NotFound, "no checkpoint at " << checkpoint.string(),
           "pass --checkpoint runs/NAME/checkpoints/last.ckpt");
  Checkpoint ck = read_checkpoint(checkpoint);
  LoadedModel m;
  m.checkpoint = checkpoint;
  const fs::path abs = fs::absolute(checkpoint).lexically_normal();
  const fs::path ck_dir = abs.has_filename() ? abs : abs.parent_path();
  m.run_dir =
      ck_dir.parent_path().filename() == "checkpoints" ? ck_dir.parent_path().parent_path() : ck_dir.parent_path();
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
    GB_CHECK(out.dim() == 2, FailedPrecondition,
             "the model's output has shape " << out.sizes() << ", not [batch, classes]",
             "evaluate a classification model");
    out = out.to(torch::kCPU, torch::kDouble);
    parts.push_back(m.outputs_probabilities ? out : torch::softmax(out, 1));
  }
  return parts.empty() ? torch::zeros({0, m.info.num_classes}, torch::kDouble) : torch::cat(parts);
}

}  // namespace glassbox::train
