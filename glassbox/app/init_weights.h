// model.init_from: a new run (or an export) starting from weights in a .safetensors file
// (torchvision's or timm's state_dict names) or a glassbox checkpoint directory.
//
//   nn::InitReport r = load_initial_weights(*model->module(), config.model);  // its init_from, init_strict, init_head
//   std::cout << "init_from: " << r.summary() << "\n";
//
// Errors: NotFound for a missing path; FailedPrecondition naming the misfits under strict.
#pragma once

#include <filesystem>

#include <torch/nn/module.h>

#include "glassbox/nn/model.h"
#include "glassbox/nn/pretrained.h"
#include "glassbox/nn/registry.h"

namespace glassbox::app {

// trainer.gradient_checkpointing on the model: InvalidArgument for a model without blocks.
void apply_gradient_checkpointing(nn::Model& model, bool on);

// model.init_from into the module, with model.init_strict and model.init_head.
nn::InitReport load_initial_weights(torch::nn::Module& module, const nn::ModelOptions& options);

}  // namespace glassbox::app
