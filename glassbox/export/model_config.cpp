#include "glassbox/export/model_config.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <sstream>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include "glassbox/base/config.h"
#include "glassbox/base/error.h"
#include "glassbox/base/files.h"

namespace glassbox::exporter {
namespace {

namespace fs = std::filesystem;
namespace pb = google::protobuf;

// Triton fields that glassbox's message leaves out: named in the hint when a config uses one.
const std::set<std::string> kTritonOnlyFields = {
    "sequence_batching", "ensemble_scheduling",    "optimization",
    "batch_input",       "batch_output",           "cc_model_filenames",
    "metric_tags",       "model_operations",       "model_repository_agents",
    "model_metrics",     "rate_limiter",           "secondary_devices",
    "profile",           "is_non_linear_format_io"};

// Keeps the first error protobuf reports (the later ones are usually consequences of it).
class FirstErrorCollector : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (has_error_) return;
    has_error_ = true;
    line_ = line;
    column_ = column;
    message_ = message;
  }
  void AddWarning(int, pb::io::ColumnNumber, const std::string&) override {}

  bool has_error() const { return has_error_; }
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& message() const { return message_; }

 private:
  bool has_error_ = false;
  int line_ = -1;
  int column_ = -1;
  std::string message_;
};

// The quoted strings of a protobuf error message, in order.
std::vector<std::string> quoted(const std::string& message) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t open = message.find('"', pos);
    if (open == std::string::npos) break;
    const std::size_t close = message.find('"', open + 1);
    if (close == std::string::npos) break;
    out.push_back(message.substr(open + 1, close - open - 1));
    pos = close + 1;
  }
  return out;
}

// A hint for protobuf's parse error: the closest field or enum value name where one is close.
std::string parse_hint(const std::string& message) {
  const std::vector<std::string> q = quoted(message);
  if (message.find("has no field named") != std::string::npos && q.size() >= 2) {
    const std::string& field = q[1];
    if (const pb::Descriptor* d = pb::DescriptorPool::generated_pool()->FindMessageTypeByName(q[0])) {
      std::vector<std::string> names;
      for (int i = 0; i < d->field_count(); ++i) names.push_back(d->field(i)->name());
      const std::string close = closest_match(field, names);
      if (!close.empty()) return "did you mean \"" + close + "\"?";
      if (kTritonOnlyFields.count(field) != 0) {
        return "\"" + field +
               "\" is a Triton field glassbox does not support; remove it (docs/export.md lists the fields)";
      }
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      return "fields of " + d->name() + ": " + list;
    }
  }
  if (message.find("Unknown enumeration value") != std::string::npos && !q.empty()) {
    std::vector<std::string> values;
    for (const pb::EnumDescriptor* e :
         {triton::DataType_descriptor(), triton::ModelInstanceGroup::Kind_descriptor(),
          triton::ModelInput::Format_descriptor(), triton::ModelQueuePolicy::TimeoutAction_descriptor()}) {
      for (int i = 0; i < e->value_count(); ++i) values.push_back(e->value(i)->name());
    }
    const std::string close = closest_match(q[0], values);
    if (!close.empty()) return "did you mean " + close + "?";
    return "data types are TYPE_FP32, TYPE_INT64, ... and instance kinds KIND_CPU, KIND_GPU (docs/export.md)";
  }
  return "fix the file's protobuf text format (docs/export.md shows a complete config.pbtxt)";
}

