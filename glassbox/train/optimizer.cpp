#include "glassbox/train/optimizer.h"

#include <cmath>

#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/nn/pretrained.h"

namespace glassbox::train {

void OptimizerOptions::visit(FieldVisitor& v) {
  v.choice("name", name, "optimiser");
  v.field("lr", lr, "learning rate (schedulers scale from this)");
  v.field("weight_decay", weight_decay, "sgd/adam: L2 penalty added to the gradient; adamw: decoupled decay");
  v.field("momentum", momentum, "sgd: momentum factor");
  v.field("dampening", dampening, "sgd: dampening for momentum");
  v.field("nesterov", nesterov, "sgd: Nesterov momentum");
  v.field("betas", betas, "adam/adamw: [beta1, beta2]");
  v.field("eps", eps, "adam/adamw: term added to the denominator");
  v.field("amsgrad", amsgrad, "adam/adamw: AMSGrad variant");
  v.choice("implementation", implementation, "kernel family: fused (adam/adamw), foreach, or auto");
  v.field("no_decay_for_bias_and_norm", no_decay_for_bias_and_norm, "exclude biases and 1-d weights from weight decay");
  v.field("backbone_lr_scale", backbone_lr_scale,
          "learning rate of the backbone (all but the head, the last linear layer) relative to lr, e.g. 0.1 when "
          "fine-tuning; schedulers scale each group from its own");
}

void OptimizerOptions::validate() const {
  GB_CHECK(backbone_lr_scale >= 0 && std::isfinite(backbone_lr_scale), InvalidArgument,
           "optim.backbone_lr_scale must be >= 0, got " << backbone_lr_scale, "use e.g. 0.1, or 1 for one rate");
  GB_CHECK(lr >= 0 && std::isfinite(lr), InvalidArgument, "optim.lr must be a finite number >= 0, got " << lr,
           "use e.g. 1e-3");
  GB_CHECK(weight_decay >= 0, InvalidArgument, "optim.weight_decay must be >= 0, got " << weight_decay,
           "use e.g. 1e-4");
  GB_CHECK(momentum >= 0, InvalidArgument, "optim.momentum must be >= 0, got " << momentum, "use e.g. 0.9");
  GB_CHECK(!nesterov || (momentum > 0 && dampening == 0), InvalidArgument,
           "optim.nesterov needs momentum > 0 and dampening = 0 (got momentum " << momentum << ", dampening "
                                                                                << dampening << ")",
           "set optim.momentum = 0.9");
  GB_CHECK(betas.size() == 2 && betas[0] >= 0 && betas[0] < 1 && betas[1] >= 0 && betas[1] < 1, InvalidArgument,
           "optim.betas must be two numbers in [0, 1)", "use [0.9, 0.999]");
  GB_CHECK(eps >= 0, InvalidArgument, "optim.eps must be >= 0, got " << eps, "use 1e-8");
}

std::vector<ParamGroup> make_param_groups(const torch::nn::Module& module, const OptimizerOptions& options) {
  const bool split = options.backbone_lr_scale != 1.0;
  const std::string head = split ? nn::head_module(module) : "";
  GB_CHECK(!split || !head.empty(), InvalidArgument,
           "optim.backbone_lr_scale needs a head (a last linear layer), and this model has none",
           "leave optim.backbone_lr_scale at 1");
  // [backbone decay, backbone no-decay, head decay, head no-decay]
  ParamGroup g[4];
  for (int i = 0; i < 4; ++i) {
    g[i].lr = i < 2 && split ? options.lr * options.backbone_lr_scale : options.lr;
    g[i].weight_decay = i % 2 == 0 ? options.weight_decay : 0.0;
    g[i].momentum = options.name == OptimizerKind::kSgd ? options.momentum : options.betas.at(0);
  }
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    if (!p.requires_grad()) continue;
    const bool exempt = options.no_decay_for_bias_and_norm && p.dim() <= 1;
    const bool in_head = split && item.key().compare(0, head.size() + 1, head + ".") == 0;
    ParamGroup& to = g[(split && !in_head ? 0 : 2) + (exempt ? 1 : 0)];
    to.params.push_back(p);
    to.names.push_back(item.key());
  }
  std::vector<ParamGroup> groups;
  for (int i = 0; i < 4; ++i) {
    const bool first_of_head = i == 2;  // the (possibly empty) main group always exists
    if (!g[i].params.empty() || first_of_head) groups.push_back(std::move(g[i]));
  }
  return groups;
}

Optimizer::Optimizer(std::vector<ParamGroup> groups, OptimizerOptions options)
    : options_(std::move(options)), groups_(std::move(groups)) {
  options_.validate();
  for (auto& g : groups_) slots_.emplace_back(g.params.size());
  if (options_.name == OptimizerKind::kSgd) {
    impl_ = "foreach";
  } else {
    impl_ = options_.implementation == OptimizerImpl::kForeach ? "foreach" : "fused";
  }
}

