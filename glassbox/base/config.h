// Reflection for options structs: one `visit` function per struct lists its fields, and the same
// list serves TOML config files, `--set key=value` overrides, config.toml in the run directory,
// JSON in checkpoints, and "did you mean" hints for unknown keys.
//
//   struct MlpOptions {
//     std::vector<std::int64_t> hidden{256, 128};
//     std::string activation = "relu";
//     void visit(FieldVisitor& v) {
//       v.field("hidden", hidden, "hidden layer sizes");
//       v.choice("activation", activation, {"relu", "gelu"}, "activation function");
//     }
//   };
//   load_config(toml_text, "quickstart.toml", {"model.mlp.hidden=[512]"}, visit_fn(cfg));
//
// Errors (exit code 2 at the CLI): unknown key with the nearest known key, wrong type naming the
// key, the expected and the received type, a value outside a choice list naming the choices.
// Thread safety: none needed; functions operate on the caller's objects.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace glassbox {

class FieldVisitor {
 public:
  virtual ~FieldVisitor() = default;
  virtual void field(std::string_view name, std::int64_t& value, std::string_view doc) = 0;
  virtual void field(std::string_view name, double& value, std::string_view doc) = 0;
  virtual void field(std::string_view name, bool& value, std::string_view doc) = 0;
  virtual void field(std::string_view name, std::string& value, std::string_view doc) = 0;
  virtual void field(std::string_view name, std::vector<std::int64_t>& value, std::string_view doc) = 0;
  virtual void field(std::string_view name, std::vector<double>& value, std::string_view doc) = 0;
  virtual void field(std::string_view name, std::vector<std::string>& value, std::string_view doc) = 0;
  // A string restricted to `allowed`.
  virtual void choice(std::string_view name, std::string& value, std::initializer_list<std::string_view> allowed,
                      std::string_view doc) = 0;
  // A nested table.
  virtual void section(std::string_view name, const std::function<void(FieldVisitor&)>& body) = 0;
};

using VisitFn = std::function<void(FieldVisitor&)>;

template <class T>
VisitFn visit_fn(T& obj) {
  return [&obj](FieldVisitor& v) { obj.visit(v); };
}

// Parses TOML text, applies `overrides` ("a.b.c=value", value in TOML syntax; a bare word is a
// string) and fills the visited object. `source` names the text in error messages.
void load_config(std::string_view toml_text, std::string_view source, const std::vector<std::string>& overrides,
                 const VisitFn& visit);

// The visited object as TOML text (every field, documented with comments).
std::string to_toml(const VisitFn& visit);

// The visited object as JSON, and back (unknown keys are errors, missing keys keep defaults).
nlohmann::json to_json(const VisitFn& visit);
void from_json(const nlohmann::json& j, std::string_view source, const VisitFn& visit);

// The candidate closest to `name` by edit distance, or "" when none is close.
std::string closest_match(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace glassbox
