// The doctor, part 1: facts about the data and the setup, and the findings they support.

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/data/image.h"
#include "glassbox/data/image_folder.h"
#include "glassbox/inspect/doctor_internal.h"
#include "glassbox/inspect/layer_map.h"
#include "glassbox/inspect/recorder.h"

namespace glassbox::inspect::detail {

namespace {

struct Gathered {
  at::Tensor x, y, file_index;
};

// Every sample of a data set (up to `limit`), with their positions in the file they came from.
Gathered gather(const data::Dataset& ds, std::int64_t limit = 200000) {
  Gathered g;
  const std::int64_t n = std::min(ds.size(), limit);
  if (const auto* t = dynamic_cast<const data::TensorDataset*>(&ds)) {
    g.x = t->inputs().slice(0, 0, n);
    g.y = t->targets().slice(0, 0, n);
  } else {
    std::vector<at::Tensor> xs, ys;
    for (std::int64_t i = 0; i < n; i += 1024) {
      data::Batch b = ds.get_batch(torch::arange(i, std::min(n, i + 1024), torch::kLong));
      xs.push_back(b.inputs);
      ys.push_back(b.targets);
    }
    if (!xs.empty()) {
      g.x = torch::cat(xs);
      g.y = torch::cat(ys);
    }
  }
  g.file_index = data::root_indices(ds, torch::arange(n, torch::kLong));
  if (g.x.defined()) g.x = g.x.to(torch::kCPU).contiguous();
  if (g.y.defined()) g.y = g.y.to(torch::kCPU, torch::kLong).contiguous();
  return g;
}

std::vector<std::int64_t> first_indices(const at::Tensor& mask, const at::Tensor& file_index, std::size_t max = 8) {
  at::Tensor pos = mask.nonzero().flatten();
  if (pos.numel() > static_cast<std::int64_t>(max)) pos = pos.slice(0, 0, static_cast<std::int64_t>(max));
  at::Tensor f = at::index_select(file_index, 0, pos).contiguous();
  return std::vector<std::int64_t>(f.data_ptr<std::int64_t>(), f.data_ptr<std::int64_t>() + f.numel());
}

// The image-file data set under `ds` (through subsets), or null.
const data::ImageDataset* image_root(const data::Dataset& ds) {
  const data::Dataset* d = &ds;
  while (const auto* sub = dynamic_cast<const data::SubsetDataset*>(d)) d = sub->base().get();
  return dynamic_cast<const data::ImageDataset*>(d);
}

// FNV-1a of each sample's file bytes (in parallel): identical files, whatever augmentation does
// to the tensors they become.
std::vector<std::uint64_t> file_hashes(const data::ImageDataset& images, const at::Tensor& file_index) {
  const at::Tensor fi = file_index.contiguous();
  const std::int64_t n = fi.numel();
  std::vector<std::uint64_t> out(static_cast<std::size_t>(n), 0);
  at::parallel_for(0, n, 16, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      std::uint64_t h = 1469598103934665603ULL;
      try {
        const std::string bytes =
            data::read_encoded(images.files().at(static_cast<std::size_t>(fi.data_ptr<std::int64_t>()[i])));
        for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ULL;
      } catch (const Error&) {
        h = static_cast<std::uint64_t>(i) * 0x9E3779B97F4A7C15ULL;  // unreadable: unique, the load reports it
      }
      out[static_cast<std::size_t>(i)] = h;
    }
  });
  return out;
}

void split_facts(const std::string& name, const data::Dataset& ds, std::int64_t outputs, SplitFacts& s,
                 Gathered* keep) {
  Gathered g = gather(ds);
  s.name = name;
  s.size = g.x.defined() ? g.x.size(0) : 0;
  if (s.size == 0) return;
  if (g.y.dim() == 1) {
    s.label_min = g.y.min().item<std::int64_t>();
    s.label_max = g.y.max().item<std::int64_t>();
    at::Tensor u, counts;
    std::tie(u, std::ignore, counts) =
        at::_unique2(g.y, /*sorted=*/true, /*return_inverse=*/false, /*return_counts=*/true);
    for (std::int64_t i = 0; i < u.numel(); ++i) s.counts[u[i].item<std::int64_t>()] = counts[i].item<std::int64_t>();
    if (outputs > 0) {
      at::Tensor bad = (g.y < 0) | (g.y >= outputs);
      s.out_of_range_count = bad.sum().item<std::int64_t>();
      if (s.out_of_range_count > 0) s.out_of_range = first_indices(bad, g.file_index);
    }
  }
  if (g.x.is_floating_point()) {
    at::Tensor bad = ~torch::isfinite(g.x);
    s.nonfinite_values = bad.sum().item<std::int64_t>();
    if (s.nonfinite_values > 0) {
      at::Tensor rows = bad.reshape({s.size, -1}).any(1);
      s.nonfinite_sample_count = rows.sum().item<std::int64_t>();
      s.nonfinite_samples = first_indices(rows, g.file_index);
    }
  }
  if (const data::ImageDataset* images = image_root(ds)) {
    s.hashes = file_hashes(*images, g.file_index);
    s.file_hashes = true;
  } else {
    s.hashes = sample_hashes(g.x);
  }
  s.distinct = static_cast<std::int64_t>(std::unordered_set<std::uint64_t>(s.hashes.begin(), s.hashes.end()).size());
  if (keep != nullptr) *keep = std::move(g);
}

}  // namespace

