// The doctor's rules over the data and the setup: labels, inputs, duplicates, BatchNorm against
// batch sizes, the model's head. One function per finding id; each may also read the run's facts
// (a cause in the data becomes an error when the run shows its effect).
// Tested in doctor_rules_test.cpp (hand-built facts) and doctor_test.cpp / lab_test.cpp (end to end).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "glassbox/inspect/doctor_internal.h"

namespace glassbox::inspect::detail {

namespace {

bool weighted_loss(const train::RunConfig& cfg) {
  return !cfg.loss.class_weights.empty() ||
         nn::resolve_loss(cfg.loss.name, cfg.data.source.task) == nn::LossKind::kFocal;
}

std::vector<Finding> label_offset(const Facts& f) {
  const SplitFacts& tr = f.data.train;
  const std::int64_t K = f.data.outputs;
  const bool contiguous =
      !tr.counts.empty() && static_cast<std::int64_t>(tr.counts.size()) == tr.label_max - tr.label_min + 1;
  if (!(tr.size > 0 && tr.label_min >= 1 && tr.counts.count(0) == 0 && contiguous && tr.counts.size() > 1 &&
        (tr.label_max == K - 1 || tr.label_max == K)))
    return {};
  return {Finding{
      .id = "label-offset",
      .severity = Severity::kError,
      .confidence = 0.95,
      .where = {{"split", "train"}, {"labels", {tr.label_min, tr.label_max}}},
      .evidence = fmt::format("training labels span {}..{} ({} distinct values), the model has {} outputs; {} never "
                              "occurs",
                              tr.label_min, tr.label_max, tr.counts.size(), K,
                              tr.label_min == 1 ? "0" : "0.." + std::to_string(tr.label_min - 1)),
      .fix =
          fmt::format("labels must run 0..K-1: subtract {} from every label (training and test files)", tr.label_min),
      .actions = {{"labels", "repair"}},
  }};
}

std::vector<Finding> label_out_of_range(const Facts& f) {
  std::vector<Finding> out;
  const std::int64_t K = f.data.outputs;
  for (const SplitFacts* s : {&f.data.train, &f.data.val, &f.data.test}) {
    if (s->out_of_range_count == 0) continue;
    std::vector<std::string> values;
    for (const auto& [label, count] : s->counts)
      if (label < 0 || label >= K) values.push_back(fmt::format("{} x{}", label, count));
    out.push_back(Finding{
        .id = "label-out-of-range",
        .severity = Severity::kError,
        .confidence = 0.9,
        .where = {{"split", s->name}, {"samples", s->out_of_range}},
        .evidence = fmt::format("{} {} labels are outside 0..{} (the model has {} outputs): {}; first at samples {}",
                                s->out_of_range_count, s->name, K - 1, K, fmt::join(values, ", "),
                                fmt_samples(s->out_of_range)),
        .fix = f.config.data.source.num_classes > 0 && s->label_max >= K
                   ? fmt::format("correct those labels, or set data.num_classes = {} if they are real classes",
                                 s->label_max + 1)
                   : "correct those labels (class labels must be 0..K-1)",
        .actions = {{"labels", "repair"}},
    });
  }
  // The loss failed on a label the data checks could not see (a user dataset's targets).
  const std::string& e = f.run.error;
  if (out.empty() && !e.empty() &&
      (e.find("out of bounds") != std::string::npos || e.find("Target") != std::string::npos))
    out.push_back(Finding{.id = "label-out-of-range",
                          .severity = Severity::kError,
                          .confidence = 0.85,
                          .where = {{"step", f.run.failing_step}},
                          .evidence = fmt::format("the loss failed: {}", first_line_of(e)),
                          .fix = "labels must be 0..K-1 for a K-output model",
                          .actions = {{"labels", "repair"}}});
  return out;
}

std::vector<Finding> constant_labels(const Facts& f) {
  const SplitFacts& tr = f.data.train;
  if (!(tr.size > 0 && tr.counts.size() == 1)) return {};
  return {Finding{
      .id = "constant-labels",
      .severity = Severity::kError,
      .confidence = 0.97,
      .where = {{"split", "train"}, {"label", tr.label_min}},
      .evidence = fmt::format("all {} training labels are {}: there is nothing to learn", tr.size, tr.label_min),
      .fix = "check how the labels were exported (a constant column, a broadcast, a wrong file)",
      .actions = {{"labels", "repair"}}}};
}

// Imbalance is a note; a warning past 70 % without a weighted loss; an error when the run shows
// the model predicting no better than the majority class.
std::vector<Finding> class_imbalance(const Facts& f) {
  const SplitFacts& tr = f.data.train;
  if (tr.size == 0 || tr.counts.size() < 2) return {};
  std::int64_t maj_label = 0, maj = 0, mn = tr.size;
  for (const auto& [label, count] : tr.counts) {
    if (count > maj) {
      maj = count;
      maj_label = label;
    }
    mn = std::min(mn, count);
  }
  const double share = static_cast<double>(maj) / static_cast<double>(tr.size);
  const double ratio = static_cast<double>(mn) / static_cast<double>(maj);
  if (share < 0.5 && ratio > 0.05) return {};
  const std::int64_t absent = std::max<std::int64_t>(0, f.data.outputs - static_cast<std::int64_t>(tr.counts.size()));
  const bool weighted = weighted_loss(f.config);
  const double acc = f.summary.recent_acc;
  const bool followed = share >= 0.7 && std::isfinite(acc) && acc <= share + 0.03 && !weighted;
  Finding out{
      .id = "class-imbalance",
      .severity = followed                    ? Severity::kError
                  : share >= 0.7 && !weighted ? Severity::kWarning
                                              : Severity::kInfo,
      .confidence = followed                    ? 0.8
                    : share >= 0.7 && !weighted ? 0.7
                                                : 0.4,
      .where = {{"split", "train"}, {"majority_class", maj_label}},
      .evidence = fmt::format("class {} holds {:.1f}% of the {} training samples (the smallest class {}, ratio "
                              "{:.3f}{}): always predicting {} scores {:.1f}% accuracy",
                              maj_label, 100 * share, tr.size, mn, ratio,
                              absent > 0 ? fmt::format("; {} classes absent", absent) : "", maj_label, 100 * share),
      .fix = weighted ? "the loss is already weighted (loss.class_weights / focal): judge by per-class recall or "
                        "balanced accuracy"
                      : "weight the loss (loss.class_weights, inverse class frequency) or use loss.name = \"focal\", "
                        "resample, and judge by per-class recall or balanced accuracy rather than accuracy",
      .actions = weighted ? std::vector<FixAction>{} : std::vector<FixAction>{{"loss.class_weights", "set"}},
  };
  if (followed)
    out.evidence += fmt::format("; the run's training accuracy ({:.1f}%) is no better than that", 100 * acc);
  return {out};
}

std::vector<Finding> nonfinite_input(const Facts& f) {
  std::vector<Finding> out;
  for (const SplitFacts* s : {&f.data.train, &f.data.val, &f.data.test}) {
    if (s->nonfinite_values == 0) continue;
    out.push_back(Finding{
        .id = "nonfinite-input",
        .severity = Severity::kError,
        .confidence = s->name == "train" ? 0.97 : 0.9,
        .where = {{"split", s->name}, {"samples", s->nonfinite_samples}},
        .evidence = fmt::format("{} {} samples hold NaN/Inf ({} values): samples {}", s->nonfinite_sample_count,
                                s->name, s->nonfinite_values, fmt_samples(s->nonfinite_samples)),
        .fix = "drop or repair those samples before training (NaN spreads from the first layer to the loss and every "
               "weight)",
        .actions = {{"data.samples", "repair"}},
    });
  }
  return out;
}

// Inputs far from unit scale: a warning, an error when the run does not learn (the symptoms it
// causes downstream raise it too, through the cause graph).
std::vector<Finding> unnormalized_input(const Facts& f) {
  const DataFacts& d = f.data;
  const bool raw_scale = d.median_sample_absmax > 20 || d.std > 10;
  const bool tiny_scale = d.std > 0 && d.std < 1e-3;
  if (!raw_scale && !tiny_scale) return {};
  const bool stuck = f.run.loss.size() >= 10 && !f.summary.learning;
  return {Finding{
      .id = "unnormalized-input",
      .severity = stuck || f.run.nonfinite ? Severity::kError : Severity::kWarning,
      .confidence = stuck || f.run.nonfinite ? 0.92 : 0.75,
      .where = {{"split", "train"}},
      .evidence = fmt::format("training inputs as the model sees them: mean {:.4g}, std {:.4g}, range {:.4g}..{:.4g} "
                              "(median per-sample max |x| {:.4g}){}",
                              d.mean, d.std, d.min, d.max, d.median_sample_absmax,
                              f.config.data.source.normalize ? "" : "; data.normalize = false"),
      .fix = f.config.data.source.normalize
                 ? "scale the inputs to mean 0, std 1 (data.mean / data.std)"
                 : "set data.normalize = true (per-channel mean 0, std 1 from the training split)",
      .actions = {{"data.normalize", "true"}},
  }};
}

std::vector<Finding> input_outliers(const Facts& f) {
  const DataFacts& d = f.data;
  if (d.extreme_samples.empty()) return {};
  return {Finding{.id = "input-outliers",
                  .severity = Severity::kWarning,
                  .confidence = 0.6,
                  .where = {{"split", "train"}, {"samples", d.extreme_samples}},
                  .evidence = fmt::format("training samples {} reach |x| = {:.3g}, against a median per-sample max |x| "
                                          "of {:.3g}",
                                          fmt_samples(d.extreme_samples), d.extreme_value, d.median_sample_absmax),
                  .fix = "drop or clip these outliers (float32 overflows past 3.4e38 in the first layer)",
                  .actions = {{"data.samples", "repair"}}}};
}

std::vector<Finding> train_test_leakage(const Facts& f) {
  const DataFacts& d = f.data;
  if (!d.has_test || d.dup_test == 0) return {};
  const double share = static_cast<double>(d.dup_test) / static_cast<double>(d.test.size);
  // Data with few distinct values repeat naturally (iris has duplicate flowers): the training
  // split's own share of repeated samples is the base rate that leakage must exceed, by 4
  // standard errors on the test split's size.
  const double base =
      d.train.size > 0 ? 1.0 - static_cast<double>(d.train.distinct) / static_cast<double>(d.train.size) : 0.0;
  const double p0 = std::max(base, 1.0 / static_cast<double>(std::max<std::int64_t>(1, d.train.size)));
  const bool leak = share >= 0.01 && share - base > 4 * std::sqrt(p0 * (1 - p0) / static_cast<double>(d.test.size));
  return {Finding{
      .id = "train-test-leakage",
      .severity = leak ? Severity::kError : Severity::kInfo,
      .confidence = leak ? 0.9 : 0.4,
      .where = {{"split", "test"}, {"samples", d.dup_test_examples}},
      .evidence = d.dup_test_files.empty()
                      ? fmt::format("{} of {} test samples ({:.2f}%) also occur in the training set with identical "
                                    "inputs (the training split repeats {:.2f}% of its own samples): test samples {}",
                                    d.dup_test, d.test.size, 100 * share, 100 * base, fmt_samples(d.dup_test_examples))
                      : fmt::format("{} of {} test images ({:.2f}%) are byte-identical copies of training files: {}",
                                    d.dup_test, d.test.size, 100 * share, fmt::join(d.dup_test_files, ", ")),
      .fix = "remove the duplicates from one split (hash the samples) so that the test score measures generalisation",
      .actions = {{"data.splits", "deduplicate"}},
  }};
}

// Near-duplicates across splits: more evaluation samples with a near twin in training than the
// training split has among itself (4 standard errors above that base rate), and at least 1 %.
std::vector<Finding> near_duplicate_leakage(const Facts& f) {
  const NearDuplicates& nd = f.data.near_dup;
  if (nd.found == 0 || nd.checked == 0) return {};
  const double n = static_cast<double>(nd.checked);
  const double p0 = std::max(nd.base_rate, 1.0 / static_cast<double>(std::max<std::int64_t>(1, nd.base_checked)));
  const double excess = nd.share - nd.base_rate;
  const bool leak = nd.share >= 0.01 && excess > 4 * std::sqrt(p0 * (1 - p0) / n);
  if (!leak && excess <= 0) return {};
  std::string pairs;
  for (std::size_t i = 0; i < nd.examples.size(); ++i)
    pairs += (i ? ", " : "") + (i < nd.example_files.size()
                                    ? nd.example_files[i]
                                    : fmt::format("{} ~ train {}", nd.examples[i], nd.train_examples[i]));
  return {Finding{
      .id = "near-duplicate-leakage",
      .severity = leak ? Severity::kError : Severity::kInfo,
      .confidence = leak ? 0.85 : 0.35,
      .where = {{"split", nd.split}, {"samples", nd.examples}, {"train_samples", nd.train_examples}},
      .evidence = fmt::format("{} of {} {} samples checked ({:.2f}%) are near-duplicates of training samples without "
                              "being byte-identical ({}); within the training split {:.2f}% of {} samples have such a "
                              "twin; pairs: {}",
                              nd.found, nd.checked, nd.split, 100 * nd.share, nd.method, 100 * nd.base_rate,
                              nd.base_checked, pairs),
      .fix = "remove the near-duplicates from one split (or split by source: patient, part, session, capture date) so "
             "that the evaluation measures generalisation rather than recall",
      .actions = {{"data.splits", "deduplicate"}},
  }};
}

std::vector<Finding> unreadable_images(const Facts& f) {
  const DataFacts& d = f.data;
  if (d.skipped_files.empty()) return {};
  const double share = static_cast<double>(d.skipped_files.size()) /
                       static_cast<double>(d.skipped_files.size() + static_cast<std::size_t>(d.train.size));
  return {Finding{.id = "unreadable-images",
                  .severity = share >= 0.01 ? Severity::kWarning : Severity::kInfo,
                  .confidence = share >= 0.01 ? 0.7 : 0.35,
                  .where = {{"split", "train"}, {"files", d.skipped_files.size()}},
                  .evidence = fmt::format("{} image file(s) do not decode and were left out (data.on_bad_image = "
                                          "\"skip\"): {}",
                                          d.skipped_files.size(), d.skipped_files.front()),
                  .fix = "replace or delete those files (glassbox data inspect lists them all); a share this large "
                         "often means a copy or a download broke off",
                  .actions = {{"data.files", "repair"}}}};
}

std::vector<Finding> batchnorm_batch_of_one(const Facts& f) {
  const DataFacts& d = f.data;
  // The run failed on it (a batch of one from a loader the data checks cannot see through).
  if (f.run.error.find("more than 1 value per channel") != std::string::npos) {
    Finding out{.id = "batchnorm-batch-of-one",
                .severity = Severity::kError,
                .confidence = 0.95,
                .where = {{"step", f.run.failing_step}},
                .evidence = fmt::format("training failed at step {}: a batch of one sample reached a BatchNorm layer "
                                        "in training mode ({})",
                                        f.run.failing_step, first_line_of(f.run.error)),
                .fix = "set data.loader.drop_last = true (or a batch size that leaves no batch of one)",
                .actions = {{"data.loader.drop_last", "true"}}};
    if (!d.batchnorm_layers.empty())
      out.where["layer"] = f.run.failing_layer.empty() ? d.batchnorm_layers.front() : f.run.failing_layer;
    return {out};
  }
  if (d.batchnorm_layers.empty() || d.batch_size <= 0) return {};
  const std::int64_t last = d.train.size % d.batch_size;
  if (!(d.batch_size == 1 || (last == 1 && !d.drop_last))) return {};
  const bool one = d.batch_size == 1;
  std::vector<FixAction> actions{one ? FixAction{"data.loader.batch_size", "raise"}
                                     : FixAction{"data.loader.drop_last", "true"}};
  return {Finding{
      .id = "batchnorm-batch-of-one",
      .severity = Severity::kError,
      .confidence = 0.9,
      .where = {{"layer", d.batchnorm_layers.front()}, {"batch_size", d.batch_size}},
      .evidence =
          one ? fmt::format("batch_size is 1 and the model has BatchNorm layers ({}): a batch of one has zero variance "
                            "in training mode",
                            d.batchnorm_layers.front())
              : fmt::format("the training split has {} samples and batch_size {} without drop_last: the last batch of "
                            "every epoch holds 1 sample, which reaches BatchNorm layer {} in training mode (the "
                            "variance of one sample is 0)",
                            d.train.size, d.batch_size, d.batchnorm_layers.front()),
      .fix = one ? "use a batch size of at least 2 (better 16+) or a norm without batch statistics (layernorm)"
                 : "set data.loader.drop_last = true (or change batch_size so that no batch has one sample)",
      .actions = std::move(actions),
  }};
}

std::vector<Finding> probabilities_as_logits(const Facts& f) {
  const nn::LossKind loss = nn::resolve_loss(f.config.loss.name, f.config.data.source.task);
  if (!(f.data.outputs_are_probabilities && (loss == nn::LossKind::kCrossEntropy || loss == nn::LossKind::kFocal)))
    return {};
  return {Finding{.id = "probabilities-as-logits",
                  .severity = Severity::kError,
                  .confidence = 0.9,
                  .where = {{"layer", f.data.head_layer}},
                  .evidence = fmt::format("the model's outputs are probabilities (every row in [0, 1] and summing to 1 "
                                          "on 8 training samples; last module {}) but loss {} applies log-softmax "
                                          "itself: softmax is applied twice and the gradients shrink",
                                          f.data.head_layer, name_of(f.config.loss.name)),
                  .fix = "end the model with the last linear layer (model.<name>.output = \"logits\"); apply softmax "
                         "only for reporting or serving",
                  .actions = {{"model.output", "logits"}}}};
}

// A check that could not run says so (never a silent catch).
std::vector<Finding> check_not_run(const Facts& f) {
  static const std::map<std::string, std::string> what = {
      {"model-output", "the model's output on a first training batch (its width, whether it is already probabilities)"},
      {"failing-layer", "naming the layer that failed, by replaying the failing batch"},
      {"batchnorm-statistics", "comparing BatchNorm's running statistics with batch statistics on training samples"},
      {"baseline", "fitting the doctor's own baseline (a linear classifier on the same features)"},
      {"label-noise", "estimating label noise from the trained model's probabilities on validation samples"},
      {"near-duplicates", "looking for near-duplicates of training samples in the evaluation split"},
  };
  std::vector<Finding> out;
  for (const auto* list : {&f.data.skipped, &f.run.skipped}) {
    for (const auto& s : *list) {
      const auto it = what.find(s.check);
      out.push_back(Finding{
          .id = "check-not-run",
          .severity = Severity::kInfo,
          .confidence = 0.3,
          .where = {{"check", s.check}},
          .evidence =
              fmt::format("the check {} could not run: {}", it == what.end() ? s.check : "of " + it->second, s.reason),
          .fix = "the findings above do not rest on it; fix the error it names (often the same as the run's) and run "
                 "the doctor again",
      });
    }
  }
  return out;
}

}  // namespace

std::vector<Rule> data_rules() {
  return {
      {"label-offset", label_offset, {{"labels", "repair"}}},
      {"label-out-of-range", label_out_of_range, {{"labels", "repair"}}},
      {"constant-labels", constant_labels, {{"labels", "repair"}}},
      {"class-imbalance", class_imbalance, {{"loss.class_weights", "set"}}},
      {"nonfinite-input", nonfinite_input, {{"data.samples", "repair"}}},
      {"unnormalized-input", unnormalized_input, {{"data.normalize", "true"}}},
      {"input-outliers", input_outliers, {{"data.samples", "repair"}}},
      {"train-test-leakage", train_test_leakage, {{"data.splits", "deduplicate"}}},
      {"near-duplicate-leakage", near_duplicate_leakage, {{"data.splits", "deduplicate"}}},
      {"unreadable-images", unreadable_images, {{"data.files", "repair"}}},
      {"batchnorm-batch-of-one",
       batchnorm_batch_of_one,
       {{"data.loader.drop_last", "true"}, {"data.loader.batch_size", "raise"}}},
      {"probabilities-as-logits", probabilities_as_logits, {{"model.output", "logits"}}},
      {"check-not-run", check_not_run, {}},
  };
}

}  // namespace glassbox::inspect::detail
