#include "glassbox/inspect/recorder.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "glassbox/inspect/layer_map.h"
#include "glassbox/inspect/stats.h"
#include "glassbox/nn/registry.h"

namespace glassbox::inspect {
namespace {

std::vector<std::string> layer_names(const ForwardRecorder& rec) {
  std::vector<std::string> out;
  for (const OpRecord* r : rec.layer_outputs()) out.push_back(r->layer);
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// A parameterless module of the user's own kind, in the middle of a Sequential.
struct ExpLayerImpl : torch::nn::Cloneable<ExpLayerImpl> {
  explicit ExpLayerImpl(double scale) : scale(scale) {}
  void reset() override {}
  at::Tensor forward(const at::Tensor& x) { return torch::exp(x * scale); }
  double scale;
};
TORCH_MODULE(ExpLayer);

TEST(LayerMap, UnitsAndOwners) {
  nn::ModelOptions mo;
  mo.name = "mlp";
  mo.mlp.hidden = {16, 8};
  mo.mlp.norm = nn::MlpNorm::kBatchNorm;
  mo.mlp.dropout = 0.1;
  auto model = nn::make_model(mo, nn::ModelShape{{1, 4, 4}, 3});
  LayerMap map(*model->module());
  std::vector<std::string> paths;
  for (const auto& u : map.units()) paths.push_back(u.path);
  EXPECT_TRUE(contains(paths, "body.fc0")) << paths.size();
  EXPECT_TRUE(contains(paths, "body.bn0"));
  EXPECT_TRUE(contains(paths, "body.act0"));
  for (const auto& p : map.parameters()) {
    ASSERT_GE(p.unit, 0);
    EXPECT_EQ(p.name.rfind(map.units()[static_cast<std::size_t>(p.unit)].path + ".", 0), 0u) << p.name;
    EXPECT_EQ(map.owner(p.tensor.unsafeGetTensorImpl()), p.unit);
  }
  const auto& act =
      *std::find_if(map.units().begin(), map.units().end(), [](const Unit& u) { return u.path == "body.act0"; });
  EXPECT_EQ(act.type, "ReLU");
  EXPECT_TRUE(act.known_kind);
  EXPECT_EQ(map.owner(torch::zeros({1}).unsafeGetTensorImpl()), -1);
}

TEST(ForwardRecorder, AttributesMlpOpsToModulesInForwardOrder) {
  nn::ModelOptions mo;
  mo.name = "mlp";
  mo.mlp.hidden = {16, 8};
  mo.mlp.norm = nn::MlpNorm::kBatchNorm;
  mo.mlp.dropout = 0.1;
  auto model = nn::make_model(mo, nn::ModelShape{{1, 4, 4}, 3});
  model->module()->train();
  LayerMap map(*model->module());
  at::Tensor x = torch::randn({5, 1, 4, 4});
  ForwardRecorder rec(map, {});
  at::Tensor y = model->forward(x);
  rec.stop();
  const auto names = layer_names(rec);
  const std::vector<std::string> want = {"body.fc0", "body.bn0",  "body.act0",  "body.drop0", "body.fc1",
                                         "body.bn1", "body.act1", "body.drop1", "body.head"};
  ASSERT_GE(names.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(names[i], want[i]) << i;
  // Nothing is recorded once stopped.
  const auto n = rec.records().size();
  model->forward(torch::randn({5, 1, 4, 4}));
  EXPECT_EQ(rec.records().size(), n);
}

TEST(ForwardRecorder, NamesFunctionalOpsAfterTheirModuleInResNet) {
  nn::ModelOptions mo;
  mo.name = "resnet18";
  mo.resnet18.width = 4;
  auto model = nn::make_model(mo, nn::ModelShape{{3, 16, 16}, 5});
  LayerMap map(*model->module());
  at::Tensor x = torch::randn({2, 3, 16, 16});
  ForwardRecorder rec(map, {});
  model->forward(x);
  rec.stop();
  const auto names = layer_names(rec);
  for (const char* n : {"conv1", "bn1", "layer1.0.conv1", "layer1.0.bn1", "layer1.0.bn1:relu", "layer2.0.downsample.0",
                        "layer4.1.bn2", "fc"})
    EXPECT_TRUE(contains(names, n)) << n;
}

TEST(ForwardRecorder, FindsTheOverflowingModuleInTheMiddle) {
  torch::nn::Sequential seq(torch::nn::Linear(6, 12), torch::nn::ReLU(), ExpLayer(400.0), torch::nn::Linear(12, 4));
  LayerMap map(*seq.ptr());
  RecorderOptions ro;
  ro.check_finite = true;
  ForwardRecorder rec(map, ro);
  at::Tensor x = torch::rand({7, 6});
  seq->forward(x);
  rec.stop();
  const OpRecord* origin = rec.first_nonfinite_origin();
  ASSERT_NE(origin, nullptr);
  EXPECT_EQ(origin->layer, "2");
  EXPECT_EQ(origin->op, "aten::exp");
  EXPECT_GT(origin->nonfinite, 0);
  EXPECT_TRUE(origin->bad_rows.defined());
  // The relu before it was finite; the linear after it saw non-finite input.
  for (const auto& r : rec.records()) {
    if (r.layer == "1") {
      EXPECT_TRUE(r.output_finite);
    }
    if (r.layer == "3") {
      EXPECT_FALSE(r.inputs_finite);
    }
  }
}

TEST(ActivationStats, MatchHandComputedValues) {
  at::Tensor x = torch::tensor({0.0, 2.0, -1.0, 0.0, 3.0, std::nan(""), 1.0, -2.0}).reshape({2, 4});
  auto s = activation_stats_to_host({activation_stats_row(x)}).at(0);
  // finite values: 0 2 -1 0 3 1 -2 (7 of them)
  const double mean = 3.0 / 7.0;
  double var = 0;
  for (double v : {0.0, 2.0, -1.0, 0.0, 3.0, 1.0, -2.0}) var += (v - mean) * (v - mean);
  var /= 7.0;
  EXPECT_NEAR(s.mean, mean, 1e-6);
  EXPECT_NEAR(s.std, std::sqrt(var), 1e-6);
  EXPECT_EQ(s.min, -2.0);
  EXPECT_EQ(s.max, 3.0);
  EXPECT_DOUBLE_EQ(s.zero_fraction, 2.0 / 8.0);
  EXPECT_EQ(s.nonfinite, 1.0);
  EXPECT_EQ(s.numel, 8.0);
  // Units are columns: {0, 3}, {2, nan}, {-1, 1} are positive somewhere; {0, -2} never is.
  EXPECT_DOUBLE_EQ(s.dead_fraction, 0.25);
  EXPECT_TRUE(std::isnan(activation_stats_to_host({activation_stats_row(torch::ones({3}))}).at(0).dead_fraction));
}

// Feature maps [N, C, H, W]: units are channels. Non-contiguous (channels-last strides), one
// dead channel, an Inf and a NaN, in float16 and float64; against direct torch reductions.
TEST(ActivationStats, AgreeWithTorchOnFeatureMapsOfEveryDtype) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  at::Tensor base = torch::randn({6, 5, 4, 3}, gen).to(torch::kDouble) * 3 + 1;
  base.select(1, 2).fill_(-0.5);  // channel 2 never positive: 1 of 5 units dead
  base[0][1][0][0] = std::numeric_limits<double>::infinity();
  base[4][3][2][1] = std::nan("");
  base[1][0][1][1] = 0.0;
  for (auto dtype : {torch::kDouble, torch::kFloat, torch::kHalf}) {
    SCOPED_TRACE(c10::toString(dtype));
    at::Tensor x = base.to(dtype).contiguous(at::MemoryFormat::ChannelsLast);
    ASSERT_FALSE(x.is_contiguous());
    const auto s = activation_stats_to_host({activation_stats_row(x)}).at(0);
    const at::Tensor v = x.to(torch::kDouble);
    const at::Tensor finite = v.masked_select(torch::isfinite(v));
    EXPECT_NEAR(s.mean, finite.mean().item<double>(), 1e-12);
    EXPECT_NEAR(s.std, finite.std(/*unbiased=*/false).item<double>(), 1e-12);
    EXPECT_EQ(s.min, finite.min().item<double>());
    EXPECT_EQ(s.max, finite.max().item<double>());
    EXPECT_DOUBLE_EQ(s.zero_fraction, (v == 0).sum().item<double>() / 360.0);
    EXPECT_DOUBLE_EQ(s.dead_fraction, 0.2);
    EXPECT_EQ(s.nonfinite, 2.0);
    EXPECT_EQ(s.numel, 360.0);
  }
}

TEST(Stats, QuantileMatchesNumpyLinear) {
  // numpy.percentile([1, 2, 3, 4, 10], 95) = 8.8
  EXPECT_NEAR(quantile({10, 1, 3, 2, 4}, 0.95), 8.8, 1e-12);
  EXPECT_EQ(quantile({5}, 0.95), 5);
}

}  // namespace
}  // namespace glassbox::inspect
