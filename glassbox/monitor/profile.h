// The reference profile on disk: what the server compares its windows with.
//
//   DIR/profile.json   format, prediction count, predicted-class shares, and for each feature and
//                      the confidence: name, count, min, max, mean, std, and where its sample lies
//   DIR/profile.npy    every sample, one after another: float64 [total], little-endian (NPY 1.0,
//                      readable by numpy.load)
//
//   write_reference(repo / "model" / "1", reference);
//   Reference r = read_reference(repo / "model" / "1");
//
// Both files are written atomically (profile.npy first). Errors name the file and the problem: a
// missing or unreadable file (NotFound / DataLoss), JSON that is not a profile, a newer format,
// samples that do not fit the array, unsorted or non-finite samples (DataLoss).
#pragma once

#include <filesystem>

#include "glassbox/monitor/window.h"

namespace glassbox::monitor {

constexpr int kProfileFormat = 1;

void write_reference(const std::filesystem::path& dir, const Reference& reference);
Reference read_reference(const std::filesystem::path& dir);

}  // namespace glassbox::monitor
