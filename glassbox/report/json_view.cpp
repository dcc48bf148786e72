#include "glassbox/report/json_view.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "glassbox/base/error.h"

namespace glassbox::report {

JsonView::JsonView(const nlohmann::json* value, const JsonSource& source, std::string path)
    : value_(value), source_(&source), path_(std::move(path)) {}

bool JsonView::present() const { return value_ != nullptr && !value_->is_null(); }
bool JsonView::is_object() const { return value_ != nullptr && value_->is_object(); }
bool JsonView::is_array() const { return value_ != nullptr && value_->is_array(); }

std::string JsonView::type_name() const {
  if (value_ == nullptr) return "nothing";
  switch (value_->type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float: return "a number";
    default: return "an unsupported value";
  }
}

void JsonView::fail(std::string_view problem) const {
  const std::string where = path_.empty() ? "the document" : path_;
  throw Error(ErrorCode::kDataLoss, source_->file + ": " + where + " " + std::string(problem), source_->hint);
}

JsonView JsonView::operator[](std::string_view key) const {
  const std::string child = path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  if (!present()) return JsonView(nullptr, *source_, child);
  if (!value_->is_object()) fail("must be an object, got " + type_name());
  const auto it = value_->find(key);
  return JsonView(it == value_->end() ? nullptr : &*it, *source_, child);
}

JsonView JsonView::operator[](std::size_t index) const {
  const std::string child = path_ + "[" + std::to_string(index) + "]";
  if (!present()) return JsonView(nullptr, *source_, child);
  if (!value_->is_array()) fail("must be an array, got " + type_name());
  return JsonView(index < value_->size() ? &(*value_)[index] : nullptr, *source_, child);
}

std::size_t JsonView::size() const {
  if (!present()) return 0;
  if (!value_->is_array()) fail("must be an array, got " + type_name());
  return value_->size();
}

std::vector<std::pair<std::string, JsonView>> JsonView::items() const {
  std::vector<std::pair<std::string, JsonView>> out;
  if (!present()) return out;
  if (!value_->is_object()) fail("must be an object, got " + type_name());
  for (auto it = value_->begin(); it != value_->end(); ++it) {
    out.emplace_back(it.key(), JsonView(&it.value(), *source_, path_.empty() ? it.key() : path_ + "." + it.key()));
  }
  return out;
}

std::optional<double> JsonView::number() const {
  if (!present()) return std::nullopt;
  if (!value_->is_number()) fail("must be a number, got " + type_name());
  return value_->get<double>();
}

std::optional<std::int64_t> JsonView::integer() const {
  if (!present()) return std::nullopt;
  if (value_->is_number_integer()) return value_->get<std::int64_t>();
  if (value_->is_number_unsigned()) {
    const auto u = value_->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) fail("is too large");
    return static_cast<std::int64_t>(u);
  }
  if (value_->is_number_float()) {
    const double d = value_->get<double>();
    if (std::isfinite(d) && d == std::round(d) && std::fabs(d) < 9e15) return static_cast<std::int64_t>(d);
    fail("must be a whole number, got " + nlohmann::json(d).dump());
  }
  fail("must be a whole number, got " + type_name());
}

std::optional<std::string> JsonView::string() const {
  if (!present()) return std::nullopt;
  if (!value_->is_string()) fail("must be a string, got " + type_name());
  return value_->get<std::string>();
}

std::optional<bool> JsonView::boolean() const {
  if (!present()) return std::nullopt;
  if (!value_->is_boolean()) fail("must be true or false, got " + type_name());
  return value_->get<bool>();
}

std::optional<std::string> JsonView::text() const {
  if (!present()) return std::nullopt;
  if (value_->is_string()) return value_->get<std::string>();
  if (value_->is_number() || value_->is_boolean()) return value_->dump();
  fail("must be a string or a number, got " + type_name());
}

}  // namespace glassbox::report
