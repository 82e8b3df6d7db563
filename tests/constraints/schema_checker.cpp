#include "schema_checker.hpp"

#include <cmath>
#include <map>
#include <regex>

#include "constraint_test_support.hpp"

namespace troupe::constraints::testing {
namespace {

namespace json = boost::json;

bool has_type(const json::value& v, std::string_view type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "integer")
    return v.is_int64() || v.is_uint64() || (v.is_double() && std::floor(v.as_double()) == v.as_double());
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_bool();
  if (type == "null") return v.is_null();
  return false;
}

bool matches_format(const std::string& text, std::string_view format) {
  static const std::map<std::string_view, std::wregex> formats = {
      {"date", std::wregex(L"\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])")},
      {"uuid", std::wregex(L"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")},
      {"email", std::wregex(L"[^@\\s]+@[^@\\s]+\\.[^@\\s]+")},
      {"date-time", std::wregex(L"\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(\\.\\d+)?(Z|[+-]\\d\\d:\\d\\d)")},
  };
  const auto it = formats.find(format);
  return it == formats.end() || std::regex_match(widen(text), it->second);
}

std::string check_string(const json::value& v, const json::object& s, const std::string& path) {
  const std::string text(v.as_string());
  const std::size_t length = widen(text).size();
  if (const auto* min = s.if_contains("minLength"); min && length < min->to_number<std::size_t>()) return path;
  if (const auto* max = s.if_contains("maxLength"); max && length > max->to_number<std::size_t>()) return path;
  if (const auto* p = s.if_contains("pattern")) {
    if (!std::regex_search(widen(text), std::wregex(widen(std::string(p->as_string()))))) return path;
  }
  if (const auto* f = s.if_contains("format"); f && !matches_format(text, f->as_string())) return path;
  return {};
}

std::string check_number(const json::value& v, const json::object& s, const std::string& path) {
  const double x = v.to_number<double>();
  if (const auto* m = s.if_contains("minimum"); m && x < m->to_number<double>()) return path;
  if (const auto* m = s.if_contains("maximum"); m && x > m->to_number<double>()) return path;
  if (const auto* m = s.if_contains("exclusiveMinimum"); m && x <= m->to_number<double>()) return path;
  if (const auto* m = s.if_contains("exclusiveMaximum"); m && x >= m->to_number<double>()) return path;
  return {};
}

std::string check_object(const json::object& o, const json::object& s, const json::value& root,
                         const std::string& path) {
  const json::object empty;
  const auto* props = s.if_contains("properties");
  const json::object& properties = props ? props->as_object() : empty;
  if (const auto* required = s.if_contains("required")) {
    for (const auto& name : required->as_array()) {
      if (!o.contains(name.as_string())) return path + "." + std::string(name.as_string()) + " (missing)";
    }
  }
  const auto* additional = s.if_contains("additionalProperties");
  for (const auto& [key, value] : o) {
    const std::string where = path + "." + std::string(key);
    if (const auto* schema = properties.if_contains(key)) {
      if (auto problem = schema_violation(value, *schema, root, where); !problem.empty()) return problem;
    } else if (additional && additional->is_object()) {
      if (auto problem = schema_violation(value, *additional, root, where); !problem.empty()) return problem;
    } else if (additional && additional->is_bool() && !additional->as_bool()) {
      return where + " (not allowed)";
    }
  }
  return {};
}

std::string check_array(const json::array& a, const json::object& s, const json::value& root, const std::string& path) {
  if (const auto* min = s.if_contains("minItems"); min && a.size() < min->to_number<std::size_t>()) return path;
  if (const auto* max = s.if_contains("maxItems"); max && a.size() > max->to_number<std::size_t>()) return path;
  if (const auto* items = s.if_contains("items")) {
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (auto problem = schema_violation(a[i], *items, root, path + "[" + std::to_string(i) + "]"); !problem.empty()) {
        return problem;
      }
    }
  }
  return {};
}

}  // namespace

std::string schema_violation(const json::value& value, const json::value& schema, const json::value& root,
                             const std::string& path) {
  if (schema.is_bool()) return schema.as_bool() ? "" : path;
  const json::object& s = schema.as_object();
  if (const auto* ref = s.if_contains("$ref")) {
    boost::system::error_code error;
    const auto* target = root.find_pointer(std::string_view(ref->as_string()).substr(1), error);
    if (!target) return path + " (dangling $ref)";
    return schema_violation(value, *target, root, path);
  }
  if (const auto* values = s.if_contains("enum")) {
    for (const auto& v : values->as_array()) {
      if (v == value) return {};
    }
    return path + " (not in enum)";
  }
  if (const auto* c = s.if_contains("const")) return *c == value ? "" : path + " (not const)";
  for (const char* key : {"anyOf", "oneOf"}) {
    if (const auto* list = s.if_contains(key)) {
      std::size_t passing = 0;
      for (const auto& sub : list->as_array()) passing += schema_violation(value, sub, root, path).empty() ? 1 : 0;
      if (passing == 0 || (std::string_view(key) == "oneOf" && passing > 1)) return path + " (" + key + ")";
      return {};
    }
  }
  if (const auto* type = s.if_contains("type")) {
    bool any = false;
    if (type->is_string()) any = has_type(value, type->as_string());
    if (type->is_array()) {
      for (const auto& t : type->as_array()) any = any || has_type(value, t.as_string());
    }
    if (!any) return path + " (type)";
  }
  if (value.is_string()) return check_string(value, s, path);
  if (value.is_number()) return check_number(value, s, path);
  if (value.is_object()) return check_object(value.as_object(), s, root, path);
  if (value.is_array()) return check_array(value.as_array(), s, root, path);
  return {};
}

}  // namespace troupe::constraints::testing
