// TaskKind: what a model's outputs mean, and so its targets, loss and metrics.
//
//   classification  one class per sample: targets [N] int64, outputs K logits (softmax)
//   regression      real values: targets [N, T] float32, outputs the T values themselves
//   multilabel      any number of L labels per sample: targets [N, L] float32 0/1, outputs L
//                   logits (a sigmoid each; a label is predicted at probability >= 0.5)
//
// The data declares it (data.task); the loss, the metrics, the export's contract, evaluation,
// prediction and serving follow it.
// Thread safety: constants.
#pragma once

#include "glassbox/base/config.h"

namespace glassbox {

enum class TaskKind { kClassification, kRegression, kMultilabel };
constexpr NameTable<TaskKind, 3> enum_names(TaskKind) {
  return {{{TaskKind::kClassification, "classification"},
           {TaskKind::kRegression, "regression"},
           {TaskKind::kMultilabel, "multilabel"}}};
}
static_assert(is_complete_table(enum_names(TaskKind{})));

}  // namespace glassbox
