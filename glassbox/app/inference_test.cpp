// A TorchScript model with its contract, served glassbox's data: the contract's preprocessing
// is what the model sees, channel by channel (BGR models included).
#include "glassbox/app/inference.h"

#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "glassbox/base/files.h"
#include "glassbox/data/npy.h"
#include "glassbox/testing/testing.h"

namespace glassbox::app {
namespace {

namespace fs = std::filesystem;

TEST(ScriptInference, ABgrModelSeesItsChannelsNormalisedWithItsOwnStatistics) {
  const fs::path dir = testing::temp_dir("inference_bgr");
  torch::manual_seed(3);
  const at::Tensor train_x = torch::randint(0, 256, {20, 3, 4, 4}).to(torch::kUInt8);
  const at::Tensor test_x = torch::randint(0, 256, {6, 3, 4, 4}).to(torch::kUInt8);
  data::write_npy(dir / "train_x.npy", train_x);
  data::write_npy(dir / "train_y.npy", torch::arange(20, torch::kLong) % 10);
  data::write_npy(dir / "test_x.npy", test_x);
  data::write_npy(dir / "test_y.npy", torch::arange(6, torch::kLong));
  // The model returns what it was fed: per-channel means of its input, then zeros.
  torch::jit::Module jm("__torch__.Probe");
  jm.register_attribute("training", c10::BoolType::get(), false);
  jm.define(
      "def forward(self, x: Tensor) -> Tensor:\n    return torch.cat([x.mean([2, 3]), torch.zeros([x.size(0), 7])], "
      "1)\n");
  jm.save((dir / "probe.pt").string());
  // Statistics in the model's (BGR) order: blue first.
  const std::vector<double> mean{0.1, 0.2, 0.3}, std{0.5, 0.25, 0.125};
  write_file_atomic(dir / "probe.json", R"({"name": "probe", "architecture": "torchscript",
    "input": {"shape": [3, 4, 4], "layout": "NCHW"}, "output": {"num_classes": 10},
    "preprocessing": {"scale": 0.00392156862745098, "mean": [0.1, 0.2, 0.3], "std": [0.5, 0.25, 0.125], "channel_order": "BGR"}})");
  ScriptSource s;
  s.model = dir / "probe.pt";
  s.data.source.format = data::DataFormat::kNpy;
  s.data.source.root = dir.string();
  s.data.source.val_size = 0;
  LoadedModel m = load_script_for_inference(s);
  const data::Batch b = m.data->test_dataset()->get_batch(torch::arange(6, torch::kLong));
  torch::NoGradGuard ng;
  const at::Tensor seen = m.model->forward(b.inputs).slice(1, 0, 3);
  for (std::int64_t c = 0; c < 3; ++c) {
    // Model channel c is the data's channel 2 - c (RGB -> BGR), normalised with mean[c], std[c].
    const at::Tensor want = ((test_x.select(1, 2 - c).to(torch::kDouble) / 255 - mean[c]) / std[c]).mean({1, 2});
    EXPECT_LE((seen.select(1, c).to(torch::kDouble) - want).abs().max().item<double>(), 1e-5) << "channel " << c;
  }
}

}  // namespace
}  // namespace glassbox::app
