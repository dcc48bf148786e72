#include "glassbox/explain/render.h"

#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/png.h"

namespace glassbox::explain {

at::Tensor jet_colormap(const at::Tensor& maps) {
  // uint8(255 cam) first, as the reference renders a uint8 image through the colour map.
  const at::Tensor t = (maps.to(torch::kFloat).clamp(0, 1) * 255).to(torch::kUInt8).to(torch::kFloat) / 255.0;
  auto ch = [&](double c) { return (1.5 - (4 * t - c).abs()).clamp(0, 1); };
  return torch::stack({ch(3), ch(2), ch(1)}, -1);
}

at::Tensor overlay_heatmap(const at::Tensor& images, const at::Tensor& maps, double w) {
  GB_CHECK(images.dim() == 4 && maps.dim() == 3 && images.size(0) == maps.size(0) && images.size(2) == maps.size(1) &&
               images.size(3) == maps.size(2),
           InvalidArgument, "overlay: images " << images.sizes() << " and maps " << maps.sizes() << " do not match",
           "pass [N, C, H, W] and [N, H, W]");
  GB_CHECK(w >= 0 && w <= 1, InvalidArgument, "overlay: image weight must be in [0, 1], got " << w, "use 0.5");
  at::Tensor img = images.to(torch::kFloat).clamp(0, 1);
  if (img.size(1) == 1) img = img.expand({-1, 3, -1, -1});
  img = img.slice(1, 0, 3).permute({0, 2, 3, 1});  // [N, H, W, 3]
  at::Tensor out = (1 - w) * jet_colormap(maps) + w * img;
  out = out / out.reshape({out.size(0), -1}).amax(1).clamp_min(1e-12).view({-1, 1, 1, 1});
  return (out * 255).to(torch::kUInt8).contiguous();
}

void write_rgb_png(const std::filesystem::path& path, const at::Tensor& image) {
  at::Tensor im = image;
  if (im.dim() == 2) im = im.unsqueeze(-1);
  GB_CHECK(im.dim() == 3 && (im.size(2) == 1 || im.size(2) == 3), InvalidArgument,
           "write_rgb_png: expected [H, W, 3] or [H, W], got " << image.sizes(), "pass one image");
  if (im.scalar_type() != torch::kUInt8) im = (im.to(torch::kFloat).clamp(0, 1) * 255).round().to(torch::kUInt8);
  im = im.to(torch::kCPU).contiguous();
  write_png(path, im.data_ptr<std::uint8_t>(), static_cast<int>(im.size(1)), static_cast<int>(im.size(0)),
            static_cast<int>(im.size(2)));
}

at::Tensor display_images(const at::Tensor& x, const std::vector<double>& mean, const std::vector<double>& std) {
  at::Tensor img = x.detach().to(torch::kCPU, torch::kFloat);
  if (img.dim() == 3) img = img.unsqueeze(1);
  const std::int64_t c = img.size(1);
  if (!mean.empty() && !std.empty()) {
    auto per_channel = [&](const std::vector<double>& v) {
      std::vector<double> full(static_cast<std::size_t>(c), v.front());
      for (std::int64_t i = 0; i < c && static_cast<std::size_t>(i) < v.size(); ++i)
        full[static_cast<std::size_t>(i)] = v[static_cast<std::size_t>(i)];
      return torch::tensor(full, torch::kDouble).to(torch::kFloat).view({1, c, 1, 1});
    };
    return (img * per_channel(std) + per_channel(mean)).clamp(0, 1);
  }
  const at::Tensor flat = img.reshape({img.size(0), -1});
  const at::Tensor lo = flat.amin(1).view({-1, 1, 1, 1}), hi = flat.amax(1).view({-1, 1, 1, 1});
  return (img - lo) / (hi - lo).clamp_min(1e-12);
}

}  // namespace glassbox::explain
