// Tested by app_test (PortableCheckpoint.*: NPY and CSV inputs) and the readme_tour test.
#include "glassbox/app/predict.h"

#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/base/progress.h"
#include "glassbox/data/csv.h"
#include "glassbox/data/image.h"
#include "glassbox/data/image_folder.h"
#include "glassbox/data/image_preprocessing.h"
#include "glassbox/data/npy.h"

namespace glassbox::app {

namespace fs = std::filesystem;

namespace {

// Raw inputs as the model's contract describes them: [N, ...input_shape] float32, preprocessed.
at::Tensor preprocess(at::Tensor x, const nn::ModelContract& c) {
  x = x.to(torch::kFloat) * c.scale;
  if (!c.mean.empty() || !c.std.empty()) {
    const std::int64_t width = c.input_shape.empty() ? 1 : c.input_shape[0];
    std::vector<int64_t> view(static_cast<std::size_t>(x.dim()), 1);
    view[1] = -1;
    const auto stat = [&](const std::vector<double>& v, double fill) {
      std::vector<double> full = v.empty() ? std::vector<double>{fill} : v;
      if (full.size() == 1) full.assign(static_cast<std::size_t>(width), full[0]);
      return torch::tensor(full, torch::kDouble).to(torch::kFloat).view(view);
    };
    x = (x - stat(c.mean, 0.0)) / stat(c.std, 1.0);
  }
  if (c.channel_order == nn::ChannelOrder::kBGR) x = x.flip(1);
  return x;
}

data::CsvTable read_table(const fs::path& path, const std::string& label_column);

// The table's features in the order of `names` (the model's training columns) when the model
// knows them: every one present, no other.
at::Tensor model_columns(const data::CsvTable& t, const std::vector<std::string>& names, const fs::path& path) {
  if (names.empty() || t.feature_names == names) return t.features;
  std::vector<std::int64_t> order;
  for (const auto& n : names) {
    const auto it = std::find(t.feature_names.begin(), t.feature_names.end(), n);
    GB_CHECK(it != t.feature_names.end(), InvalidArgument,
             path.string() << " has no column '" << n << "', a feature the model was trained on",
             "give the training table's feature columns (any order; extra columns are an error)");
    order.push_back(it - t.feature_names.begin());
  }
  GB_CHECK(t.feature_names.size() == names.size(), InvalidArgument,
           path.string() << " has " << t.feature_names.size() << " feature columns, the model " << names.size(),
           "drop the columns the model was not trained on");
  return t.features.index_select(1, torch::tensor(order, torch::kLong));
}

// The feature columns of a CSV table: every column but the label column (when the file has one),
// in the order of `names` (the model's training columns) when the model knows them.
at::Tensor csv_features(const fs::path& path, const std::string& label_column, const std::vector<std::string>& names) {
  data::CsvTable t = read_table(path, label_column);
  return model_columns(t, names, path);
}

data::CsvTable read_table(const fs::path& path, const std::string& label_column) {
  const std::string text = read_file(path);
  const std::size_t eol = text.find('\n');
  const std::string header = text.substr(0, eol);
  std::vector<std::string> cols;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= header.size(); ++i) {
    if (i == header.size() || header[i] == ',') {
      std::string c = header.substr(start, i - start);
      while (!c.empty() && (c.back() == '\r' || c.back() == ' ' || c.back() == '"')) c.pop_back();
      while (!c.empty() && (c.front() == ' ' || c.front() == '"')) c.erase(c.begin());
      cols.push_back(c);
      start = i + 1;
    }
  }
  if (std::find(cols.begin(), cols.end(), label_column) != cols.end())
    return data::parse_csv(text, path.string(), label_column);
  // Unlabeled: a placeholder label column is added so the table reads as a training file does.
  std::string labeled;
  std::size_t pos = 0;
  bool first = true;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") != std::string::npos) labeled += line + (first ? ",__row_label__\n" : ",0\n");
    first = first && line.find_first_not_of(" \t") == std::string::npos;
    pos = end + 1;
  }
  return data::parse_csv(labeled, path.string(), "__row_label__");
}

// The feature columns of a CSV table that may also hold a regression or multi-label model's
// target columns (`targets`, left out when present), in the order of `names` when known.
at::Tensor csv_features_beside_targets(const fs::path& path, const std::vector<std::string>& targets,
                                       const std::vector<std::string>& names) {
  const std::string text = read_file(path);
  const data::CsvText head = data::parse_csv_text(text.substr(0, text.find('\n')), path.string());
  std::vector<std::string> present;
  for (const auto& t : targets)
    if (std::find(head.header.begin(), head.header.end(), t) != head.header.end()) present.push_back(t);
  const data::CsvTable t = data::parse_csv_targets(text, path.string(), present);
  return model_columns(t, names, path);
}

