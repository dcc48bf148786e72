#include "glassbox/train/checkpoint.h"

#include <sstream>

#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"

namespace glassbox::train {

TensorMap module_state(const torch::nn::Module& module, bool trainable_only) {
  TensorMap out;
  for (const auto& p : module.named_parameters(true)) {
    if (!trainable_only || p.value().requires_grad()) out.emplace_back(p.key(), p.value());
  }
  if (!trainable_only) {
    for (const auto& b : module.named_buffers(true)) out.emplace_back(b.key(), b.value());
  }
  return out;
}

void load_module_state(torch::nn::Module& module, const SafetensorsFile& weights, bool partial) {
  std::vector<std::string> missing, mismatched, unexpected;
  std::map<std::string, at::Tensor> targets;
  std::map<std::string, bool> required;
  for (const auto& p : module.named_parameters(true)) {
    targets[p.key()] = p.value();
    required[p.key()] = !partial || p.value().requires_grad();
  }
  for (const auto& b : module.named_buffers(true)) {
    targets[b.key()] = b.value();
    required[b.key()] = !partial;
  }
  std::map<std::string, const at::Tensor*> given;
  for (const auto& [n, t] : weights.tensors) given[n] = &t;
  for (const auto& [n, t] : targets) {
    auto it = given.find(n);
    if (it == given.end()) {
      if (required[n]) missing.push_back(n);
      continue;
    }
    if (it->second->sizes() != t.sizes()) {
      std::ostringstream os;
      os << n << " (checkpoint " << it->second->sizes() << ", model " << t.sizes() << ")";
      mismatched.push_back(os.str());
    }
  }
  for (const auto& [n, _] : given)
    if (targets.count(n) == 0) unexpected.push_back(n);
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size() && i < 6; ++i) s += (i ? ", " : "") + v[i];
    if (v.size() > 6) s += ", ... (" + std::to_string(v.size()) + " in all)";
    return s;
  };
  if (!missing.empty() || !mismatched.empty() || !unexpected.empty()) {
    std::ostringstream os;
    os << "the checkpoint does not fit this model:";
    if (!mismatched.empty()) os << " shape mismatch: " << list(mismatched) << ";";
    if (!missing.empty()) os << " missing: " << list(missing) << ";";
    if (!unexpected.empty()) os << " unexpected: " << list(unexpected) << ";";
    std::string msg = os.str();
    msg.pop_back();
    GB_THROW(FailedPrecondition, msg, "use a checkpoint of the same architecture and options (model.* in the config)");
  }
  torch::NoGradGuard no_grad;
  for (auto& [n, t] : targets) {
    auto it = given.find(n);
    if (it != given.end()) t.copy_(*it->second);
  }
}

void write_checkpoint(const std::filesystem::path& dir, const Checkpoint& c) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir.parent_path(), ec);
  const fs::path tmp = temp_sibling(dir);
  fs::create_directories(tmp, ec);
  GB_CHECK(!ec, ResourceExhausted, "cannot create " << tmp.string() << ": " << ec.message(), "check the run directory");
  try {
    save_safetensors(tmp / "model.safetensors", c.model.tensors, {{"format", "pt"}});
    save_safetensors(tmp / "optimizer.safetensors", c.optimizer.tensors);
    save_safetensors(tmp / "extra.safetensors", c.extra.tensors);
    write_file_atomic(tmp / "state.json", c.state.dump(2) + "\n");
    replace_dir_atomic(tmp, dir);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

Checkpoint read_checkpoint(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  GB_CHECK(fs::exists(dir), NotFound, "no checkpoint at " << dir.string(),
           "pass a checkpoint directory such as runs/NAME/checkpoints/last.ckpt");
  GB_CHECK(fs::is_directory(dir), InvalidArgument, dir.string() << " is a file; a glassbox checkpoint is a directory",
           "pass the .ckpt directory written by glassbox train");
  for (const char* f : {"state.json", "model.safetensors"}) {
    GB_CHECK(fs::exists(dir / f), DataLoss, "checkpoint " << dir.string() << " has no " << f,
             "the checkpoint is incomplete; use another one");
  }
  Checkpoint c;
  c.path = dir;
  const std::string text = read_file(dir / "state.json");
  try {
    c.state = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    GB_THROW(DataLoss, (dir / "state.json").string() << " is not valid JSON: " << e.what(),
             "the checkpoint is corrupt; use another one");
  }
  GB_CHECK(c.state.is_object() && c.state.contains("format") && c.state["format"].is_number_integer(), DataLoss,
           (dir / "state.json").string() << " is not a glassbox checkpoint state",
           "use a checkpoint written by glassbox");
  GB_CHECK(c.state["format"].get<int>() <= kCheckpointFormat, FailedPrecondition,
           "checkpoint format " << c.state["format"].get<int>() << " is newer than this glassbox understands ("
                                << kCheckpointFormat << ")",
           "upgrade glassbox");
  c.model = load_safetensors(dir / "model.safetensors");
  if (fs::exists(dir / "optimizer.safetensors")) c.optimizer = load_safetensors(dir / "optimizer.safetensors");
  if (fs::exists(dir / "extra.safetensors")) c.extra = load_safetensors(dir / "extra.safetensors");
  return c;
}

}  // namespace glassbox::train

namespace glassbox::train {

std::vector<std::string> missing_for_resume(const Checkpoint& c) {
  std::vector<std::string> missing;
  const nlohmann::json& s = c.state;
  if (s.value("weights_only", false)) {
    missing.push_back("everything but the weights (written with checkpoint.save_weights_only)");
    return missing;
  }
  if (!s.contains("optimizer") || !s["optimizer"].is_object()) {
    missing.push_back("optimiser state (state.json: optimizer)");
  } else if (s.contains("optimizer_tensors")) {
    std::size_t absent = 0, total = 0;
    for (const auto& n : s["optimizer_tensors"]) {
      ++total;
      if (c.optimizer.find(n.get<std::string>()) == nullptr) ++absent;
    }
    if (absent > 0)
      missing.push_back("optimiser state (optimizer.safetensors: " + std::to_string(absent) + " of " +
                        std::to_string(total) + " tensors absent)");
  } else if (c.optimizer.tensors.empty() && s.value("global_step", std::int64_t{0}) > 0) {
    // An older checkpoint without the list: an optimiser that has stepped keeps slots, except
    // plain SGD without momentum.
    const nlohmann::json& o = s["optimizer"];
    bool stateless = o.value("name", "") == "sgd";
    if (o.contains("groups"))
      for (const auto& g : o["groups"]) stateless = stateless && g.value("momentum", 0.0) == 0.0;
    if (!stateless) missing.push_back("optimiser state (optimizer.safetensors is empty)");
  }
  if (!s.contains("scheduler")) missing.push_back("scheduler state (state.json: scheduler)");
  if (!s.contains("callbacks")) missing.push_back("callback state (state.json: callbacks)");
  if (!s.contains("resume") || !s["resume"].contains("epoch") || !s["resume"].contains("batch"))
    missing.push_back("sampler position (state.json: resume)");
  if (!s.contains("global_step")) missing.push_back("step counter (state.json: global_step)");
  if (c.extra.find("rng.cpu") == nullptr) missing.push_back("RNG state (extra.safetensors: rng.cpu)");
  return missing;
}

}  // namespace glassbox::train
