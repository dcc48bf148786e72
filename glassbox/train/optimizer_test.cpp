#include "glassbox/train/optimizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "glassbox/testing/testing.h"

namespace glassbox::train {
namespace {

at::Tensor from_json(const nlohmann::json& values, const nlohmann::json& shape) {
  return torch::tensor(values.get<std::vector<float>>()).reshape(shape.get<std::vector<std::int64_t>>());
}

TEST(OptimizerReference, MatchesTorchOptimAfterSixSteps) {
  const auto ref = nlohmann::json::parse(testing::run_python("tests/reference/optimizers.py"));
  int checked = 0;
  for (const auto& c : ref["cases"]) {
    for (const std::string impl : {"fused", "foreach"}) {
      OptimizerOptions o;
      const auto& cfg = c["options"];
      o.name = enum_of<OptimizerKind>(cfg["name"].get<std::string>());
      o.lr = cfg["lr"];
      o.momentum = cfg.value("momentum", 0.0);
      o.dampening = cfg.value("dampening", 0.0);
      o.nesterov = cfg.value("nesterov", false);
      o.weight_decay = cfg.value("weight_decay", o.name == OptimizerKind::kAdamW ? 0.01 : 0.0);
      o.amsgrad = cfg.value("amsgrad", false);
      o.eps = cfg.value("eps", 1e-8);
      if (cfg.contains("betas")) o.betas = cfg["betas"].get<std::vector<double>>();
      o.implementation = enum_of<OptimizerImpl>(impl);
      ParamGroup g;
      g.lr = o.lr;
      g.weight_decay = o.weight_decay;
      g.momentum = o.name == OptimizerKind::kSgd ? o.momentum : o.betas[0];
      for (std::size_t i = 0; i < ref["params"].size(); ++i) {
        g.params.push_back(from_json(ref["params"][i], ref["shapes"][i]).set_requires_grad(true));
        g.names.push_back("p" + std::to_string(i));
      }
      Optimizer opt({g}, o);
      for (const auto& step_grads : ref["grads"]) {
        for (std::size_t i = 0; i < g.params.size(); ++i)
          g.params[i].mutable_grad() = from_json(step_grads[i], ref["shapes"][i]);
        opt.step();
      }
      for (std::size_t i = 0; i < g.params.size(); ++i) {
        at::Tensor want = from_json(c["final"][i], ref["shapes"][i]);
        const double err = (g.params[i].detach() - want).abs().max().item<double>();
        EXPECT_LT(err, 2e-6) << cfg.dump() << " impl " << impl << " param " << i;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 18);
}

TEST(Optimizer, StateRoundTripContinuesIdentically) {
  torch::manual_seed(0);
  for (const std::string name : {"sgd", "adamw"}) {
    OptimizerOptions o;
    o.name = enum_of<OptimizerKind>(name);
    o.momentum = 0.9;
    auto make = [&](at::Tensor init) {
      ParamGroup g;
      g.params = {init.clone().set_requires_grad(true)};
      g.names = {"w"};
      g.lr = 0.01;
      g.momentum = name == "sgd" ? 0.9 : 0.9;
      return g;
    };
    at::Tensor init = torch::randn({5});
    std::vector<at::Tensor> grads;
    for (int k = 0; k < 4; ++k) grads.push_back(torch::randn({5}));
    ParamGroup ga = make(init);
    Optimizer a({ga}, o);
    for (int k = 0; k < 4; ++k) {
      ga.params[0].mutable_grad() = grads[k].clone();
      a.step();
    }
    ParamGroup gb = make(init);
    Optimizer b({gb}, o);
    for (int k = 0; k < 2; ++k) {
      gb.params[0].mutable_grad() = grads[k].clone();
      b.step();
    }
    SafetensorsFile saved;
    saved.tensors = b.state_tensors();
    const auto js = b.state_json();
    ParamGroup gc = make(init);
    {
      torch::NoGradGuard ng;
      gc.params[0].copy_(gb.params[0]);
    }
    Optimizer c({gc}, o);
    c.load_state(saved, js);
    for (int k = 2; k < 4; ++k) {
      gc.params[0].mutable_grad() = grads[k].clone();
      c.step();
    }
    EXPECT_TRUE(torch::equal(ga.params[0], gc.params[0])) << name;
  }
}

}  // namespace
}  // namespace glassbox::train