// Image files: INPUT itself, or every image under the folder INPUT (torchvision's order).
std::vector<fs::path> image_inputs(const fs::path& input) {
  std::vector<fs::path> files;
  if (!fs::is_directory(input)) return {input};
  for (const auto& e : fs::recursive_directory_iterator(input))
    if (e.is_regular_file() && data::is_image_file(e.path())) files.push_back(e.path());
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    return std::make_pair(a.parent_path().string(), a.filename().string()) <
           std::make_pair(b.parent_path().string(), b.filename().string());
  });
  GB_CHECK(!files.empty(), NotFound, "no images under " << input.string(),
           "give an image file or a folder of .jpg/.png/... files");
  return files;
}

// Images decoded and run through the contract's image preprocessing (the run's eval pipeline)
// and normalisation: the tensors its validation saw. A contract without one (a TorchScript file
// exported elsewhere) decodes to its channel count, and the images must have its size.
at::Tensor image_batch(const std::vector<fs::path>& files, const nn::ModelContract& c) {
  const data::ImagePreprocessing spec = c.image.is_null()
                                            ? data::ImagePreprocessing{c.input_shape.at(0), {}}
                                            : data::image_preprocessing_from_json(c.image, "the model's contract");
  const data::ImagePreprocessor pre(spec);
  const auto n = static_cast<std::int64_t>(files.size());
  at::Tensor out = torch::empty({n, c.input_shape[0], c.input_shape[1], c.input_shape[2]}, torch::kFloat);
  const auto channels = c.input_shape[0];
  const auto stat = [&](const std::vector<double>& v, std::int64_t ch, double fallback) {
    return v.empty() ? fallback : v.size() == 1 ? v[0] : v[static_cast<std::size_t>(ch)];
  };
  std::vector<std::exception_ptr> errors(files.size());
  at::parallel_for(0, n, 8, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      try {
        const fs::path& f = files[static_cast<std::size_t>(i)];
        const at::Tensor t = pre(read_file(f), f.string());
        GB_CHECK(t.sizes().vec() == c.input_shape, InvalidArgument,
                 f.string() << ": the image comes out " << t.sizes() << " (C, H, W) but the model takes "
                            << c10::IntArrayRef(c.input_shape),
                 c.image.is_null() ? "resize the images to the model's size (its contract has no image preprocessing)"
                                   : "the contract's transforms must end at the model's size: add a Resize step");
        at::Tensor x = t.to(torch::kFloat) * c.scale;
        for (std::int64_t ch = 0; ch < channels; ++ch) x[ch].sub_(stat(c.mean, ch, 0.0)).div_(stat(c.std, ch, 1.0));
        out[i].copy_(x);
      } catch (...) {
        errors[static_cast<std::size_t>(i)] = std::current_exception();
      }
    }
  });
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

// A field's text inside double quotes ("" for a quote).
std::string csv_quoted(const std::string& s) {
  std::string out;
  for (char ch : s) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out;
}

std::string shape_text(c10::IntArrayRef s) {
  std::string t;
  for (auto d : s) t += (t.empty() ? "" : ", ") + std::to_string(d);
  return "[" + t + "]";
}

}  // namespace

