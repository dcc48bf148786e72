// The doctor, part 1: facts about the data and the setup (the rules that read them are in
// doctor_rules_*.cpp). Tested in doctor_test.cpp and doctor_rules_test.cpp.

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
#include "glassbox/inspect/stats.h"

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

// Held-out accuracy of a ridge classifier (one-vs-rest least squares on centred one-hot
// targets, features standardised on the fitting samples), its strength chosen from four on a
// quarter of the fitting samples, then refitted on all of them.
double ridge_accuracy(const at::Tensor& xfit, const at::Tensor& yfit, const at::Tensor& xtest, const at::Tensor& ytest,
                      std::int64_t k) {
  const at::Tensor mu = xfit.mean(0, true);
  const at::Tensor sd = xfit.std(0, /*unbiased=*/false, true).clamp_min(1e-8);
  auto fit = [&](const at::Tensor& x, const at::Tensor& y, double alpha) {
    const at::Tensor xs = (x - mu) / sd;
    at::Tensor t = torch::nn::functional::one_hot(y, k).to(torch::kDouble);
    const at::Tensor tm = t.mean(0, true);
    const at::Tensor xm = xs.mean(0, true);
    const at::Tensor xc = xs - xm;
    const std::int64_t n = x.size(0), dim = x.size(1);
    const double lam = alpha * static_cast<double>(n);
    at::Tensor w = dim <= n ? at::linalg_solve(xc.t().mm(xc) + lam * torch::eye(dim, xc.options()), xc.t().mm(t - tm))
                            : xc.t().mm(at::linalg_solve(xc.mm(xc.t()) + lam * torch::eye(n, xc.options()), t - tm));
    return std::make_tuple(w, xm, tm);
  };
  auto score = [&](const std::tuple<at::Tensor, at::Tensor, at::Tensor>& m, const at::Tensor& x, const at::Tensor& y) {
    const auto& [w, xm, tm] = m;
    const at::Tensor pred = ((((x - mu) / sd) - xm).mm(w) + tm).argmax(1);
    return (pred == y).to(torch::kDouble).mean().item<double>();
  };
  const std::int64_t n = xfit.size(0), hold = n / 4;
  double best_alpha = 1.0, best = -1;
  for (double alpha : {1e-3, 1e-2, 1e-1, 1.0}) {
    const double s =
        score(fit(xfit.slice(0, hold), yfit.slice(0, hold), alpha), xfit.slice(0, 0, hold), yfit.slice(0, 0, hold));
    if (s > best) {
      best = s;
      best_alpha = alpha;
    }
  }
  return score(fit(xfit, yfit, best_alpha), xtest, ytest);
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

std::vector<double> finite_of(const std::vector<double>& v) {
  std::vector<double> out;
  for (double x : v)
    if (std::isfinite(x)) out.push_back(x);
  return out;
}

double mean_of(const std::vector<double>& v, std::size_t from, std::size_t to) {
  double s = 0;
  std::size_t n = 0;
  for (std::size_t i = from; i < to && i < v.size(); ++i)
    if (std::isfinite(v[i])) {
      s += v[i];
      ++n;
    }
  return n ? s / static_cast<double>(n) : NAN;
}

double median_of(const std::vector<double>& v) { return quantile(finite_of(v), 0.5); }

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

  Gathered g, ge;  // the training split; the evaluation split checked for near-duplicates
  split_facts("train", *train_ds, d.outputs, d.train, &g);
  auto test_ds = data.test_dataset();
  auto val_ds = data.val_dataset();
  d.has_test = test_ds != nullptr && test_ds->size() > 0;
  d.has_val = val_ds != nullptr && val_ds->size() > 0;
  if (d.has_val) split_facts("val", *val_ds, d.outputs, d.val, d.has_test ? nullptr : &ge);
  if (d.has_test) split_facts("test", *test_ds, d.outputs, d.test, &ge);
  if (d.has_test || d.has_val) {
    const SplitFacts& target = d.has_test ? d.test : d.val;
    try {
      d.near_dup = find_near_duplicates(target.name, *train_ds, g.x, g.file_index, d.train.hashes,
                                        d.has_test ? *test_ds : *val_ds, ge.x, ge.file_index, target.hashes);
    } catch (const std::exception& e) {
      d.skipped.push_back({"near-duplicates", first_line_of(e.what())});
    }
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
  if (g.y.defined() && g.y.dim() == 1 && d.train.counts.size() > 1 && g.x.size(0) >= 60 && d.train.label_min >= 0) {
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
    // The doctor's own baseline on the same split: plain nearest-neighbour accuracy, and a ridge
    // linear classifier (the underfitting check compares the model with the better of the two).
    const double nn_acc = (yq == yr.index_select(0, nn)).to(torch::kDouble).mean().item<double>();
    d.baseline_acc = nn_acc;
    d.baseline_name = "the nearest neighbour";
    d.baseline_samples = nq;
    try {
      at::Tensor feats = g.x;
      // Images: pooled to at most 16x16 per channel, enough for a linear baseline, cheap to solve.
      if (feats.dim() == 4 && feats.size(2) * feats.size(3) > 256)
        feats = torch::adaptive_avg_pool2d(torch::nan_to_num(feats.to(torch::kFloat), 0.0, 0.0, 0.0), {16, 16});
      feats = torch::nan_to_num(feats.reshape({n, -1}).to(torch::kDouble), 0.0, 0.0, 0.0);
      const double ridge = ridge_accuracy(feats.index_select(0, ri), yr, feats.index_select(0, qi), yq, k);
      if (ridge > d.baseline_acc) {
        d.baseline_acc = ridge;
        d.baseline_name = "a ridge linear classifier";
      }
    } catch (const std::exception& e) {
      d.skipped.push_back({"baseline", first_line_of(e.what())});
    }
  }
  // Runs of equal labels in stored order: K when the split is sorted by class.
  if (g.y.defined() && g.y.dim() == 1 && g.y.numel() >= 2) {
    const at::Tensor y = g.y;
    d.label_runs = 1 + (y.slice(0, 1) != y.slice(0, 0, -1)).sum().item<std::int64_t>();
    double sum_p2 = 0;
    for (const auto& [label, count] : d.train.counts) {
      const double p = static_cast<double>(count) / static_cast<double>(y.numel());
      sum_p2 += p * p;
    }
    d.label_runs_expected = 1 + static_cast<double>(y.numel() - 1) * (1 - sum_p2);
  }
}

}  // namespace glassbox::inspect::detail
