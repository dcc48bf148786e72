#include "glassbox/base/config.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "glassbox/base/error.h"

namespace glassbox {
namespace {

std::string list_of(const std::vector<std::string>& options) {
  std::string list;
  for (const auto& o : options) list += (list.empty() ? "" : ", ") + o;
  return list;
}

// "did you mean ..." for a value outside a choice list.
std::string choice_hint(const std::string& v, const std::vector<std::string>& options) {
  std::string near = closest_match(v, options);
  for (const auto& o : options) {  // "NHWC" for "nhwc": the same word in another case
    if (o.size() == v.size() && std::equal(o.begin(), o.end(), v.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
        })) {
      near = o;
    }
  }
  return near.empty() ? "use one of the listed values" : "did you mean \"" + near + "\"?";
}

std::string join_key(std::string_view prefix, std::string_view name) {
  if (prefix.empty()) return std::string(name);
  return std::string(prefix) + "." + std::string(name);
}

const char* toml_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date/time";
  }
}

std::string describe(const toml::node& n) {
  std::ostringstream os;
  os << toml_type_name(n);
  if (n.is_value()) {
    os << " (";
    n.visit([&](auto&& v) { os << v; });
    os << ")";
  }
  return os.str();
}

// Reads fields from a TOML table; remembers which keys were consumed.
// Every key of the object being read ("trainer.max_epochs", ...), while load_config runs: an
// unknown key is matched against all of them, not only its own section's.
thread_local const std::vector<std::string>* t_all_keys = nullptr;

void list_keys(const nlohmann::json& j, const std::string& prefix, std::vector<std::string>& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it.value().is_object())
      list_keys(it.value(), key, out);
    else
      out.push_back(key);
  }
}

class TomlReader final : public FieldVisitor {
 public:
  TomlReader(const toml::table& table, std::string prefix, std::string source,
             const std::set<std::string>* overridden = nullptr)
      : table_(table), prefix_(std::move(prefix)), source_(std::move(source)), overridden_(overridden) {}

  void field(std::string_view name, std::int64_t& value, std::string_view) override {
    if (const toml::node* n = take(name)) {
      if (auto v = n->as_integer()) {
        value = v->get();
      } else {
        type_error(name, "an integer", *n);
      }
    }
  }
  void field(std::string_view name, double& value, std::string_view) override {
    if (const toml::node* n = take(name)) {
      if (auto f = n->as_floating_point()) {
        value = f->get();
      } else if (auto i = n->as_integer()) {
        value = static_cast<double>(i->get());
      } else {
        type_error(name, "a number", *n);
      }
    }
  }
  void field(std::string_view name, bool& value, std::string_view) override {
    if (const toml::node* n = take(name)) {
      if (auto b = n->as_boolean()) {
        value = b->get();
      } else {
        type_error(name, "true or false", *n);
      }
    }
  }
  void field(std::string_view name, std::string& value, std::string_view) override {
    if (const toml::node* n = take(name)) {
      if (auto s = n->as_string()) {
        value = s->get();
      } else {
        type_error(name, "a string", *n);
      }
    }
  }
  void field(std::string_view name, std::vector<std::int64_t>& value, std::string_view) override {
    if (const toml::node* n = take(name)) {
      value.clear();
      if (auto i = n->as_integer()) {  // a scalar is a one-element list
        value.push_back(i->get());
        return;
      }
      const toml::array* arr = n->as_array();
      if (arr == nullptr) type_error(name, "an array of integers", *n);
      for (const auto& e : *arr) {
        if (auto i = e.as_integer()) {
          value.push_back(i->get());
        } else {
          type_error(name, "an array of integers", e);
        }
      }
    }
  }
  void field(std::string_view name, std::vector<double>& value, std::string_view) override {
    if (const toml::node* n = take(name)) {
      value.clear();
      if (n->is_number()) {
        value.push_back(n->value<double>().value());
        return;
      }
      const toml::array* arr = n->as_array();
      if (arr == nullptr) type_error(name, "an array of numbers", *n);
      for (const auto& e : *arr) {
        if (e.is_number()) {
          value.push_back(e.value<double>().value());
        } else {
          type_error(name, "an array of numbers", e);
        }
      }
    }
  }
  void field(std::string_view name, std::vector<std::string>& value, std::string_view) override {
    if (const toml::node* n = take(name)) {
      value.clear();
      if (auto s = n->as_string()) {
        value.push_back(s->get());
        return;
      }
      const toml::array* arr = n->as_array();
      if (arr == nullptr) type_error(name, "an array of strings", *n);
      for (const auto& e : *arr) {
        if (auto s = e.as_string()) {
          value.push_back(s->get());
        } else {
          type_error(name, "an array of strings", e);
        }
      }
    }
  }
  void choice(std::string_view name, std::string& value, const std::vector<std::string_view>& allowed,
              std::string_view doc) override {
    std::string v = value;
    field(name, v, doc);
    std::vector<std::string> options(allowed.begin(), allowed.end());
    if (std::find(options.begin(), options.end(), v) == options.end()) {
      GB_THROW(
          InvalidArgument,
          origin(name) << ": " << join_key(prefix_, name) << " = \"" << v << "\" is not one of: " << list_of(options),
          choice_hint(v, options));
    }
    value = v;
  }
  void section(std::string_view name, const std::function<void(FieldVisitor&)>& body) override {
    known_.emplace_back(name);
    const toml::node* n = table_.get(name);
    static const toml::table kEmpty;
    const toml::table* sub = &kEmpty;
    if (n != nullptr) {
      sub = n->as_table();
      if (sub == nullptr) type_error(name, "a table", *n);
      consumed_.insert(std::string(name));
    }
    TomlReader reader(*sub, join_key(prefix_, name), source_, overridden_);
    body(reader);
    reader.finish();
  }