std::vector<std::uint64_t> sample_hashes(const at::Tensor& xin) {
  std::vector<std::uint64_t> out;
  if (!xin.defined() || xin.size(0) == 0) return out;
  at::Tensor x = xin.to(torch::kCPU).contiguous();
  const auto n = x.size(0);
  const std::size_t row = static_cast<std::size_t>(x.numel() / n) * x.element_size();
  const auto* p = static_cast<const unsigned char*>(x.data_ptr());
  out.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint64_t h = 1469598103934665603ULL;  // FNV-1a, 64 bit
    const unsigned char* r = p + static_cast<std::size_t>(i) * row;
    for (std::size_t k = 0; k < row; ++k) h = (h ^ r[k]) * 1099511628211ULL;
    out[static_cast<std::size_t>(i)] = h;
  }
  return out;
}

std::string first_line_of(const std::string& message) { return message.substr(0, message.find('\n')); }

void skipped_findings(const std::vector<SkippedCheck>& skipped, std::vector<Finding>& out) {
  static const std::map<std::string, std::string> what = {
      {"model-output", "the model's output on a first training batch (its width, whether it is already probabilities)"},
      {"failing-layer", "naming the layer that failed, by replaying the failing batch"},
      {"batchnorm-statistics", "comparing BatchNorm's running statistics with batch statistics on training samples"},
  };
  for (const auto& s : skipped) {
    const auto it = what.find(s.check);
    Finding f{"check-not-run", "info", 0.3, {{"check", s.check}}, "", ""};
    f.evidence =
        fmt::format("the check {} could not run: {}", it == what.end() ? s.check : "of " + it->second, s.reason);
    f.fix =
        "the findings above do not rest on it; fix the error it names (often the same as the run's) and run the "
        "doctor again";
    out.push_back(f);
  }
}

std::string fmt_samples(const std::vector<std::int64_t>& s, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < max; ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out;
}

