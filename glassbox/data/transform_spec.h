// TransformSpec: one augmentation step as a config names it, with albumentations' names,
// parameters and defaults, so a pipeline written for albumentations transfers by copying values.
//
//   [[data.train_transforms]]
//   name = "RandomResizedCrop"
//   size = [224, 224]
//   [[data.train_transforms]]
//   name = "OneOf"
//   p = 0.3
//   [[data.train_transforms.transforms]]
//   name = "CLAHE"
//   clip_limit = 2.0
//
// Every parameter of the named transform is a key of its table; keys it does not have are
// errors with a did-you-mean, values are checked when the pipeline is built (make_pipeline in
// augment.h). A range parameter takes one number or [lo, hi]; what one number means is the
// transform's (albumentations' rules: Rotate's limit = 15 is [-15, 15], CLAHE's clip_limit = 2 is
// [1, 2], Affine's rotate = 30 is exactly 30). The spec stores what the user wrote, plus the
// defaults of the keys they left out, so a checkpoint's config rebuilds the same pipeline.
// Thread safety: a value type.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "glassbox/base/config.h"

namespace glassbox::data {

struct TransformSpec {
  std::string name = "HorizontalFlip";
  double p = -1;                                       // < 0: the transform's default
  std::map<std::string, double> reals;                 // one-number parameters
  std::map<std::string, std::int64_t> ints;            // integer parameters
  std::map<std::string, std::vector<double>> numbers;  // ranges ([lo, hi] or one number) and lists
  std::map<std::string, std::string> words;            // string parameters
  std::map<std::string, bool> flags;                   // boolean parameters
  std::vector<TransformSpec> transforms;               // Compose, OneOf, SomeOf: the children

  void visit(FieldVisitor& v);
};

// The names a config may use, in registry order.
std::vector<std::string> transform_names();

}  // namespace glassbox::data
