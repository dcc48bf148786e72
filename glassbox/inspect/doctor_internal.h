// The doctor's internals: the facts it gathers from the data and from the instrumented run, the
// rules that turn them into findings (one small function per finding id, listed in a table), and
// the cause graph that ranks and reconciles them. Not a public interface (see doctor.h).
// Tested in doctor_rules_test.cpp (each rule on hand-built facts) and doctor_test.cpp (end to end).
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "glassbox/inspect/doctor.h"
#include "glassbox/inspect/nonfinite.h"
#include "glassbox/inspect/probes.h"
#include "glassbox/train/trainer_options.h"

namespace glassbox::inspect::detail {

// A check that could not run, and why (reported as an info finding, "check-not-run").
struct SkippedCheck {
  std::string check;   // e.g. "model-output"
  std::string reason;  // the error's first line
};

struct SplitFacts {
  std::string name;
  std::int64_t size = 0;
  std::int64_t label_min = 0, label_max = 0;
  std::map<std::int64_t, std::int64_t> counts;  // label -> samples
  std::vector<std::int64_t> out_of_range;       // file indices of labels outside 0..outputs-1 (first few)
  std::int64_t out_of_range_count = 0;
  std::int64_t nonfinite_values = 0;
  std::int64_t nonfinite_sample_count = 0;
  std::vector<std::int64_t> nonfinite_samples;  // file indices (first few)
  std::int64_t distinct = 0;                    // distinct inputs (by content hash)
  std::vector<std::uint64_t> hashes;            // per sample
  bool file_hashes = false;                     // image files: hashes of the files' bytes, not of the tensors
};

// Evaluation samples nearly (not byte-) identical to a training sample (doctor_duplicates.cpp).
struct NearDuplicates {
  std::string split;   // "test" or "val"
  std::string method;  // how "near" was decided
  double threshold = 0;
  std::int64_t checked = 0, found = 0;
  double share = 0;
  // The same check within the training split (each sample against the others): the share of
  // natural look-alikes, which leakage must exceed.
  std::int64_t base_checked = 0;
  double base_rate = 0;
  std::vector<std::int64_t> examples, train_examples;  // file indices: evaluation sample, its training twin
  std::vector<std::string> example_files;              // image files: "test/a.png ~ train/b.png"
};

struct DataFacts {
  std::int64_t outputs = 0;  // the model's output width
  SplitFacts train, val, test;
  bool has_val = false, has_test = false;
  // Training inputs as the model sees them, over finite values.
  double mean = 0, std = 0, min = 0, max = 0;
  double median_sample_absmax = 0;            // robust scale: the median over samples of max |x|
  std::vector<std::int64_t> extreme_samples;  // |x| far beyond the robust scale (first few, file indices)
  double extreme_value = 0;
  std::int64_t dup_test = 0, dup_val = 0;       // test/val samples whose input also occurs in train
  std::vector<std::int64_t> dup_test_examples;  // test file indices
  std::vector<std::string> dup_test_files;      // image data: those test files' names
  NearDuplicates near_dup;
  std::vector<std::string> skipped_files;  // image files left out because they do not decode
  double knn_agreement = -1, knn_chance = 0, knn_sigma = 0;
  std::int64_t knn_queries = 0;
  // The doctor's own baseline on the same features: the better of a ridge linear classifier and
  // the nearest neighbour, fitted on the neighbour check's references and scored on its queries.
  double baseline_acc = -1;
  std::string baseline_name;
  std::int64_t baseline_samples = 0;
  // Runs of equal labels in the training split's stored order (what an unshuffled loader
  // yields), and how many a random order gives: 1 + (n - 1)(1 - sum p_k^2).
  std::int64_t label_runs = -1;
  double label_runs_expected = 0;
  std::int64_t batch_size = 0;
  bool drop_last = false;
  bool shuffle = true;
  std::vector<std::string> batchnorm_layers;  // BatchNorm modules in forward order
  bool outputs_are_probabilities = false;
  std::string head_layer;           // the module producing the output
  std::vector<std::string> frozen;  // parameters that do not require grad
  std::int64_t frozen_numel = 0, total_numel = 0;
  std::vector<SkippedCheck> skipped;
};

struct Validation {
  std::int64_t step = 0;
  double val_loss = 0, val_acc = 0;
  double train_loss = 0;  // mean training loss over the steps since the previous check
};

struct RunFacts {
  bool ran = false;
  std::string error;       // exception message when the run failed
  std::string failing_op;  // the op in flight when it failed (with its module)
  std::string failing_layer, failing_type, failing_inputs;
  std::int64_t failing_step = -1;
  std::int64_t steps = 0;
  std::int64_t batches_per_epoch = 0;       // what the run trains on per epoch
  std::int64_t full_batches_per_epoch = 0;  // what the whole training split makes
  double seconds = 0, data_wait = 0;
  std::vector<double> loss, acc, lr, grad_norm;  // per step (NaN where absent)
  std::vector<std::uint64_t> batch_hash;         // per step: hash of the batch's inputs
  std::vector<std::int64_t> batch_size;
  std::vector<Validation> validations;
  std::int64_t val_samples = 0;  // samples scored per validation check
  std::vector<ProbeRecord> probes;
  std::vector<Alert> alerts;
  std::optional<NonFiniteEvent> nonfinite;
  std::int64_t scaler_skips = 0;
  double bn_train_mode_acc = -1, bn_eval_mode_acc = -1;      // the same training batches, batch vs running statistics
  double bn_train_mode_loss = NAN, bn_eval_mode_loss = NAN;  // their mean losses
  // Samples right only with batch statistics / only with running statistics (the discordant
  // pairs of a paired comparison), and how many samples were compared.
  std::int64_t bn_only_train_right = 0, bn_only_eval_right = 0, bn_samples = 0;
  // Confident learning (label_noise.h) on the trained model's probabilities for validation
  // samples (out of sample: the run never trains on them): the estimated share of wrong labels,
  // on how many samples, the model's accuracy there, the samples it suspects (file indices,
  // first few), and the most frequent (given, true) pair with its share of all samples.
  double noise_rate = -1;
  std::int64_t noise_samples = 0, noise_suspects = 0;
  double noise_model_acc = -1;
  std::vector<std::int64_t> noise_examples;
  std::int64_t noise_given = -1, noise_true = -1;
  double noise_pair_share = 0;
  std::vector<std::string> no_grad_params;  // require grad but never received one
  std::vector<std::string> frozen;          // parameters the run did not train (requires_grad false)
  std::int64_t frozen_numel = 0, total_numel = 0;
  std::int64_t chance_classes = 0;
  std::vector<SkippedCheck> skipped;
};

// Quantities several rules read, derived once from the run's histories.
struct RunSummary {
  // The loss: the first step's, the largest finite one, the mean of the first and last steps.
  double loss_first = NAN, loss_peak = NAN, loss_start = NAN, loss_end = NAN;
  bool loss_nonfinite = false;  // some step's loss was NaN/Inf
  bool learning = false;        // the loss fell clearly (end < 0.85 start)
  bool rising = false;          // the loss ended above 1.1x its start (or non-finite)
  double chance_loss = 1;       // ln K: the loss of a uniform prediction
  // Gradient norms up to (not including) the first non-finite step.
  double grad_first = NAN, grad_max = NAN;  // median of the first 5 finite norms; the largest
  std::int64_t grad_max_step = -1, grad_exceed_step = -1;
  bool grad_nonfinite = false;
  bool exploding = false;  // grew x100 and beyond diagnostics.grad_norm_high (or became non-finite)
  double clip_suggestion = NAN;
  // Update-to-weight ratios of the weight matrices: median over every probe, over the first 3.
  double update_ratio = NAN, update_ratio_early = NAN;
  double weight_norm_first = NAN, weight_norm_last = NAN;
  double recent_acc = NAN;    // training accuracy over the last 50 steps
  double majority_share = 0;  // the largest class's share of the training split
};

// Everything a rule may read. `run` is empty (ran = false, no steps) when the run was skipped.
struct Facts {
  const DataFacts& data;
  const RunFacts& run;
  const train::RunConfig& config;
  RunSummary summary;
};
Facts make_facts(const DataFacts& d, const RunFacts& r, const train::RunConfig& cfg);

// A rule: the findings of one id supported by the facts (usually none or one).
using RuleFn = std::vector<Finding> (*)(const Facts&);
struct Rule {
  const char* id;
  RuleFn check;
  std::vector<FixAction> actions;  // every action the rule's fixes may ask for (the consistency test reads them)
};
// Every rule, data rules first (doctor_rules_data.cpp, doctor_rules_run.cpp, doctor_rules_fit.cpp).
const std::vector<Rule>& rules();
std::vector<Rule> data_rules();
std::vector<Rule> run_rules();
std::vector<Rule> fit_rules();

// The cause graph: ids of the findings that `cause` explains when both are found.
const std::map<std::string, std::vector<std::string>>& cause_graph();
// Two actions on one setting in opposite directions (lower/raise, true/false, smaller/larger,
// add/remove, set/remove, wider/narrower).
bool contradicts(const FixAction& a, const FixAction& b);
// Ranks and reconciles the rules' findings (doctor_graph.cpp): one finding per id (one per check
// for check-not-run),
// causes raised to the severity of the symptoms they explain and placed above them, symptoms
// naming their causes, and any fix that contradicts a higher-ranked one replaced by a pointer
// to it.
std::vector<Finding> finalise(std::vector<Finding> findings);
// Runs every rule over the facts, then finalise.
std::vector<Finding> diagnose(const Facts& facts);

// Content hash of each sample's input bytes (x: [N, ...] contiguous, any dtype).
std::vector<std::uint64_t> sample_hashes(const at::Tensor& x);

NearDuplicates find_near_duplicates(const std::string& split, const data::Dataset& train_ds, const at::Tensor& train_x,
                                    const at::Tensor& train_files, const std::vector<std::uint64_t>& train_hashes,
                                    const data::Dataset& target_ds, const at::Tensor& target_x,
                                    const at::Tensor& target_files, const std::vector<std::uint64_t>& target_hashes);
void gather_data_facts(train::TaskModule& task, train::DataModule& data, const DoctorOptions& options,
                       DataFacts& facts);
void run_instrumented(train::TaskModule& task, train::DataModule& data, const train::RunConfig& cfg,
                      const DoctorOptions& options, const DataFacts& d, RunFacts& r, std::ostream* log);

// Helpers shared by the rule files.
std::string fmt_samples(const std::vector<std::int64_t>& s, std::size_t max = 6);
// The first line of an error message.
std::string first_line_of(const std::string& message);
std::vector<double> finite_of(const std::vector<double>& v);
double mean_of(const std::vector<double>& v, std::size_t from, std::size_t to);
double median_of(const std::vector<double>& v);

}  // namespace glassbox::inspect::detail
