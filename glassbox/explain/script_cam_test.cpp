// Class activation maps of TorchScript models saved by Python (tests/reference/make_script_model.py:
// a scripted torchvision resnet18 and a scripted glassbox-like cnn), split into stages by
// nn::ScriptModel, against pytorch-grad-cam on the eager PyTorch model with the same weights.
#include <cstdio>
#include <filesystem>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "glassbox/core/safetensors.h"
#include "glassbox/data/npy.h"
#include "glassbox/explain/cam.h"
#include "glassbox/nn/script_model.h"
#include "glassbox/testing/testing.h"

namespace glassbox::explain {
namespace {

namespace fs = std::filesystem;

TEST(ScriptCamReference, ScriptedModelsMatchPytorchGradCam) {
  struct Case {
    std::string arch, default_layer;
    std::vector<std::string> layers;
  };
  const Case cases[] = {{"resnet18", "layer4.1", {"layer4", "layer2"}},
                        {"cnn", "features.relu1_0", {"features.relu1_0", "features.pool0"}}};
  for (const Case& c : cases) {
    const fs::path dir = testing::temp_dir("script_cam_" + c.arch);
    testing::run_python("tests/reference/make_script_model.py",
                        {"--out", dir.string(), "--arch", c.arch, "--first", "4", "--fit-head", "0"});
    nn::ScriptModelOptions so;
    so.sample_shape = {1, 28, 28};
    so.num_classes = 10;
    auto model = nn::load_script_model(dir / "model.pt", so);
    EXPECT_EQ(default_cam_layer(*model), c.default_layer) << model->stages_note();
    // Four real test images (normalised by Python) and two random ones.
    const SafetensorsFile first = load_safetensors(dir / "first.safetensors");
    torch::manual_seed(5);
    const at::Tensor x = torch::cat({*first.find("inputs"), torch::randn({2, 1, 28, 28})});
    std::vector<std::int64_t> targets;
    for (std::int64_t i = 0; i < x.size(0); ++i)
      targets.push_back(i == 0 ? -1 : (3 * i + 1) % 10);  // -1: the predicted class
    for (const auto& layer : c.layers) {
      for (const std::string method : {"gradcam", "gradcam++"}) {
        SCOPED_TRACE(c.arch + " " + layer + " " + method);
        CamOptions o;
        o.method = parse_cam_method(method);
        o.layer = layer;
        const CamResult r = class_activation_maps(*model, x, targets, o);
        data::write_npy(dir / "x.npy", x);
        data::write_npy(dir / "t.npy", torch::tensor(r.targets, torch::kLong));
        testing::run_python("tests/reference/gradcam_ref.py",
                            {"--arch", c.arch, "--model-json", (dir / "model_spec.json").string(), "--weights",
                             (dir / "model.safetensors").string(), "--inputs", (dir / "x.npy").string(), "--targets",
                             (dir / "t.npy").string(), "--method", method, "--layer", layer, "--out",
                             (dir / "cams.npy").string(), "--logits-out", (dir / "logits.npy").string()});
        const at::Tensor ref = data::read_npy(dir / "cams.npy");
        ASSERT_EQ(ref.sizes(), r.maps.sizes());
        const double diff = (ref - r.maps).abs().max().item<double>();
        const double logit_diff = (data::read_npy(dir / "logits.npy") - r.logits).abs().max().item<double>();
        std::printf("scripted %s %s %s: max |glassbox - pytorch-grad-cam| = %.3g (logits %.3g)\n", c.arch.c_str(),
                    layer.c_str(), method.c_str(), diff, logit_diff);
        EXPECT_LT(diff, 1e-4);
        EXPECT_LT(logit_diff, 1e-4);
        EXPECT_EQ(r.targets[0], r.logits[0].argmax().item<std::int64_t>());
        EXPECT_GT(r.maps.max().item<double>(), 0.9);
        EXPECT_GT((r.maps[1] - r.maps[2]).abs().max().item<double>(), 1e-2);
      }
    }
  }
}

}  // namespace
}  // namespace glassbox::explain
