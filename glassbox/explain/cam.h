// Class activation maps: where a model looks when it scores a class.
//
//   CamOptions o; o.method = CamMethod::GradCam;           // o.layer empty: the last conv block
//   CamResult r = class_activation_maps(model, x, {3, -1});  // x: [N, C, H, W]; -1: the predicted class
//   r.maps;    // [N, H, W] float32 in [0, 1], at the input's resolution
//   r.raw;     // [N, h, w] the map at the layer's resolution (ReLU'd, min-max normalised)
//
// Methods, as pytorch-grad-cam computes them:
//   gradcam    weights = spatial mean of d logit_c / d A; cam = ReLU(sum_k w_k A_k)
//   gradcam++  alpha = g^2 / (2 g^2 + sum_ij(A) g^3 + 1e-6) (0 where g = 0); w = sum_ij ReLU(g) alpha
//   scorecam   no gradients: each channel of A, upsampled (bilinear, align_corners) and min-max
//              normalised, masks the input; softmax over channels of the masked inputs' logits
//              weights the channels
//   saliency   max over channels of |d logit_c / d x| (Simonyan et al.); for models without a
//              spatial layer (an MLP), where the CAM methods do not apply
// Then per image: cam -= min; cam /= (max + 1e-7); bilinear resize to the input size (half-pixel
// centres, as cv2.resize's INTER_LINEAR). The target is the raw logit (pre-softmax). The model
// is run in evaluation mode (and left in the mode it had).
// The layer is a stage name of Model::stages() ("layer4.1", "features.relu1_1") or a container
// of stages ("layer4" = its last block). A wrong name is an InvalidArgument listing the valid ones.
// Thread safety: one call at a time per model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "glassbox/nn/model.h"

namespace glassbox::explain {

enum class CamMethod { GradCam, GradCamPlusPlus, ScoreCam, Saliency };
CamMethod parse_cam_method(const std::string& name);  // gradcam | gradcam++ | scorecam | saliency
std::string cam_method_name(CamMethod m);

struct CamOptions {
  CamMethod method = CamMethod::GradCam;
  std::string layer;                 // empty: default_cam_layer(model)
  std::int64_t scorecam_batch = 16;  // masked inputs per forward (pytorch-grad-cam's BATCH_SIZE)
};

struct CamResult {
  at::Tensor maps;                    // [N, H, W] float32, in [0, 1]
  at::Tensor raw;                     // [N, h, w] float32 at the layer's resolution (saliency: same as maps)
  at::Tensor logits;                  // [N, K] the model's outputs for x
  std::vector<std::int64_t> targets;  // the class explained for each image
  std::string layer;                  // the stage used ("input" for saliency)
  CamMethod method = CamMethod::GradCam;
};

// Names a --layer accepts: every stage with a feature-map output, and the containers of stages.
std::vector<std::string> cam_layers(nn::Model& model);
// The last convolutional block: the last stage with a feature-map output that is not a pooling
// layer (no "pool" in its last name: "features.relu1_1" of the cnn, "layer4.1" of resnet18, also
// of a scripted torchvision resnet18 whose avgpool keeps a 1x1 map); "" when there is none.
std::string default_cam_layer(nn::Model& model);

CamResult class_activation_maps(nn::Model& model, const at::Tensor& x, const std::vector<std::int64_t>& targets,
                                const CamOptions& options);

}  // namespace glassbox::explain