std::string format_double(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string join_doubles(const std::vector<double>& values) {
  std::string out;
  for (double v : values) out += (out.empty() ? "" : ",") + format_double(v);
  return out;
}

bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

// Validation helpers: every message names the source and the field path.
class Checker {
 public:
  explicit Checker(std::string source) : source_(std::move(source)) {}

  template <typename Msg>
  void check(bool ok, const std::string& field, const Msg& problem, const std::string& hint) const {
    if (ok) return;
    std::ostringstream os;
    os << source_ << ": " << field << " " << problem;
    throw Error(ErrorCode::kInvalidArgument, os.str(), hint);
  }

  // dims (or reshape.shape): each > 0 or -1; `allow_empty` for reshape (a scalar).
  template <typename Repeated>
  void dims(const Repeated& d, const std::string& field, bool allow_empty) const {
    check(allow_empty || !d.empty(), field, "is empty",
          "give one sample's shape without the batch axis, e.g. dims: [1, 28, 28]");
    for (int j = 0; j < d.size(); ++j) {
      check(d[j] > 0 || d[j] == -1, field + "[" + std::to_string(j) + "]", "is " + std::to_string(d[j]),
            "each dimension is a positive size or -1 for a variable size");
    }
  }

 private:
  std::string source_;
};

template <typename Repeated>
std::int64_t element_count(const Repeated& d) {
  std::int64_t n = 1;
  for (auto v : d) {
    if (v < 0) return -1;
    n *= v;
  }
  return n;
}

template <typename Tensor>
void check_tensor(const Checker& c, const Tensor& t, const std::string& field, std::set<std::string>& names) {
  c.check(!t.name().empty(), field + ".name", "is empty", "name every tensor, e.g. INPUT__0 / OUTPUT__0");
  c.check(names.insert(t.name()).second, field + ".name", "\"" + t.name() + "\" is used twice",
          "give each tensor a distinct name");
  c.check(t.data_type() != triton::TYPE_INVALID, field + ".data_type", "is missing (TYPE_INVALID)",
          "set data_type, e.g. TYPE_FP32");
  c.dims(t.dims(), field + ".dims", false);
  if (t.has_reshape()) {
    c.dims(t.reshape().shape(), field + ".reshape.shape", true);
    const std::int64_t a = element_count(t.dims());
    const std::int64_t b = element_count(t.reshape().shape());
    c.check(a < 0 || b < 0 || a == b, field + ".reshape.shape",
            "holds " + std::to_string(b) + " elements but dims hold " + std::to_string(a),
            "a reshape must keep the number of elements");
  }
}

void check_queue_policy(const Checker& c, const triton::ModelQueuePolicy& p, const std::string& field) {
  c.check(p.timeout_action() != triton::ModelQueuePolicy::DELAY || p.default_timeout_microseconds() > 0 ||
              p.allow_timeout_override(),
          field + ".timeout_action", "is DELAY without a timeout", "set default_timeout_microseconds or use REJECT");
}

}  // namespace

void ModelConfigOptions::validate() const {
  GB_CHECK(max_batch_size >= 0, InvalidArgument, "max_batch_size is " << max_batch_size,
           "use 0 (no batch axis) or a positive size, e.g. 64");
  for (std::int32_t p : preferred_batch_sizes) {
    GB_CHECK(p >= 1 && p <= max_batch_size, InvalidArgument,
             "preferred batch size " << p << " is outside 1.." << max_batch_size,
             "preferred batch sizes must be between 1 and max_batch_size");
  }
  GB_CHECK(!dynamic_batching || max_batch_size > 0, InvalidArgument, "dynamic batching with max_batch_size 0",
           "set max_batch_size > 0 or turn dynamic batching off");
  GB_CHECK(instance_count >= 1, InvalidArgument, "instance count is " << instance_count, "use at least 1 instance");
  GB_CHECK(gpus.empty() || instance_kind == InstanceKind::kGpu, InvalidArgument, "GPUs listed for a CPU instance group",
           "choose the GPU instance kind or drop the GPU list");
  for (std::int32_t g : gpus) GB_CHECK(g >= 0, InvalidArgument, "GPU index " << g, "GPU indices start at 0");
  GB_CHECK(latest_versions >= 1, InvalidArgument, "latest_versions is 0", "serve at least the latest version (1)");
}

