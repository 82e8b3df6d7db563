#include "api/http/request_fields.hpp"

#include <algorithm>
#include <charconv>
#include <limits>

#include "api/http/api_error.hpp"
#include "api/http/constraint_fields.hpp"
#include "base/utf8.hpp"

namespace troupe::api {

namespace {

constexpr std::int64_t int32_max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t int32_min = std::numeric_limits<std::int32_t>::min();
constexpr std::size_t max_user_bytes = 512;
constexpr double max_deadline_ms = 86'400'000.0;  // a day

void read_model(const json_field& fields, const model_info& model, parsed_generation& out) {
  const std::optional<std::string> name = fields.get_string("model", 1024);
  out.model = model.served_model_name;
  if (!name || model.served_model_name.empty()) return;
  if (*name != model.served_model_name) {
    throw api_error(404, "invalid_request_error",
                    "The model '" + truncate_utf8(*name, 128) + "' does not exist; this server serves '" +
                        model.served_model_name + "'",
                    "model", "model_not_found");
  }
}

void read_stream(const json_field& fields, parsed_generation& out) {
  out.stream = fields.get_bool("stream").value_or(false);
  const std::optional<json_field> options = fields.get_object("stream_options");
  if (!options) return;
  if (!out.stream) throw invalid_field("stream_options", "'stream_options' is only allowed when 'stream' is true");
  static constexpr std::array<std::string_view, 1> known = {"include_usage"};
  options->reject_unknown(known);
  out.include_usage = options->get_bool("include_usage").value_or(false);
}

void read_stop(const json_field& fields, const request_limits& limits, generation_request& base) {
  const std::optional<json_field> stop = fields.find("stop");
  if (!stop) return;
  const auto add = [&](const boost::json::value& entry, const std::string& param) {
    if (!entry.is_string()) throw invalid_field(param, "'" + param + "' must be a string", "invalid_type");
    const boost::json::string& text = entry.get_string();
    if (text.empty()) throw invalid_field(param, "'" + param + "' must not be empty");
    if (text.size() > static_cast<std::size_t>(limits.engine.max_stop_string_bytes)) {
      throw invalid_field(
          param, "'" + param + "' is longer than " + std::to_string(limits.engine.max_stop_string_bytes) + " bytes",
          "too_long");
    }
    base.stop.emplace_back(text);
  };
  if (stop->value().is_string()) return add(stop->value(), "stop");
  if (!stop->value().is_array()) stop->fail_type("a string or an array of strings");
  const boost::json::array& list = stop->array();
  if (list.size() > static_cast<std::size_t>(limits.engine.max_stop_strings)) {
    throw invalid_field("stop",
                        "'stop' has " + std::to_string(list.size()) + " entries; at most " +
                            std::to_string(limits.engine.max_stop_strings) + " are allowed",
                        "too_many");
  }
  for (std::size_t i = 0; i < list.size(); ++i) add(list[i], "stop[" + std::to_string(i) + "]");
}

void read_logit_bias(const json_field& fields, const request_limits& limits, const model_info& model,
                     generation_request& base) {
  const std::optional<json_field> bias_field = fields.get_object("logit_bias");
  if (!bias_field) return;
  const boost::json::object& bias = bias_field->object();
  if (bias.size() > static_cast<std::size_t>(limits.engine.max_logit_bias)) {
    throw invalid_field("logit_bias",
                        "'logit_bias' has " + std::to_string(bias.size()) + " entries; at most " +
                            std::to_string(limits.engine.max_logit_bias) + " are allowed",
                        "too_many");
  }
  for (const auto& entry : bias) {
    const std::string_view key = entry.key();
    const std::string param = "logit_bias." + truncate_utf8(key, 32);
    std::int64_t id = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || key.empty()) {
      throw invalid_field(param, "'logit_bias' keys must be token ids written as decimal integers");
    }
    check_token_id(id, model, param);
    if (!entry.value().is_number()) throw invalid_field(param, "'" + param + "' must be a number", "invalid_type");
    const double value = entry.value().to_number<double>();
    if (!(value >= -100.0 && value <= 100.0)) throw invalid_field(param, "'" + param + "' must be in [-100, 100]");
    base.sampling.logit_bias.emplace_back(static_cast<std::int32_t>(id), static_cast<float>(value));
  }
}

void read_stop_token_ids(const json_field& fields, const request_limits& limits, const model_info& model,
                         generation_request& base) {
  const std::optional<json_field> ids_field = fields.get_array("stop_token_ids");
  if (!ids_field) return;
  const boost::json::array& ids = ids_field->array();
  if (ids.size() > static_cast<std::size_t>(limits.max_stop_token_ids)) {
    throw invalid_field("stop_token_ids",
                        "'stop_token_ids' has more than " + std::to_string(limits.max_stop_token_ids) + " entries",
                        "too_many");
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::string param = "stop_token_ids[" + std::to_string(i) + "]";
    const std::optional<std::int64_t> id = json_integer(ids[i], /*integral_doubles=*/true);
    if (!id) throw invalid_field(param, "'" + param + "' must be an integer token id", "invalid_type");
    check_token_id(*id, model, param);
    base.stop_token_ids.push_back(static_cast<std::int32_t>(*id));
  }
}

void read_sampling(const json_field& fields, const sampling_defaults& defaults, sampling_params& sampling) {
  sampling.temperature = static_cast<float>(fields.get_number("temperature", 0.0, 2.0).value_or(defaults.temperature));
  sampling.top_p = static_cast<float>(fields.get_number("top_p", 0.0, 1.0, true).value_or(defaults.top_p));
  const std::int64_t top_k = fields.get_int("top_k", -1, int32_max).value_or(defaults.top_k);
  sampling.top_k = top_k < 0 ? 0 : static_cast<int>(top_k);
  sampling.min_p = static_cast<float>(fields.get_number("min_p", 0.0, 1.0).value_or(defaults.min_p));
  sampling.repetition_penalty = static_cast<float>(
      fields.get_number("repetition_penalty", 0.0, 10.0, true).value_or(defaults.repetition_penalty));
  sampling.presence_penalty = static_cast<float>(fields.get_number("presence_penalty", -2.0, 2.0).value_or(0.0));
  sampling.frequency_penalty = static_cast<float>(fields.get_number("frequency_penalty", -2.0, 2.0).value_or(0.0));
}

void read_extras(const json_field& fields, generation_request& base) {
  if (const auto seed =
          fields.get_int("seed", std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max())) {
    base.seed = static_cast<std::uint64_t>(*seed);  // negative seeds keep their bits
  }
  base.user = fields.get_string("user", max_user_bytes).value_or("");
  base.ignore_eos = fields.get_bool("ignore_eos").value_or(false);
  base.speculative = fields.get_bool("speculative").value_or(true);
  base.skip_special_tokens = fields.get_bool("skip_special_tokens").value_or(true);
  base.priority = static_cast<int>(fields.get_int("priority", int32_min, int32_max).value_or(0));
  base.deadline_ms = fields.get_number("deadline_ms", 0.0, max_deadline_ms, true);
  // Accepted for compatibility, not used: they must still be well-formed.
  fields.get_object("metadata");
  fields.get_bool("store");
  fields.get_string("service_tier", 64);
}

}  // namespace