void gather_data_facts(train::TaskModule& task, train::DataModule& data, const DoctorOptions& options, DataFacts& d) {
  data.setup();
  auto train_ds = data.train_dataset();
  GB_CHECK(train_ds != nullptr && train_ds->size() > 0, FailedPrecondition, "the data module has no training samples",
           "check the [data] section");
  const data::LoaderOptions lo = data.train_loader_options();
  d.batch_size = lo.batch_size;
  d.drop_last = lo.drop_last;
  d.shuffle = lo.shuffle;

  // The model's output width and what the head produces, from one forward pass.
  LayerMap map(task.module());
  for (const auto& u : map.units())
    if (u.type.rfind("BatchNorm", 0) == 0) d.batchnorm_layers.push_back(u.path);
  for (const auto& p : map.parameters()) {
    d.total_numel += p.tensor.numel();
    if (!p.tensor.requires_grad()) {
      d.frozen.push_back(p.name);
      d.frozen_numel += p.tensor.numel();
    }
  }
  {
    data::Batch b = train_ds->get_batch(torch::arange(std::min<std::int64_t>(8, train_ds->size()), torch::kLong));
    const bool was_training = task.module().is_training();
    task.module().eval();
    try {
      torch::NoGradGuard ng;
      ForwardRecorder rec(map, RecorderOptions{});
      train::StepOutput out = task.validation_step(b);
      rec.stop();
      for (auto it = rec.records().rbegin(); it != rec.records().rend(); ++it) {
        if (it->shape.size() == 2 && it->shape[0] == b.size()) {
          d.head_layer = it->layer;
          break;
        }
      }
      if (out.logits.defined() && out.logits.dim() == 2) {
        d.outputs = out.logits.size(1);
        at::Tensor l = out.logits.detach().to(torch::kDouble);
        d.outputs_are_probabilities = d.outputs > 1 && torch::isfinite(l).all().item<bool>() &&
                                      (l >= 0).all().item<bool>() && (l <= 1).all().item<bool>() &&
                                      ((l.sum(1) - 1.0).abs() < 1e-4).all().item<bool>();
      }
    } catch (const std::exception& e) {
      // The run reports what fails; the data checks go on with the data's class count.
      d.skipped.push_back({"model-output", first_line_of(e.what())});
    }
    if (was_training) task.module().train();
  }
  if (d.outputs == 0) d.outputs = train_ds->num_classes();
  d.skipped_files = data.info().skipped_files;

  Gathered g;
  split_facts("train", *train_ds, d.outputs, d.train, &g);
  if (auto v = data.val_dataset()) {
    d.has_val = v->size() > 0;
    if (d.has_val) split_facts("val", *v, d.outputs, d.val, nullptr);
  }
  if (auto t = data.test_dataset()) {
    d.has_test = t->size() > 0;
    if (d.has_test) split_facts("test", *t, d.outputs, d.test, nullptr);
  }

  // Input statistics over finite values, and a robust scale (outliers do not move a median).
  // Samples far beyond the robust scale are reported on their own and left out of the moments.
  if (g.x.is_floating_point() && g.x.numel() > 0) {
    at::Tensor x = g.x.reshape({g.x.size(0), -1}).to(torch::kFloat);
    at::Tensor finite = torch::isfinite(x);
    at::Tensor xz = torch::where(finite, x, torch::zeros({}, x.options()));
    at::Tensor absmax = std::get<0>(xz.abs().max(1));
    d.median_sample_absmax = absmax.median().item<double>();
    const double limit = std::max(1e6, 1e3 * d.median_sample_absmax);
    at::Tensor extreme = absmax > limit;
    if (extreme.any().item<bool>()) {
      d.extreme_samples = first_indices(extreme, g.file_index);
      d.extreme_value = absmax.max().item<double>();
      finite = finite & (~extreme).unsqueeze(1);
      xz = torch::where(finite, x, torch::zeros({}, x.options()));
    }
    const double n = std::max<double>(1.0, finite.sum().item<double>());
    d.mean = xz.sum(torch::kDouble).item<double>() / n;
    d.std = std::sqrt(torch::where(finite, (xz.to(torch::kDouble) - d.mean).square(), torch::zeros({}, torch::kDouble))
                          .sum()
                          .item<double>() /
                      n);
    d.min = torch::where(finite, x, torch::full({}, INFINITY)).min().item<double>();
    d.max = torch::where(finite, x, torch::full({}, -INFINITY)).max().item<double>();
  }

  // Samples of the evaluation splits that also occur in the training split.
  std::unordered_set<std::uint64_t> train_set(d.train.hashes.begin(), d.train.hashes.end());
  if (d.has_test) {
    auto t = data.test_dataset();
    at::Tensor fi =
        data::root_indices(*t, torch::arange(static_cast<std::int64_t>(d.test.hashes.size()), torch::kLong));
    for (std::size_t i = 0; i < d.test.hashes.size(); ++i) {
      if (train_set.count(d.test.hashes[i]) == 0) continue;
      ++d.dup_test;
      if (d.dup_test_examples.size() < 6) {
        const std::int64_t file = fi[static_cast<std::int64_t>(i)].item<std::int64_t>();
        d.dup_test_examples.push_back(file);
        if (const data::ImageDataset* images = image_root(*t))
          d.dup_test_files.push_back(images->files().at(static_cast<std::size_t>(file)).name());
      }
    }
  }
  for (std::uint64_t h : d.val.hashes) d.dup_val += static_cast<std::int64_t>(train_set.count(h) > 0);

  // Do the labels depend on the inputs? The nearest training neighbour's label agrees far more
  // often than chance on any learnable data set, and only at chance when labels are shuffled.
  // The agreement is balanced (the mean over classes of how often a query of that class finds a
  // neighbour of its class): with labels independent of the inputs it is 1/K in expectation
  // whatever the class frequencies, where plain agreement would be sum p_k^2 (0.96 with a 98 %
  // class, leaving no room above chance). Its null distribution under the observed frequencies
  // comes from permuting the references' labels.
  if (g.y.defined() && g.y.dim() == 1 && d.train.counts.size() > 1 && g.x.size(0) >= 60) {
    const std::int64_t n = g.x.size(0);
    const std::int64_t nq = std::min<std::int64_t>(options.knn_queries, n / 3);
    const std::int64_t nr = std::min<std::int64_t>(2 * options.knn_queries, n - nq);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(1234);
    at::Tensor perm = torch::randperm(n, gen, torch::kLong);
    at::Tensor qi = perm.slice(0, 0, nq), ri = perm.slice(0, nq, nq + nr);
    at::Tensor xf = torch::nan_to_num(g.x.reshape({n, -1}).to(torch::kFloat), 0.0, 0.0, 0.0);
    at::Tensor q = xf.index_select(0, qi), r = xf.index_select(0, ri);
    at::Tensor dist = torch::cdist(q, r);
    at::Tensor nn = std::get<1>(dist.min(1));
    at::Tensor yq = g.y.index_select(0, qi), yr = g.y.index_select(0, ri);
    const std::int64_t k = std::max<std::int64_t>(yq.max().item<std::int64_t>(), yr.max().item<std::int64_t>()) + 1;
    const at::Tensor per_class = torch::bincount(yq, {}, k).to(torch::kDouble);
    const at::Tensor present = per_class > 0;
    auto balanced = [&](const at::Tensor& neighbour_labels) {
      const at::Tensor hits = torch::bincount(yq, (yq == neighbour_labels).to(torch::kDouble), k);
      return (hits.masked_select(present) / per_class.masked_select(present)).mean().item<double>();
    };
    d.knn_agreement = balanced(yr.index_select(0, nn));
    constexpr int kPermutations = 200;
    std::vector<double> null;
    for (int i = 0; i < kPermutations; ++i) {
      const at::Tensor shuffled = yr.index_select(0, torch::randperm(nr, gen, torch::kLong));
      null.push_back(balanced(shuffled.index_select(0, nn)));
    }
    double mean = 0, sq = 0;
    for (double v : null) mean += v;
    mean /= kPermutations;
    for (double v : null) sq += (v - mean) * (v - mean);
    d.knn_queries = nq;
    d.knn_chance = mean;
    d.knn_sigma = std::sqrt(sq / (kPermutations - 1));
  }
}

