#pragma once
// HF `generation_config.json`: the model's own stop ids and sampling
// defaults. The file is optional; every field is optional.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

namespace troupe {

/// What `generation_config.json` says. Unset fields are nullopt / empty, so
/// the engine can tell "the model has no default" from a default value.
struct generation_config {
  std::vector<std::int64_t> eos_token_ids;  ///< `eos_token_id`, an int or a list
  std::optional<std::int64_t> bos_token_id;
  std::optional<std::int64_t> pad_token_id;
  std::optional<bool> do_sample;               ///< false means greedy in HF
  std::optional<double> temperature;           ///< >= 0
  std::optional<double> top_p;                 ///< (0, 1]
  std::optional<std::int64_t> top_k;           ///< >= 0; 0 disables
  std::optional<double> min_p;                 ///< [0, 1]
  std::optional<double> repetition_penalty;    ///< > 0
  std::optional<std::int64_t> max_new_tokens;  ///< > 0
};

/// Parses the text of a generation_config.json; throws std::runtime_error
/// starting with `source` and naming the field on wrong types or ranges.
generation_config parse_generation_config(std::string_view json_text,
                                          std::string_view source = "generation_config.json");

/// Reads `model_dir`/generation_config.json; an absent file gives an empty config.
generation_config load_generation_config(const std::filesystem::path& model_dir);

}  // namespace troupe
