// The doctor's cause graph and the step that turns the rules' findings into a report: one finding
// per id, causes above the symptoms they explain, symptoms naming their causes, and no two fixes
// that contradict each other.
// Tested in doctor_rules_test.cpp (the graph, ranking and every pair of rules' fixes).
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "glassbox/inspect/doctor_internal.h"

namespace glassbox::inspect::detail {

namespace {

int rank_of(Severity s) { return static_cast<int>(s); }  // error 0, warning 1, info 2

bool better(const Finding& a, const Finding& b) {
  if (a.severity != b.severity) return rank_of(a.severity) < rank_of(b.severity);
  return a.confidence > b.confidence;
}

}  // namespace

const std::vector<Rule>& rules() {
  static const std::vector<Rule> all = [] {
    std::vector<Rule> r = data_rules();
    for (auto* part : {run_rules, fit_rules}) {
      auto more = part();
      r.insert(r.end(), more.begin(), more.end());
    }
    return r;
  }();
  return all;
}

// cause -> the symptoms it explains when both are found. docs/doctor.md draws the same graph.
const std::map<std::string, std::vector<std::string>>& cause_graph() {
  static const std::map<std::string, std::vector<std::string>> graph = {
      // The data.
      {"nonfinite-input",
       {"nonfinite-activation", "nonfinite-gradient", "exploding-gradients", "lr-too-high", "low-precision-overflow",
        "dead-relu", "underfitting", "run-failed"}},
      {"input-outliers",
       {"nonfinite-activation", "nonfinite-gradient", "exploding-gradients", "lr-too-high", "low-precision-overflow"}},
      {"unnormalized-input",
       {"exploding-gradients", "nonfinite-activation", "nonfinite-gradient", "lr-too-high", "lr-too-low", "dead-relu",
        "vanishing-gradients", "low-precision-overflow", "underfitting"}},
      {"label-offset", {"label-out-of-range", "run-failed"}},
      {"label-out-of-range", {"run-failed"}},
      {"constant-labels", {"dead-relu", "underfitting"}},
      {"labels-shuffled", {"overfitting", "underfitting", "dead-relu", "label-noise"}},
      {"label-noise", {"overfitting", "underfitting"}},
      {"class-imbalance", {"underfitting"}},
      {"repeated-batches", {"overfitting"}},
      {"ordered-data-without-shuffle", {"batchnorm-stats-drift", "dead-relu", "underfitting", "overfitting"}},
      {"batchnorm-stats-drift", {"underfitting"}},
      {"partial-epochs-left-on", {"repeated-batches", "overfitting", "underfitting"}},
      // The setup.
      {"probabilities-as-logits",
       {"vanishing-gradients", "lr-too-low", "parameters-not-updating", "underfitting", "label-noise"}},
      {"batchnorm-batch-of-one", {"run-failed"}},
      {"no-gradient", {"underfitting"}},
      // The optimisation.
      {"lr-too-high",
       {"exploding-gradients", "dead-relu", "nonfinite-activation", "nonfinite-gradient", "overfitting",
        "underfitting"}},
      {"exploding-gradients", {"nonfinite-activation", "nonfinite-gradient", "dead-relu"}},
      {"weight-decay-too-large",
       {"dead-relu", "vanishing-gradients", "lr-too-low", "parameters-not-updating", "underfitting"}},
      {"vanishing-gradients", {"lr-too-low", "parameters-not-updating", "underfitting"}},
      {"dead-relu", {"lr-too-low", "vanishing-gradients", "underfitting"}},
      {"lr-too-low", {"underfitting"}},
  };
  return graph;
}

bool contradicts(const FixAction& a, const FixAction& b) {
  if (a.setting != b.setting) return false;
  static const std::pair<const char*, const char*> opposite[] = {{"lower", "raise"},    {"true", "false"},
                                                                 {"smaller", "larger"}, {"add", "remove"},
                                                                 {"set", "remove"},     {"wider", "narrower"}};
  for (const auto& [x, y] : opposite)
    if ((a.direction == x && b.direction == y) || (a.direction == y && b.direction == x)) return true;
  return false;
}

std::vector<Finding> finalise(std::vector<Finding> findings) {
  // One finding per id (the most severe, then most confident); each check that could not run is
  // its own note.
  std::vector<Finding> kept;
  for (auto& f : findings) {
    auto it = std::find_if(kept.begin(), kept.end(), [&](const Finding& k) {
      return k.id == f.id && (f.id != "check-not-run" || k.where == f.where);
    });
    if (it == kept.end())
      kept.push_back(std::move(f));
    else if (better(f, *it))
      *it = std::move(f);
  }
  const auto& graph = cause_graph();
  auto explains = [&](const Finding& cause, const Finding& symptom) {
    if (cause.severity == Severity::kInfo || &cause == &symptom) return false;
    const auto it = graph.find(cause.id);
    return it != graph.end() && std::find(it->second.begin(), it->second.end(), symptom.id) != it->second.end();
  };
  // A cause carries the weight of what it explains: the severity of its worst symptom, and at
  // least the confidence of its most confident one. (Chains: repeat until nothing changes.)
  for (std::size_t pass = 0; pass < kept.size(); ++pass) {
    bool changed = false;
    for (auto& c : kept)
      for (const auto& s : kept)
        if (explains(c, s)) {
          if (rank_of(s.severity) < rank_of(c.severity)) {
            c.severity = s.severity;
            changed = true;
          }
          if (s.confidence > c.confidence) {
            c.confidence = s.confidence;
            changed = true;
          }
        }
    if (!changed) break;
  }
  for (auto& s : kept) {
    s.because_of.clear();
    for (const auto& c : kept)
      if (explains(c, s)) s.because_of.push_back(c.id);
  }
  // Causes first (DoctorReport::sort: the best finding whose causes are all placed, in turn).
  DoctorReport report;
  report.findings = std::move(kept);
  report.sort();
  std::vector<Finding> ordered = std::move(report.findings);
  // A symptom's fix starts with its causes'. No two fixes contradict: a fix that would undo a
  // higher-ranked one points to it instead.
  std::vector<std::pair<FixAction, std::string>> accepted;
  for (auto& f : ordered) {
    const std::string* against = nullptr;
    for (const auto& a : f.actions)
      for (const auto& [b, id] : accepted)
        if (against == nullptr && contradicts(a, b)) against = &id;
    const std::string causes = fmt::format("{}", fmt::join(f.because_of, ", "));
    if (against != nullptr) {
      const bool from_cause = std::find(f.because_of.begin(), f.because_of.end(), *against) != f.because_of.end();
      f.fix = !from_cause ? fmt::format(
                                "apply the fix of {} above first (stronger evidence), then run the doctor again; this "
                                "finding's own remedy would undo it",
                                *against)
                          : fmt::format(
                                "this follows from {} above: fix that first, then run the doctor again; this "
                                "finding's own remedy would work against that fix",
                                causes);
      f.actions.clear();
      continue;
    }
    if (!f.because_of.empty())
      f.fix = fmt::format("this follows from {} above: fix that first; if it persists after that, {}", causes, f.fix);
    for (const auto& a : f.actions) accepted.emplace_back(a, f.id);
  }
  return ordered;
}

std::vector<Finding> diagnose(const Facts& facts) {
  std::vector<Finding> out;
  for (const Rule& rule : rules())
    for (auto& f : rule.check(facts)) out.push_back(std::move(f));
  return finalise(std::move(out));
}

}  // namespace glassbox::inspect::detail
