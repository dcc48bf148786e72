#include "glassbox/explain/cam.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::explain {

namespace {

namespace F = torch::nn::functional;

// pytorch-grad-cam's scale_cam_image without resizing: per image, subtract the minimum, then
// divide by (1e-7 + the new maximum). cam: [N, h, w].
at::Tensor min_max(const at::Tensor& cam) {
  const at::Tensor flat = cam.reshape({cam.size(0), -1});
  const at::Tensor shifted = flat - std::get<0>(flat.min(1, /*keepdim=*/true));
  return (shifted / (std::get<0>(shifted.max(1, true)) + 1e-7)).reshape(cam.sizes());
}

// The map at the layer's resolution -> normalised, resized to the input (half-pixel bilinear,
// cv2.resize's INTER_LINEAR), normalised again (pytorch-grad-cam scales the aggregated map once
// more after resizing).
at::Tensor finish(const at::Tensor& cam, std::int64_t h, std::int64_t w, at::Tensor* raw) {
  const at::Tensor normed = min_max(torch::relu(cam));
  if (raw != nullptr) *raw = normed;
  at::Tensor up = normed;
  if (cam.size(1) != h || cam.size(2) != w)
    up = F::interpolate(normed.unsqueeze(1), F::InterpolateFuncOptions()
                                                 .size(std::vector<std::int64_t>{h, w})
                                                 .mode(torch::kBilinear)
                                                 .align_corners(false))
             .squeeze(1);
  return min_max(torch::relu(up));
}

std::vector<std::int64_t> resolve_targets(const at::Tensor& logits, const std::vector<std::int64_t>& targets) {
  const std::int64_t n = logits.size(0), k = logits.size(1);
  GB_CHECK(targets.empty() || static_cast<std::int64_t>(targets.size()) == n, InvalidArgument,
           "explain: " << targets.size() << " target classes for " << n << " images",
           "give one class per image, or none for the predicted ones");
  const at::Tensor pred = logits.argmax(1).to(torch::kCPU);
  std::vector<std::int64_t> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t t = targets.empty() ? -1 : targets[static_cast<std::size_t>(i)];
    GB_CHECK(t < k, InvalidArgument, "explain: class " << t << " is outside 0.." << k - 1,
             "choose a class the model outputs");
    out[static_cast<std::size_t>(i)] = t >= 0 ? t : pred[i].item<std::int64_t>();
  }
  return out;
}

at::Tensor target_scores(const at::Tensor& logits, const std::vector<std::int64_t>& t) {
  return logits.gather(1, torch::tensor(t, torch::kLong).to(logits.device()).unsqueeze(1)).squeeze(1);
}

std::size_t stage_index(const std::vector<nn::Stage>& stages, const std::string& layer, nn::Model& model) {
  for (std::size_t i = 0; i < stages.size(); ++i)
    if (stages[i].name == layer && stages[i].spatial) return i;
  // A container: its last stage.
  std::size_t found = stages.size();
  for (std::size_t i = 0; i < stages.size(); ++i)
    if (stages[i].name.rfind(layer + ".", 0) == 0 && stages[i].spatial) found = i;
  if (found < stages.size()) return found;
  const auto valid = cam_layers(model);
  GB_CHECK(false, InvalidArgument, "explain: '" << layer << "' is not a convolutional layer of " << model.name(),
           fmt::format("use --layer with one of: {}", fmt::join(valid, ", ")));
  return 0;
}

CamResult saliency(nn::Model& model, const at::Tensor& x, const std::vector<std::int64_t>& targets) {
  GB_CHECK(x.dim() == 4 || x.dim() == 3, InvalidArgument,
           "explain: saliency maps need image inputs [N, C, H, W], got " << x.sizes(), "explain an image model");
  at::Tensor in = x.detach().clone().requires_grad_(true);
  CamResult r;
  r.logits = model.forward(in);
  r.targets = resolve_targets(r.logits, targets);
  const at::Tensor g = torch::autograd::grad({target_scores(r.logits, r.targets).sum()}, {in})[0];
  const at::Tensor sal = x.dim() == 4 ? g.abs().amax(1) : g.abs();
  r.maps = min_max(sal).to(torch::kFloat);
  r.raw = r.maps;
  r.layer = "input";
  r.method = CamMethod::Saliency;
  r.logits = r.logits.detach();
  return r;
}

}  // namespace

CamMethod parse_cam_method(const std::string& name) {
  if (name == "gradcam") return CamMethod::GradCam;
  if (name == "gradcam++") return CamMethod::GradCamPlusPlus;
  if (name == "scorecam") return CamMethod::ScoreCam;
  if (name == "saliency") return CamMethod::Saliency;
  GB_CHECK(false, InvalidArgument, "unknown explanation method '" << name << "'",
           "use gradcam, gradcam++, scorecam or saliency");
  return CamMethod::GradCam;
}

std::string cam_method_name(CamMethod m) {
  switch (m) {
    case CamMethod::GradCam: return "gradcam";
    case CamMethod::GradCamPlusPlus: return "gradcam++";
    case CamMethod::ScoreCam: return "scorecam";
    case CamMethod::Saliency: return "saliency";
  }
  return "gradcam";
}

