#include "model/generation_config.hpp"

#include <cmath>
#include <string>

#include "model/checkpoint_json.hpp"
#include "model/python_json.hpp"

namespace troupe {

namespace {

std::optional<double> number_in(const json_field& reader, std::string_view key, double low, double high,
                                bool low_inclusive) {
  const std::optional<double> value = reader.get_number(key);
  if (!value) return value;
  const bool above_low = low_inclusive ? *value >= low : *value > low;
  if (!std::isfinite(*value) || !above_low || *value > high) {
    reader.fail(key, "(" + python_float_repr(*value) + ") is out of range " + (low_inclusive ? "[" : "(") +
                         python_float_repr(low) + ", " + python_float_repr(high) + "]");
  }
  return value;
}

std::optional<std::int64_t> non_negative_int(const json_field& reader, std::string_view key) {
  const std::optional<std::int64_t> value = reader.get_int(key);
  if (value && *value < 0) reader.fail(key, "(" + std::to_string(*value) + ") must not be negative");
  return value;
}

}  // namespace

generation_config parse_generation_config(std::string_view json_text, std::string_view source) {
  const boost::json::value document = parse_json_text(json_text, source);
  const file_json_rules rules = checkpoint_json_rules(std::string(source));
  const json_field reader(document, rules);
  reader.object();
  generation_config out;
  out.eos_token_ids = get_int_or_int_list(reader, "eos_token_id");
  for (auto id : out.eos_token_ids) {
    if (id < 0) reader.fail("eos_token_id", "(" + std::to_string(id) + ") must not be negative");
  }
  out.bos_token_id = non_negative_int(reader, "bos_token_id");
  out.pad_token_id = non_negative_int(reader, "pad_token_id");
  out.do_sample = reader.get_bool("do_sample");
  out.temperature = number_in(reader, "temperature", 0.0, 1e6, true);
  out.top_p = number_in(reader, "top_p", 0.0, 1.0, false);
  out.top_k = non_negative_int(reader, "top_k");
  out.min_p = number_in(reader, "min_p", 0.0, 1.0, true);
  out.repetition_penalty = number_in(reader, "repetition_penalty", 0.0, 1e6, false);
  out.max_new_tokens = reader.get_int("max_new_tokens");
  if (out.max_new_tokens && *out.max_new_tokens <= 0) reader.fail("max_new_tokens", "must be positive");
  return out;
}

generation_config load_generation_config(const std::filesystem::path& model_dir) {
  const std::filesystem::path path = model_dir / "generation_config.json";
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return {};
  constexpr std::uintmax_t max_bytes = 1 << 20;
  return parse_generation_config(read_text_file(path, max_bytes, "generation_config.json"), "generation_config.json");
}

}  // namespace troupe
