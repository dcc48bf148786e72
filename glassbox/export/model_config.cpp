// Over 600 lines: Triton's config.pbtxt in one place — parse (strict and lenient, with the list of
// Triton fields glassbox skips), print, make and validate share the descriptor walks and messages.
#include "glassbox/export/model_config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

#include "glassbox/base/config.h"
#include "glassbox/base/error.h"
#include "glassbox/base/files.h"

namespace glassbox::exporter {
namespace {

namespace fs = std::filesystem;
namespace pb = google::protobuf;

// Fields of Triton's model_config.proto that glassbox's message leaves out: the message they
// belong to, their name and number, and the shape of their value.
enum class Shape { kMessage, kMessages, kStringMap, kBool, kStrings };
struct TritonField {
  const char* message;
  const char* name;
  int number;
  Shape shape;
  bool scheduling = false;  // a member of ModelConfig's oneof scheduling_choice
};
constexpr TritonField kTritonOnlyFields[] = {
    {"ModelConfig", "cc_model_filenames", 9, Shape::kStringMap},
    {"ModelConfig", "metric_tags", 10, Shape::kStringMap},
    {"ModelConfig", "optimization", 12, Shape::kMessage},
    {"ModelConfig", "sequence_batching", 13, Shape::kMessage, true},
    {"ModelConfig", "ensemble_scheduling", 15, Shape::kMessage, true},
    {"ModelConfig", "model_operations", 18, Shape::kMessage},
    {"ModelConfig", "batch_input", 20, Shape::kMessages},
    {"ModelConfig", "batch_output", 21, Shape::kMessages},
    {"ModelConfig", "model_repository_agents", 23, Shape::kMessage},
    {"ModelConfig", "model_metrics", 26, Shape::kMessage},
    {"ModelInstanceGroup", "profile", 5, Shape::kStrings},
    {"ModelInstanceGroup", "rate_limiter", 6, Shape::kMessage},
    {"ModelInstanceGroup", "secondary_devices", 8, Shape::kMessages},
    {"ModelInput", "is_non_linear_format_io", 9, Shape::kBool},
    {"ModelOutput", "is_non_linear_format_io", 7, Shape::kBool},
};

// "metric_tags" -> "MetricTags" (upper) or "metricTags" (JSON's name).
std::string camel_case(std::string_view name, bool upper) {
  std::string out;
  bool next_upper = upper;
  for (char c : name) {
    if (c == '_') {
      next_upper = true;
      continue;
    }
    out += next_upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    next_upper = false;
  }
  return out;
}

// The Triton field of `message` (a message's short name, "ModelConfig") that glassbox leaves out,
// by its name or its JSON name; nullptr when there is none.
const TritonField* triton_only_field(std::string_view message, std::string_view name) {
  for (const TritonField& t : kTritonOnlyFields) {
    if (message == t.message && (name == t.name || name == camel_case(t.name, false))) return &t;
  }
  return nullptr;
}

const char* shape_text(Shape shape) {
  switch (shape) {
    case Shape::kMessage: return "a message";
    case Shape::kMessages: return "a list of messages";
    case Shape::kStringMap: return "a map of strings";
    case Shape::kBool: return "a bool";
    case Shape::kStrings: return "a list of strings";
  }
  return "?";
}

struct Diagnostic {
  int line = -1;  // 0-based, as protobuf reports it
  int column = -1;
  std::string message;
};

// Keeps the first error protobuf reports (the later ones are usually consequences of it).
class FirstErrorCollector : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (!error_) error_ = Diagnostic{line, column, message};
  }
  void AddWarning(int, pb::io::ColumnNumber, const std::string&) override {}

  const std::optional<Diagnostic>& error() const { return error_; }

