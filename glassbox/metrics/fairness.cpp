#include "glassbox/metrics/fairness.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "glassbox/base/error.h"

namespace glassbox::metrics {

namespace {

nlohmann::json num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

struct Counts {
  double n = 0, tp = 0, fp = 0, tn = 0, fn = 0;
};

double rate(double a, double b, bool* empty) {
  if (b == 0) {
    *empty = true;
    return 0.0;
  }
  return a / b;
}

}  // namespace

void FairnessOptions::validate() const {
  GB_CHECK(threshold >= 0 && threshold <= 1, InvalidArgument, "fairness threshold must be in [0, 1], got " << threshold,
           "use 0.1 or 0.05");
  GB_CHECK(disparate_impact_low > 0 && disparate_impact_low <= 1 && disparate_impact_high >= 1, InvalidArgument,
           "disparate impact bounds must satisfy 0 < low <= 1 <= high", "use 0.8 and 1.25");
}

FairnessReport fairness_audit(const std::vector<std::int64_t>& labels, const std::vector<std::int64_t>& predicted,
                              const std::vector<std::string>& groups, std::int64_t num_classes,
                              const FairnessOptions& o) {
  o.validate();
  GB_CHECK(labels.size() == predicted.size() && labels.size() == groups.size(), InvalidArgument,
           "fairness audit: " << labels.size() << " labels, " << predicted.size() << " predictions and "
                              << groups.size() << " group values",
           "give one " + o.attribute + " value per sample");
  GB_CHECK(num_classes >= 2, InvalidArgument, "fairness audit needs at least 2 classes", "check the model's outputs");
  // Groups sorted by name (a stable report).
  std::map<std::string, std::int64_t> sizes;
  for (const auto& g : groups) ++sizes[g];
  GB_CHECK(sizes.size() >= 2, InvalidArgument,
           "fairness audit: " << o.attribute << " has a single value ('"
                              << (sizes.empty() ? std::string() : sizes.begin()->first) << "')",
           "give an attribute with at least two groups");
  FairnessReport r;
  r.attribute = o.attribute;
  r.threshold = o.threshold;
  if (o.privileged.empty()) {
    r.privileged = sizes.begin()->first;
    for (const auto& [g, n] : sizes)
      if (n > sizes[r.privileged]) r.privileged = g;
  } else {
    GB_CHECK(sizes.count(o.privileged) != 0, InvalidArgument,
             "privileged group '" << o.privileged << "' does not occur in " << o.attribute,
             "choose one of the groups present");
    r.privileged = o.privileged;
  }
  std::vector<std::int64_t> classes;
  if (o.positive_class >= 0) {
    GB_CHECK(o.positive_class < num_classes, InvalidArgument,
             "positive class " << o.positive_class << " is outside 0.." << num_classes - 1,
             "choose a class of the model");
    classes.push_back(o.positive_class);
  } else if (num_classes == 2) {
    classes.push_back(1);
  } else {
    for (std::int64_t c = 0; c < num_classes; ++c) classes.push_back(c);
  }
  for (std::int64_t c : classes) {
    std::map<std::string, Counts> by;
    Counts priv, unpriv;
    for (std::size_t i = 0; i < labels.size(); ++i) {
      const bool yt = labels[i] == c, yp = predicted[i] == c;
      Counts& k = by[groups[i]];
      Counts& side = groups[i] == r.privileged ? priv : unpriv;
      for (Counts* t : {&k, &side}) {
        t->n += 1;
        t->tp += yt && yp ? 1 : 0;
        t->fp += !yt && yp ? 1 : 0;
        t->tn += !yt && !yp ? 1 : 0;
        t->fn += yt && !yp ? 1 : 0;
      }
    }
    ClassAudit a;
    a.positive_class = c;
    double sel_lo = 1e300, sel_hi = -1e300, tpr_lo = 1e300, tpr_hi = -1e300, fpr_lo = 1e300, fpr_hi = -1e300;
    for (const auto& [g, k] : by) {
      GroupRates gr;
      gr.group = g;
      gr.support = static_cast<std::int64_t>(k.n);
      gr.positives = static_cast<std::int64_t>(k.tp + k.fn);
      gr.negatives = static_cast<std::int64_t>(k.fp + k.tn);
      bool empty_tpr = false, empty_fpr = false, unused = false;
      gr.selection_rate = rate(k.tp + k.fp, k.n, &unused);
      gr.tpr = rate(k.tp, k.tp + k.fn, &empty_tpr);
      gr.fpr = rate(k.fp, k.fp + k.tn, &empty_fpr);
      gr.accuracy = rate(k.tp + k.tn, k.n, &unused);
      if (empty_tpr)
        r.notes.push_back(fmt::format("class {}: group '{}' has no positive sample; its TPR is taken as 0", c, g));
      if (empty_fpr)
        r.notes.push_back(fmt::format("class {}: group '{}' has no negative sample; its FPR is taken as 0", c, g));
      sel_lo = std::min(sel_lo, gr.selection_rate);
      sel_hi = std::max(sel_hi, gr.selection_rate);
      tpr_lo = std::min(tpr_lo, gr.tpr);
      tpr_hi = std::max(tpr_hi, gr.tpr);
      fpr_lo = std::min(fpr_lo, gr.fpr);
      fpr_hi = std::max(fpr_hi, gr.fpr);
      a.groups.push_back(gr);
    }
    a.differences.demographic_parity = sel_hi - sel_lo;
    a.differences.demographic_parity_ratio = sel_hi > 0 ? sel_lo / sel_hi : std::numeric_limits<double>::quiet_NaN();
    a.differences.equal_opportunity = tpr_hi - tpr_lo;
    a.differences.fpr = fpr_hi - fpr_lo;
    a.differences.equalized_odds = std::max(a.differences.equal_opportunity, a.differences.fpr);
    bool unused = false;
    const double sel_p = rate(priv.tp + priv.fp, priv.n, &unused),
                 sel_u = rate(unpriv.tp + unpriv.fp, unpriv.n, &unused);
    const double tpr_p = rate(priv.tp, priv.tp + priv.fn, &unused),
                 tpr_u = rate(unpriv.tp, unpriv.tp + unpriv.fn, &unused);
    const double fpr_p = rate(priv.fp, priv.fp + priv.tn, &unused),
                 fpr_u = rate(unpriv.fp, unpriv.fp + unpriv.tn, &unused);
    a.aif360.statistical_parity_difference = sel_u - sel_p;
    a.aif360.disparate_impact = sel_p > 0 ? sel_u / sel_p : std::numeric_limits<double>::quiet_NaN();
    a.aif360.equal_opportunity_difference = tpr_u - tpr_p;
    a.aif360.average_odds_difference = 0.5 * ((fpr_u - fpr_p) + (tpr_u - tpr_p));
    a.aif360.fpr_difference = fpr_u - fpr_p;
    auto flag = [&](const std::string& metric, double v, const std::string& what) {
      if (!(std::abs(v) > o.threshold)) return;
      r.flags.push_back({c, metric, v, o.threshold,
                         fmt::format("class {}: {} {:.4f} across {} groups exceeds {:g} ({})", c, metric, v,
                                     o.attribute, o.threshold, what)});
    };
    flag("demographic_parity_difference", a.differences.demographic_parity, "selection rates differ between groups");
    flag("equal_opportunity_difference", a.differences.equal_opportunity,
         "true positive rates differ: qualified members of some group are missed more");
    flag("fpr_difference", a.differences.fpr, "false positive rates differ: some group is wrongly selected more");
    flag("equalized_odds_difference", a.differences.equalized_odds, "the worse of the TPR and FPR gaps");
    const double di = a.aif360.disparate_impact;
    if (std::isfinite(di) && (di < o.disparate_impact_low || di > o.disparate_impact_high)) {
      r.flags.push_back({c, "disparate_impact", di, o.disparate_impact_low,
                         fmt::format("class {}: disparate impact {:.4f} (unprivileged / privileged '{}' selection "
                                     "rate) is outside [{:g}, {:g}]",
                                     c, di, r.privileged, o.disparate_impact_low, o.disparate_impact_high)});
    }
    r.audits.push_back(std::move(a));
  }
  return r;
}

nlohmann::json FairnessReport::to_json(const std::vector<std::string>& class_names) const {
  auto audit_json = [&](const ClassAudit& a) {
    nlohmann::json g = nlohmann::json::array();
    for (const auto& x : a.groups)
      g.push_back({{"group", x.group},
                   {"support", x.support},
                   {"positives", x.positives},
                   {"negatives", x.negatives},
                   {"selection_rate", x.selection_rate},
                   {"tpr", x.tpr},
                   {"fpr", x.fpr},
                   {"accuracy", x.accuracy}});
    nlohmann::json j = {{"positive_class", a.positive_class},
                        {"groups", g},
                        {"differences",
                         {{"convention", "fairlearn: absolute, max - min between groups"},
                          {"demographic_parity", a.differences.demographic_parity},
                          {"equal_opportunity", a.differences.equal_opportunity},
                          {"fpr", a.differences.fpr},
                          {"equalized_odds", a.differences.equalized_odds}}},
                        {"ratios",
                         {{"demographic_parity_ratio", num(a.differences.demographic_parity_ratio)},
                          {"disparate_impact", num(a.aif360.disparate_impact)}}},
                        {"aif360",
                         {{"convention", "AIF360: signed, unprivileged - privileged"},
                          {"statistical_parity_difference", a.aif360.statistical_parity_difference},
                          {"disparate_impact", num(a.aif360.disparate_impact)},
                          {"equal_opportunity_difference", a.aif360.equal_opportunity_difference},
                          {"average_odds_difference", a.aif360.average_odds_difference},
                          {"fpr_difference", a.aif360.fpr_difference}}}};
    if (static_cast<std::size_t>(a.positive_class) < class_names.size())
      j["positive_class_name"] = class_names[static_cast<std::size_t>(a.positive_class)];
    return j;
  };
  nlohmann::json j = {{"attribute", attribute}, {"privileged", privileged}, {"threshold", threshold}};
  nlohmann::json flags_j = nlohmann::json::array();
  for (const auto& f : flags)
    flags_j.push_back({{"positive_class", f.positive_class},
                       {"metric", f.metric},
                       {"value", f.value},
                       {"threshold", f.threshold},
                       {"message", f.message}});
  // The first audit's figures at the top level (the binary case); every class under per_class.
  if (!audits.empty()) {
    const nlohmann::json first = audit_json(audits.front());
    for (auto it = first.begin(); it != first.end(); ++it) j[it.key()] = it.value();
  }
  if (audits.size() > 1) {
    nlohmann::json pc = nlohmann::json::array();
    for (const auto& a : audits) pc.push_back(audit_json(a));
    j["per_class"] = pc;
  }
  j["flags"] = flags_j;
  j["notes"] = notes;
  return j;
}

}  // namespace glassbox::metrics