std::vector<std::string> cam_layers(nn::Model& model) {
  std::vector<std::string> out;
  for (const auto& s : model.stages()) {
    if (!s.spatial) continue;
    // Containers first ("layer4" before "layer4.0"), each once.
    for (std::size_t dot = s.name.find('.'); dot != std::string::npos; dot = s.name.find('.', dot + 1)) {
      const std::string parent = s.name.substr(0, dot);
      if (std::find(out.begin(), out.end(), parent) == out.end()) out.push_back(parent);
    }
    out.push_back(s.name);
  }
  return out;
}

std::string default_cam_layer(nn::Model& model) {
  // The last feature map that is not just a pooled copy of the one before (the cnn's last
  // conv-norm-ReLU block rather than its max-pool; resnet18's layer4.1, not a scripted
  // torchvision resnet's avgpool).
  std::string last, last_any;
  for (const auto& s : model.stages()) {
    if (!s.spatial) continue;
    last_any = s.name;
    const std::string leaf = s.name.substr(s.name.rfind('.') + 1);
    if (leaf.find("pool") == std::string::npos)
      last = s.name;  // pool0, maxpool, avgpool (a TorchScript model's 1x1 map)
  }
  return last.empty() ? last_any : last;
}

CamResult class_activation_maps(nn::Model& model, const at::Tensor& x, const std::vector<std::int64_t>& targets,
                                const CamOptions& o) {
  GB_CHECK(x.dim() >= 2 && x.size(0) > 0, InvalidArgument, "explain: no images given (input shape " << x.sizes() << ")",
           "pass a batch [N, C, H, W]");
  nn::EvalModeScope eval(*model.module());
  torch::AutoGradMode grad_on(true);
  if (o.method == CamMethod::Saliency) return saliency(model, x, targets);
  const std::vector<nn::Stage> stages = model.stages();
  GB_CHECK(!default_cam_layer(model).empty(), InvalidArgument,
           "explain: " << model.name() << " has no convolutional layer for " << cam_method_name(o.method),
           "use --method saliency (input gradients) for this model");
  GB_CHECK(x.dim() == 4, InvalidArgument,
           "explain: " << cam_method_name(o.method) << " needs images [N, C, H, W], got " << x.sizes(),
           "explain an image model");
  const std::string layer = o.layer.empty() ? default_cam_layer(model) : o.layer;
  const std::size_t split = stage_index(stages, layer, model);

  at::Tensor a;
  {
    torch::NoGradGuard no_grad;
    a = x;
    for (std::size_t i = 0; i <= split; ++i) a = stages[i].run(a);
  }
  auto rest = [&](const at::Tensor& in) {
    at::Tensor y = in.clone();  // the stages after may work in place; the activations stay intact
    for (std::size_t i = split + 1; i < stages.size(); ++i) y = stages[i].run(y);
    return y;
  };
  CamResult r;
  r.layer = stages[split].name;
  r.method = o.method;
  const std::int64_t h = x.size(2), w = x.size(3);
  at::Tensor cam;
  if (o.method == CamMethod::ScoreCam) {
    torch::NoGradGuard no_grad;
    r.logits = rest(a);
    r.targets = resolve_targets(r.logits, targets);
    at::Tensor up = F::interpolate(
        a,
        F::InterpolateFuncOptions().size(std::vector<std::int64_t>{h, w}).mode(torch::kBilinear).align_corners(true));
    const at::Tensor flat = up.reshape({up.size(0), up.size(1), -1});
    const at::Tensor mx = std::get<0>(flat.max(-1)).unsqueeze(-1).unsqueeze(-1),
                     mn = std::get<0>(flat.min(-1)).unsqueeze(-1).unsqueeze(-1);
    up = (up - mn) / (mx - mn + 1e-8);
    std::vector<at::Tensor> weights;
    for (std::int64_t n = 0; n < x.size(0); ++n) {
      const at::Tensor masked = x[n].unsqueeze(0) * up[n].unsqueeze(1);  // [channels, C, H, W]
      std::vector<at::Tensor> scores;
      for (std::int64_t s = 0; s < masked.size(0); s += o.scorecam_batch) {
        const at::Tensor out = model.forward(masked.slice(0, s, std::min(masked.size(0), s + o.scorecam_batch)));
        scores.push_back(out.select(1, r.targets[static_cast<std::size_t>(n)]));
      }
      weights.push_back(torch::softmax(torch::cat(scores), 0));
    }
    cam = (torch::stack(weights).unsqueeze(-1).unsqueeze(-1) * a).sum(1);
  } else {
    const at::Tensor leaf = a.detach().requires_grad_(true);
    r.logits = rest(leaf);
    r.targets = resolve_targets(r.logits, targets);
    const at::Tensor g = torch::autograd::grad({target_scores(r.logits, r.targets).sum()}, {leaf})[0];
    at::Tensor wts;
    if (o.method == CamMethod::GradCam) {
      wts = g.mean({2, 3});
    } else {
      const at::Tensor g2 = g.square(), g3 = g2 * g;
      const at::Tensor sum_a = a.sum({2, 3}, /*keepdim=*/true);
      at::Tensor alpha = g2 / (2 * g2 + sum_a * g3 + 1e-6);
      alpha = torch::where(g != 0, alpha, torch::zeros_like(alpha));
      wts = (torch::relu(g) * alpha).sum({2, 3});
    }
    cam = (wts.unsqueeze(-1).unsqueeze(-1) * a).sum(1);
  }
  r.logits = r.logits.detach();
  at::Tensor raw;
  r.maps = finish(cam.detach().to(torch::kFloat), h, w, &raw);
  r.raw = raw;
  return r;
}

}  // namespace glassbox::explain
