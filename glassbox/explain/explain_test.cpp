// Class activation maps: behaviour on models built to look somewhere, and the reference test
// against pytorch-grad-cam (tests/reference/gradcam_ref.py) on the zoo's cnn and resnet18.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/core/safetensors.h"
#include "glassbox/data/idx.h"
#include "glassbox/data/npy.h"
#include "glassbox/explain/cam.h"
#include "glassbox/explain/render.h"
#include "glassbox/nn/registry.h"
#include "glassbox/testing/testing.h"

namespace glassbox::explain {
namespace {

namespace fs = std::filesystem;

// Random weights and BatchNorm statistics away from the identity, so every layer matters.
// (copy_ of fresh tensors rather than normal_/uniform_: GCC 12's -O1 sanitizer build warns about
// the optional generator those take.)
void randomise(nn::Model& m) {
  torch::NoGradGuard ng;
  auto normal = [](at::Tensor& t, double sd) { t.copy_(torch::randn(t.sizes()) * sd); };
  auto around_one = [](at::Tensor& t) { t.copy_(torch::rand(t.sizes()) + 0.5); };
  for (auto& b : m.module()->named_buffers()) {
    if (b.key().find("running_mean") != std::string::npos) normal(b.value(), 0.1);
    if (b.key().find("running_var") != std::string::npos) around_one(b.value());
  }
  for (auto& p : m.module()->named_parameters()) {
    if (p.key().find("bn") != std::string::npos && p.key().find("weight") != std::string::npos) around_one(p.value());
    if (p.key().find("bn") != std::string::npos && p.key().find("bias") != std::string::npos) normal(p.value(), 0.1);
  }
}

void save_weights(nn::Model& m, const fs::path& path) {
  TensorMap t;
  for (const auto& p : m.module()->named_parameters()) t.emplace_back(p.key(), p.value().detach().contiguous());
  for (const auto& b : m.module()->named_buffers()) t.emplace_back(b.key(), b.value().contiguous());
  save_safetensors(path, t, {{"format", "pt"}});
}

struct RefCase {
  std::string arch, layer, method;
};

// Runs the reference for one case and returns pytorch-grad-cam's maps.
at::Tensor reference_maps(const fs::path& dir, const nlohmann::json& model_json, const RefCase& c, const at::Tensor& x,
                          const std::vector<std::int64_t>& targets) {
  std::ofstream(dir / "model.json") << model_json.dump();
  data::write_npy(dir / "x.npy", x);
  data::write_npy(dir / "t.npy", torch::tensor(targets, torch::kLong));
  testing::run_python(
      "tests/reference/gradcam_ref.py",
      {"--arch", c.arch, "--model-json", (dir / "model.json").string(), "--weights", (dir / "w.safetensors").string(),
       "--inputs", (dir / "x.npy").string(), "--targets", (dir / "t.npy").string(), "--method", c.method, "--layer",
       c.layer, "--out", (dir / "cams.npy").string()});
  return data::read_npy(dir / "cams.npy");
}

void expect_matches_reference(nn::Model& model, const nlohmann::json& model_json, const std::string& arch,
                              const at::Tensor& x, const std::vector<std::int64_t>& targets,
                              const std::vector<std::string>& layers,
                              const std::vector<std::string>& methods = {"gradcam", "gradcam++"}) {
  const fs::path dir = testing::temp_dir("gradcam_" + arch);
  save_weights(model, dir / "w.safetensors");
  for (const auto& layer : layers) {
    for (const std::string& method : methods) {
      SCOPED_TRACE(arch + " " + layer + " " + method);
      CamOptions o;
      o.method = parse_cam_method(method);
      o.layer = layer;
      const CamResult r = class_activation_maps(model, x, targets, o);
      const at::Tensor ref = reference_maps(dir, model_json, {arch, layer, method}, x, targets);
      ASSERT_EQ(ref.sizes(), r.maps.sizes());
      const double diff = (ref - r.maps).abs().max().item<double>();
      EXPECT_LT(diff, 1e-4) << "max |glassbox - pytorch-grad-cam| = " << diff;
      std::printf("%s %s %s: max |glassbox - pytorch-grad-cam| = %.3g\n", arch.c_str(), layer.c_str(), method.c_str(),
                  diff);
      // The maps are not trivial: they span [0, 1] and differ between images.
      EXPECT_GT(r.maps.max().item<double>(), 0.9);
      EXPECT_GT((r.maps[0] - r.maps[1]).abs().max().item<double>(), 1e-2);
    }
  }
}

TEST(GradCamReference, CnnMatchesPytorchGradCamOnRandomAndRealImages) {
  torch::manual_seed(11);
  nn::ModelOptions mo;
  mo.name = "cnn";
  auto model = nn::make_model(mo, nn::ModelShape{{1, 28, 28}, 10});
  randomise(*model);
  at::Tensor x = torch::randn({3, 1, 28, 28});
  const fs::path idx = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte";
  const fs::path file = fs::exists(idx) ? idx : fs::path(idx.string() + ".gz");
  if (fs::exists(file)) {
    const at::Tensor real =
        data::read_idx(file).slice(0, 0, 3).to(torch::kFloat).div(255.0).sub(0.2860).div(0.3530).unsqueeze(1);
    x = torch::cat({x, real});
  }
  const nlohmann::json mj = {
      {"input_shape", {1, 28, 28}},
      {"num_classes", 10},
      {"cnn", {{"channels", mo.cnn.channels}, {"hidden", mo.cnn.hidden}, {"dropout", mo.cnn.dropout}}}};
  EXPECT_EQ(default_cam_layer(*model), "features.relu1_1");
  std::vector<std::int64_t> targets;
  for (std::int64_t i = 0; i < x.size(0); ++i) targets.push_back((3 * i + 1) % 10);
  expect_matches_reference(*model, mj, "cnn", x, targets, {"features.relu1_1", "features.relu0_1"});
  // Score-CAM: no gradients, one forward per channel and image (64 channels here).
  expect_matches_reference(*model, mj, "cnn", x, targets, {"features.relu1_1"}, {"scorecam"});
}

TEST(GradCamReference, ResNet18MatchesPytorchGradCam) {
  torch::manual_seed(12);
  nn::ModelOptions mo;
  mo.name = "resnet18";
  auto model = nn::make_model(mo, nn::ModelShape{{3, 32, 32}, 10});
  randomise(*model);
  const at::Tensor x = torch::randn({3, 3, 32, 32});
  const nlohmann::json mj = {
      {"input_shape", {3, 32, 32}}, {"num_classes", 10}, {"resnet18", {{"stem", "small"}, {"width", 64}}}};
  EXPECT_EQ(default_cam_layer(*model), "layer4.1");
  expect_matches_reference(*model, mj, "resnet18", x, {2, 7, 5}, {"layer4", "layer3.1"});
}

// An image whose content is a bright top-left corner, and a model whose class-1 logit reads that
// corner: every method's map lives there (CAMs through the activations, saliency through the
// gradient of the logit).
struct QuadrantImpl : torch::nn::Module {
  QuadrantImpl() { conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 3).padding(1))); }
  torch::nn::Conv2d conv{nullptr};
};
TORCH_MODULE(Quadrant);

