// Tested by nn_test (Pretrained.*; ZooReference.*: torchvision and timm names).
#include "glassbox/nn/pretrained.h"

#include <map>
#include <sstream>

#include <torch/torch.h>

#include "glassbox/base/error.h"

namespace glassbox::nn {

namespace {

std::string shape_of(const at::Tensor& t) {
  std::ostringstream os;
  os << t.sizes();
  return os.str();
}

std::string list(const std::vector<std::string>& v, std::size_t max = 6) {
  std::string s;
  for (std::size_t i = 0; i < v.size() && i < max; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > max) s += ", ... (" + std::to_string(v.size()) + " in all)";
  return s;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

bool is_number(const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; }

// "blocks.<i>[.<j>].<rest>": the indices and the rest (false when n is not such a name).
bool block_name(const std::string& n, std::string& i, std::string& j, std::string& rest) {
  if (!starts_with(n, "blocks.")) return false;
  const std::size_t a = n.find('.', 7);
  if (a == std::string::npos) return false;
  i = n.substr(7, a - 7);
  const std::size_t b = n.find('.', a + 1);
  j = b == std::string::npos ? "" : n.substr(a + 1, b - a - 1);
  if (is_number(j)) {
    rest = n.substr(b + 1);
  } else {
    j.clear();
    rest = n.substr(a + 1);
  }
  return is_number(i);
}

// One timm name as torchvision's, or "" when it is not one of timm's.
std::string timm_to_torchvision(const std::string& n, const std::map<std::string, bool>& separable) {
  std::string i, j, rest;
  if (!block_name(n, i, j, rest)) return "";
  const std::size_t dot = rest.rfind('.');
  if (dot == std::string::npos) return "";
  const std::string part = rest.substr(0, dot), kind = rest.substr(dot + 1);
  if (j.empty()) {  // a ViT layer
    static const std::map<std::string, std::string> kVit = {{"norm1", "ln_1."},
                                                            {"norm2", "ln_2."},
                                                            {"attn.qkv", "self_attention.in_proj_"},
                                                            {"attn.proj", "self_attention.out_proj."},
                                                            {"mlp.fc1", "mlp.0."},
                                                            {"mlp.fc2", "mlp.3."}};
    auto it = kVit.find(part);
    return it == kVit.end() ? "" : "encoder.layers.encoder_layer_" + i + "." + it->second + kind;
  }
  // EfficientNet: depthwise-separable blocks (expansion 1) are conv_dw bn1 se conv_pw bn2;
  // inverted residuals conv_pw bn1 conv_dw bn2 se conv_pwl bn3.
  static const std::map<std::string, std::string> kSeparable = {
      {"conv_dw", "0.0"},          {"bn1", "0.1"},     {"se.conv_reduce", "1.fc1"},
      {"se.conv_expand", "1.fc2"}, {"conv_pw", "2.0"}, {"bn2", "2.1"}};
  static const std::map<std::string, std::string> kInverted = {
      {"conv_pw", "0.0"},          {"bn1", "0.1"},      {"conv_dw", "1.0"}, {"bn2", "1.1"}, {"se.conv_reduce", "2.fc1"},
      {"se.conv_expand", "2.fc2"}, {"conv_pwl", "3.0"}, {"bn3", "3.1"}};
  auto sep = separable.find(i + "." + j);
  const auto& table = sep != separable.end() && sep->second ? kSeparable : kInverted;
  auto it = table.find(part);
  if (it == table.end()) return "";
  return "features." + std::to_string(std::stoi(i) + 1) + "." + j + ".block." + it->second + "." + kind;
}

}  // namespace

nlohmann::json InitReport::to_json() const {
  return {{"naming", naming},
          {"matched", matched},
          {"model_tensors", model_tensors},
          {"head", head},
          {"reinitialised", reinitialised},
          {"missing", missing},
          {"unexpected", unexpected},
          {"shape_mismatched", mismatched},
          {"input_channels_adapted", adapted}};
}

std::string InitReport::summary() const {
  std::ostringstream os;
  os << "loaded " << matched << " of the model's " << model_tensors << " tensors (" << naming << " names)";
  if (!reinitialised.empty()) os << "; head " << head << " re-initialised: " << list(reinitialised);
  if (!adapted.empty()) os << "; input channels adapted: " << list(adapted);
  if (!mismatched.empty()) os << "; kept at initialisation, other shape: " << list(mismatched);
  if (!missing.empty()) os << "; missing: " << list(missing);
  if (!unexpected.empty()) os << "; unused: " << list(unexpected);
  return os.str();
}

std::string head_module(const torch::nn::Module& module) {
  std::string head;
  for (const auto& m : module.named_modules("", /*include_self=*/false))
    if (m.value()->as<torch::nn::Linear>()) head = m.key();
  return head;
}

TensorMap map_timm_names(const TensorMap& tensors, std::string* naming) {
  std::map<std::string, bool> separable;  // "S.B" -> the block has no conv_pwl
  bool timm = false;
  for (const auto& [n, _] : tensors) {
    if (n == "conv_stem.weight" || n == "patch_embed.proj.weight" || n == "cls_token") timm = true;
    std::string i, j, rest;
    if (block_name(n, i, j, rest) && !j.empty()) {
      bool& sep = separable.try_emplace(i + "." + j, true).first->second;
      if (starts_with(rest, "conv_pwl.")) sep = false;
    }
  }
  if (naming) *naming = timm ? "timm" : "torchvision";
  if (!timm) return tensors;
  static const std::map<std::string, std::string> kTop = {
      {"cls_token", "class_token"},
      {"pos_embed", "encoder.pos_embedding"},
      {"patch_embed.proj.weight", "conv_proj.weight"},
      {"patch_embed.proj.bias", "conv_proj.bias"},
      {"norm.weight", "encoder.ln.weight"},
      {"norm.bias", "encoder.ln.bias"},
      {"head.weight", "heads.head.weight"},
      {"head.bias", "heads.head.bias"},
      {"conv_stem.weight", "features.0.0.weight"},
      {"classifier.weight", "classifier.1.weight"},
      {"classifier.bias", "classifier.1.bias"},
      {"conv_head.weight", "features.8.0.weight"},
  };
  TensorMap out;
  for (const auto& [n, t] : tensors) {
    std::string to;
    if (auto it = kTop.find(n); it != kTop.end()) {
      to = it->second;
    } else if (starts_with(n, "bn1.")) {
      to = "features.0.1." + n.substr(4);
    } else if (starts_with(n, "bn2.")) {
      to = "features.8.1." + n.substr(4);
    } else {
      to = timm_to_torchvision(n, separable);
    }
    out.emplace_back(to.empty() ? n : to, t);
  }
  return out;
}

InitReport load_pretrained(torch::nn::Module& module, const TensorMap& tensors, const InitOptions& options) {
  InitReport r;
  const TensorMap given_list = map_timm_names(tensors, &r.naming);
  std::map<std::string, const at::Tensor*> given;
  for (const auto& [n, t] : given_list) given[n] = &t;
  r.head = head_module(module);
  const std::string head_prefix = r.head.empty() ? std::string("\x01") : r.head + ".";
  std::vector<std::pair<at::Tensor, const at::Tensor*>> copies;
  std::vector<std::pair<at::Tensor, at::Tensor>> adapted;  // the input conv, its kernel adapted
  std::map<std::string, bool> known;
  // The model's input convolution: its first 4-d parameter (a stem conv or a ViT's patch projection).
  std::string input_conv;
  for (const auto& p : module.named_parameters(true)) {
    if (p.value().dim() == 4) {
      input_conv = p.key();
      break;
    }
  }
  auto visit = [&](const std::string& name, at::Tensor& target, bool required) {
    known[name] = true;
    ++r.model_tensors;
    const bool head = starts_with(name, head_prefix);
    auto it = given.find(name);
    if (head && !options.load_head) {
      if (it == given.end())
        r.reinitialised.push_back(name + " (not in the file)");
      else if (it->second->sizes() != target.sizes())
        r.reinitialised.push_back(name + " (file " + shape_of(*it->second) + ", model " + shape_of(target) + ")");
      else
        r.reinitialised.push_back(name + " (model.init_head = false)");
      return;
    }
    if (it == given.end()) {
      if (head) {
        r.reinitialised.push_back(name + " (not in the file)");
      } else if (required) {
        r.missing.push_back(name);
      }
      return;
    }
    const at::Tensor& src = *it->second;
    if (name == input_conv && src.dim() == 4 && src.size(0) == target.size(0) && src.size(2) == target.size(2) &&
        src.size(3) == target.size(3) && src.size(1) != target.size(1)) {
      // Another number of input channels (RGB weights for gray images, or the reverse): timm's
      // adapt_input_conv - summed over the channels for one, else repeated and scaled by
      // in/out so that an image with equal channels gives the same response.
      const std::int64_t from = src.size(1), to = target.size(1);
      at::Tensor w = src.to(at::kFloat);
      if (to == 1) {
        w = w.sum(1, /*keepdim=*/true);
      } else {
        const std::int64_t repeat = (to + from - 1) / from;
        w = w.repeat({1, repeat, 1, 1}).slice(1, 0, to) * (static_cast<double>(from) / static_cast<double>(to));
      }
      adapted.emplace_back(target, w.to(target.scalar_type()));
      r.adapted.push_back(name + " (file " + shape_of(src) + ", model " + shape_of(target) + ")");
      ++r.matched;
      return;
    }
    if (it->second->sizes() != target.sizes()) {
      const std::string what = name + " (file " + shape_of(*it->second) + ", model " + shape_of(target) + ")";
      (head ? r.reinitialised : r.mismatched).push_back(what);
      return;
    }
    copies.emplace_back(target, it->second);
    ++r.matched;
  };
  for (auto& p : module.named_parameters(true))
    visit(p.key(), p.value(), !options.trainable_only || p.value().requires_grad());
  for (auto& b : module.named_buffers(true)) visit(b.key(), b.value(), !options.trainable_only);
  for (const auto& [n, _] : given)
    if (!known.contains(n)) r.unexpected.push_back(n);
  if (options.strict && (!r.missing.empty() || !r.mismatched.empty() || !r.unexpected.empty())) {
    std::ostringstream os;
    os << "model.init_from does not fit this model (" << r.naming << " names, " << r.matched << " of "
       << r.model_tensors << " tensors fit):";
    if (!r.mismatched.empty()) os << " other shape: " << list(r.mismatched) << ";";
    if (!r.missing.empty()) os << " missing: " << list(r.missing) << ";";
    if (!r.unexpected.empty()) os << " not in the model: " << list(r.unexpected) << ";";
    std::string msg = os.str();
    msg.pop_back();
    GB_THROW(FailedPrecondition, msg,
             "use weights of the same architecture (model.name and its options), or set model.init_strict = false "
             "to keep the model's own initialisation for these");
  }
  GB_CHECK(r.matched > 0, FailedPrecondition,
           "model.init_from: none of the file's " << given.size() << " tensors fits this model ("
                                                  << list(r.unexpected, 3) << ")",
           "check that the file holds weights of this architecture (model.name)");
  torch::NoGradGuard no_grad;
  for (auto& [target, source] : copies) target.copy_(*source);
  for (auto& [target, source] : adapted) target.copy_(source);
  return r;
}

}  // namespace glassbox::nn
