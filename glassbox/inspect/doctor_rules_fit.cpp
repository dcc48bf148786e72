// The doctor's rules over what the run learnt and what it was fed: labels without signal, the
// same batches over and over, BatchNorm's running statistics, over- and under-fitting, data sorted
// by class, epochs cut short, the loader as the bottleneck. One function per finding id; the
// thresholds are set against the chance level or the sampling error of the data at hand.
// Tested in doctor_rules_test.cpp (hand-built facts) and doctor_test.cpp / lab_test.cpp (end to end).
#include <algorithm>
#include <cmath>
#include <thread>

#include <fmt/format.h>

#include "glassbox/inspect/doctor_internal.h"

namespace glassbox::inspect::detail {

namespace {

// Labels independent of the inputs: balanced nearest-neighbour agreement no higher than its
// permutation null under the observed class frequencies.
std::vector<Finding> labels_shuffled(const Facts& f) {
  const DataFacts& d = f.data;
  if (d.knn_agreement < 0 || d.train.counts.size() < 2) return {};
  // Four standard deviations of the permutation null (and at least 0.005, for a null that
  // barely varies): a false alarm is then rarer than 1 in 10 000 for a normal null.
  const double margin = std::max(4 * d.knn_sigma, 0.005);
  if (d.knn_agreement > d.knn_chance + margin) return {};
  // Independence predicts agreement near chance, not far below it: neighbours that carry other
  // labels 2 standard deviations more often than chance (rarer than 1 in 40 under independence)
  // are a dependence the neighbour vote reads the wrong way.
  if (d.knn_agreement < d.knn_chance - 2 * d.knn_sigma) return {};
  // Neighbours miss signal where few queries leave the null wide, or where most input dimensions
  // are noise. Held-out signal settles it: the doctor's linear baseline or the run's validation
  // accuracy 4 standard errors above always predicting the majority class means the labels
  // depend on the inputs after all.
  {
    const double maj = f.summary.majority_share;
    double held_out = d.baseline_samples > 0 ? d.baseline_acc : -1;
    std::int64_t n = d.baseline_samples;
    for (const auto& v : f.run.validations)
      if (std::isfinite(v.val_acc) && v.val_acc > held_out && f.run.val_samples > 0) {
        held_out = v.val_acc;
        n = f.run.val_samples;
      }
    if (n > 0 && held_out > maj + 4 * std::sqrt(maj * (1 - maj) / static_cast<double>(n))) return {};
  }
  const double acc = f.summary.recent_acc, majority = f.summary.majority_share;
  const bool stuck = !f.run.acc.empty() && std::isfinite(acc) && acc <= majority + 0.05;
  return {Finding{
      .id = "labels-shuffled",
      .severity = stuck ? Severity::kError : Severity::kWarning,
      .confidence = stuck ? 0.88 : 0.55,
      .where = {{"split", "train"}},
      .evidence = fmt::format("the nearest training neighbour of {} training samples has the same label {:.1f}% of the "
                              "time, averaged over classes — what labels independent of the inputs give under these "
                              "class frequencies ({:.1f}% +- {:.1f}%, from permuted labels){}",
                              d.knn_queries, 100 * d.knn_agreement, 100 * d.knn_chance, 100 * d.knn_sigma,
                              stuck ? fmt::format("; training accuracy stays at {:.1f}% (majority class {:.1f}%)",
                                                  100 * acc, 100 * majority)
                                    : ""),
      .fix = "check that inputs and labels are stored and shuffled together (one index for both)",
      .actions = {{"labels", "repair"}},
  }};
}

// Labels that contradict what the data say, by confident learning on the trained model's
// probabilities for validation samples. The estimate includes the model's confident mistakes,
// so it is an upper bound; on clean data sets a short run gives 3-15 %, a weak or memorising
// model up to 20 %, and a weak model on a hard task more. A quarter or more, from a model right
// on at least half of the samples (so that its probabilities carry information), is reported
// as a warning: an upper bound does not prove an error.
std::vector<Finding> label_noise(const Facts& f) {
  const RunFacts& r = f.run;
  if (r.noise_rate < 0.25 || r.noise_model_acc < 0.5 || r.noise_samples < 100) return {};
  nlohmann::json where = {{"split", "val"}, {"samples", r.noise_examples}};
  std::string pair;
  if (r.noise_given >= 0) {
    where["given"] = r.noise_given;
    where["likely"] = r.noise_true;
    pair = fmt::format("; the most common: labelled {} where the data say {} ({:.1f}% of the samples)", r.noise_given,
                       r.noise_true, 100 * r.noise_pair_share);
  }
  return {Finding{
      .id = "label-noise",
      .severity = Severity::kWarning,
      .confidence = std::min(0.9, 0.5 + r.noise_rate),
      .where = where,
      .evidence =
          fmt::format("confident learning on the trained model's probabilities for {} validation samples "
                      "(which it never trained on) estimates {:.1f}% of the labels wrong ({} samples contradict "
                      "the model's confident prediction; the model agrees with {:.1f}% of the labels){}; "
                      "suspects: samples {}",
                      r.noise_samples, 100 * r.noise_rate, r.noise_suspects, 100 * r.noise_model_acc, pair,
                      fmt_samples(r.noise_examples)),
      .fix = "review the suspect samples and relabel or drop the wrong ones (the same labelling process made the "
             "training labels); where the noise cannot be removed, soften the targets (loss.label_smoothing = 0.1) "
             "and stop early",
      .actions = {{"labels", "repair"}},
  }};
}

// The same inputs over and over: few distinct samples in the split, or few distinct batches in
// the run where an epoch holds many.
std::vector<Finding> repeated_batches(const Facts& f) {
  std::vector<Finding> out;
  const SplitFacts& tr = f.data.train;
  if (tr.size >= 100 && static_cast<double>(tr.distinct) < 0.5 * static_cast<double>(tr.size))
    out.push_back(Finding{
        .id = "repeated-batches",
        .severity = Severity::kError,
        .confidence = 0.85,
        .where = {{"split", "train"}},
        .evidence =
            fmt::format("the training split has {} samples but only {} distinct inputs ({:.1f}%): each is seen "
                        "about {:.0f} times per epoch",
                        tr.size, tr.distinct, 100.0 * static_cast<double>(tr.distinct) / static_cast<double>(tr.size),
                        static_cast<double>(tr.size) / static_cast<double>(std::max<std::int64_t>(1, tr.distinct))),
        .fix = "check the data export (the same rows written repeatedly); train on the distinct samples",
        .actions = {{"data.samples", "deduplicate"}},
    });
  const RunFacts& r = f.run;
  if (r.batch_hash.size() >= 20) {
    std::map<std::uint64_t, std::int64_t> seen;
    for (auto h : r.batch_hash) ++seen[h];
    // Batches recur across epochs of course; within the batches of one epoch they should differ.
    const double distinct = static_cast<double>(seen.size());
    const double expected = static_cast<double>(std::min<std::int64_t>(static_cast<std::int64_t>(r.batch_hash.size()),
                                                                       std::max<std::int64_t>(1, r.batches_per_epoch)));
    const bool asked = f.config.trainer.overfit_batches > 0;
    if (distinct <= 0.25 * expected)
      out.push_back(Finding{
          .id = "repeated-batches",
          .severity = asked ? Severity::kInfo : Severity::kError,
          .confidence = asked ? 0.3 : 0.85,
          .where = {{"steps", r.batch_hash.size()}},
          .evidence = fmt::format(
              "the training loader yielded {} distinct batches in {} steps ({} batches per epoch){}", seen.size(),
              r.batch_hash.size(), r.batches_per_epoch, asked ? " (trainer.overfit_batches is set: expected)" : ""),
          .fix = "check the dataset's get_batch and the sampler: each index should give its own sample",
          .actions = {{"data.sampler", "repair"}},
      });
  }
  return out;
}

// BatchNorm's running statistics far from the batch statistics. The accuracy gap alone sits near
// its threshold when the model has barely learnt (a few hundred steps of batches of two); the
// loss on the same samples separates the cases by a wide margin (healthy: within 10 %). On few
// samples a smaller gap is already beyond sampling error: the two accuracies are measured on the
// same samples, so the test is McNemar's on the discordant pairs (b samples right only with batch
// statistics, c only with running ones): z = (b - c) / sqrt(b + c), about normal without drift.
// z >= 4 with a gap of at least 8 points is drift whatever the sample size; above 15 points the
// gap alone suffices.
std::vector<Finding> batchnorm_stats_drift(const Facts& f) {
  const RunFacts& r = f.run;
  const double discordant = static_cast<double>(r.bn_only_train_right + r.bn_only_eval_right);
  const double z =
      discordant > 0 ? static_cast<double>(r.bn_only_train_right - r.bn_only_eval_right) / std::sqrt(discordant) : 0.0;
  const double gap = r.bn_train_mode_acc - r.bn_eval_mode_acc;
  const bool acc_gap = r.bn_train_mode_acc >= 0 && (gap > 0.15 || (gap >= 0.08 && z >= 4.0));
  const bool loss_gap = std::isfinite(r.bn_train_mode_loss) && std::isfinite(r.bn_eval_mode_loss) &&
                        r.bn_eval_mode_loss > 2.0 * r.bn_train_mode_loss &&
                        r.bn_eval_mode_loss - r.bn_train_mode_loss > 0.5;
  if (!acc_gap && !loss_gap) return {};
  const DataFacts& d = f.data;
  return {Finding{
      .id = "batchnorm-stats-drift",
      .severity = Severity::kError,
      .confidence = 0.85,
      .where = {{"layer", d.batchnorm_layers.empty() ? "" : d.batchnorm_layers.front()}},
      .evidence = fmt::format(
          "on the same training samples, accuracy is {:.1f}% and the loss {:.3g} with the statistics of batches of 256 "
          "(train mode) but {:.1f}% and {:.3g} with the running statistics evaluation uses (eval mode); the running "
          "statistics were gathered from batches of {}; of {} samples, {} are right only with batch statistics and {} "
          "only with running ones (McNemar z = {:.1f})",
          100 * r.bn_train_mode_acc, r.bn_train_mode_loss, 100 * r.bn_eval_mode_acc, r.bn_eval_mode_loss, d.batch_size,
          r.bn_samples, r.bn_only_train_right, r.bn_only_eval_right, z),
      .fix = "lower the BatchNorm momentum (bn_momentum = 0.1 or less for small batches), use larger batches, and "
             "evaluate in eval mode",
      .actions = {{"model.bn_momentum", "lower"}, {"data.loader.batch_size", "raise"}},
  }};
}

// Validation loss rising while training loss falls.
std::vector<Finding> overfitting(const Facts& f) {
  const auto& v = f.run.validations;
  if (v.size() < 3) return {};
  std::size_t best = 0;
  for (std::size_t i = 1; i < v.size(); ++i)
    if (v[i].val_loss < v[best].val_loss) best = i;
  const Validation& b = v[best];
  const Validation& last = v.back();
  // Only a model that fits its training data over-fits (a diverged run's losses say nothing).
  if (!(best + 2 <= v.size() - 1 && last.val_loss > 1.1 * b.val_loss && last.train_loss < b.train_loss &&
        last.train_loss < f.summary.chance_loss))
    return {};
  return {Finding{
      .id = "overfitting",
      .severity = Severity::kWarning,
      .confidence = 0.8,
      .where = {{"step", b.step}},
      .evidence =
          fmt::format("validation loss rose from {:.4g} (step {}) to {:.4g} (step {}) while the training loss "
                      "fell from {:.4g} to {:.4g}; {} training samples",
                      b.val_loss, b.step, last.val_loss, last.step, b.train_loss, last.train_loss, f.data.train.size),
      .fix = "more data or augmentation, dropout (model.mlp.dropout), weight decay, a smaller model, and "
             "early_stopping on val_loss",
      .actions = {{"model.capacity", "smaller"}, {"model.dropout", "raise"}, {"optim.weight_decay", "raise"}},
  }};
}

// A model too small (or too constrained) for its task: the loss has flattened, and the doctor's
// own baseline (a linear classifier and the nearest neighbour, fitted on the same features and
// scored on held-out training samples) does much better than the model does on the samples it
// trains on. The margin is 10 points and 4 standard errors of the difference.
std::vector<Finding> underfitting(const Facts& f) {
  const DataFacts& d = f.data;
  const RunFacts& r = f.run;
  if (d.baseline_acc < 0 || d.baseline_samples <= 0 || r.acc.size() < 100 || !std::isfinite(f.summary.recent_acc))
    return {};
  // The loss has flattened: the last quarter's mean within 3 % of the quarter before.
  const std::size_t n = r.loss.size(), q = n / 4;
  const double late = mean_of(r.loss, n - q, n), before = mean_of(r.loss, n - 2 * q, n - q);
  if (!(std::isfinite(late) && std::isfinite(before)) || late < 0.97 * before) return {};
  double model = f.summary.recent_acc;
  std::int64_t model_n =
      std::min<std::int64_t>(50, static_cast<std::int64_t>(r.acc.size())) * std::max<std::int64_t>(1, d.batch_size);
  if (!r.validations.empty() && std::isfinite(r.validations.back().val_acc) && r.validations.back().val_acc > model &&
      r.val_samples > 0) {
    model = r.validations.back().val_acc;
    model_n = r.val_samples;
  }
  const double pb = d.baseline_acc;
  const double se = std::sqrt(pb * (1 - pb) / static_cast<double>(d.baseline_samples) +
                              model * (1 - model) / static_cast<double>(std::max<std::int64_t>(1, model_n)));
  const double gap = pb - model;
  if (gap < std::max(0.10, 4 * se)) return {};
  return {Finding{
      .id = "underfitting",
      .severity = Severity::kError,
      .confidence = 0.8,
      .where = {{"baseline", d.baseline_name}, {"baseline_accuracy", pb}, {"model_accuracy", model}},
      .evidence =
          fmt::format("the loss has flattened at {:.4g} (chance {:.4g}) with the model at {:.1f}% accuracy (the "
                      "better of its last training batches and its last validation check), while {} fitted "
                      "by the doctor on the same features scores "
                      "{:.1f}% on {} held-out training samples ({:.1f} points more, {:.1f} standard errors)",
                      late, f.summary.chance_loss, 100 * model, d.baseline_name, 100 * pb, d.baseline_samples,
                      100 * gap, gap / std::max(se, 1e-12)),
      .fix = "give the model more capacity (wider or more layers, e.g. model.mlp.hidden), train longer, and ease "
             "regularisation (dropout, weight decay) until it beats the baseline",
      .actions = {{"model.capacity", "larger"}, {"model.dropout", "lower"}},
  }};
}

// Training data sorted by class with shuffling off: every batch holds one or two classes, and
// the model chases whichever class it saw last.
std::vector<Finding> ordered_data_without_shuffle(const Facts& f) {
  const DataFacts& d = f.data;
  if (d.shuffle || d.label_runs < 0 || d.train.counts.size() < 2 || d.train.size < 20) return {};
  // Random order gives about 1 + (n - 1)(1 - sum p^2) runs of equal labels; sorted data K of them.
  if (static_cast<double>(d.label_runs) > 0.1 * d.label_runs_expected) return {};
  const double per_batch =
      static_cast<double>(d.train.size) / static_cast<double>(std::max<std::int64_t>(1, d.label_runs));
  return {Finding{
      .id = "ordered-data-without-shuffle",
      .severity = Severity::kError,
      .confidence = 0.9,
      .where = {{"split", "train"}, {"label_runs", d.label_runs}},
      .evidence = fmt::format("data.loader.shuffle is off and the {} training samples are ordered by label: {} runs of "
                              "one label (about {:.0f} samples each, {:.1f} batches of {}) where a random order gives "
                              "{:.0f}",
                              d.train.size, d.label_runs, per_batch,
                              per_batch / static_cast<double>(std::max<std::int64_t>(1, d.batch_size)), d.batch_size,
                              d.label_runs_expected),
      .fix = "set data.loader.shuffle = true (each epoch in a new random order)",
      .actions = {{"data.loader.shuffle", "true"}},
  }};
}

// limit_train_batches or overfit_batches left over from debugging: each epoch sees a sliver of
// the training split.
std::vector<Finding> partial_epochs_left_on(const Facts& f) {
  const auto& t = f.config.trainer;
  const RunFacts& r = f.run;
  const bool overfit = t.overfit_batches > 0;
  if (!overfit && t.limit_train_batches == 1.0) return {};
  if (r.full_batches_per_epoch <= 0 || r.batches_per_epoch <= 0) return {};
  const double share = static_cast<double>(r.batches_per_epoch) / static_cast<double>(r.full_batches_per_epoch);
  if (share >= 0.5) return {};
  const std::string setting = overfit ? "trainer.overfit_batches" : "trainer.limit_train_batches";
  const double value = overfit ? t.overfit_batches : t.limit_train_batches;
  // What the configured training adds up to.
  std::string total;
  if (t.max_steps <= 0 && t.max_epochs > 0)
    total =
        fmt::format("; with trainer.max_epochs = {} the whole training makes {} steps, {:.2g} passes over the split",
                    t.max_epochs, t.max_epochs * r.batches_per_epoch, static_cast<double>(t.max_epochs) * share);
  return {Finding{
      .id = "partial-epochs-left-on",
      .severity = share <= 0.1 ? Severity::kError : Severity::kWarning,
      .confidence = share <= 0.1 ? 0.85 : 0.65,
      .where = {{"setting", setting}, {"batches_per_epoch", r.batches_per_epoch}},
      .evidence =
          fmt::format("{} = {:g}: each epoch trains on {} of the {} batches of the training split ({:.1f}% of "
                      "its {} samples){}{}",
                      setting, value, r.batches_per_epoch, r.full_batches_per_epoch, 100 * share, f.data.train.size,
                      overfit ? ", the same ones every epoch, and validates on them too" : "", total),
      .fix = fmt::format("remove {} from the config (it is a debugging aid) so that every epoch sees the whole split",
                         setting),
      .actions = {{setting, "remove"}},
  }};
}

// The loader as the bottleneck: the step waits for its batch longer than it computes.
std::vector<Finding> data_loading_bottleneck(const Facts& f) {
  const RunFacts& r = f.run;
  if (!(r.steps >= 20 && r.seconds >= 0.5 && r.data_wait > 0.5 * r.seconds)) return {};
  const double steps = static_cast<double>(r.steps);
  const double wait = r.data_wait / steps, compute = (r.seconds - r.data_wait) / steps;
  const std::int64_t workers = f.config.data.loader.num_workers;
  const auto cores = static_cast<std::int64_t>(std::max(1u, std::thread::hardware_concurrency()));
  // Workers in parallel cut the wait by about their number.
  const auto needed = static_cast<std::int64_t>(
      std::ceil(static_cast<double>(std::max<std::int64_t>(1, workers)) * (wait + compute) / std::max(compute, 1e-9)));
  return {Finding{
      .id = "data-loading-bottleneck",
      .severity = Severity::kWarning,
      .confidence = 0.8,
      .where = {{"data_wait_share", r.data_wait / r.seconds}},
      .evidence = fmt::format("{:.0f}% of the {:.1f} s of training went to waiting for the next batch: {:.1f} ms of "
                              "waiting per step against {:.1f} ms of computing (data.loader.num_workers = {})",
                              100 * r.data_wait / r.seconds, r.seconds, 1e3 * wait, 1e3 * compute, workers),
      .fix = needed <= cores
                 ? fmt::format("raise data.loader.num_workers to about {} (this machine has {} cores) and "
                               "prefetch_factor, or keep decoded data in memory",
                               needed, cores)
                 : fmt::format("the pipeline would need about {} workers to keep up and this machine has {} cores: "
                               "make the per-sample work lighter (smaller intermediate sizes, cheaper transforms, "
                               "decoded images cached in memory), then raise data.loader.num_workers",
                               needed, cores),
      .actions = {{"data.loader.num_workers", "raise"}},
  }};
}

}  // namespace

std::vector<Rule> fit_rules() {
  return {
      {"labels-shuffled", labels_shuffled, {{"labels", "repair"}}},
      {"label-noise", label_noise, {{"labels", "repair"}}},
      {"repeated-batches", repeated_batches, {{"data.samples", "deduplicate"}, {"data.sampler", "repair"}}},
      {"batchnorm-stats-drift",
       batchnorm_stats_drift,
       {{"model.bn_momentum", "lower"}, {"data.loader.batch_size", "raise"}}},
      {"overfitting",
       overfitting,
       {{"model.capacity", "smaller"}, {"model.dropout", "raise"}, {"optim.weight_decay", "raise"}}},
      {"underfitting", underfitting, {{"model.capacity", "larger"}, {"model.dropout", "lower"}}},
      {"ordered-data-without-shuffle", ordered_data_without_shuffle, {{"data.loader.shuffle", "true"}}},
      {"partial-epochs-left-on",
       partial_epochs_left_on,
       {{"trainer.overfit_batches", "remove"}, {"trainer.limit_train_batches", "remove"}}},
      {"data-loading-bottleneck", data_loading_bottleneck, {{"data.loader.num_workers", "raise"}}},
  };
}

}  // namespace glassbox::inspect::detail