void check_token_id(std::int64_t id, const model_info& model, const std::string& param) {
  const std::int64_t vocab = model.vocab_size > 0 ? model.vocab_size : int32_max;
  if (id < 0 || id >= vocab) {
    throw invalid_field(param,
                        "token id " + std::to_string(id) + " in '" + param + "' is outside the vocabulary [0, " +
                            std::to_string(vocab) + ")",
                        "invalid_token_id");
  }
}

void read_max_tokens(const json_field& fields, std::string_view key, const model_info& model,
                     generation_request& base) {
  const std::int64_t context = model.max_model_len > 0 ? model.max_model_len : int32_max;
  if (const auto max_tokens = fields.get_int(key, 1, context)) base.max_tokens = static_cast<int>(*max_tokens);
}

void read_min_tokens(const json_field& fields, generation_request& base) {
  const std::int64_t upper = base.max_tokens > 0 ? base.max_tokens : int32_max;
  base.min_tokens = static_cast<int>(fields.get_int("min_tokens", 0, upper).value_or(0));
}

void check_request_output_budget(const parsed_generation& out, const request_limits& limits, const model_info& model) {
  if (out.prompts.empty()) return;
  admission_limits budget = limits.engine;
  budget.max_model_len = model.max_model_len > 0 ? model.max_model_len : static_cast<int>(int32_max);
  const auto sequences = static_cast<std::int64_t>(out.prompts.size()) * out.n;
  if (const auto error = check_output_budget(sequences, out.prompts.front().max_tokens, budget))
    throw invalid_field(error->param, error->message);
}

void read_common_fields(const json_field& fields, const request_limits& limits, const model_info& model,
                        parsed_generation& out, generation_request& base) {
  read_model(fields, model, out);
  out.n = static_cast<int>(fields.get_int("n", 1, limits.engine.max_n).value_or(1));
  base.n = out.n;
  read_stream(fields, out);
  read_sampling(fields, limits.sampling, base.sampling);
  if (const std::optional<int> max_tokens = limits.sampling.max_tokens) {
    // The endpoint's own default gives way; read_max_tokens still reads the request's.
    base.max_tokens = model.max_model_len > 0 ? std::min(*max_tokens, model.max_model_len) : *max_tokens;
  }
  read_stop(fields, limits, base);
  read_logit_bias(fields, limits, model, base);
  read_stop_token_ids(fields, limits, model, base);
  read_extras(fields, base);
  read_constraint(fields, base);
}

}  // namespace troupe::api
