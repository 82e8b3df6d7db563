#include "config/config_store.hpp"

#include <boost/json.hpp>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <sstream>

namespace troupe {

namespace {

// "knob 'name' (from source)", or "knob 'name'" for a value checked without a source.
std::string describe(const knob_spec& spec, std::optional<config_source> source) {
  if (!source) return "knob '" + spec.name + "'";
  return "knob '" + spec.name + "' (from " + std::string(config_source_name(*source)) + ")";
}

std::int64_t parse_integer(const knob_spec& spec, std::string_view text, std::optional<config_source> source) {
  std::int64_t value = 0;
  // Accept size suffixes for byte knobs: 4G, 512M, 64K.
  std::int64_t multiplier = 1;
  if (spec.unit == "bytes" && !text.empty()) {
    const char last = text.back();
    if (last == 'K' || last == 'k') multiplier = 1024;
    if (last == 'M' || last == 'm') multiplier = 1024 * 1024;
    if (last == 'G' || last == 'g') multiplier = std::int64_t{1024} * 1024 * 1024;
    if (multiplier != 1) text.remove_suffix(1);
  }
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size())
    throw config_error(describe(spec, source) + ": '" + std::string(text) + "' is not an integer");
  if (value > INT64_MAX / multiplier || value < INT64_MIN / multiplier)
    throw config_error(describe(spec, source) + ": value overflows");
  return value * multiplier;
}

double parse_real(const knob_spec& spec, std::string_view text, std::optional<config_source> source) {
  const std::string copy(text);
  char* end = nullptr;
  const double value = std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size() || !std::isfinite(value))
    throw config_error(describe(spec, source) + ": '" + copy + "' is not a number");
  return value;
}

bool parse_boolean(const knob_spec& spec, std::string_view text, std::optional<config_source> source) {
  if (text == "true" || text == "1" || text == "on" || text == "yes") return true;
  if (text == "false" || text == "0" || text == "off" || text == "no") return false;
  throw config_error(describe(spec, source) + ": '" + std::string(text) + "' is not a boolean (true/false)");
}

void check_range(const knob_spec& spec, double value, std::optional<config_source> source) {
  std::ostringstream bounds;
  // Exact digits for integer knobs (1048576, not 1.04858e+06).
  bounds << std::setprecision(spec.kind == knob_kind::integer ? 17 : 6);
  if ((spec.min && value < *spec.min) || (spec.max && value > *spec.max)) {
    bounds << describe(spec, source) << ": " << value << " is outside [" << (spec.min ? *spec.min : -INFINITY) << ", "
           << (spec.max ? *spec.max : INFINITY) << "]";
    throw config_error(bounds.str());
  }
}

std::string json_scalar_text(const boost::json::value& value) {
  if (value.is_string()) return std::string(value.as_string());
  if (value.is_bool()) return value.as_bool() ? "true" : "false";
  return boost::json::serialize(value);
}

}  // namespace

std::string_view config_source_name(config_source source) {
  switch (source) {
    case config_source::defaults:
      return "defaults";
    case config_source::file:
      return "file";
    case config_source::environment:
      return "environment";
    case config_source::command_line:
      return "command_line";
    case config_source::runtime:
      return "runtime";
  }
  return "?";
}

config_store::config_store(std::vector<knob_spec> specs) : specs_(std::move(specs)) {
  for (const auto& spec : specs_) {
    values_[spec.name] = entry{parse(spec, spec.default_value, config_source::defaults), config_source::defaults};
  }
}

