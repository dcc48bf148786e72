#include "glassbox/export/package.h"

#include <cstdio>
#include <set>
#include <sstream>

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/base/files.h"
#include "glassbox/core/safetensors.h"
#include "glassbox/core/version.h"
#include "glassbox/export/graph.h"
#include "glassbox/export/onnx.h"
#include "glassbox/export/repository.h"
#include "glassbox/export/torchscript.h"

namespace glassbox::exporter {

namespace fs = std::filesystem;

namespace {

// create_directories with a glassbox error (a file in the way, no permission) instead of a bare
// std::filesystem_error.
void make_dirs(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  GB_CHECK(!ec, InvalidArgument, "cannot create the folder " << dir.string() << ": " << ec.message(),
           "choose an --out path in a writable folder");
}

Artefact artefact(const std::string& kind, const fs::path& path) { return {kind, path, fs::file_size(path)}; }

void prepare_parent(const fs::path& out) {
  GB_CHECK(!out.empty(), InvalidArgument, "no output path given", "pass --out PATH");
  const fs::path parent = out.parent_path();
  if (!parent.empty()) make_dirs(parent);
  GB_CHECK(!fs::is_directory(out), InvalidArgument, "--out " << out.string() << " is a directory, not a file path",
           "give a file name, e.g. " + (out / "model.pt").string());
}

std::int64_t count(const torch::nn::Module& m) {
  std::int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

// A deterministic random batch of the contract's input shape.
at::Tensor probe_batch(const nn::ModelContract& c, std::int64_t n) {
  std::vector<std::int64_t> shape{n};
  shape.insert(shape.end(), c.input_shape.begin(), c.input_shape.end());
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1234);
  return at::randn(shape, gen, torch::kFloat32);
}

// Loads the serialized file back (as torch::jit::load reads it from disk) and compares it with
// the model on a random batch.
double verify_torchscript(nn::Model& model, const nn::ModelContract& contract, const std::string& bytes) {
  std::istringstream in(bytes);
  torch::jit::Module loaded = torch::jit::load(in);
  loaded.eval();
  torch::NoGradGuard ng;
  const at::Tensor x = probe_batch(contract, 3);
  const auto device =
      model.module()->parameters().empty() ? torch::Device(torch::kCPU) : model.module()->parameters()[0].device();
  const at::Tensor want = model.forward(x.to(device)).to(torch::kCPU);
  const at::Tensor got = loaded.forward({x}).toTensor();
  GB_CHECK(got.sizes() == want.sizes(), Internal,
           "the exported TorchScript returns shape " << got.sizes() << ", the model " << want.sizes(),
           "report this as a glassbox bug");
  const double diff = (got - want).abs().max().item<double>();
  GB_CHECK(diff <= 1e-4, Internal,
           "the exported TorchScript differs from the model by " << diff << " on a random batch",
           "report this as a glassbox bug");
  return diff;
}

void export_torchscript(nn::Model& model, const nn::ModelContract& contract, const fs::path& out,
                        const ExportRequest& r, ExportResult& res) {
  const ExportGraph g =
      lower_model(*model.module(), contract.architecture.empty() ? model.name() : contract.architecture);
  const torch::jit::Module jm = to_torchscript(g, *model.module());
  const std::string bytes = serialize_torchscript(jm, {{"contract.json", nn::contract_to_json(contract)}});
  // Checked before it replaces anything: a wrong export never lands on disk.
  if (r.verify) res.max_abs_difference = verify_torchscript(model, contract, bytes);
  write_file_atomic(out, bytes);
  res.artefacts.push_back(artefact("torchscript", out));
}

void export_onnx(nn::Model& model, const nn::ModelContract& contract, const fs::path& out, ExportResult& res) {
  const ExportGraph g =
      lower_model(*model.module(), contract.architecture.empty() ? model.name() : contract.architecture);
  OnnxOptions o;
  o.input_shape = contract.input_shape;
  o.output_shape = {contract.num_classes};
  o.input_name = contract.input_name;
  o.output_name = contract.output_name;
  o.producer_version = kGlassboxVersion;
  const std::string bytes = to_onnx(g, *model.module(), o);
  onnx::ModelProto proto;
  GB_CHECK(proto.ParseFromString(bytes), Internal, "the ONNX writer produced an unreadable model",
           "report this as a glassbox bug");
  try {
    onnx::checker::check_model(proto);
    onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(true, 1, false));
  } catch (const std::exception& e) {
    GB_THROW(Internal, "the exported ONNX graph fails the ONNX checker: " << e.what(), "report this as a glassbox bug");
  }
  write_file_atomic(out, bytes);
  res.artefacts.push_back(artefact("onnx", out));
}

void export_weights(nn::Model& model, const fs::path& out, bool trainable_only, ExportResult& res) {
  const torch::nn::Module& m = *model.module();
  TensorMap all;
  for (const auto& p : m.named_parameters()) all.emplace_back(p.key(), p.value().detach().to(torch::kCPU));
  for (const auto& b : m.named_buffers()) all.emplace_back(b.key(), b.value().detach().to(torch::kCPU));
  TensorMap kept;
  if (!trainable_only) {
    kept = all;
    res.parameters = count(m);
  } else {
    // Layers owning a trainable parameter keep their buffers too (a BatchNorm in a fine-tuned head).
    std::set<std::string> trainable, owners;
    for (const auto& p : m.named_parameters()) {
      if (!p.value().requires_grad()) continue;
      trainable.insert(p.key());
      const auto dot = p.key().rfind('.');
      owners.insert(dot == std::string::npos ? std::string() : p.key().substr(0, dot));
      res.parameters += p.value().numel();
    }
    GB_CHECK(!trainable.empty(), FailedPrecondition,
             "every parameter is frozen: a trainable-only export would be empty",
             "export without --trainable-only, or freeze fewer layers (trainer.freeze)");
    for (const auto& b : m.named_buffers()) {
      const auto dot = b.key().rfind('.');
      if (owners.contains(dot == std::string::npos ? std::string() : b.key().substr(0, dot))) trainable.insert(b.key());
    }
    for (const auto& t : all)
      if (trainable.contains(t.first)) kept.push_back(t);
  }
  std::map<std::string, std::string> meta{{"format", "pt"},
                                          {"glassbox_trainable_only", trainable_only ? "true" : "false"}};
  res.full_bytes = encode_safetensors(all, meta).size();
  save_safetensors(out, kept, meta);
  res.artefacts.push_back(artefact("weights", out));
}

}  // namespace