 private:
  std::optional<Diagnostic> error_;
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
      if (triton_only_field(d->name(), field) != nullptr) {
        return "\"" + field +
               "\" is a Triton field glassbox does not support; remove it (docs/export.md lists the fields)";
      }
      std::vector<std::string> served;  // glassbox's fields
      for (int i = 0; i < d->field_count(); ++i) served.push_back(d->field(i)->name());
      std::vector<std::string> names = served;  // and Triton's others, for the suggestion
      for (const TritonField& t : kTritonOnlyFields)
        if (d->name() == t.message) names.push_back(t.name);
      const std::string close = closest_match(field, names);
      if (!close.empty()) return "did you mean \"" + close + "\"?";
      std::string list;
      for (const auto& n : served) list += (list.empty() ? "" : ", ") + n;
      return "\"" + field + "\" is in no Triton model configuration; fields of " + d->name() + ": " + list;
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

Error parse_error(const std::string& source, const Diagnostic& d, std::string hint = {}) {
  const std::string where = d.line >= 0 ? ":" + std::to_string(d.line + 1) + ":" + std::to_string(d.column + 1) : "";
  return Error(ErrorCode::kDataLoss, source + where + ": " + d.message,
               hint.empty() ? parse_hint(d.message) : std::move(hint));
}

// Walks the tokens of config.pbtxt along glassbox's messages to find the fields of Triton's that
// glassbox leaves out. Each one is blanked out of the text (spaces; line breaks and every other
// line and column stay as they were) and listed, after a check of the shape of its value: what
// it holds is not read, as glassbox does not implement it. Everything else is left to protobuf's
// parser, which reads the blanked text next: a field in no Triton message, a wrong type or a
// syntax error is its error, at the same position as in the original text.
class TritonFieldSkipper {
 public:
  struct Skipped {
    int line = -1;
    std::string path;
  };

