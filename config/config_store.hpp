#pragma once
// Every knob is declared once (name, type, default, range, unit, help, and
// whether it may change while the engine runs). Values layer as
// defaults < config file < environment < command line < runtime changes.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace troupe {

/// The type of a knob's value.
enum class knob_kind : std::uint8_t { integer, real, boolean, text };

/// Where a knob's current value came from, lowest precedence first.
enum class config_source : std::uint8_t { defaults, file, environment, command_line, runtime };

/// "defaults", "file", "environment", "command_line", "runtime".
std::string_view config_source_name(config_source source);

/// Declaration of one knob.
struct knob_spec {
  std::string name;  ///< snake_case; CLI flag is --name-with-dashes, env TROUPE_NAME
  knob_kind kind = knob_kind::integer;
  std::string default_value;  ///< textual, parsed like any other source
  std::optional<double> min;  ///< inclusive bounds for integer and real knobs
  std::optional<double> max;
  std::vector<std::string> choices;  ///< allowed values of a text knob (empty: any)
  std::string unit;                  ///< "tokens", "bytes", "s", ... (empty when unitless)
  std::string help;
  bool live = false;    ///< may change while the engine runs
  std::string group;    ///< "engine", "server", ...
  bool secret = false;  ///< its value is never shown (the admin API reports whether it is set)
};

/// A parsed knob value.
using knob_value = std::variant<std::int64_t, double, bool, std::string>;

/// A bad value or unknown knob; the message names the knob and the source.
class config_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Current values of a set of knobs, with their provenance.
class config_store {
 public:
  explicit config_store(std::vector<knob_spec> specs);

  /// Parses `text` for knob `name` and sets it if `source` is not lower than
  /// the source of the current value. Throws config_error on an unknown knob,
  /// a malformed value, a value out of range, or (source runtime) a knob that
  /// is not live.
  void set(std::string_view name, std::string_view text, config_source source);
  /// Loads a JSON object {"knob_name": value, ...} from `path`.
  void load_file(const std::filesystem::path& path);
  /// Reads TROUPE_<NAME> for every knob from the process environment.
  void load_environment();

  std::int64_t get_int(std::string_view name) const;
  double get_real(std::string_view name) const;
  bool get_bool(std::string_view name) const;
  const std::string& get_text(std::string_view name) const;
  /// The value as text, as it would be written back to a config file.
  std::string get_as_text(std::string_view name) const;
  config_source source_of(std::string_view name) const;
  /// Empty when `text` is a valid value of knob `name` (type, range,
  /// choices), else why not, naming the knob ("knob 'max_num_seqs': 0 is
  /// outside [1, 65536]"). Changes nothing. For code that checks a value it
  /// holds without restating the registry's bounds.
  std::string problem(std::string_view name, std::string_view text) const;

  const knob_spec& spec(std::string_view name) const;
  const std::vector<knob_spec>& specs() const { return specs_; }

 private:
  struct entry {
    knob_value value;
    config_source source = config_source::defaults;
  };
  const entry& find(std::string_view name) const;
  knob_value parse(const knob_spec& spec, std::string_view text, std::optional<config_source> source) const;

  std::vector<knob_spec> specs_;
  std::map<std::string, entry, std::less<>> values_;
};

/// Prompts one completions request may carry at most (the API's limit,
/// request_limits::max_prompts). The bounds on prompts awaiting preparation
/// start here: below it, a full request would be refused however idle the
/// engine is.
inline constexpr int max_prompts_per_request = 64;

/// The engine's knobs (scheduling, memory, limits, model loading).
std::vector<knob_spec> engine_knobs();
/// The HTTP server's knobs (address, threads, limits, timeouts).
std::vector<knob_spec> server_knobs();
/// The engine knobs, then the server knobs (what `troupe serve` takes).
std::vector<knob_spec> all_knobs();
/// Every knob at its registry default, built once: where the configuration
/// structs of the other layers take their defaults from.
const config_store& knob_defaults();

/// Converts a knob name to its CLI flag ("max_num_seqs" -> "--max-num-seqs").
std::string knob_flag(std::string_view name);
/// Converts a knob name to its environment variable ("max_num_seqs" -> "TROUPE_MAX_NUM_SEQS").
std::string knob_env_var(std::string_view name);

}  // namespace troupe
