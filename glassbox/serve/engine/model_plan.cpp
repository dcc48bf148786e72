// The backend's load-time plan (model_plan.h).
#include "glassbox/serve/engine/model_plan.h"

#include <algorithm>
#include <charconv>
#include <set>

#include <torch/cuda.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "glassbox/base/error.h"
#include "glassbox/serve/engine/torch_io.h"

namespace glassbox::serve::detail {
namespace {

// "INPUT__3" -> 3: Triton's "<name>__<index>" convention.
std::optional<std::size_t> conventional_index(const std::string& name) {
  const std::size_t p = name.rfind("__");
  if (p == std::string::npos || p + 2 >= name.size()) return std::nullopt;
  std::size_t i = 0;
  const char* b = name.data() + p + 2;
  const char* e = name.data() + name.size();
  const auto r = std::from_chars(b, e, i);
  if (r.ec != std::errc() || r.ptr != e) return std::nullopt;
  return i;
}

Platform resolve_platform(const triton::ModelConfig& c) {
  const std::string& p = c.platform();
  if (p == exporter::kTorchScriptPlatform || (p.empty() && c.backend() == "pytorch")) return Platform::kTorchScript;
  if (p == "glassbox" || (p.empty() && c.backend() == "glassbox")) return Platform::kGlassbox;
  const std::string what = !p.empty() ? "platform \"" + p + "\"" : "backend \"" + c.backend() + "\"";
  GB_THROW(InvalidArgument, "model '" << c.name() << "': " << what << " is not served by glassbox",
           std::string("glassbox serves platform \"pytorch_libtorch\" (or backend \"pytorch\") and platform "
                       "\"glassbox\": export the model to TorchScript"));
}

std::vector<c10::Device> instance_devices(const triton::ModelConfig& c) {
  const bool cuda = torch::cuda::is_available();
  const int gpu_count = cuda ? static_cast<int>(torch::cuda::device_count()) : 0;
  std::vector<c10::Device> out;
  if (c.instance_group_size() == 0) return {cuda ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU)};
  for (int g = 0; g < c.instance_group_size(); ++g) {
    const triton::ModelInstanceGroup& group = c.instance_group(g);
    const int count = std::max(1, group.count());
    const bool gpu = group.kind() == triton::ModelInstanceGroup::KIND_GPU ||
                     (group.kind() == triton::ModelInstanceGroup::KIND_AUTO && cuda);
    if (gpu) {
      GB_CHECK(cuda, Unavailable,
               "model '" << c.name() << "': instance_group[" << g << "] is KIND_GPU but LibTorch sees no CUDA device",
               std::string("use kind: KIND_CPU, or serve on a machine with a GPU and the CUDA build of LibTorch"));
      for (int gi : group.gpus())
        GB_CHECK(gi < gpu_count, InvalidArgument,
                 "model '" << c.name() << "': instance_group[" << g << "] names GPU " << gi << " but there are "
                           << gpu_count,
                 std::string("list GPU indices below ") + std::to_string(gpu_count));
    }
    for (int j = 0; j < count; ++j) {
      if (!gpu) {
        out.emplace_back(c10::kCPU);
      } else {
        const int gi = group.gpus().empty() ? j % gpu_count : group.gpus(j % group.gpus_size());
        out.emplace_back(c10::kCUDA, static_cast<c10::DeviceIndex>(gi));
      }
    }
  }
  return out;
}

bool is_string_list(const c10::TypePtr& t) {
  return t->kind() == c10::TypeKind::ListType &&
         t->expectRef<c10::ListType>().getElementType()->kind() == c10::TypeKind::StringType;
}

// Maps the config's inputs onto forward()'s positional arguments (see backend.h).
void plan_inputs(Plan& p, const torch::jit::Module& module) {
  const std::optional<torch::jit::Method> forward = module.find_method("forward");
  GB_CHECK(forward.has_value(), InvalidArgument, p.who() << ": the TorchScript module has no forward() method",
           std::string("script a module with a forward method"));
  const c10::FunctionSchema& schema = forward->function().getSchema();
  std::vector<const c10::Argument*> args;
  std::vector<std::string> arg_names;
  for (std::size_t i = 1; i < schema.arguments().size(); ++i) {  // 0 is self
    args.push_back(&schema.arguments()[i]);
    arg_names.push_back(schema.arguments()[i].name());
  }
  const auto& cin = p.config.input();
  const bool by_name = std::all_of(cin.begin(), cin.end(), [&](const triton::ModelInput& in) {
    return std::find(arg_names.begin(), arg_names.end(), in.name()) != arg_names.end();
  });
  const bool by_index = std::all_of(
      cin.begin(), cin.end(), [](const triton::ModelInput& in) { return conventional_index(in.name()).has_value(); });
  std::set<std::size_t> used;
  for (int i = 0; i < cin.size(); ++i) {
    const triton::ModelInput& in = cin[i];
    GB_CHECK(
        !in.optional() && !in.is_shape_tensor() && !in.allow_ragged_batch(), InvalidArgument,
        p.who() << ": input '" << in.name() << "' is optional, a shape tensor or ragged, which glassbox does not serve",
        std::string("remove optional / is_shape_tensor / allow_ragged_batch from config.pbtxt"));
    InputPlan ip;
    ip.name = in.name();
    ip.config_type = in.data_type();
    ip.datatype = serve_datatype(in.data_type());
    ip.bytes = in.data_type() == triton::TYPE_STRING;
    if (!ip.bytes) ip.dtype = *torch_dtype(in.data_type());
    if (in.has_reshape()) ip.reshape = to_vector(in.reshape().shape());
    ip.arg =
        by_name ? static_cast<std::size_t>(std::find(arg_names.begin(), arg_names.end(), in.name()) - arg_names.begin())
        : by_index ? *conventional_index(in.name())
                   : static_cast<std::size_t>(i);
    GB_CHECK(ip.arg < args.size(), InvalidArgument,
             p.who() << ": input '" << in.name() << "' is forward() argument " << ip.arg << " but forward takes "
                     << args.size() << " (" << join(arg_names) << ")",
             std::string("name the inputs INPUT__0..INPUT__") + std::to_string(args.size() ? args.size() - 1 : 0) +
                 " or after forward()'s arguments");
    GB_CHECK(used.insert(ip.arg).second, InvalidArgument,
             p.who() << ": two inputs map to forward() argument " << ip.arg << " ('" << arg_names[ip.arg] << "')",
             std::string("give each input its own INPUT__i index"));
    const c10::TypePtr& type = args[ip.arg]->type();
    const bool tensor_arg = type->kind() == c10::TypeKind::TensorType;
    // glassbox decodes a TYPE_STRING input of encoded images into the Tensor forward() takes.
    const bool decoded = ip.bytes && tensor_arg && p.platform == Platform::kGlassbox;
    GB_CHECK(decoded || (!(ip.bytes && tensor_arg) && !(!ip.bytes && is_string_list(type))), InvalidArgument,
             p.who() << ": input '" << in.name() << "' is " << triton::DataType_Name(in.data_type())
                     << " in config.pbtxt but forward() argument '" << arg_names[ip.arg] << "' is "
                     << type->annotation_str(),
             std::string("use TYPE_STRING for List[str] arguments and a numeric type for Tensor arguments"));
    p.inputs.push_back(std::move(ip));
  }
  p.forward_args = used.empty() ? 0 : *used.rbegin() + 1;
  for (std::size_t a = 0; a < args.size(); ++a) {
    if (used.count(a) != 0) continue;
    GB_CHECK(a >= p.forward_args && args[a]->default_value().has_value(), InvalidArgument,
             p.who() << ": forward() argument " << a << " ('" << arg_names[a] << "') has no input in config.pbtxt",
             std::string("add an input for it (INPUT__") + std::to_string(a) + ") or give it a default in forward()");
  }
}

void plan_outputs(Plan& p) {
  const auto& cout = p.config.output();
  const bool by_index = std::all_of(
      cout.begin(), cout.end(), [](const triton::ModelOutput& o) { return conventional_index(o.name()).has_value(); });
  std::set<std::size_t> used;
  for (int i = 0; i < cout.size(); ++i) {
    const triton::ModelOutput& o = cout[i];
    OutputPlan op;
    op.name = o.name();
    op.config_type = o.data_type();
    op.datatype = serve_datatype(o.data_type());
    op.bytes = o.data_type() == triton::TYPE_STRING;
    if (!op.bytes) op.dtype = *torch_dtype(o.data_type());
    op.dims = to_vector(o.dims());
    op.reshaped = o.has_reshape();
    op.model_dims = op.reshaped ? to_vector(o.reshape().shape()) : op.dims;
    op.index = by_index ? *conventional_index(o.name()) : static_cast<std::size_t>(i);
    GB_CHECK(used.insert(op.index).second, InvalidArgument,
             p.who() << ": two outputs map to element " << op.index << " of forward()'s result",
             std::string("give each output its own OUTPUT__i index"));
    p.outputs.push_back(std::move(op));
  }
}

void plan_glassbox(Plan& p, const exporter::RepositoryEntry& entry) {
  GB_CHECK(entry.contract.has_value(), NotFound,
           p.who() << ": platform glassbox needs the contract " << (entry.dir / exporter::kContractFile).string(),
           std::string("write it with glassbox export --format repository, or use platform \"pytorch_libtorch\""));
  const nn::ModelContract& c = *entry.contract;
  GB_CHECK(p.inputs.size() == 1, InvalidArgument,
           p.who() << ": platform glassbox takes one input, config.pbtxt lists " << p.inputs.size(),
           std::string("describe the raw input only (the contract's preprocessing makes the model's input)"));
  const triton::ModelInput& in = p.config.input(0);
  if (in.data_type() == triton::TYPE_STRING) {
    // Encoded images (JPEG, PNG, ...): one per sample, preprocessed as the contract says.
    GB_CHECK(!c.image.is_null(), InvalidArgument,
             p.who() << ": input '" << in.name() << "' is TYPE_STRING but the contract has no preprocessing.image",
             std::string("export the model from a run on image files, or send pixels (TYPE_UINT8 dims ") +
                 shape_string(c.input_shape) + ")");
    GB_CHECK(to_vector(in.dims()) == std::vector<std::int64_t>{1} && !in.has_reshape(), InvalidArgument,
             p.who() << ": encoded-image input '" << in.name() << "' has dims " << shape_string(to_vector(in.dims())),
             std::string("set dims: [ 1 ] (one encoded image per sample)"));
    p.image = std::make_shared<const data::ImagePreprocessor>(
        data::image_preprocessing_from_json(c.image, (entry.dir / exporter::kContractFile).string()));
    p.image_shape = c.input_shape;
  } else {
    GB_CHECK(in.data_type() == triton::TYPE_UINT8 || in.data_type() == triton::TYPE_FP32, InvalidArgument,
             p.who() << ": platform glassbox takes TYPE_UINT8 or TYPE_FP32 raw data (or TYPE_STRING encoded images), "
                     << "input '" << in.name() << "' is " << triton::DataType_Name(in.data_type()),
             std::string("use TYPE_UINT8 for pixels or TYPE_FP32"));
    GB_CHECK(to_vector(in.dims()) == c.input_shape && !in.has_reshape(), InvalidArgument,
             p.who() << ": input '" << in.name() << "' has dims " << shape_string(to_vector(in.dims()))
                     << " but the contract's input shape is " << shape_string(c.input_shape),
             std::string("set dims: ") + shape_string(c.input_shape));
  }
  const std::int64_t channels = c.input_shape.at(0);
  for (std::int64_t ch = 0; ch < channels; ++ch) {
    const auto at = [&](const std::vector<double>& v, double fallback) {
      return v.empty() ? fallback : v.size() == 1 ? v[0] : v[static_cast<std::size_t>(ch)];
    };
    const double sd = at(c.std, 1.0);
    p.pre_mul.push_back(static_cast<float>(c.scale / sd));
    p.pre_sub.push_back(static_cast<float>(at(c.mean, 0.0) / sd));
  }
  p.pre_shape.assign(c.input_shape.size(), 1);
  p.pre_shape[0] = channels;
  p.flip_channels = c.channel_order == nn::ChannelOrder::kBGR;
  const std::string output = parameter(p.config, "glassbox.output").value_or("logits");
  GB_CHECK(output == "logits" || output == "probabilities", InvalidArgument,
           p.who() << ": parameter glassbox.output is \"" << output << "\"",
           std::string("use \"probabilities\" (softmax of the logits) or \"logits\""));
  GB_CHECK(!(output == "probabilities" && c.task == TaskKind::kRegression), InvalidArgument,
           p.who() << ": parameter glassbox.output is \"probabilities\" but the model is a regression model",
           std::string("remove the parameter: a regression model's outputs are its values"));
  p.probabilities = output == "probabilities" && c.output_kind == nn::OutputKind::kLogits;
  p.sigmoid_outputs = c.task == TaskKind::kMultilabel;
}

}  // namespace

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::optional<std::string> parameter(const triton::ModelConfig& c, const std::string& key) {
  const auto it = c.parameters().find(key);
  if (it == c.parameters().end()) return std::nullopt;
  return it->second.string_value();
}