  explicit TritonFieldSkipper(std::string& text)
      : text_(text), input_(text.data(), static_cast<int>(text.size())), tokenizer_(&input_, &ignored_) {
    tokenizer_.set_allow_f_after_float(true);
    tokenizer_.set_comment_style(pb::io::Tokenizer::SH_COMMENT_STYLE);
    tokenizer_.set_require_space_after_number(false);
    tokenizer_.set_allow_multiline_strings(true);
    std::size_t start = 0;
    while (true) {
      line_starts_.push_back(start);
      const std::size_t nl = text_.find('\n', start);
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
  }

  void run() {
    tokenizer_.Next();
    message(*triton::ModelConfig::descriptor(), "", true);
  }

  const std::vector<Skipped>& skipped() const { return skipped_; }
  // A skipped field whose value has the wrong shape, or a second scheduler: the first one.
  const std::optional<Diagnostic>& error() const { return error_; }
  const std::string& error_hint() const { return error_hint_; }

 private:
  using Token = pb::io::Tokenizer::Token;

  const Token& tok() const { return tokenizer_.current(); }
  bool end() const { return tok().type == pb::io::Tokenizer::TYPE_END; }
  bool at(const char* symbol) const { return tok().type == pb::io::Tokenizer::TYPE_SYMBOL && tok().text == symbol; }
  bool at_open() const { return at("{") || at("<"); }
  bool at_close() const { return at("}") || at(">"); }
  void next() {
    last_line_ = tok().line;
    last_end_ = tok().end_column;
    tokenizer_.Next();
  }

  // Byte offset of a tokenizer position (a tab advances the column to the next multiple of 8).
  std::size_t offset(int line, int column) const {
    std::size_t i = line_starts_.at(static_cast<std::size_t>(line));
    for (int c = 0; c < column && i < text_.size() && text_[i] != '\n'; ++i)
      c = text_[i] == '\t' ? c + 8 - c % 8 : c + 1;
    return i;
  }

  void fail(int line, int column, std::string message, std::string hint) {
    if (error_) return;
    error_ = Diagnostic{line, column, std::move(message)};
    error_hint_ = std::move(hint);
  }

  // Skips `{ ... }`, `< ... >` or `[ ... ]` with what it holds.
  void skip_balanced() {
    int depth = 0;
    do {
      if (at_open() || at("[")) ++depth;
      if (at_close() || at("]")) --depth;
      next();
    } while (depth > 0 && !end());
  }

  // Skips a field's value, after its name: `: scalar`, `: [ ... ]`, `{ ... }`, `: { ... }`.
  void skip_value() {
    if (at(":")) next();
    if (at_open() || at("[")) {
      skip_balanced();
      return;
    }
    if (at("-")) next();
    const bool string = tok().type == pb::io::Tokenizer::TYPE_STRING;
    if (!end() && !at_close()) next();
    while (string && tok().type == pb::io::Tokenizer::TYPE_STRING) next();  // "a" "b" is one string
  }

  // Skips a value that must be one message or a list of them; false when it is not.
  bool skip_messages() {
    if (at_open()) {
      skip_balanced();
      return true;
    }
    if (!at("[")) {
      skip_value();
      return false;
    }
    next();
    bool ok = true;
    while (!end() && !at("]")) {
      if (at_open()) {
        skip_balanced();
      } else if (at(",")) {
        next();
      } else {
        ok = false;
        skip_value();
      }
    }
    if (at("]")) next();
    return ok;
  }

  // Skips a scalar value or a list of them of `type`; false when it is something else.
  bool skip_scalars(Shape shape) {
    const auto scalar_ok = [&] {
      if (shape == Shape::kStrings) return tok().type == pb::io::Tokenizer::TYPE_STRING;
      static const std::set<std::string> kBools = {"true", "True", "t", "false", "False", "f", "0", "1"};
      return kBools.count(tok().text) != 0 && tok().type != pb::io::Tokenizer::TYPE_STRING;
    };
    if (!at("[")) {
      const bool ok = scalar_ok();
      skip_value();
      return ok;
    }
    if (shape != Shape::kStrings) {
      skip_balanced();
      return false;
    }
    next();
    bool ok = true;
    while (!end() && !at("]")) {
      if (at(",")) {
        next();
        continue;
      }
      ok = ok && scalar_ok();
      if (at_open() || at("[")) {
        skip_balanced();
      } else {
        skip_value();
      }
    }
    if (at("]")) next();
    return ok;
  }

  // Skips the value of Triton field `t` (after its name) and checks its shape.
  void skip_triton_field(const TritonField& t) {
    const bool colon = at(":");
    if (colon) next();
    const int line = tok().line;
    const int column = tok().column;
    const std::string found = end() ? std::string("the end of the file") : "\"" + tok().text + "\"";
    bool ok = false;
    switch (t.shape) {
      case Shape::kMessage:
      case Shape::kMessages:
      case Shape::kStringMap: ok = skip_messages(); break;
      case Shape::kBool:
      case Shape::kStrings: ok = colon && skip_scalars(t.shape); break;
    }
    if (!ok) {
      fail(line, column,
           std::string("Triton's field \"") + t.name + "\" of " + t.message + " is " + shape_text(t.shape) +
               ", found " + found + ".",
           std::string("write it as Triton's model configuration does, or remove it (glassbox does not implement "
                       "it and skips it)"));
    }
  }

  // The fields of one message, up to its closing brace (left for the caller) or the end.
  void message(const pb::Descriptor& d, const std::string& path, bool top) {
    std::map<const pb::FieldDescriptor*, int> count;  // repeated fields' next index
    while (!end()) {
      if (at_close()) {
        if (!top) return;
        next();  // a stray brace: the parser reports it
        continue;
      }
      if (at(";") || at(",")) {
        next();
        continue;
      }
      if (at("[")) {  // an extension or Any's type URL: the parser reports it
        skip_balanced();
        skip_value();
        continue;
      }
      if (tok().type != pb::io::Tokenizer::TYPE_IDENTIFIER) {
        next();
        continue;
      }
      const std::string name = tok().text;
      const int line = tok().line;
      const int column = tok().column;
      next();
      if (top && (name == "dynamic_batching" || name == "sequence_batching" || name == "ensemble_scheduling")) {
        if (scheduler_.empty()) scheduler_ = name;
        if (scheduler_ != name) {
          fail(line, column,
               "Field \"" + name + "\" is specified along with field \"" + scheduler_ +
                   "\", another member of oneof \"scheduling_choice\" for type ModelConfig.",
               "a model has one scheduler: keep one of dynamic_batching, sequence_batching, ensemble_scheduling");
        }
      }
      if (const TritonField* t = triton_only_field(d.name(), name)) {
        skip_triton_field(*t);
        const std::size_t from = offset(line, column);
        const std::size_t to = offset(last_line_, last_end_);
        for (std::size_t i = from; i < to && i < text_.size(); ++i)
          if (text_[i] != '\n') text_[i] = ' ';
        skipped_.push_back({line, path + name});
        continue;
      }
      const pb::FieldDescriptor* f = d.FindFieldByName(name);
      if (f == nullptr || f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        skip_value();  // a scalar, or a field in no Triton message: the parser reports it
        continue;
      }
      const auto sub = [&] {
        return f->is_repeated() ? path + name + "[" + std::to_string(count[f]++) + "]." : path + name + ".";
      };
      if (at(":")) next();
      if (at_open()) {
        next();
        message(*f->message_type(), sub(), false);
        if (at_close()) next();
      } else if (at("[")) {
        next();
        while (!end() && !at("]")) {
          if (at_open()) {
            next();
            message(*f->message_type(), sub(), false);
            if (at_close()) next();
          } else if (at(",")) {
            next();
          } else {
            skip_value();  // not a message: the parser reports it
          }
        }
        if (at("]")) next();
      }
    }
  }

  std::string& text_;
  std::vector<std::size_t> line_starts_;
  pb::io::ArrayInputStream input_;
  FirstErrorCollector ignored_;          // the parser reports what does not tokenize
  mutable pb::io::Tokenizer tokenizer_;  // current() is not const
  int last_line_ = 0;
  int last_end_ = 0;
  std::string scheduler_;
  std::vector<Skipped> skipped_;
  std::optional<Diagnostic> error_;
  std::string error_hint_;
};

bool json_has_shape(const nlohmann::json& v, Shape shape) {
  if (v.is_null()) return true;  // the default, as protobuf's JSON reads it
  const auto all = [&v](auto pred) { return std::all_of(v.begin(), v.end(), pred); };
  switch (shape) {
    case Shape::kMessage: return v.is_object();
    case Shape::kMessages: return v.is_array() && all([](const nlohmann::json& e) { return e.is_object(); });
    case Shape::kStringMap: return v.is_object() && all([](const nlohmann::json& e) { return e.is_string(); });
    case Shape::kBool: return v.is_boolean();
    case Shape::kStrings: return v.is_array() && all([](const nlohmann::json& e) { return e.is_string(); });
  }
  return false;
}

// Checks every key of `j` against `d` (and Triton's other fields), removing the skipped ones.
// Values of the wrong type are left for protobuf's JSON parser to report.
void check_json_fields(nlohmann::json& j, const pb::Descriptor& d, const std::string& path, const std::string& source,
                       const ParseConfigOptions& options) {
  if (!j.is_object()) return;
  const std::string at = path.empty() ? "" : path.substr(0, path.size() - 1) + ": ";
  for (auto it = j.begin(); it != j.end();) {
    const std::string key = it.key();
    const pb::FieldDescriptor* f = d.FindFieldByName(key);
    if (f == nullptr) f = d.FindFieldByCamelcaseName(key);
    if (f == nullptr) {
      const TritonField* t = triton_only_field(d.name(), key);
      const std::string unknown = "Message type \"" + d.full_name() + "\" has no field named \"" + key + "\".";
      GB_CHECK(t != nullptr && options.allow_unknown_fields, InvalidArgument, source << ": " << at << unknown,
               parse_hint(unknown));
      GB_CHECK(json_has_shape(it.value(), t->shape), InvalidArgument,
               source << ": " << at << "Triton's field \"" << t->name << "\" of " << t->message << " is "
                      << shape_text(t->shape) << ", found " << it.value().type_name() << ".",
               std::string("write it as Triton's model configuration does, or remove it (glassbox does not implement "
                           "it and skips it)"));
      if (options.skipped != nullptr) options.skipped->push_back(path + t->name);
      it = j.erase(it);
      continue;
    }
    nlohmann::json& v = it.value();
    if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_map()) {
        const pb::FieldDescriptor* value = f->message_type()->map_value();
        if (value->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE && v.is_object()) {
          for (auto& e : v.items())
            check_json_fields(e.value(), *value->message_type(), path + f->name() + "[\"" + e.key() + "\"].", source,
                              options);
        }
      } else if (f->is_repeated()) {
        if (v.is_array()) {
          for (std::size_t i = 0; i < v.size(); ++i)
            check_json_fields(v[i], *f->message_type(), path + f->name() + "[" + std::to_string(i) + "].", source,
                              options);
        }
      } else {
        check_json_fields(v, *f->message_type(), path + f->name() + ".", source, options);
      }
    }
    ++it;
  }
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
  c.set_platform(options.raw_input ? "glassbox" : kTorchScriptPlatform);
  // Raw pixels travel as bytes when the contract scales them from 0..255.
  const bool encoded = options.raw_input && options.encoded_images && !contract.image.is_null();
  const bool bytes =
      options.raw_input && contract.layout == nn::InputLayout::kNCHW && std::abs(contract.scale * 255.0 - 1.0) < 1e-9;
  const triton::DataType input_type = encoded ? triton::TYPE_STRING : bytes ? triton::TYPE_UINT8 : triton::TYPE_FP32;
  const std::vector<std::int64_t> input_dims = encoded ? std::vector<std::int64_t>{1} : contract.input_shape;
  c.mutable_version_policy()->mutable_latest()->set_num_versions(options.latest_versions);
  c.set_max_batch_size(options.max_batch_size);