void Optimizer::add_param_group(ParamGroup group) {
  GB_CHECK(group.params.size() == group.names.size(), InvalidArgument,
           "a parameter group needs one name per parameter, got " << group.params.size() << " parameters and "
                                                                  << group.names.size() << " names",
           "name every parameter");
  for (const auto& g : groups_)
    for (const auto& p : g.params)
      for (const auto& q : group.params)
        GB_CHECK(!p.is_same(q), InvalidArgument, "a parameter of the new group is already optimised",
                 "add each parameter to one group only");
  slots_.emplace_back(group.params.size());
  groups_.push_back(std::move(group));
}

std::vector<double> Optimizer::lrs() const {
  std::vector<double> out;
  for (const auto& g : groups_) out.push_back(g.lr);
  return out;
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& g : groups_) {
    for (auto& p : g.params) {
      at::Tensor& grad = p.mutable_grad();
      if (!grad.defined()) continue;
      if (set_to_none) {
        grad.reset();
      } else {
        // PyTorch's rule: a gradient with a history is detached; a view (a data-parallel bucket's
        // slice) cannot be, and only stops requiring grad.
        if (grad.grad_fn())
          grad.detach_();
        else
          grad.requires_grad_(false);
        grad.zero_();
      }
    }
  }
}

void Optimizer::step() {
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < groups_.size(); ++i) {
    if (options_.name == OptimizerKind::kSgd)
      step_sgd(groups_[i], slots_[i]);
    else
      step_adam(groups_[i], slots_[i], options_.name == OptimizerKind::kAdamW);
  }
}

void Optimizer::step_sgd(ParamGroup& g, std::vector<Slot>& slots) {
  std::vector<at::Tensor> params, grads, bufs;
  std::vector<std::size_t> where;
  for (std::size_t i = 0; i < g.params.size(); ++i) {
    const at::Tensor& grad = g.params[i].grad();
    if (!grad.defined()) continue;
    params.push_back(g.params[i]);
    grads.push_back(grad);
    where.push_back(i);
  }
  if (params.empty()) return;
  if (g.weight_decay != 0) grads = at::_foreach_add(grads, params, g.weight_decay);
  const double m = g.momentum;
  if (m != 0) {
    bool all_initialised = true;
    for (std::size_t k = 0; k < where.size(); ++k) all_initialised = all_initialised && slots[where[k]].initialised;
    if (all_initialised) {
      for (std::size_t k = 0; k < where.size(); ++k) bufs.push_back(slots[where[k]].momentum_buffer);
      at::_foreach_mul_(bufs, m);
      at::_foreach_add_(bufs, grads, 1.0 - options_.dampening);
    } else {
      for (std::size_t k = 0; k < where.size(); ++k) {
        Slot& s = slots[where[k]];
        if (!s.initialised) {
          s.momentum_buffer = grads[k].detach().clone();
          s.initialised = true;
        } else {
          s.momentum_buffer.mul_(m).add_(grads[k], 1.0 - options_.dampening);
        }
        bufs.push_back(s.momentum_buffer);
      }
    }
    if (options_.nesterov) {
      grads = at::_foreach_add(grads, bufs, m);
    } else {
      grads = bufs;
    }
  }
  at::_foreach_add_(params, grads, -g.lr);
}

void Optimizer::step_adam(ParamGroup& g, std::vector<Slot>& slots, bool decoupled) {
  std::vector<at::Tensor> params, grads, m1, m2, vmax, steps;
  for (std::size_t i = 0; i < g.params.size(); ++i) {
    at::Tensor& p = g.params[i];
    const at::Tensor& grad = p.grad();
    if (!grad.defined()) continue;
    Slot& s = slots[i];
    if (!s.initialised) {
      s.exp_avg = torch::zeros_like(p, torch::MemoryFormat::Preserve);
      s.exp_avg_sq = torch::zeros_like(p, torch::MemoryFormat::Preserve);
      if (options_.amsgrad) s.max_exp_avg_sq = torch::zeros_like(p, torch::MemoryFormat::Preserve);
      s.step = torch::zeros({}, p.options().dtype(torch::kFloat));
      s.initialised = true;
    }
    params.push_back(p);
    grads.push_back(grad);
    m1.push_back(s.exp_avg);
    m2.push_back(s.exp_avg_sq);
    if (options_.amsgrad) vmax.push_back(s.max_exp_avg_sq);
    steps.push_back(s.step);
  }
  if (params.empty()) return;
  const double beta1 = g.momentum, beta2 = options_.betas[1];
  at::_foreach_add_(steps, 1.0);
  if (impl_ == "fused") {
    if (decoupled) {
      at::_fused_adamw_(params, grads, m1, m2, vmax, steps, g.lr, beta1, beta2, g.weight_decay, options_.eps,
                        options_.amsgrad, false);
    } else {
      at::_fused_adam_(params, grads, m1, m2, vmax, steps, g.lr, beta1, beta2, g.weight_decay, options_.eps,
                       options_.amsgrad, false);
    }
    return;
  }
  // foreach path: PyTorch's _multi_tensor_adam with scalar steps.
  if (decoupled) {
    if (g.weight_decay != 0) at::_foreach_mul_(params, 1.0 - g.lr * g.weight_decay);
  } else if (g.weight_decay != 0) {
    grads = at::_foreach_add(grads, params, g.weight_decay);
  }
  at::_foreach_lerp_(m1, grads, 1.0 - beta1);
  at::_foreach_mul_(m2, beta2);
  at::_foreach_addcmul_(m2, grads, grads, 1.0 - beta2);
  for (std::size_t k = 0; k < params.size(); ++k) {
    const double step = steps[k].item<double>();
    const double bc1 = 1.0 - std::pow(beta1, step);
    const double bc2 = 1.0 - std::pow(beta2, step);
    const double step_size = g.lr / bc1;
    at::Tensor denom;
    if (options_.amsgrad) {
      at::maximum_out(vmax[k], vmax[k], m2[k]);
      denom = (vmax[k].sqrt() / std::sqrt(bc2)).add_(options_.eps);
    } else {
      denom = (m2[k].sqrt() / std::sqrt(bc2)).add_(options_.eps);
    }
    params[k].addcdiv_(m1[k], denom, -step_size);
  }
}

