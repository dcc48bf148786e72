// Typed, located reads from a parsed JSON artefact of a run directory (eval/metrics.json,
// explain/index.json, doctor.json, summary.json, a metrics.jsonl row). Each accessor returns the
// value, says it is absent (missing key or null), or throws one line naming the file, the place
// in the document and the problem:
//
//   JsonSource src{"runs/a/eval/metrics.json", "rewrite it with glassbox eval"};
//   JsonView doc(json, src);
//   std::optional<double> acc = doc["accuracy"].number();      // absent/null -> nullopt
//   for (std::size_t i = 0; i < doc["per_class"].size(); ++i)
//     doc["per_class"][i]["f1"].number();
//   // a string where a number belongs throws glassbox::Error (DataLoss):
//   //   "runs/a/eval/metrics.json: per_class[2].f1 must be a number, got a string (hint: ...)"
//
// Ownership: a view refers to the JSON value and the source without owning them; both must
// outlive it. Thread safety: read-only; views of one document may be used from many threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace glassbox::report {

struct JsonSource {
  std::string file;  // as shown in errors
  std::string hint;  // how to repair or regenerate the file
};

class JsonView {
 public:
  // `value` may be null (an absent value).
  JsonView(const nlohmann::json* value, const JsonSource& source, std::string path = {});
  JsonView(const nlohmann::json& value, const JsonSource& source) : JsonView(&value, source) {}

  // Present: the key exists and its value is not null.
  bool present() const;
  bool is_object() const;
  bool is_array() const;

  // A member; an absent view when this view is absent. Throws when present but not an object.
  JsonView operator[](std::string_view key) const;
  // An element; absent past the end. Throws when present but not an array.
  JsonView operator[](std::size_t index) const;
  // Number of array elements (0 when absent). Throws when present but not an array.
  std::size_t size() const;
  // Members of an object in document order (none when absent). Throws when not an object.
  std::vector<std::pair<std::string, JsonView>> items() const;

  // Typed values: nullopt when absent; throw when present with another type.
  std::optional<double> number() const;
  std::optional<std::int64_t> integer() const;  // a number without a fractional part
  std::optional<std::string> string() const;
  std::optional<bool> boolean() const;
  // The string, or a number written as text (labels may be either); nullopt when absent.
  std::optional<std::string> text() const;

  // Throws DataLoss: "<file>: <path> <problem> (hint: <hint>)".
  [[noreturn]] void fail(std::string_view problem) const;
  const std::string& path() const { return path_; }
  const nlohmann::json* raw() const { return value_; }

 private:
  std::string type_name() const;
  const nlohmann::json* value_;
  const JsonSource* source_;
  std::string path_;  // "per_class[2].f1"; empty at the root
};

}  // namespace glassbox::report