  triton::ModelInput* in = c.add_input();
  in->set_name(kTorchScriptInput);
  in->set_data_type(input_type);
  if (!encoded && contract.layout == nn::InputLayout::kNCHW && contract.input_shape.size() == 3)
    in->set_format(triton::ModelInput::FORMAT_NCHW);
  for (std::int64_t d : input_dims) in->add_dims(d);

  triton::ModelOutput* out = c.add_output();
  out->set_name(kTorchScriptOutput);
  out->set_data_type(triton::TYPE_FP32);
  out->add_dims(contract.num_classes);
  // Class (or label) names for Triton's classification extension; a regression model's outputs
  // are values, not classes.
  if (contract.task != TaskKind::kRegression) out->set_label_filename(kLabelsFile);

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
  param("channel_order", std::string(name_of(contract.channel_order)));
  param("scale", format_double(contract.scale));
  param("mean", join_doubles(contract.mean));
  param("std", join_doubles(contract.std));
  param("output_kind", std::string(name_of(contract.output_kind)));
  param("task", std::string(name_of(contract.task)));
  if (options.raw_input && contract.task != TaskKind::kRegression) param("output", "probabilities");

  if (options.warmup) {
    triton::ModelWarmup* w = c.add_model_warmup();
    w->set_name("zeros");
    w->set_batch_size(1);
    w->set_count(1);
    triton::ModelWarmup::Input& wi = (*w->mutable_inputs())[kTorchScriptInput];
    wi.set_data_type(input_type);
    for (std::int64_t d : input_dims) wi.add_dims(d);
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
  std::string blanked;
  std::optional<TritonFieldSkipper> skipper;
  if (options.allow_unknown_fields) {
    blanked = text;
    skipper.emplace(blanked);
    skipper->run();
  }
  triton::ModelConfig config;
  pb::TextFormat::Parser parser;
  FirstErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  const bool parsed = parser.ParseFromString(skipper ? blanked : text, &config);
  // The first error in the text: the parser's, or a skipped field's wrong shape before it.
  const std::optional<Diagnostic>& shape = skipper ? skipper->error() : std::nullopt;
  const auto before = [](const Diagnostic& a, const Diagnostic& b) {
    return std::pair(a.line, a.column) < std::pair(b.line, b.column);
  };
  if (shape && (parsed || !errors.error() || before(*shape, *errors.error()))) {
    throw parse_error(source, *shape, skipper->error_hint());
  }
  if (!parsed) throw parse_error(source, errors.error().value_or(Diagnostic{-1, -1, "not a model configuration"}));
  if (skipper && options.skipped != nullptr) {
    for (const TritonFieldSkipper::Skipped& f : skipper->skipped())
      options.skipped->push_back(f.path + " (line " + std::to_string(f.line + 1) + ")");
  }
  if (options.validate) validate_model_config(config, options.expected_name, source);
  return config;
}

triton::ModelConfig parse_model_config_json(const std::string& json, const std::string& source,
                                            const ParseConfigOptions& options) {
  const std::string hint =
      "send the configuration as JSON with Triton's field names, as GET /v2/models/NAME/config returns it";
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  GB_CHECK(!j.is_discarded() && j.is_object(), InvalidArgument,
           source << " is not a JSON object" << (j.is_discarded() ? " (it does not parse as JSON)" : ""), hint);
  check_json_fields(j, *triton::ModelConfig::descriptor(), "", source, options);
  triton::ModelConfig config;
  const auto status = pb::util::JsonStringToMessage(j.dump(), &config, pb::util::JsonParseOptions());
  GB_CHECK(status.ok(), InvalidArgument, source << ": " << status.message().ToString(), hint);
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
