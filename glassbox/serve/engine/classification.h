// The classification extension (Triton's): instead of an output's scores, the top `class_count`
// entries of each batch item, as BYTES strings "score:index:label" ("score:index" when the output
// has no label file, or the file has no line for that index), highest score first. The score is
// written as C++'s std::to_string of the value in its own type ("0.912345" for FP32, "7" for
// INT64); equal scores keep index order. class_count is clamped to the entries there are.
//
//   // scores FP32 [2, 10], labels from the output's label_filename:
//   Tensor top = classify(scores, 3, labels, /*batched=*/true);   // BYTES [2, 3]
//
// Shapes: batched, [B, d1, d2...] -> [B, k] over the d1*d2... entries of each item; not batched,
// the whole tensor is one item -> [k]. Numeric datatypes only (the validator refuses BOOL and BYTES
// outputs up front); InvalidArgument otherwise.
// Thread safety: a pure function.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "glassbox/serve/engine/api.h"

namespace glassbox::serve {

Tensor classify(const Tensor& scores, std::uint32_t class_count, const std::vector<std::string>& labels, bool batched);

}  // namespace glassbox::serve
