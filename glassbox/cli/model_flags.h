// The flags that name a model for `glassbox eval`, `explain` and `predict`: --checkpoint (with
// --set data.KEY=... to point it at other data), or --model with its contract, CONFIG and the
// contract flags (--input-shape, --mean, --std, --scale, --labels, --num-classes, --output-kind,
// --channel-order).
//
//   auto model = std::make_shared<ModelArgs>();
//   add_model_options(*cmd, model);
//   ... app::ModelSpec spec = model->to_spec();
#pragma once

#include <memory>
#include <string>

#include "glassbox/app/inference.h"

namespace CLI {
class App;
}

namespace glassbox::cli {

struct ModelArgs {
  app::ModelSpec spec;
  std::string labels;  // --labels (a file of class names)
  app::ModelSpec to_spec() const;
};

void add_model_options(CLI::App& cmd, const std::shared_ptr<ModelArgs>& args);

}  // namespace glassbox::cli
