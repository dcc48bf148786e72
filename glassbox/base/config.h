// Reflection for options structs: one `visit` function per struct lists its fields, and the same
// list serves TOML config files, `--set key=value` overrides, config.toml in the run directory,
// JSON in checkpoints, and "did you mean" hints for unknown keys.
//
//   enum class Activation { kRelu, kGelu };
//   constexpr NameTable<Activation, 2> enum_names(Activation) {  // found by argument-dependent lookup
//     return {{{Activation::kRelu, "relu"}, {Activation::kGelu, "gelu"}}};
//   }
//   struct MlpOptions {
//     std::vector<std::int64_t> hidden{256, 128};
//     Activation activation = Activation::kRelu;
//     void visit(FieldVisitor& v) {
//       v.field("hidden", hidden, "hidden layer sizes");
//       v.choice("activation", activation, "activation function");  // "relu" | "gelu" in files
//     }
//   };
//   load_config(toml_text, "quickstart.toml", {"model.mlp.hidden=[512]"}, visit_fn(cfg));
//
// Errors (exit code 2 at the CLI): unknown key with the nearest known key, wrong type naming the
// key, the expected and the received type, a value outside a choice list naming the choices.
// Thread safety: none needed; functions operate on the caller's objects.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
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
  virtual void choice(std::string_view name, std::string& value, const std::vector<std::string_view>& allowed,
                      std::string_view doc) = 0;
  // An enum whose names come from its `enum_names` table (see the example at the top).
  template <class E>
  void choice(std::string_view name, E& value, std::string_view doc);
  // A nested table.
  virtual void section(std::string_view name, const std::function<void(FieldVisitor&)>& body) = 0;
  // A list of tables (TOML's [[name]]), `size` of them. A reader that finds the key calls
  // resize(n) and then item(visitor, i) for each of its n tables; a writer calls item for
  // i < size. A reader that does not find the key leaves the list as it is.
  virtual void table_list(std::string_view name, std::size_t size, const std::function<void(std::size_t)>& resize,
                          const std::function<void(FieldVisitor&, std::size_t)>& item, std::string_view doc) = 0;
  // The same for a vector of structs with visit(FieldVisitor&); read items start from T{}.
  template <class T>
  void list(std::string_view name, std::vector<T>& items, std::string_view doc) {
    table_list(
        name, items.size(), [&](std::size_t n) { items.assign(n, T{}); },
        [&](FieldVisitor& v, std::size_t i) { items.at(i).visit(v); }, doc);
  }
};

// One row of an enum's name table.
template <class E>
struct EnumName {
  E value;
  std::string_view name;
};
template <class E, std::size_t N>
using NameTable = std::array<EnumName<E>, N>;

// The name of an enum value in its table ("?" for a value outside it, which the tables rule out).
template <class E>
constexpr std::string_view name_of(E value) {
  for (const auto& row : enum_names(E{})) {
    if (row.value == value) return row.name;
  }
  return "?";
}

// Every name of an enum, in table order.
template <class E>
std::vector<std::string_view> names_of() {
  std::vector<std::string_view> out;
  for (const auto& row : enum_names(E{})) out.push_back(row.name);
  return out;
}

// The value named `name`; false when no row has that name.
template <class E>
constexpr bool parse_name(std::string_view name, E& value) {
  for (const auto& row : enum_names(E{})) {
    if (row.name == name) {
      value = row.value;
      return true;
    }
  }
  return false;
}

// InvalidArgument naming `what` (a key or a flag), the value and the allowed names, with a
// did-you-mean hint: the error a choice field gives.
[[noreturn]] void throw_bad_choice(std::string_view what, std::string_view value,
                                   const std::vector<std::string_view>& allowed);

// The value named `text`, or the error above (for names from flags and other user input).
template <class E>
E parse_choice(std::string_view what, std::string_view text) {
  E value{};
  if (!parse_name(text, value)) throw_bad_choice(what, text, names_of<E>());
  return value;
}

// The value named `name`; std::invalid_argument when there is none (for names the program itself
// chose; user input goes through FieldVisitor::choice, which explains the allowed names).
template <class E>
E enum_of(std::string_view name) {
  E value{};
  if (!parse_name(name, value)) throw std::invalid_argument("no enum value is named \"" + std::string(name) + "\"");
  return value;
}

// True when a table lists each of the values 0 .. N-1 once, in order: tables are checked with
// static_assert(is_complete_table(enum_names(E{}))) beside each enum.
template <class E, std::size_t N>
constexpr bool is_complete_table(const NameTable<E, N>& table) {
  for (std::size_t i = 0; i < N; ++i) {
    if (static_cast<std::size_t>(table[i].value) != i) return false;
  }
  return true;
}

template <class E>
void FieldVisitor::choice(std::string_view name, E& value, std::string_view doc) {
  std::string text(name_of(value));
  choice(name, text, names_of<E>(), doc);
  parse_name(text, value);  // choice() accepted only names from the table
}

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
