// Whether a monitored metric improves downwards (a loss) or upwards (an accuracy): shared by
// ModelCheckpoint, EarlyStopping and ReduceLROnPlateau.
//
//   MetricMode m = MetricMode::kMax;   // "max" in config files
//
// Thread safety: constant data and pure functions.
#pragma once

#include "glassbox/base/config.h"

namespace glassbox::train {

enum class MetricMode { kMin, kMax };
constexpr NameTable<MetricMode, 2> enum_names(MetricMode) {
  return {{{MetricMode::kMin, "min"}, {MetricMode::kMax, "max"}}};
}
static_assert(is_complete_table(enum_names(MetricMode{})));

}  // namespace glassbox::train
