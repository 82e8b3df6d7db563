// The `troupe` binary: one CLI11 app whose subcommands register themselves.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>

#include "tools/cli/command_registry.hpp"

namespace troupe::cli {

namespace {
std::map<std::string, command_setup>& registry() {
  static std::map<std::string, command_setup> commands;
  return commands;
}
}  // namespace

bool register_command(std::string name, command_setup setup) {
  registry().emplace(std::move(name), std::move(setup));
  return true;
}

std::vector<std::pair<std::string, command_setup>> registered_commands() {
  return {registry().begin(), registry().end()};
}

}  // namespace troupe::cli

int main(int argc, char** argv) {
  CLI::App app{"troupe: an actor-based LLM serving engine"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "troupe " TROUPE_VERSION);
  for (auto& [name, setup] : troupe::cli::registered_commands()) setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "troupe: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
