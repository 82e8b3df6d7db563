// `troupe serve`: the engine behind the OpenAI-compatible HTTP API and the
// WebSocket protocol (docs/api.md) until SIGINT or SIGTERM, then a drain.
// Every flag is a knob of config/ (defaults < --config file < TROUPE_*
// environment < command line); see docs/operations.md.

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdlib>
#include <map>
#include <memory>

#include "api/http/admin_access.hpp"
#include "api/http/http_server.hpp"
#include "config/config_store.hpp"
#include "tools/cli/command_registry.hpp"

namespace troupe::cli {
namespace {

/// The flags as given, before layering.
struct serve_flags {
  std::map<std::string, std::string> values;
  std::map<std::string, bool> switches;
  std::map<std::string, CLI::Option*> options;
};

std::string help_of(const knob_spec& knob) {
  std::string help = knob.help;
  if (!knob.unit.empty()) help += " [" + knob.unit + "]";
  if (!knob.choices.empty()) {
    help += " {";
    for (std::size_t i = 0; i < knob.choices.size(); ++i) help += (i ? "|" : "") + knob.choices[i];
    help += "}";
  }
  if (knob.live) help += " (live)";
  if (!knob.default_value.empty()) help += " [default: " + knob.default_value + "]";
  return help;
}

config_store layered_knobs(const serve_flags& flags) {
  config_store knobs(all_knobs());
  std::string config_file;
  if (const auto it = flags.options.find("config"); it->second->count() > 0) config_file = flags.values.at("config");
  if (config_file.empty() && std::getenv("TROUPE_CONFIG") != nullptr) config_file = std::getenv("TROUPE_CONFIG");
  if (!config_file.empty()) knobs.load_file(config_file);
  knobs.load_environment();
  for (const auto& [name, option] : flags.options) {
    if (option->count() == 0) continue;
    const auto value = flags.switches.find(name);
    knobs.set(name, value != flags.switches.end() ? (value->second ? "true" : "false") : flags.values.at(name),
              config_source::command_line);
  }
  return knobs;
}

/// SIGINT and SIGTERM, blocked in every thread (before any starts) and taken
/// synchronously by sigwait, so no handler runs on an engine thread.
sigset_t stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  return signals;
}

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
}

void run(const serve_flags& flags) {
  const config_store knobs = layered_knobs(flags);
  const engine_config engine_settings(knobs);
  api::server_config server_settings(knobs, engine_settings);
  server_settings.version = TROUPE_VERSION;
  // Refused before the model loads (http_server checks again, for embedders).
  if (std::string problem =
          api::admin_startup_problem(server_settings.host, server_settings.admin_enabled, server_settings.admin_token);
      !problem.empty())
    throw std::runtime_error(problem);
  const sigset_t signals = stop_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const std::unique_ptr<engine> engine = engine::start(engine_settings);
  api::http_server server(*engine, server_settings);
  server.start();
  spdlog::info("serving '{}' on http://{}:{} (policy {}, device {})", engine->info().served_model_name,
               server_settings.host, server.port(), engine_settings.policy, engine->info().device);
  if (server.admin_port() != 0)
    spdlog::info("admin endpoints on http://{}:{}/admin only", server_settings.host, server.admin_port());

  int received = 0;
  sigwait(&signals, &received);
  const double drain_s = knobs.get_real("shutdown_timeout");
  spdlog::info("{}: draining for up to {} s", received == SIGTERM ? "SIGTERM" : "SIGINT", drain_s);
  server.stop_accepting();
  engine->shutdown(to_ms(drain_s));  // running requests finish or abort
  if (!server.wait_idle(std::chrono::seconds(5))) spdlog::warn("responses still in flight at shutdown");
  server.stop();
}

void setup(CLI::App& root) {
  auto flags = std::make_shared<serve_flags>();
  CLI::App* cmd = root.add_subcommand("serve", "serve a model over HTTP (OpenAI API, SSE) and WebSocket");
  for (const knob_spec& knob : all_knobs()) {
    const std::string flag = knob_flag(knob.name);
    if (knob.kind == knob_kind::boolean) {
      const std::string negation = "!--no-" + flag.substr(2);
      flags->options[knob.name] = cmd->add_flag(flag + "," + negation, flags->switches[knob.name], help_of(knob));
    } else {
      const char* type = knob.kind == knob_kind::integer ? "INT" : knob.kind == knob_kind::real ? "NUM" : "TEXT";
      // --config-file names the same file: the one POST /admin/config/save writes back to.
      const std::string names = knob.name == "config" ? flag + ",--config-file" : flag;
      flags->options[knob.name] = cmd->add_option(names, flags->values[knob.name], help_of(knob))->type_name(type);
    }
    flags->options[knob.name]->group(knob.group == "server" ? "Server" : "Engine");
  }
  cmd->callback([flags] { run(*flags); });
}

const bool registered = register_command("serve", setup);

}  // namespace
}  // namespace troupe::cli
