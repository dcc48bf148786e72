// Heat maps and overlays of class activation maps, as images people look at.
//
//   at::Tensor heat = jet_colormap(maps);                       // [N, H, W] in [0, 1] -> [N, H, W, 3] float
//   at::Tensor rgb = overlay_heatmap(images, maps, 0.5);        // images [N, C, H, W] in [0, 1] -> uint8 [N, H, W, 3]
//   write_rgb_png("out/sample-17-overlay.png", rgb[0]);
//
// The overlay follows pytorch-grad-cam's show_cam_on_image(use_rgb=True): heat = JET colour of
// uint8(255 cam) as floats in [0, 1]; out = (1 - w) heat + w image; out /= max(out);
// uint8(255 out). JET is the piecewise-linear jet (red = clamp(1.5 - |4t - 3|), green with 2,
// blue with 1), the colour map OpenCV and matplotlib approximate. Grey images are shown on all
// three channels; other channel counts keep the first three.
// Thread safety: pure functions.
#pragma once

#include <filesystem>

#include <ATen/core/Tensor.h>

namespace glassbox::explain {

at::Tensor jet_colormap(const at::Tensor& maps);
at::Tensor overlay_heatmap(const at::Tensor& images, const at::Tensor& maps, double image_weight = 0.5);
// A [H, W, 3] uint8 image (or [H, W] / [H, W, 1] grey) written as PNG (atomically).
void write_rgb_png(const std::filesystem::path& path, const at::Tensor& image);
// Images back to [0, 1] for display: x * std + mean per channel (empty mean/std: min-max per image).
at::Tensor display_images(const at::Tensor& x, const std::vector<double>& mean, const std::vector<double>& std);

}  // namespace glassbox::explain