triton::ModelConfig make_model_config(const std::string& name, const nn::ModelContract& contract,
                                      const ModelConfigOptions& options) {
  options.validate();
  contract.validate();
  triton::ModelConfig c;
  c.set_name(name);
  c.set_platform(kTorchScriptPlatform);
  c.mutable_version_policy()->mutable_latest()->set_num_versions(options.latest_versions);
  c.set_max_batch_size(options.max_batch_size);

  triton::ModelInput* in = c.add_input();
  in->set_name(kTorchScriptInput);
  in->set_data_type(triton::TYPE_FP32);
  if (contract.layout == "NCHW" && contract.input_shape.size() == 3) in->set_format(triton::ModelInput::FORMAT_NCHW);
  for (std::int64_t d : contract.input_shape) in->add_dims(d);

  triton::ModelOutput* out = c.add_output();
  out->set_name(kTorchScriptOutput);
  out->set_data_type(triton::TYPE_FP32);
  out->add_dims(contract.num_classes);
  out->set_label_filename(kLabelsFile);

  if (options.dynamic_batching) {
    triton::ModelDynamicBatching* b = c.mutable_dynamic_batching();
    std::vector<std::int32_t> preferred = options.preferred_batch_sizes;
    if (preferred.empty()) {
      if (options.max_batch_size >= 2) preferred.push_back(options.max_batch_size / 2);
      preferred.push_back(options.max_batch_size);
    }
    std::sort(preferred.begin(), preferred.end());
    preferred.erase(std::unique(preferred.begin(), preferred.end()), preferred.end());
    for (std::int32_t p : preferred) b->add_preferred_batch_size(p);
    b->set_max_queue_delay_microseconds(options.max_queue_delay_microseconds);
  }

  triton::ModelInstanceGroup* g = c.add_instance_group();
  g->set_count(options.instance_count);
  g->set_kind(options.instance_kind == InstanceKind::kGpu ? triton::ModelInstanceGroup::KIND_GPU
                                                          : triton::ModelInstanceGroup::KIND_CPU);
  for (std::int32_t gpu : options.gpus) g->add_gpus(gpu);

  c.set_default_model_filename(kModelFile);

  auto param = [&c](const std::string& key, const std::string& value) {
    if (!value.empty()) (*c.mutable_parameters())["glassbox." + key].set_string_value(value);
  };
  param("contract", kContractFile);
  param("architecture", contract.architecture);
  param("channel_order", contract.channel_order);
  param("scale", format_double(contract.scale));
  param("mean", join_doubles(contract.mean));
  param("std", join_doubles(contract.std));
  param("output_kind", contract.output_kind);

  if (options.warmup) {
    triton::ModelWarmup* w = c.add_model_warmup();
    w->set_name("zeros");
    w->set_batch_size(1);
    w->set_count(1);
    triton::ModelWarmup::Input& wi = (*w->mutable_inputs())[kTorchScriptInput];
    wi.set_data_type(triton::TYPE_FP32);
    for (std::int64_t d : contract.input_shape) wi.add_dims(d);
    wi.set_zero_data(true);
  }
  validate_model_config(c, name);
  return c;
}

