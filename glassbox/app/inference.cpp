#include "glassbox/app/inference.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "glassbox/app/quickstart.h"
#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/base/progress.h"
#include "glassbox/core/device.h"
#include "glassbox/data/image_preprocessing.h"
#include "glassbox/data/source.h"
#include "glassbox/nn/registry.h"
#include "glassbox/nn/script_model.h"
#include "glassbox/train/checkpoint.h"

namespace glassbox::app {

namespace fs = std::filesystem;

namespace {

// Evaluating the test split needs only the test file. When the training file is absent, the test
// file stands in for it: the model's own normalisation and classes are used, so nothing is
// computed from it, and the train/val splits are refused (LoadedModel::test_only).
bool read_test_alone(data::DataOptions& d) {
  const auto exists = [&](const std::string& f) {
    if (f.empty()) return false;
    const fs::path p = fs::path(f).is_absolute() ? fs::path(f) : fs::path(d.root) / f;
    return fs::exists(p) || fs::exists(p.string() + ".gz");
  };
  if (d.format == data::DataFormat::kMnist) {
    if ((exists(d.train_images) && exists(d.train_labels)) || !exists(d.test_images)) return false;
    d.train_images = d.test_images;
    d.train_labels = d.test_labels;
  } else if (d.format == data::DataFormat::kNpy) {
    if ((exists(d.train_x) && exists(d.train_y)) || !exists(d.test_x)) return false;
    d.train_x = d.test_x;
    d.train_y = d.test_y;
  } else {
    if (exists(d.train_csv) || !exists(d.test_csv)) return false;
    d.train_csv = d.test_csv;
  }
  d.val_size = 0;
  return true;
}

}  // namespace

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
  if (d.format == data::DataFormat::kMnist) return 1.0 / 255.0;
  if (data::is_image_format(d.format)) {
    // 8-bit pixels; a Normalize step divides by its max_pixel_value instead of 255.
    if (!d.eval_transforms.empty() && d.eval_transforms.back().name == "Normalize") {
      const auto& r = d.eval_transforms.back().reals;
      const auto it = r.find("max_pixel_value");
      if (it != r.end() && it->second > 0) return 1.0 / it->second;
    }
    return 1.0 / 255.0;
  }
  if (d.format != data::DataFormat::kNpy) return 1.0;
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

nn::ChannelOrder default_channel_order(const std::vector<std::int64_t>& shape) {
  if (shape.size() == 1) return nn::ChannelOrder::kNone;
  return shape[0] == 1 ? nn::ChannelOrder::kGray : shape[0] == 3 ? nn::ChannelOrder::kRGB : nn::ChannelOrder::kNone;
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
    c.layout = f.input_shape.size() == 1 ? nn::InputLayout::kNC : nn::InputLayout::kNCHW;
    c.scale = c.layout == nn::InputLayout::kNC ? 1.0 : 1.0 / 255.0;
    c.channel_order = default_channel_order(f.input_shape);
  }
  if (!f.input_shape.empty()) {
    c.input_shape = f.input_shape;
    c.layout = f.input_shape.size() == 1 ? nn::InputLayout::kNC : nn::InputLayout::kNCHW;
    // The channel order follows a new channel count unless --channel-order says otherwise.
    if (c.layout == nn::InputLayout::kNC || f.input_shape[0] != 3 ||
        (c.channel_order != nn::ChannelOrder::kRGB && c.channel_order != nn::ChannelOrder::kBGR))
      c.channel_order = default_channel_order(f.input_shape);
  }
  if (!f.mean.empty()) c.mean = f.mean;
  if (!f.std.empty()) c.std = f.std;
  if (f.scale != 0) c.scale = f.scale;
  if (!f.output_kind.empty()) c.output_kind = parse_choice<nn::OutputKind>("--output-kind", f.output_kind);
  if (!f.channel_order.empty()) c.channel_order = parse_choice<nn::ChannelOrder>("--channel-order", f.channel_order);
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

LoadedModel load_script_for_inference(const ScriptSource& s, const std::string& device, bool with_data) {
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
  so.flip_channels = c.channel_order == nn::ChannelOrder::kBGR;
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
  if (c.channel_order == nn::ChannelOrder::kBGR) {
    std::reverse(d.mean.begin(), d.mean.end());
    std::reverse(d.std.begin(), d.std.end());
  }
  GB_CHECK(d.task == c.task, InvalidArgument,
           "the model's outputs are " << name_of(c.task) << " (" << m.contract_source << ") but data.task = \""
                                      << name_of(d.task) << "\"",
           "set data.task = \"" + std::string(name_of(c.task)) + "\" in the [data] section (or fix output.task)");
  m.task = c.task;
  d.num_classes = c.num_classes;
  if (!c.labels.empty() && c.task == TaskKind::kClassification) d.class_names = c.labels;
  m.config.model.name = "torchscript";
  const auto check_shape = [&](const std::vector<std::int64_t>& data_shape) {
    GB_CHECK(data_shape == c.input_shape, InvalidArgument,
             "the model expects inputs of shape " << shape_text(c.input_shape) << " (" << m.contract_source
                                                  << "), the data's samples have shape " << shape_text(data_shape)
                                                  << " (" << name_of(d.format) << " data in " << d.root << ")",
             "point the [data] section (CONFIG or --set data.root=...) at the data the model was trained on, or fix "
             "input.shape");
  };
  if (!with_data) {
    m.info.sample_shape = c.input_shape;
    m.info.num_classes = c.num_classes;
    m.info.class_names = c.class_names();
    m.info.mean = c.mean;
    m.info.std = c.std;
    m.info.feature_names = c.feature_names;
  } else {
    m.test_only = read_test_alone(m.config.data.source);
    m.data = std::make_shared<train::StandardDataModule>(m.config.data);
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
  }
  m.model = std::move(model);
  m.device = resolve_device(device);
  m.model->module()->to(m.device);
  m.model->module()->eval();
  m.outputs_probabilities = c.output_kind == nn::OutputKind::kProbabilities;
  return m;
}

nlohmann::json data_info_to_json(const train::DataInfo& info, double scale) {
  return {{"sample_shape", info.sample_shape},
          {"num_classes", info.num_classes},
          {"class_names", info.class_names},
          {"mean", info.mean},
          {"std", info.std},
          {"scale", scale},
          {"feature_names", info.feature_names}};
}

train::DataInfo data_info_from_json(const nlohmann::json& j) {
  train::DataInfo info;
  info.sample_shape = j.at("sample_shape").get<std::vector<std::int64_t>>();
  info.num_classes = j.at("num_classes").get<std::int64_t>();
  info.class_names = j.value("class_names", std::vector<std::string>{});
  info.mean = j.value("mean", std::vector<double>{});
  info.std = j.value("std", std::vector<double>{});
  info.feature_names = j.value("feature_names", std::vector<std::string>{});
  return info;
}

nn::ModelContract contract_for(const train::RunConfig& config, const train::DataInfo& info, double scale,
                               bool outputs_probabilities, std::string name) {
  nn::ModelContract c;
  c.name = name.empty() ? config.model.name : std::move(name);
  for (char& ch : c.name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '-' && ch != '.') ch = '_';
  c.architecture = config.model.name;
  c.input_shape = info.sample_shape;
  c.layout = c.input_shape.size() == 3 ? nn::InputLayout::kNCHW : nn::InputLayout::kNC;
  c.num_classes = info.num_classes;
  c.task = config.data.source.task;
  c.output_kind = outputs_probabilities ? nn::OutputKind::kProbabilities : nn::OutputKind::kLogits;
  c.output_name = outputs_probabilities ? "probabilities" : "logits";
  // What the data module does to a raw sample: uint8 pixels are scaled to [0, 1] first.
  c.scale = scale;
  c.mean = info.mean;
  c.std = info.std;
  if (c.layout == nn::InputLayout::kNC) {
    c.channel_order = nn::ChannelOrder::kNone;
  } else {
    // glassbox's image data (IDX, npy) is read as it is stored; 3 channels are taken as RGB.
    c.channel_order = default_channel_order(c.input_shape);
  }
  // Image files: how an encoded image becomes the raw sample (decode + the eval transforms).
  if (data::is_image_format(config.data.source.format) && c.layout == nn::InputLayout::kNCHW) {
    const data::ImagePreprocessing pre = data::image_preprocessing_of(config.data.source, c.input_shape[0]);
    c.image = data::to_json(pre);
    if (!pre.transforms.empty() && pre.transforms.back().name == "Normalize") {
      // A Normalize of the image's own statistics: its float output is the model's input.
      c.scale = 1.0;
      c.mean.clear();
      c.std.clear();
    }
  }
  c.labels = info.class_names;
  if (static_cast<std::int64_t>(c.labels.size()) != c.num_classes) c.labels.clear();
  if (c.layout == nn::InputLayout::kNC && !info.feature_names.empty() &&
      static_cast<std::int64_t>(info.feature_names.size()) == c.input_shape.at(0))
    c.feature_names = info.feature_names;
  return c;
}

nn::ModelContract contract_for_checkpoint(const LoadedModel& m) {
  // The run directory's name (runs/<run.name> unless --run-dir chose another).
  nn::ModelContract c = contract_for(m.config, m.info, m.scale, m.outputs_probabilities, m.run_dir.filename().string());
  return c;
}

namespace {

// The stored configuration with data overrides only; the checkpoint's normalisation and classes.
train::RunConfig inference_config(const std::string& stored, const std::string& source,
                                  const std::vector<std::string>& data_overrides) {
  for (const auto& o : data_overrides) {
    const std::string key = o.substr(0, o.find('='));
    GB_CHECK(key.rfind("data.", 0) == 0, InvalidArgument,
             "--set " << key << " does not apply to a checkpoint: only data.* keys can change (where the samples "
                      << "come from)",
             "the checkpoint's model, optimiser and training settings are fixed; drop --set " + key);
  }
  return train::parse_run_config(stored, source, data_overrides);
}

}  // namespace

LoadedModel load_checkpoint_for_inference(const fs::path& checkpoint, const std::string& device,
                                          const std::vector<std::string>& data_overrides) {
  GB_CHECK(!checkpoint.empty(), InvalidArgument, "no checkpoint given",
           "pass --checkpoint runs/NAME/checkpoints/last.ckpt");
  GB_CHECK(fs::exists(checkpoint), NotFound, "no checkpoint at " << checkpoint.string(),
           "pass --checkpoint runs/NAME/checkpoints/last.ckpt");
  train::Checkpoint ck = train::read_checkpoint(checkpoint);
  LoadedModel m;
  m.checkpoint = checkpoint;
  const fs::path abs = fs::absolute(checkpoint).lexically_normal();
  const fs::path ck_dir = abs.has_filename() ? abs : abs.parent_path();
  m.run_dir =
      ck_dir.parent_path().filename() == "checkpoints" ? ck_dir.parent_path().parent_path() : ck_dir.parent_path();
  GB_CHECK(ck.state.contains("config") && ck.state["config"].is_string(), DataLoss,
           "checkpoint " << checkpoint.string() << " carries no configuration (state.json has no \"config\")",
           "evaluate a checkpoint written by glassbox train");
  m.config =
      inference_config(ck.state["config"].get<std::string>(), checkpoint.string() + "/state.json", data_overrides);
  m.global_step = ck.state.value("global_step", std::int64_t{0});
  m.outputs_probabilities = m.config.model.name == "mlp" && m.config.model.mlp.output == nn::MlpOutput::kSoftmax;
  if (ck.state.contains("data_info") && ck.state["data_info"].is_object()) {
    // A portable checkpoint: no data is read here.
    m.info = data_info_from_json(ck.state["data_info"]);
    m.scale = ck.state["data_info"].value("scale", 1.0);
    m.has_stored_contract = ck.state.contains("contract");
    // Another data set is read with this model's preprocessing and classes.
    m.config.data.source.mean = m.info.mean;
    m.config.data.source.std = m.info.std;
    if (m.info.mean.empty()) m.config.data.source.normalize = false;
    if (!m.info.class_names.empty() && m.config.data.source.task == TaskKind::kClassification)
      m.config.data.source.class_names = m.info.class_names;
    m.config.data.source.num_classes = m.info.num_classes;
  } else {
    // Written by an older glassbox: the data tell the shapes.
    m.data = std::make_shared<train::StandardDataModule>(m.config.data);
    m.data->setup();
    m.info = m.data->info();
    m.scale = data_scale(m.config.data.source);
  }
  m.task = m.config.data.source.task;
  m.model = nn::make_model(m.config.model, nn::ModelShape{m.info.sample_shape, m.info.num_classes});
  train::load_module_state(*m.model->module(), ck.model, ck.state.value("trainable_only", false));
  m.device = resolve_device(device);
  m.model->module()->to(m.device);
  m.model->module()->eval();
  return m;
}

ScriptSource script_source(const ModelSpec& a) {
  GB_CHECK(a.checkpoint.empty() || a.model.empty(), InvalidArgument, "--checkpoint and --model are mutually exclusive",
           "give a glassbox checkpoint (--checkpoint) or a TorchScript file (--model), not both");
  GB_CHECK(!a.checkpoint.empty() || !a.model.empty(), InvalidArgument, "no model given",
           "pass --checkpoint runs/NAME/checkpoints/last.ckpt, or --model model.pt for a TorchScript file");
  ScriptSource s;
  if (a.model.empty()) {
    GB_CHECK(a.contract.empty() && a.config.empty() && a.flags.empty(), InvalidArgument,
             "CONFIG, --contract and the contract flags apply to --model only",
             "a checkpoint carries its own configuration and preprocessing; drop them (--set data.KEY=... points it "
             "at other data)");
    return s;
  }
  s.model = a.model;
  s.contract = a.contract;
  s.flags = a.flags;
  const train::RunConfig cfg =
      a.config.empty() ? train::parse_run_config(embedded_quickstart_config(), "quickstart (built in)", a.overrides)
                       : train::load_run_config(a.config, a.overrides);
  s.data = cfg.data;
  return s;
}

std::shared_ptr<const data::Dataset> split_dataset(LoadedModel& m, const std::string& split) {
  GB_CHECK(split == "test" || split == "val" || split == "train", InvalidArgument, "unknown split '" << split << "'",
           "use --split test, val or train");
  if (!m.data) {
    data::DataOptions alone = m.config.data.source;
    if (read_test_alone(alone)) {
      GB_CHECK(split == "test", NotFound,
               "the " << split << " split needs the training file, which is not in " << alone.root,
               "use --split test, or point data.* (--set data.root=...) at the training data");
      m.config.data.source = alone;
      m.test_only = true;
    }
    m.data = std::make_shared<train::StandardDataModule>(m.config.data);
    m.data->setup();
    const train::DataInfo d = m.data->info();
    GB_CHECK(d.sample_shape == m.info.sample_shape, InvalidArgument,
             "the data's samples have shape " << shape_text(d.sample_shape) << ", the model expects "
                                              << shape_text(m.info.sample_shape),
             "point data.* (--set data.root=...) at data shaped like the model's training data");
  }
  GB_CHECK(!m.test_only || split == "test", NotFound,
           "the " << split << " split needs the training file, which is not at " << m.config.data.source.root,
           "use --split test, or point data.* (--set data.root=...) at the training data");
  std::shared_ptr<const data::Dataset> ds;
  if (split == "test") {
    ds = m.data->test_dataset();
  } else if (split == "val") {
    ds = m.data->val_dataset();
  } else {
    ds = m.data->train_dataset();
  }
  GB_CHECK(ds != nullptr && ds->size() > 0, NotFound, "the run has no " << split << " split",
           (split == "val" ? "its data.val_size is 0; use --split test" : "use --split test"));
  return ds;
}

at::Tensor predict_outputs(LoadedModel& m, const data::Dataset& dataset, std::int64_t batch_size) {
  GB_CHECK(batch_size > 0, InvalidArgument, "batch size must be positive, got " << batch_size, "use e.g. 512");
  torch::NoGradGuard no_grad;
  m.model->module()->eval();
  std::vector<at::Tensor> parts;
  const std::int64_t n = dataset.size();
  // A bar on a terminal (plain lines every 10 s otherwise) once there is more than a moment's work.
  ProgressBar bar(std::cerr, n > 4 * batch_size);
  bar.start("predicting", n);
  const auto started = std::chrono::steady_clock::now();
  for (std::int64_t start = 0; start < n; start += batch_size) {
    const at::Tensor idx = torch::arange(start, std::min(n, start + batch_size), torch::kLong);
    data::Batch b = dataset.get_batch(idx);
    at::Tensor out = m.model->forward(b.inputs.to(m.device));
    const std::int64_t done = std::min(n, start + batch_size);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    bar.update(done, "", s > 0 ? static_cast<double>(done) / s : 0.0);
    GB_CHECK(out.dim() == 2, FailedPrecondition,
             "the model's output has shape " << out.sizes() << ", not [batch, outputs]",
             "evaluate a model with one output vector per sample");
    out = out.to(torch::kCPU, torch::kDouble);
    if (!m.outputs_probabilities && m.task == TaskKind::kClassification) out = torch::softmax(out, 1);
    if (!m.outputs_probabilities && m.task == TaskKind::kMultilabel) out = torch::sigmoid(out);
    parts.push_back(out);
  }
  bar.finish(fmt::format("{} samples", n));
  return parts.empty() ? torch::zeros({0, m.info.num_classes}, torch::kDouble) : torch::cat(parts);
}

at::Tensor predict_probabilities(LoadedModel& m, const data::Dataset& dataset, std::int64_t batch_size) {
  GB_CHECK(m.task == TaskKind::kClassification, InvalidArgument,
           "this needs class probabilities, but " << m.source() << " is a " << name_of(m.task) << " model",
           "use glassbox eval or glassbox predict, which handle every task");
  return predict_outputs(m, dataset, batch_size);
}

}  // namespace glassbox::app