PredictOutcome run_predict(const PredictRequest& r) {
  GB_CHECK(!r.input.empty(), InvalidArgument, "no input given",
           "pass the samples to predict: INPUT.npy, INPUT.csv, an image or a folder of images");
  GB_CHECK(fs::exists(r.input), NotFound, "no input file at " << r.input.string(), "check the path");
  GB_CHECK(r.batch_size > 0, InvalidArgument, "--batch-size must be positive, got " << r.batch_size, "use 512");
  const ScriptSource script = script_source(r.model);
  LoadedModel m = script.model.empty() ? load_checkpoint_for_inference(r.model.checkpoint, r.device)
                                       : load_script_for_inference(script, r.device, /*with_data=*/false);
  const nn::ModelContract contract = script.model.empty() ? contract_for_checkpoint(m) : m.contract;
  // The contract of a TorchScript file applies channel reversal inside ScriptModel already.
  nn::ModelContract pre = contract;
  if (!script.model.empty()) pre.channel_order = nn::ChannelOrder::kRGB;

  const std::string ext = r.input.extension().string();
  at::Tensor x;
  std::vector<fs::path> images;
  if (fs::is_directory(r.input) || data::is_image_file(r.input)) {
    GB_CHECK(contract.layout == nn::InputLayout::kNCHW, InvalidArgument, "the model takes feature vectors, not images",
             "give a .csv or .npy of features");
    images = image_inputs(r.input);
    x = image_batch(images, pre);  // preprocessed already
  } else if (ext == ".npy") {
    x = data::read_npy(r.input);
  } else if (ext == ".csv" && m.task != TaskKind::kClassification) {
    x = csv_features_beside_targets(r.input, m.info.class_names, m.info.feature_names);
  } else if (ext == ".csv") {
    x = csv_features(r.input, m.config.data.source.label_column, m.info.feature_names);
  } else {
    GB_THROW(InvalidArgument, "cannot read " << r.input.string() << ": unknown extension '" << ext << "'",
             "give a .npy array or a .csv table with a header");
  }
  std::vector<std::int64_t> want{-1};
  want.insert(want.end(), contract.input_shape.begin(), contract.input_shape.end());
  const bool fits = x.dim() == static_cast<std::int64_t>(want.size()) &&
                    std::equal(want.begin() + 1, want.end(), x.sizes().begin() + 1);
  GB_CHECK(fits, InvalidArgument,
           r.input.string() << " holds samples of shape " << shape_text(x.sizes().slice(x.dim() > 0 ? 1 : 0))
                            << ", the model expects " << shape_text(contract.input_shape),
           "give one row per sample shaped like the training data (images: [N, C, H, W])");

  std::vector<std::string> names = m.info.class_names;
  for (auto c = static_cast<std::int64_t>(names.size()); c < m.info.num_classes; ++c)
    names.push_back(std::to_string(c));
  torch::NoGradGuard no_grad;
  m.model->module()->eval();
  std::vector<at::Tensor> parts;
  const std::int64_t n = x.size(0);
  ProgressBar bar(std::cerr, n > 4 * r.batch_size);  // a bar on a terminal, plain lines otherwise
  bar.start("predicting", n);
  for (std::int64_t start = 0; start < n; start += r.batch_size) {
    const at::Tensor raw = x.slice(0, start, std::min(n, start + r.batch_size));
    const at::Tensor batch = images.empty() ? preprocess(raw, pre) : raw;
    at::Tensor out = m.model->forward(batch.to(m.device)).to(torch::kCPU, torch::kDouble);
    if (!m.outputs_probabilities && m.task == TaskKind::kClassification) out = torch::softmax(out, 1);
    if (!m.outputs_probabilities && m.task == TaskKind::kMultilabel) out = torch::sigmoid(out);
    parts.push_back(out);
    bar.update(std::min(n, start + r.batch_size), "", 0.0);
  }
  bar.finish(fmt::format("{} samples", n));
  const at::Tensor probs = n > 0 ? torch::cat(parts) : torch::zeros({0, m.info.num_classes}, torch::kDouble);

  PredictOutcome o;
  o.out = r.out.empty() ? r.input.parent_path() / "predictions.csv" : r.out;
  o.samples = n;
  o.class_names = names;
  o.task = m.task;
  o.counts.assign(names.size(), 0);
  if (m.task != TaskKind::kClassification) {
    // Regression: index[,file], then one column of values per target. Multi-label: the labels
    // predicted (probability >= 0.5, joined by '|'), then each label's probability.
    const bool multi = m.task == TaskKind::kMultilabel;
    std::string text = images.empty() ? "index" : "index,file";
    if (multi) text += ",predicted";
    for (const auto& c : names) text += "," + (multi ? "p_" + c : c);
    text += "\n";
    const auto p = probs.accessor<double, 2>();
    for (std::int64_t i = 0; i < n; ++i) {
      text += images.empty() ? std::to_string(i)
                             : fmt::format("{},\"{}\"", i, csv_quoted(images[static_cast<std::size_t>(i)].string()));
      if (multi) {
        std::string on;
        for (std::int64_t c = 0; c < probs.size(1); ++c) {
          if (p[i][c] < 0.5) continue;
          on += (on.empty() ? "" : "|") + names[static_cast<std::size_t>(c)];
          ++o.counts[static_cast<std::size_t>(c)];
        }
        text += ",\"" + csv_quoted(on) + "\"";
      }
      for (std::int64_t c = 0; c < probs.size(1); ++c) text += fmt::format(",{:.9g}", p[i][c]);
      text += "\n";
    }
    write_file_atomic(o.out, text);
    return o;
  }
  const at::Tensor pred = probs.argmax(1);
  std::string text = images.empty() ? "index,predicted,predicted_name" : "index,file,predicted,predicted_name";
  for (const auto& c : names) text += ",p_" + c;
  text += "\n";
  const auto p = probs.accessor<double, 2>();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t k = pred[i].item<std::int64_t>();
    ++o.counts[static_cast<std::size_t>(k)];
    text += images.empty() ? fmt::format("{},{},{}", i, k, names[static_cast<std::size_t>(k)])
                           : fmt::format("{},\"{}\",{},{}", i, csv_quoted(images[static_cast<std::size_t>(i)].string()),
                                         k, names[static_cast<std::size_t>(k)]);
    for (std::int64_t c = 0; c < probs.size(1); ++c) text += fmt::format(",{:.9g}", p[i][c]);
    text += "\n";
  }
  write_file_atomic(o.out, text);
  return o;
}

}  // namespace glassbox::app