void validate_model_config(const triton::ModelConfig& config, const std::string& expected_name,
                           const std::string& source) {
  const Checker c(source);
  c.check(!config.name().empty(), "name", "is empty", "set name to the model directory's name");
  c.check(expected_name.empty() || config.name() == expected_name, "name",
          "is \"" + config.name() + "\" but the model directory is \"" + expected_name + "\"",
          "set name: \"" + expected_name + "\" or rename the directory");
  c.check(!config.platform().empty() || !config.backend().empty(), "platform", "and backend are both empty",
          "set platform: \"pytorch_libtorch\" for a TorchScript model");
  c.check(config.max_batch_size() >= 0, "max_batch_size", "is " + std::to_string(config.max_batch_size()),
          "use 0 (the model takes no batch axis) or the largest batch, e.g. 64");
  c.check(is_plain_file_name(config.default_model_filename()) || config.default_model_filename().empty(),
          "default_model_filename", "\"" + config.default_model_filename() + "\" is not a file name",
          "give a file name inside the version folder, e.g. model.pt");

  if (config.has_version_policy()) {
    const triton::ModelVersionPolicy& v = config.version_policy();
    if (v.has_latest()) {
      c.check(v.latest().num_versions() >= 1, "version_policy.latest.num_versions", "is 0", "serve at least 1 version");
    } else if (v.has_specific()) {
      c.check(!v.specific().versions().empty(), "version_policy.specific.versions", "is empty",
              "list the versions to serve, e.g. [1, 2]");
      std::set<std::int64_t> seen;
      for (int i = 0; i < v.specific().versions_size(); ++i) {
        const std::int64_t ver = v.specific().versions(i);
        const std::string f = "version_policy.specific.versions[" + std::to_string(i) + "]";
        c.check(ver >= 1, f, "is " + std::to_string(ver), "versions are numbered from 1");
        c.check(seen.insert(ver).second, f, "repeats version " + std::to_string(ver), "list each version once");
      }
    }
  }

  c.check(config.input_size() > 0, "input", "is empty",
          "describe the model's input, e.g. input [{ name: \"INPUT__0\" ... }]");
  c.check(config.output_size() > 0, "output", "is empty",
          "describe the model's output, e.g. output [{ name: \"OUTPUT__0\" ... }]");
  std::set<std::string> input_names;
  for (int i = 0; i < config.input_size(); ++i) {
    const triton::ModelInput& in = config.input(i);
    const std::string f = "input[" + std::to_string(i) + "]";
    check_tensor(c, in, f, input_names);
    if (in.format() != triton::ModelInput::FORMAT_NONE) {
      c.check(in.dims_size() == 3, f + ".format",
              std::string(triton::ModelInput::Format_Name(in.format())) + " needs 3 dims, got " +
                  std::to_string(in.dims_size()),
              "give dims [C, H, W] (or [H, W, C]) or drop format");
    }
  }
  std::set<std::string> output_names;
  for (int i = 0; i < config.output_size(); ++i) {
    const triton::ModelOutput& out = config.output(i);
    const std::string f = "output[" + std::to_string(i) + "]";
    check_tensor(c, out, f, output_names);
    c.check(out.label_filename().empty() || is_plain_file_name(out.label_filename()), f + ".label_filename",
            "\"" + out.label_filename() + "\" is not a file name", "name a file beside config.pbtxt, e.g. labels.txt");
  }

  for (int i = 0; i < config.instance_group_size(); ++i) {
    const triton::ModelInstanceGroup& g = config.instance_group(i);
    const std::string f = "instance_group[" + std::to_string(i) + "]";
    c.check(g.count() >= 0, f + ".count", "is " + std::to_string(g.count()), "use a count >= 1 (0 means 1)");
    c.check(g.gpus().empty() || g.kind() == triton::ModelInstanceGroup::KIND_GPU ||
                g.kind() == triton::ModelInstanceGroup::KIND_AUTO,
            f + ".gpus", "are listed for kind " + triton::ModelInstanceGroup::Kind_Name(g.kind()),
            "drop gpus or use kind: KIND_GPU");
    for (int j = 0; j < g.gpus_size(); ++j) {
      c.check(g.gpus(j) >= 0, f + ".gpus[" + std::to_string(j) + "]", "is " + std::to_string(g.gpus(j)),
              "GPU indices start at 0");
    }
  }

  if (config.has_dynamic_batching()) {
    const triton::ModelDynamicBatching& b = config.dynamic_batching();
    c.check(config.max_batch_size() > 0, "dynamic_batching", "is set but max_batch_size is 0",
            "set max_batch_size > 0 (the model takes a batch axis) or remove dynamic_batching");
    for (int i = 0; i < b.preferred_batch_size_size(); ++i) {
      const std::int32_t p = b.preferred_batch_size(i);
      c.check(
          p >= 1 && p <= config.max_batch_size(), "dynamic_batching.preferred_batch_size[" + std::to_string(i) + "]",
          "is " + std::to_string(p) + ", outside 1..max_batch_size (" + std::to_string(config.max_batch_size()) + ")",
          "use preferred sizes between 1 and max_batch_size");
    }
    const std::string levels = std::to_string(b.priority_levels());
    if (b.priority_levels() == 0) {
      c.check(b.default_priority_level() == 0, "dynamic_batching.default_priority_level",
              "is set but priority_levels is 0", "set priority_levels or remove default_priority_level");
      c.check(b.priority_queue_policy().empty(), "dynamic_batching.priority_queue_policy",
              "is set but priority_levels is 0", "set priority_levels or remove priority_queue_policy");
    } else {
      c.check(b.default_priority_level() >= 1 && b.default_priority_level() <= b.priority_levels(),
              "dynamic_batching.default_priority_level",
              "is " + std::to_string(b.default_priority_level()) + ", outside 1..priority_levels (" + levels + ")",
              "set default_priority_level between 1 and priority_levels");
      for (const auto& [level, policy] : b.priority_queue_policy()) {
        const std::string f = "dynamic_batching.priority_queue_policy[" + std::to_string(level) + "]";
        c.check(level >= 1 && level <= b.priority_levels(), f,
                "names level " + std::to_string(level) + ", outside 1.." + levels,
                "key priority_queue_policy by levels 1..priority_levels");
        check_queue_policy(c, policy, f);
      }
    }
    if (b.has_default_queue_policy())
      check_queue_policy(c, b.default_queue_policy(), "dynamic_batching.default_queue_policy");
  }

  for (const auto& [key, value] : config.parameters()) {
    c.check(!key.empty(), "parameters", "has an empty key", "give each parameter a name");
  }

  for (int i = 0; i < config.model_warmup_size(); ++i) {
    const triton::ModelWarmup& w = config.model_warmup(i);
    const std::string f = "model_warmup[" + std::to_string(i) + "]";
    c.check(!w.name().empty(), f + ".name", "is empty", "name each warm-up sample");
    if (config.max_batch_size() > 0) {
      c.check(w.batch_size() >= 1 && static_cast<std::int64_t>(w.batch_size()) <= config.max_batch_size(),
              f + ".batch_size",
              "is " + std::to_string(w.batch_size()) + ", outside 1..max_batch_size (" +
                  std::to_string(config.max_batch_size()) + ")",
              "use a warm-up batch between 1 and max_batch_size");
    } else {
      c.check(w.batch_size() <= 1, f + ".batch_size",
              "is " + std::to_string(w.batch_size()) + " but max_batch_size is 0",
              "use batch_size 1 (or leave it out) for a model without a batch axis");
    }
    c.check(!w.inputs().empty(), f + ".inputs", "is empty", "give data for every input");
    for (const auto& [name, wi] : w.inputs()) {
      const std::string fi = f + ".inputs[\"" + name + "\"]";
      c.check(input_names.count(name) != 0, fi, "names no input of the model", "key warm-up inputs by the input names");
      c.check(wi.data_type() != triton::TYPE_INVALID, fi + ".data_type", "is missing (TYPE_INVALID)",
              "set data_type, e.g. TYPE_FP32");
      c.dims(wi.dims(), fi + ".dims", false);
      for (int j = 0; j < wi.dims_size(); ++j) {
        c.check(wi.dims(j) > 0, fi + ".dims[" + std::to_string(j) + "]", "is -1", "warm-up data needs fixed sizes");
      }
      c.check(wi.input_data_type_case() != triton::ModelWarmup::Input::INPUT_DATA_TYPE_NOT_SET, fi, "has no data",
              "set zero_data: true, random_data: true or input_data_file");
    }
  }
}