void data_findings(const DataFacts& d, const train::RunConfig& cfg, std::vector<Finding>& out) {
  const std::int64_t K = d.outputs;
  // --- labels ---
  const SplitFacts& tr = d.train;
  const bool zero_missing = tr.counts.count(0) == 0;
  const bool contiguous =
      !tr.counts.empty() && static_cast<std::int64_t>(tr.counts.size()) == tr.label_max - tr.label_min + 1;
  if (tr.size > 0 && tr.label_min >= 1 && zero_missing && contiguous && tr.counts.size() > 1 &&
      (tr.label_max == K - 1 || tr.label_max == K)) {
    Finding f{"label-offset", "error", 0.95, {{"split", "train"}, {"labels", {tr.label_min, tr.label_max}}}, "", ""};
    f.evidence = fmt::format(
        "training labels span {}..{} ({} distinct values), the model has {} outputs; {} never occurs", tr.label_min,
        tr.label_max, tr.counts.size(), K, tr.label_min == 1 ? "0" : "0.." + std::to_string(tr.label_min - 1));
    f.fix = fmt::format("labels must run 0..K-1: subtract {} from every label (training and test files)", tr.label_min);
    out.push_back(f);
  }
  for (const SplitFacts* s : {&d.train, &d.val, &d.test}) {
    if (s->out_of_range_count == 0) continue;
    std::vector<std::string> values;
    for (const auto& [label, count] : s->counts)
      if (label < 0 || label >= K) values.push_back(fmt::format("{} x{}", label, count));
    Finding f{"label-out-of-range", "error", 0.9, {{"split", s->name}, {"samples", s->out_of_range}}, "", ""};
    f.evidence =
        fmt::format("{} {} labels are outside 0..{} (the model has {} outputs): {}; first at samples {}",
                    s->out_of_range_count, s->name, K - 1, K, fmt::join(values, ", "), fmt_samples(s->out_of_range));
    f.fix = cfg.data.source.num_classes > 0
                ? fmt::format("correct those labels, or set data.num_classes = {} if they are real classes",
                              s->label_max + 1)
                : "correct those labels (class labels must be 0..K-1)";
    out.push_back(f);
  }
  if (tr.size > 0 && tr.counts.size() == 1) {
    Finding f{"constant-labels", "error", 0.97, {{"split", "train"}, {"label", tr.label_min}}, "", ""};
    f.evidence = fmt::format("all {} training labels are {}: there is nothing to learn", tr.size, tr.label_min);
    f.fix = "check how the labels were exported (a constant column, a broadcast, a wrong file)";
    out.push_back(f);
  } else if (tr.size > 0 && !tr.counts.empty()) {
    std::int64_t maj_label = 0, maj = 0, mn = tr.size;
    for (const auto& [label, count] : tr.counts) {
      if (count > maj) {
        maj = count;
        maj_label = label;
      }
      mn = std::min(mn, count);
    }
    const double share = static_cast<double>(maj) / static_cast<double>(tr.size);
    const std::int64_t absent = std::max<std::int64_t>(0, K - static_cast<std::int64_t>(tr.counts.size()));
    const double ratio = static_cast<double>(mn) / static_cast<double>(maj);
    const bool weighted = !cfg.loss.class_weights.empty() ||
                          nn::resolve_loss(cfg.loss.name, cfg.data.source.task) == nn::LossKind::kFocal;
    if (share >= 0.5 || ratio <= 0.05) {
      Finding f{"class-imbalance",
                share >= 0.7 && !weighted ? "warning" : "info",
                share >= 0.7 && !weighted ? 0.7 : 0.4,
                {{"split", "train"}, {"majority_class", maj_label}},
                "",
                ""};
      f.evidence = fmt::format(
          "class {} holds {:.1f}% of the {} training samples (the smallest class {}, ratio {:.3f}{}): always "
          "predicting {} "
          "scores {:.1f}% accuracy",
          maj_label, 100 * share, tr.size, mn, ratio, absent > 0 ? fmt::format("; {} classes absent", absent) : "",
          maj_label, 100 * share);
      f.fix = weighted ? "the loss is already weighted (loss.class_weights / focal): judge by per-class recall or "
                         "balanced accuracy"
                       : "weight the loss (loss.class_weights, inverse class frequency) or use loss.name = \"focal\", "
                         "resample, and judge by "
                         "per-class recall or balanced accuracy rather than accuracy";
      out.push_back(f);
    }
  }
  // --- inputs ---
  for (const SplitFacts* s : {&d.train, &d.val, &d.test}) {
    if (s->nonfinite_values == 0) continue;
    Finding f{"nonfinite-input",
              "error",
              s->name == "train" ? 0.97 : 0.9,
              {{"split", s->name}, {"samples", s->nonfinite_samples}},
              "",
              ""};
    f.evidence = fmt::format("{} {} samples hold NaN/Inf ({} values): samples {}", s->nonfinite_sample_count, s->name,
                             s->nonfinite_values, fmt_samples(s->nonfinite_samples));
    f.fix =
        "drop or repair those samples before training (NaN spreads from the first layer to the loss and every weight)";
    out.push_back(f);
  }
  const bool raw_scale = d.median_sample_absmax > 20 || d.std > 10;
  const bool tiny_scale = d.std > 0 && d.std < 1e-3;
  if (raw_scale || tiny_scale) {
    Finding f{"unnormalized-input", "warning", 0.75, {{"split", "train"}}, "", ""};
    f.evidence = fmt::format(
        "training inputs as the model sees them: mean {:.4g}, std {:.4g}, range {:.4g}..{:.4g} (median per-sample max "
        "|x| {:.4g}){}",
        d.mean, d.std, d.min, d.max, d.median_sample_absmax,
        cfg.data.source.normalize ? "" : "; data.normalize = false");
    f.fix = cfg.data.source.normalize ? "scale the inputs to mean 0, std 1 (data.mean / data.std)"
                                      : "set data.normalize = true (per-channel mean 0, std 1 from the training split)";
    out.push_back(f);
  }
  if (!d.extreme_samples.empty()) {
    Finding f{"input-outliers", "warning", 0.6, {{"split", "train"}, {"samples", d.extreme_samples}}, "", ""};
    f.evidence = fmt::format("training samples {} reach |x| = {:.3g}, against a median per-sample max |x| of {:.3g}",
                             fmt_samples(d.extreme_samples), d.extreme_value, d.median_sample_absmax);
    f.fix = "drop or clip these outliers (float32 overflows past 3.4e38 in the first layer)";
    out.push_back(f);
  }
  // --- duplicates ---
  if (d.has_test && d.dup_test > 0) {
    const double share = static_cast<double>(d.dup_test) / static_cast<double>(d.test.size);
    Finding f{"train-test-leakage",
              share >= 0.01 ? "error" : "info",
              share >= 0.01 ? 0.9 : 0.4,
              {{"split", "test"}, {"samples", d.dup_test_examples}},
              "",
              ""};
    f.evidence = d.dup_test_files.empty()
                     ? fmt::format(
                           "{} of {} test samples ({:.2f}%) also occur in the training set with identical "
                           "inputs: test samples {}",
                           d.dup_test, d.test.size, 100 * share, fmt_samples(d.dup_test_examples))
                     : fmt::format("{} of {} test images ({:.2f}%) are byte-identical copies of training files: {}",
                                   d.dup_test, d.test.size, 100 * share, fmt::join(d.dup_test_files, ", "));
    f.fix = "remove the duplicates from one split (hash the samples) so that the test score measures generalisation";
    out.push_back(f);
  }
  if (!d.skipped_files.empty()) {
    const double share = static_cast<double>(d.skipped_files.size()) /
                         static_cast<double>(d.skipped_files.size() + static_cast<std::size_t>(tr.size));
    Finding f{"unreadable-images",
              share >= 0.01 ? "warning" : "info",
              share >= 0.01 ? 0.7 : 0.35,
              {{"split", "train"}, {"files", d.skipped_files.size()}},
              "",
              ""};
    f.evidence = fmt::format("{} image file(s) do not decode and were left out (data.on_bad_image = \"skip\"): {}",
                             d.skipped_files.size(), d.skipped_files.front());
    f.fix =
        "replace or delete those files (glassbox data inspect lists them all); a share this large often means a "
        "copy or a download broke off";
    out.push_back(f);
  }
  if (tr.size >= 100 && static_cast<double>(tr.distinct) < 0.5 * static_cast<double>(tr.size)) {
    Finding f{"repeated-batches", "error", 0.85, {{"split", "train"}}, "", ""};
    f.evidence = fmt::format(
        "the training split has {} samples but only {} distinct inputs ({:.1f}%): each is seen about {:.0f} times per "
        "epoch",
        tr.size, tr.distinct, 100.0 * static_cast<double>(tr.distinct) / static_cast<double>(tr.size),
        static_cast<double>(tr.size) / static_cast<double>(std::max<std::int64_t>(1, tr.distinct)));
    f.fix = "check the data export (the same rows written repeatedly); train on the distinct samples";
    out.push_back(f);
  }
  // --- setup ---
  if (!d.batchnorm_layers.empty() && d.batch_size > 0) {
    const std::int64_t last = d.train.size % d.batch_size;
    if (d.batch_size == 1 || (last == 1 && !d.drop_last)) {
      Finding f{"batchnorm-batch-of-one",
                "error",
                0.9,
                {{"layer", d.batchnorm_layers.front()}, {"batch_size", d.batch_size}},
                "",
                ""};
      f.evidence =
          d.batch_size == 1
              ? fmt::format(
                    "batch_size is 1 and the model has BatchNorm layers ({}): a batch of one has zero variance in "
                    "training mode",
                    d.batchnorm_layers.front())
              : fmt::format(
                    "the training split has {} samples and batch_size {} without drop_last: the last batch of every "
                    "epoch holds 1 "
                    "sample, which reaches BatchNorm layer {} in training mode (the variance of one sample is 0)",
                    d.train.size, d.batch_size, d.batchnorm_layers.front());
      f.fix = d.batch_size == 1
                  ? "use a batch size of at least 2 (better 16+) or a norm without batch statistics (layernorm)"
                  : "set data.loader.drop_last = true (or change batch_size so that no batch has one sample)";
      out.push_back(f);
    }
  }
  const nn::LossKind loss = nn::resolve_loss(cfg.loss.name, cfg.data.source.task);
  if (d.outputs_are_probabilities && (loss == nn::LossKind::kCrossEntropy || loss == nn::LossKind::kFocal)) {
    Finding f{"probabilities-as-logits", "error", 0.9, {{"layer", d.head_layer}}, "", ""};
    f.evidence = fmt::format(
        "the model's outputs are probabilities (every row in [0, 1] and summing to 1 on 8 training samples; last "
        "module {}) "
        "but loss {} applies log-softmax itself: softmax is applied twice and the gradients shrink",
        d.head_layer, name_of(cfg.loss.name));
    f.fix =
        "end the model with the last linear layer (model.<name>.output = \"logits\"); apply softmax only for reporting "
        "or serving";
    out.push_back(f);
  }
}

}  // namespace glassbox::inspect::detail