int positive_parameter(const triton::ModelConfig& c, const std::string& key) {
  const std::optional<std::string> v = parameter(c, key);
  if (!v) return 0;
  int n = 0;
  const auto r = std::from_chars(v->data(), v->data() + v->size(), n);
  GB_CHECK(r.ec == std::errc() && r.ptr == v->data() + v->size() && n > 0, InvalidArgument,
           "model '" << c.name() << "': parameter " << key << " is \"" << *v << "\", not a positive integer",
           std::string("set parameters { key: \"") + key + "\" value: { string_value: \"2\" } }");
  return n;
}

std::shared_ptr<Plan> begin_plan(const exporter::RepositoryEntry& entry, std::int64_t version) {
  auto plan = std::make_shared<Plan>();
  plan->model = entry.name;
  plan->version = version;
  plan->config = entry.config;
  plan->model_dir = entry.dir;
  plan->batched = entry.config.max_batch_size() > 0;
  plan->platform = resolve_platform(entry.config);
  plan->config_intra_op_threads = positive_parameter(entry.config, "INTRA_OP_THREAD_COUNT");
  plan->devices = instance_devices(entry.config);
  return plan;
}

void plan_signature(Plan& plan, const torch::jit::Module& module, const exporter::RepositoryEntry& entry) {
  plan_inputs(plan, module);
  plan_outputs(plan);
  if (plan.platform == Platform::kGlassbox) plan_glassbox(plan, entry);
}

}  // namespace glassbox::serve::detail