triton::ModelConfig parse_model_config(const std::string& text, const std::string& source,
                                       const ParseConfigOptions& options) {
  triton::ModelConfig config;
  pb::TextFormat::Parser parser;
  FirstErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  parser.AllowUnknownField(options.allow_unknown_fields);
  if (!parser.ParseFromString(text, &config)) {
    const std::string where =
        errors.line() >= 0 ? ":" + std::to_string(errors.line() + 1) + ":" + std::to_string(errors.column() + 1) : "";
    const std::string message = errors.has_error() ? errors.message() : "not a model configuration";
    GB_THROW(DataLoss, source << where << ": " << message, parse_hint(message));
  }
  if (options.validate) validate_model_config(config, options.expected_name, source);
  return config;
}

std::string print_model_config(const triton::ModelConfig& config) {
  pb::TextFormat::Printer printer;
  printer.SetUseShortRepeatedPrimitives(true);
  printer.SetUseUtf8StringEscaping(true);
  std::string text;
  GB_CHECK(printer.PrintToString(config, &text), Internal, "cannot print the model configuration of " << config.name(),
           "report this as a bug");
  return "# Triton model configuration (protobuf text format), written by glassbox; see docs/export.md\n" + text;
}

triton::ModelConfig read_model_config(const fs::path& path, const std::string& expected_name,
                                      const ParseConfigOptions& options) {
  ParseConfigOptions o = options;
  if (!expected_name.empty()) o.expected_name = expected_name;
  GB_CHECK(fs::is_regular_file(path), NotFound, "no model configuration " << path.string(),
           "a model directory holds config.pbtxt (glassbox export --format repository writes one)");
  return parse_model_config(read_file(path), path.string(), o);
}

std::uintmax_t write_model_config(const fs::path& path, const triton::ModelConfig& config) {
  validate_model_config(config, {}, path.string());
  const std::string text = print_model_config(config);
  write_file_atomic(path, text);
  return text.size();
}

std::string model_config_to_json(const triton::ModelConfig& config) {
  pb::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  std::string json;
  const auto status = pb::util::MessageToJsonString(config, &json, o);
  GB_CHECK(status.ok(), Internal,
           "cannot convert the configuration of " << config.name() << " to JSON: " << status.ToString(),
           "report this as a bug");
  return json;
}

std::string kserve_datatype(triton::DataType type) {
  if (type == triton::TYPE_STRING) return "BYTES";
  const std::string& name = triton::DataType_Name(type);
  return name.rfind("TYPE_", 0) == 0 ? name.substr(5) : name;
}

}  // namespace glassbox::exporter