class QuadrantModel final : public nn::Model {
 public:
  QuadrantModel() { torch::manual_seed(5); }
  at::Tensor forward(const at::Tensor& x) override {
    at::Tensor y = x;
    for (auto& s : stages()) y = s.run(y);
    return y;
  }
  std::shared_ptr<torch::nn::Module> module() override { return q_.ptr(); }
  std::string name() const override { return "quadrant"; }
  std::vector<nn::Stage> stages() override {
    Quadrant q = q_;
    return {{"conv", [q](const at::Tensor& x) mutable { return torch::relu(q->conv->forward(x)); }, true},
            {"head",
             [](const at::Tensor& a) {
               // Logit 1 = mean activation of the top-left 8x8 corner; logit 0 = the rest.
               const at::Tensor corner = a.slice(2, 0, 8).slice(3, 0, 8).mean({1, 2, 3});
               return torch::stack({a.mean({1, 2, 3}) - corner, corner}, 1);
             },
             false}};
  }

 private:
  Quadrant q_;
};

TEST(Cam, EveryMethodFindsWhereTheModelLooks) {
  QuadrantModel m;
  torch::NoGradGuard ng;
  m.module()->named_parameters()["conv.weight"].abs_();  // positive filters: activations follow the input
  m.module()->named_parameters()["conv.bias"].zero_();
  at::Tensor x = torch::rand({2, 1, 32, 32}) * 0.01;
  x.slice(2, 0, 8).slice(3, 0, 8) += 1.0;
  for (auto method : {CamMethod::GradCam, CamMethod::GradCamPlusPlus, CamMethod::ScoreCam, CamMethod::Saliency}) {
    SCOPED_TRACE(cam_method_name(method));
    CamOptions o;
    o.method = method;
    const CamResult r = class_activation_maps(m, x, {1, 1}, o);
    ASSERT_EQ(r.maps.sizes(), (std::vector<std::int64_t>{2, 32, 32}));
    const double inside = r.maps.slice(1, 0, 8).slice(2, 0, 8).mean().item<double>();
    const double outside = r.maps.slice(1, 16, 32).slice(2, 16, 32).mean().item<double>();
    EXPECT_GT(inside, 0.2);
    EXPECT_LT(outside, 0.05);
    EXPECT_LE(r.maps.max().item<double>(), 1.0);
    EXPECT_GE(r.maps.min().item<double>(), 0.0);
    EXPECT_EQ(r.targets, (std::vector<std::int64_t>{1, 1}));
  }
}