  void table_list(std::string_view name, std::size_t, const std::function<void(std::size_t)>& resize,
                  const std::function<void(FieldVisitor&, std::size_t)>& item, std::string_view) override {
    const toml::node* n = take(name);
    if (n == nullptr) return;
    const toml::array* arr = n->as_array();
    if (arr == nullptr) type_error(name, "a list of tables ([[" + join_key(prefix_, name) + "]])", *n);
    for (std::size_t i = 0; i < arr->size(); ++i) {
      if (!(*arr)[i].is_table()) {
        GB_THROW(InvalidArgument,
                 origin(name) << ": " << join_key(prefix_, name) << "[" << i << "] must be a table, got "
                              << describe((*arr)[i]),
                 "write each entry as [[" + join_key(prefix_, name) + "]] with its keys below it, or as {name = ...}");
      }
    }
    resize(arr->size());
    for (std::size_t i = 0; i < arr->size(); ++i) {
      TomlReader reader(*(*arr)[i].as_table(), join_key(prefix_, name) + "[" + std::to_string(i) + "]", source_,
                        overridden_);
      item(reader, i);
      reader.finish();
    }
  }

  // Every key of the table must have been consumed.
  void finish() const {
    for (const auto& [key, node] : table_) {
      std::string k(key.str());
      if (consumed_.count(k) != 0) continue;
      const std::string near = closest_match(k, known_);
      const std::string where = prefix_.empty() ? "the top level" : "[" + prefix_ + "]";
      std::string suggestion;
      if (t_all_keys != nullptr) {
        // The same name in another section ("trainer.lr" -> "optim.lr") is the likeliest meaning.
        for (const auto& full : *t_all_keys) {
          const auto dot = full.rfind('.');
          if ((dot == std::string::npos ? full : full.substr(dot + 1)) == k) {
            suggestion = full;
            break;
          }
        }
      }
      if (suggestion.empty() && !near.empty()) suggestion = join_key(prefix_, near);
      if (suggestion.empty() && t_all_keys != nullptr) suggestion = closest_match(join_key(prefix_, k), *t_all_keys);
      GB_THROW(InvalidArgument, origin(k) << ": unknown key \"" << join_key(prefix_, k) << "\" in " << where,
               suggestion.empty() ? "remove it; see docs/configuration.md for the keys"
                                  : "did you mean \"" + suggestion + "\"?");
    }
  }

 private:
  const toml::node* take(std::string_view name) {
    known_.emplace_back(name);
    const toml::node* n = table_.get(name);
    if (n != nullptr) consumed_.insert(std::string(name));
    return n;
  }
  [[noreturn]] void type_error(std::string_view name, std::string_view expected, const toml::node& got) const {
    GB_THROW(InvalidArgument,
             origin(name) << ": " << join_key(prefix_, name) << " must be " << expected << ", got " << describe(got),
             "fix the value of " + join_key(prefix_, name));
  }

  // Where a key's value came from: "--set" for an override, else the file.
  std::string origin(std::string_view name) const {
    if (overridden_ != nullptr) {
      const std::string full = join_key(prefix_, name);
      for (const auto& o : *overridden_)
        if (o == full || o.rfind(full + ".", 0) == 0) return "--set " + o;
    }
    return source_;
  }

