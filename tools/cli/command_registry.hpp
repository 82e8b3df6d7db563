#pragma once
// Each `troupe` subcommand lives in its own file and registers itself here,
// so adding a command touches no shared file.

#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace troupe::cli {

/// Adds one subcommand (options and callback) to the root app.
using command_setup = std::function<void(CLI::App& root)>;

/// Registers a subcommand; call from a namespace-scope initialiser. Returns true.
bool register_command(std::string name, command_setup setup);

/// All registered subcommands, sorted by name.
std::vector<std::pair<std::string, command_setup>> registered_commands();

}  // namespace troupe::cli