TEST(Cam, AWrongLayerListsTheValidOnesAndAnMlpAsksForSaliency) {
  nn::ModelOptions mo;
  mo.name = "resnet18";
  mo.resnet18.width = 8;
  auto resnet = nn::make_model(mo, nn::ModelShape{{3, 16, 16}, 4});
  CamOptions o;
  o.layer = "layer5";
  try {
    class_activation_maps(*resnet, torch::randn({1, 3, 16, 16}), {}, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'layer5' is not a convolutional layer of resnet18"), std::string::npos)
        << e.what();
    EXPECT_NE(e.hint().find("layer4, layer4.0, layer4.1"), std::string::npos) << e.hint();
  }
  nn::ModelOptions mlp;
  auto m = nn::make_model(mlp, nn::ModelShape{{1, 28, 28}, 10});
  try {
    class_activation_maps(*m, torch::randn({2, 1, 28, 28}), {}, CamOptions{});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.hint().find("--method saliency"), std::string::npos) << e.hint();
  }
  CamOptions s;
  s.method = CamMethod::Saliency;
  const CamResult r = class_activation_maps(*m, torch::randn({2, 1, 28, 28}), {}, s);
  EXPECT_EQ(r.maps.sizes(), (std::vector<std::int64_t>{2, 28, 28}));
  EXPECT_TRUE(m->module()->is_training());  // the mode it had
}

TEST(Render, OverlayFollowsShowCamOnImage) {
  // cam 0 -> jet blue (0, 0, 0.5), cam 1 -> dark red (0.5, 0, 0); image white.
  const at::Tensor maps = torch::tensor({0.0f, 1.0f}).view({1, 1, 2});
  const at::Tensor img = torch::ones({1, 1, 1, 2});
  const at::Tensor heat = jet_colormap(maps);
  EXPECT_NEAR(heat[0][0][0][2].item<double>(), 0.5, 1e-6);
  EXPECT_NEAR(heat[0][0][1][0].item<double>(), 0.5, 1e-6);
  const at::Tensor out = overlay_heatmap(img, maps, 0.5);
  // (0.5 * (0, 0, 0.5) + 0.5) / max = (0.5, 0.5, 0.75) / 0.75
  EXPECT_EQ(out[0][0][0][2].item<int>(), 255);
  EXPECT_EQ(out[0][0][0][0].item<int>(), static_cast<int>(255 * (0.5 / 0.75)));
}

}  // namespace
}  // namespace glassbox::explain