TensorMap Optimizer::state_tensors() const {
  TensorMap out;
  for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
    for (std::size_t i = 0; i < groups_[gi].params.size(); ++i) {
      const Slot& s = slots_[gi][i];
      if (!s.initialised) continue;
      const std::string& n = groups_[gi].names[i];
      if (s.momentum_buffer.defined()) out.emplace_back(n + ".momentum_buffer", s.momentum_buffer);
      if (s.exp_avg.defined()) out.emplace_back(n + ".exp_avg", s.exp_avg);
      if (s.exp_avg_sq.defined()) out.emplace_back(n + ".exp_avg_sq", s.exp_avg_sq);
      if (s.max_exp_avg_sq.defined()) out.emplace_back(n + ".max_exp_avg_sq", s.max_exp_avg_sq);
      if (s.step.defined()) out.emplace_back(n + ".step", s.step);
    }
  }
  return out;
}

nlohmann::json Optimizer::state_json() const {
  nlohmann::json j;
  j["name"] = name_of(options_.name);
  j["lrs"] = lrs();
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : groups_)
    groups.push_back({{"params", g.names}, {"weight_decay", g.weight_decay}, {"momentum", g.momentum}});
  j["groups"] = groups;
  return j;
}

void Optimizer::load_state(const SafetensorsFile& tensors, const nlohmann::json& json) {
  GB_CHECK(json.value("name", "") == name_of(options_.name), FailedPrecondition,
           "the checkpoint's optimiser is " << json.value("name", "?") << ", this run uses " << name_of(options_.name),
           "resume with the same optim.name, or start a new run");
  const auto lrs_saved = json.at("lrs").get<std::vector<double>>();
  GB_CHECK(lrs_saved.size() == groups_.size(), FailedPrecondition,
           "the checkpoint has " << lrs_saved.size() << " parameter groups, this run " << groups_.size(),
           "resume with the same optimiser options");
  torch::NoGradGuard no_grad;
  for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
    groups_[gi].lr = lrs_saved[gi];
    if (json.contains("groups") && gi < json["groups"].size() && json["groups"][gi].contains("momentum"))
      groups_[gi].momentum = json["groups"][gi]["momentum"].get<double>();
    for (std::size_t i = 0; i < groups_[gi].params.size(); ++i) {
      Slot& s = slots_[gi][i];
      const at::Tensor& p = groups_[gi].params[i];
      const std::string& n = groups_[gi].names[i];
      auto fetch = [&](const char* slot, bool like_param) -> at::Tensor {
        const at::Tensor* t = tensors.find(n + "." + slot);
        if (t == nullptr) return {};
        if (like_param) {
          GB_CHECK(
              t->sizes() == p.sizes(), FailedPrecondition,
              "optimiser state " << n << "." << slot << " has shape " << t->sizes() << ", the parameter " << p.sizes(),
              "the checkpoint belongs to another architecture");
          return t->to(p.device(), p.scalar_type());
        }
        return t->to(p.device());
      };
      s.momentum_buffer = fetch("momentum_buffer", true);
      s.exp_avg = fetch("exp_avg", true);
      s.exp_avg_sq = fetch("exp_avg_sq", true);
      s.max_exp_avg_sq = fetch("max_exp_avg_sq", true);
      s.step = fetch("step", false);
      s.initialised = s.momentum_buffer.defined() || s.exp_avg.defined();
      if (options_.amsgrad && s.initialised && !s.max_exp_avg_sq.defined()) s.max_exp_avg_sq = torch::zeros_like(p);
    }
  }
}

}  // namespace glassbox::train