  const toml::table& table_;
  std::string prefix_;
  std::string source_;
  const std::set<std::string>* overridden_;
  std::vector<std::string> known_;
  std::set<std::string> consumed_;
};

class TomlWriter final : public FieldVisitor {
 public:
  explicit TomlWriter(toml::table& table) : table_(table) {}
  void field(std::string_view name, std::int64_t& value, std::string_view) override {
    table_.insert_or_assign(name, value);
  }
  void field(std::string_view name, double& value, std::string_view) override { table_.insert_or_assign(name, value); }
  void field(std::string_view name, bool& value, std::string_view) override { table_.insert_or_assign(name, value); }
  void field(std::string_view name, std::string& value, std::string_view) override {
    table_.insert_or_assign(name, value);
  }
  void field(std::string_view name, std::vector<std::int64_t>& value, std::string_view) override {
    put_array(name, value);
  }
  void field(std::string_view name, std::vector<double>& value, std::string_view) override { put_array(name, value); }
  void field(std::string_view name, std::vector<std::string>& value, std::string_view) override {
    put_array(name, value);
  }
  void choice(std::string_view name, std::string& value, const std::vector<std::string_view>&,
              std::string_view) override {
    table_.insert_or_assign(name, value);
  }
  void section(std::string_view name, const std::function<void(FieldVisitor&)>& body) override {
    toml::table sub;
    TomlWriter w(sub);
    body(w);
    table_.insert_or_assign(name, std::move(sub));
  }
  void table_list(std::string_view name, std::size_t size, const std::function<void(std::size_t)>&,
                  const std::function<void(FieldVisitor&, std::size_t)>& item, std::string_view) override {
    toml::array arr;
    for (std::size_t i = 0; i < size; ++i) {
      toml::table sub;
      TomlWriter w(sub);
      item(w, i);
      arr.push_back(std::move(sub));
    }
    table_.insert_or_assign(name, std::move(arr));
  }

 private:
  template <class V>
  void put_array(std::string_view name, const std::vector<V>& values) {
    toml::array arr;
    for (const auto& v : values) arr.push_back(v);
    table_.insert_or_assign(name, std::move(arr));
  }
  toml::table& table_;
};

class JsonWriter final : public FieldVisitor {
 public:
  explicit JsonWriter(nlohmann::json& j) : j_(j) {}
  void field(std::string_view name, std::int64_t& value, std::string_view) override { j_[std::string(name)] = value; }
  void field(std::string_view name, double& value, std::string_view) override { j_[std::string(name)] = value; }
  void field(std::string_view name, bool& value, std::string_view) override { j_[std::string(name)] = value; }
  void field(std::string_view name, std::string& value, std::string_view) override { j_[std::string(name)] = value; }
  void field(std::string_view name, std::vector<std::int64_t>& value, std::string_view) override {
    j_[std::string(name)] = value;
  }
  void field(std::string_view name, std::vector<double>& value, std::string_view) override {
    j_[std::string(name)] = value;
  }
  void field(std::string_view name, std::vector<std::string>& value, std::string_view) override {
    j_[std::string(name)] = value;
  }
  void choice(std::string_view name, std::string& value, const std::vector<std::string_view>&,
              std::string_view) override {
    j_[std::string(name)] = value;
  }
  void section(std::string_view name, const std::function<void(FieldVisitor&)>& body) override {
    nlohmann::json sub = nlohmann::json::object();
    JsonWriter w(sub);
    body(w);
    j_[std::string(name)] = std::move(sub);
  }
  void table_list(std::string_view name, std::size_t size, const std::function<void(std::size_t)>&,
                  const std::function<void(FieldVisitor&, std::size_t)>& item, std::string_view) override {
    nlohmann::json arr = nlohmann::json::array();
    for (std::size_t i = 0; i < size; ++i) {
      nlohmann::json sub = nlohmann::json::object();
      JsonWriter w(sub);
      item(w, i);
      arr.push_back(std::move(sub));
    }
    j_[std::string(name)] = std::move(arr);
  }

 private:
  nlohmann::json& j_;
};