knob_value config_store::parse(const knob_spec& spec, std::string_view text,
                               std::optional<config_source> source) const {
  switch (spec.kind) {
    case knob_kind::integer: {
      const std::int64_t value = parse_integer(spec, text, source);
      check_range(spec, static_cast<double>(value), source);
      return value;
    }
    case knob_kind::real: {
      const double value = parse_real(spec, text, source);
      check_range(spec, value, source);
      return value;
    }
    case knob_kind::boolean:
      return parse_boolean(spec, text, source);
    case knob_kind::text:
      break;
  }
  if (!spec.choices.empty()) {
    bool allowed = false;
    for (const auto& choice : spec.choices) allowed = allowed || choice == text;
    if (!allowed) {
      std::string list;
      for (const auto& choice : spec.choices) list += (list.empty() ? "" : ", ") + choice;
      throw config_error(describe(spec, source) + ": '" + std::string(text) + "' is not one of " + list);
    }
  }
  return std::string(text);
}

void config_store::set(std::string_view name, std::string_view text, config_source source) {
  const knob_spec& knob = spec(name);
  if (source == config_source::runtime && !knob.live)
    throw config_error("knob '" + knob.name + "' cannot change while the engine runs");
  knob_value value = parse(knob, text, source);
  entry& current = values_.find(name)->second;
  if (source < current.source) return;
  current = entry{std::move(value), source};
}

void config_store::load_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw config_error(path.string() + ": cannot open config file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  boost::system::error_code error;
  const boost::json::value document = boost::json::parse(buffer.str(), error);
  if (error) throw config_error(path.string() + ": not valid JSON: " + error.message());
  if (!document.is_object()) throw config_error(path.string() + ": must be a JSON object of knob names to values");
  for (const auto& [key, value] : document.as_object()) {
    if (!value.is_string() && !value.is_number() && !value.is_bool())
      throw config_error(path.string() + ": knob '" + std::string(key) + "' must be a string, number or boolean");
    try {
      set(key, json_scalar_text(value), config_source::file);
    } catch (const config_error& e) {
      throw config_error(path.string() + ": " + e.what());
    }
  }
}

void config_store::load_environment() {
  for (const auto& knob : specs_) {
    if (const char* text = std::getenv(knob_env_var(knob.name).c_str()))
      set(knob.name, text, config_source::environment);
  }
}

const config_store::entry& config_store::find(std::string_view name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) throw config_error("unknown knob '" + std::string(name) + "'");
  return it->second;
}

const knob_spec& config_store::spec(std::string_view name) const {
  for (const auto& knob : specs_) {
    if (knob.name == name) return knob;
  }
  throw config_error("unknown knob '" + std::string(name) + "'");
}

std::int64_t config_store::get_int(std::string_view name) const { return std::get<std::int64_t>(find(name).value); }
double config_store::get_real(std::string_view name) const { return std::get<double>(find(name).value); }
bool config_store::get_bool(std::string_view name) const { return std::get<bool>(find(name).value); }
const std::string& config_store::get_text(std::string_view name) const {
  return std::get<std::string>(find(name).value);
}
config_source config_store::source_of(std::string_view name) const { return find(name).source; }

std::string config_store::problem(std::string_view name, std::string_view text) const {
  try {
    parse(spec(name), text, std::nullopt);
  } catch (const config_error& error) {
    return error.what();
  }
  return {};
}

std::string config_store::get_as_text(std::string_view name) const {
  const knob_value& value = find(name).value;
  if (const auto* i = std::get_if<std::int64_t>(&value)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&value)) {
    std::ostringstream out;
    out << *d;
    return out.str();
  }
  if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  return std::get<std::string>(value);
}

std::vector<knob_spec> all_knobs() {
  std::vector<knob_spec> knobs = engine_knobs();
  for (auto& knob : server_knobs()) knobs.push_back(std::move(knob));
  return knobs;
}

const config_store& knob_defaults() {
  static const config_store defaults(all_knobs());
  return defaults;
}

std::string knob_flag(std::string_view name) {
  std::string flag = "--";
  for (char c : name) flag += c == '_' ? '-' : c;
  return flag;
}

std::string knob_env_var(std::string_view name) {
  std::string var = "TROUPE_";
  for (char c : name) var += static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
  return var;
}

}  // namespace troupe
