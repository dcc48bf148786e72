// Fairness audit of a classifier's predictions across the groups of a sensitive attribute.
//
//   FairnessOptions o; o.positive_class = 1; o.privileged = "m"; o.threshold = 0.1;
//   FairnessReport f = fairness_audit(labels, predicted, groups, num_classes, o);
//   f.audits[0].differences.equalized_odds; f.flags;  nlohmann::json j = f.to_json();
//
// Per group (one-vs-rest for the audited class): support, selection rate P(pred = c), TPR
// TP/(TP+FN), FPR FP/(FP+TN), accuracy. Two conventions, both reported and named:
//   fairlearn (absolute, between groups): demographic parity difference = max - min selection
//     rate (ratio = min / max); equal opportunity = TPR max - min; FPR difference; equalized odds
//     = max(TPR difference, FPR difference) (agg = worst_case).
//   AIF360 (signed, unprivileged - privileged; the unprivileged samples are all groups other than
//     the privileged one, pooled): statistical parity difference, disparate impact (ratio of
//     selection rates), equal opportunity difference, average odds difference
//     ((FPR_u - FPR_p) + (TPR_u - TPR_p)) / 2, FPR difference.
// A rate whose denominator is empty is 0 (fairlearn's default) and named in notes. Flags: an
// absolute difference above the threshold (default 0.1; 0.05 is a stricter common choice), a disparate impact
// outside [0.8, 1.25]. Multiclass without a positive class: every class is audited one-vs-rest.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace glassbox::metrics {

struct FairnessOptions {
  std::int64_t positive_class = -1;  // -1: class 1 for two classes, every class one-vs-rest otherwise
  std::string privileged;            // empty: the largest group
  double threshold = 0.1;            // flag absolute differences above this
  double disparate_impact_low = 0.8, disparate_impact_high = 1.25;
  std::string attribute = "group";  // the attribute's name, for messages
  void validate() const;
};

struct GroupRates {
  std::string group;
  std::int64_t support = 0, positives = 0, negatives = 0;
  double selection_rate = 0, tpr = 0, fpr = 0, accuracy = 0;
};

struct FairnessFlag {
  std::int64_t positive_class = 0;
  std::string metric;
  double value = 0, threshold = 0;
  std::string message;
};

struct ClassAudit {
  std::int64_t positive_class = 0;
  std::vector<GroupRates> groups;
  struct {
    double demographic_parity = 0, demographic_parity_ratio = 0, equal_opportunity = 0, fpr = 0, equalized_odds = 0;
  } differences;
  struct {
    double statistical_parity_difference = 0, disparate_impact = 0, equal_opportunity_difference = 0,
           average_odds_difference = 0, fpr_difference = 0;
  } aif360;
};

struct FairnessReport {
  std::string attribute;
  std::string privileged;
  double threshold = 0.1;
  std::vector<ClassAudit> audits;
  std::vector<FairnessFlag> flags;
  std::vector<std::string> notes;
  nlohmann::json to_json(const std::vector<std::string>& class_names = {}) const;
};

// labels, predicted: [N] class indices; groups: [N] group names (e.g. "0", "1", "f").
FairnessReport fairness_audit(const std::vector<std::int64_t>& labels, const std::vector<std::int64_t>& predicted,
                              const std::vector<std::string>& groups, std::int64_t num_classes,
                              const FairnessOptions& options);

}  // namespace glassbox::metrics