// Sets "a.b.c" in `root` to the TOML value written in `text`.
void apply_override(toml::table& root, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    GB_THROW(InvalidArgument, "--set " << assignment << ": expected key=value",
             "write e.g. --set trainer.max_epochs=5");
  }
  std::string key = assignment.substr(0, eq);
  std::string text = assignment.substr(eq + 1);
  key.erase(key.find_last_not_of(' ') + 1);
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + text);
  } catch (const toml::parse_error&) {
    parsed = toml::table{{"v", text}};  // a bare word is a string
  }
  toml::table* cur = &root;
  std::size_t start = 0;
  while (true) {
    const auto dot = key.find('.', start);
    std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty())
      GB_THROW(InvalidArgument, "--set " << assignment << ": empty key component",
               "write e.g. --set trainer.max_epochs=5");
    if (dot == std::string::npos) {
      cur->insert_or_assign(part, *parsed.get("v"));
      return;
    }
    toml::node* n = cur->get(part);
    if (n == nullptr) {
      cur->insert_or_assign(part, toml::table{});
      n = cur->get(part);
    }
    if (!n->is_table())
      GB_THROW(InvalidArgument, "--set " << assignment << ": " << key.substr(0, dot) << " is not a table",
               "check the key");
    cur = n->as_table();
    start = dot + 1;
  }
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::string closest_match(std::string_view name, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::string::npos;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(name, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  const std::size_t limit = std::max<std::size_t>(2, name.size() / 3);
  return best_d <= limit ? best : std::string();
}

void load_config(std::string_view toml_text, std::string_view source, const std::vector<std::string>& overrides,
                 const VisitFn& visit) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    GB_THROW(InvalidArgument, source << ":" << where.line << ":" << where.column << ": " << e.description(),
             "fix the TOML syntax at that position");
  }
  std::set<std::string> overridden;
  for (const auto& o : overrides) {
    apply_override(root, o);
    std::string key = o.substr(0, o.find('='));
    key.erase(key.find_last_not_of(' ') + 1);
    overridden.insert(key);
  }
  std::vector<std::string> all_keys;
  list_keys(to_json(visit), "", all_keys);
  t_all_keys = &all_keys;
  struct Reset {
    ~Reset() { t_all_keys = nullptr; }
  } reset;
  TomlReader reader(root, "", std::string(source), &overridden);
  visit(reader);
  reader.finish();
}

std::string to_toml(const VisitFn& visit) {
  toml::table root;
  TomlWriter w(root);
  visit(w);
  std::ostringstream os;
  os << root << "\n";
  return os.str();
}

nlohmann::json to_json(const VisitFn& visit) {
  nlohmann::json j = nlohmann::json::object();
  JsonWriter w(j);
  visit(w);
  return j;
}

void from_json(const nlohmann::json& j, std::string_view source, const VisitFn& visit) {
  // Route through TOML so that the same checks and messages apply.
  std::function<toml::table(const nlohmann::json&)> convert = [&](const nlohmann::json& obj) {
    toml::table t;
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      const auto& v = it.value();
      if (v.is_object()) {
        t.insert_or_assign(it.key(), convert(v));
      } else if (v.is_array()) {
        toml::array arr;
        for (const auto& e : v) {
          if (e.is_object())
            arr.push_back(convert(e));
          else if (e.is_number_integer())
            arr.push_back(e.get<std::int64_t>());
          else if (e.is_number())
            arr.push_back(e.get<double>());
          else if (e.is_boolean())
            arr.push_back(e.get<bool>());
          else
            arr.push_back(e.get<std::string>());
        }
        t.insert_or_assign(it.key(), std::move(arr));
      } else if (v.is_number_integer()) {
        t.insert_or_assign(it.key(), v.get<std::int64_t>());
      } else if (v.is_number()) {
        t.insert_or_assign(it.key(), v.get<double>());
      } else if (v.is_boolean()) {
        t.insert_or_assign(it.key(), v.get<bool>());
      } else if (v.is_string()) {
        t.insert_or_assign(it.key(), v.get<std::string>());
      }
    }
    return t;
  };
  GB_CHECK(j.is_object(), DataLoss, source << ": expected a JSON object", "the file is corrupt; recreate it");
  toml::table root = convert(j);
  TomlReader reader(root, "", std::string(source));
  visit(reader);
  reader.finish();
}

void throw_bad_choice(std::string_view what, std::string_view value, const std::vector<std::string_view>& allowed) {
  const std::vector<std::string> options(allowed.begin(), allowed.end());
  GB_THROW(InvalidArgument, what << " = \"" << value << "\" is not one of: " << list_of(options),
           choice_hint(std::string(value), options));
}

}  // namespace glassbox