fs::path contract_path_for(const fs::path& model_file) {
  fs::path p = model_file;
  return p.replace_extension(".json");
}

std::string human_bytes(std::uintmax_t bytes) {
  char buf[32];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof buf, "%ju B", bytes);
  } else if (bytes < 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.1f KB", static_cast<double>(bytes) / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  }
  return buf;
}

ExportResult export_model(nn::Model& model, const nn::ModelContract& contract, const ExportRequest& r) {
  contract.validate();
  GB_CHECK(!r.trainable_only || r.format == "weights", InvalidArgument,
           "--trainable-only applies to --format weights (a " << r.format << " file needs every tensor to run)",
           "use --format weights --trainable-only");
  nn::EvalModeScope eval(*model.module());
  ExportResult res;
  res.all_parameters = count(*model.module());
  if (r.format != "weights") res.parameters = res.all_parameters;
  if (r.format == "torchscript" || r.format == "onnx") {
    prepare_parent(r.out);
    // The model first, then its sidecar: a failure leaves no contract describing a missing file.
    if (r.format == "torchscript") {
      export_torchscript(model, contract, r.out, r, res);
    } else {
      export_onnx(model, contract, r.out, res);
    }
    const fs::path sidecar = contract_path_for(r.out);
    nn::write_contract(sidecar, contract);
    res.artefacts.push_back(artefact("contract", sidecar));
  } else if (r.format == "weights") {
    prepare_parent(r.out);
    export_weights(model, r.out, r.trainable_only, res);
  } else if (r.format == "repository") {
    GB_CHECK(!r.out.empty(), InvalidArgument, "no repository folder given", "pass --out DIR");
    nn::ModelContract c = contract;
    if (!r.name.empty()) c.name = r.name;
    GB_CHECK(!c.name.empty(), InvalidArgument, "the model repository needs a model name", "pass --name NAME");
    check_model_name(c.name);  // before the export's work, and before a path is made from it
    r.repository.validate();
    make_dirs(r.out);
    const fs::path staged = temp_sibling(r.out / (c.name + ".pt"));
    ExportResult staged_res;
    try {
      export_torchscript(model, c, staged, r, staged_res);
      res.max_abs_difference = staged_res.max_abs_difference;
      const RepositoryWriteResult written = write_model_repository(r.out, c.name, r.version, staged, c, r.repository);
      for (const auto& f : written.files) {
        const std::string file = f.path.filename().string();
        const std::string kind = file == "model.pt" || f.path.extension() == ".pt" ? "torchscript"
                                 : file == "config.pbtxt"                          ? "config"
                                 : file == "labels.txt"                            ? "labels"
                                                                                   : "contract";
        res.artefacts.push_back({kind, f.path, f.bytes});
      }
    } catch (...) {
      std::error_code ec;
      fs::remove(staged, ec);
      throw;
    }
    std::error_code ec;
    fs::remove(staged, ec);
  } else {
    GB_THROW(InvalidArgument, "unknown export format \"" << r.format << "\"",
             "use torchscript, onnx, repository or weights");
  }
  return res;
}

}  // namespace glassbox::exporter
