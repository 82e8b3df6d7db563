// `troupe knobs`: every knob of the registry (config/), with its flag,
// environment variable, default, range and whether it is live-tunable —
// as a Markdown table (docs/operations.md is made from it) or JSON.

#include <CLI/CLI.hpp>
#include <boost/json.hpp>
#include <iostream>

#include "config/config_store.hpp"
#include "tools/cli/command_registry.hpp"

namespace troupe::cli {
namespace {

std::string range_of(const knob_spec& knob) {
  if (!knob.choices.empty()) {
    std::string text;
    for (const auto& choice : knob.choices) text += (text.empty() ? "" : " \\| ") + choice;
    return text;
  }
  if (knob.kind == knob_kind::boolean) return "true \\| false";
  if (!knob.min && !knob.max) return "";
  auto number = [](double v) {
    std::ostringstream out;
    out << v;
    return out.str();
  };
  return "[" + (knob.min ? number(*knob.min) : "") + ", " + (knob.max ? number(*knob.max) : "") + "]";
}

void print_markdown(const std::vector<knob_spec>& knobs) {
  std::cout << "| flag | env | default | range | unit | live | meaning |\n|---|---|---|---|---|---|---|\n";
  for (const auto& knob : knobs) {
    std::cout << "| `" << knob_flag(knob.name) << "` | `" << knob_env_var(knob.name) << "` | "
              << (knob.default_value.empty() ? "" : "`" + knob.default_value + "`") << " | " << range_of(knob) << " | "
              << knob.unit << " | " << (knob.live ? "yes" : "") << " | " << knob.help << " |\n";
  }
}

void print_json(const std::vector<knob_spec>& knobs) {
  boost::json::array out;
  for (const auto& knob : knobs) {
    boost::json::object entry;
    entry["name"] = knob.name;
    entry["group"] = knob.group;
    entry["default"] = knob.default_value;
    entry["unit"] = knob.unit;
    entry["live"] = knob.live;
    entry["help"] = knob.help;
    if (knob.min) entry["min"] = *knob.min;
    if (knob.max) entry["max"] = *knob.max;
    if (!knob.choices.empty()) entry["choices"] = boost::json::value_from(knob.choices);
    out.push_back(std::move(entry));
  }
  std::cout << boost::json::serialize(out) << "\n";
}

void setup(CLI::App& root) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = root.add_subcommand("knobs", "list every configuration knob (flags, env, defaults, ranges)");
  cmd->add_flag("--json", *json, "JSON instead of a Markdown table");
  cmd->callback([json] {
    const std::vector<knob_spec> knobs = all_knobs();
    if (*json) {
      print_json(knobs);
    } else {
      print_markdown(knobs);
    }
  });
}

const bool registered = register_command("knobs", setup);

}  // namespace
}  // namespace troupe::cli
