// POST /v1/completions request parsing.

#include <algorithm>
#include <iterator>

#include "api/http/api_error.hpp"
#include "api/http/openai_request.hpp"
#include "api/http/request_fields.hpp"

namespace troupe::api {

namespace {

constexpr auto completions_only_keys =
    std::to_array<std::string_view>({"prompt", "logprobs", "echo", "suffix", "best_of"});

std::vector<std::string_view> completions_keys() {
  std::vector<std::string_view> keys(common_request_keys.begin(), common_request_keys.end());
  keys.insert(keys.end(), completions_only_keys.begin(), completions_only_keys.end());
  return keys;
}

/// One prompt as given: text or token ids.
struct prompt_input {
  bool is_text = true;
  std::string text;
  std::vector<std::int32_t> token_ids;
};

prompt_input read_text_prompt(const boost::json::value& value, const std::string& param) {
  if (!value.is_string()) throw invalid_field(param, "'" + param + "' must be a string", "invalid_type");
  if (value.get_string().empty()) throw invalid_field(param, "'" + param + "' must not be empty", "empty_prompt");
  return {true, std::string(value.get_string()), {}};
}

prompt_input read_token_prompt(const boost::json::array& ids, const std::string& param, const model_info& model) {
  if (ids.empty()) throw invalid_field(param, "'" + param + "' must not be empty", "empty_prompt");
  if (model.max_model_len > 0 && ids.size() > static_cast<std::size_t>(model.max_model_len)) {
    throw api_error(413, "invalid_request_error",
                    "'" + param + "' has " + std::to_string(ids.size()) + " tokens; the model's context length is " +
                        std::to_string(model.max_model_len),
                    param, "context_length_exceeded");
  }
  prompt_input prompt{false, {}, {}};
  prompt.token_ids.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::string entry = param + "[" + std::to_string(i) + "]";
    const std::optional<std::int64_t> id = json_integer(ids[i], /*integral_doubles=*/true);
    if (!id) throw invalid_field(entry, "'" + entry + "' must be an integer token id", "invalid_type");
    check_token_id(*id, model, entry);
    prompt.token_ids.push_back(static_cast<std::int32_t>(*id));
  }
  return prompt;
}

std::vector<prompt_input> read_prompts(const json_field& fields, const request_limits& limits,
                                       const model_info& model) {
  const std::optional<json_field> prompt = fields.find("prompt");
  if (!prompt) throw invalid_field("prompt", "'prompt' is required", "missing_field");
  if (prompt->value().is_string()) return {read_text_prompt(prompt->value(), "prompt")};
  if (!prompt->value().is_array()) {
    prompt->fail_type("a string, an array of strings, an array of token ids or an array of such arrays");
  }
  const boost::json::array& list = prompt->array();
  if (list.empty()) throw invalid_field("prompt", "'prompt' must not be empty", "empty_prompt");
  if (list.front().is_number()) return {read_token_prompt(list, "prompt", model)};
  if (list.size() > static_cast<std::size_t>(limits.max_prompts)) {
    throw invalid_field("prompt",
                        "'prompt' has " + std::to_string(list.size()) + " prompts; at most " +
                            std::to_string(limits.max_prompts) + " are allowed",
                        "too_many");
  }
  std::vector<prompt_input> prompts;
  const bool texts = list.front().is_string();
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string param = "prompt[" + std::to_string(i) + "]";
    if (texts) {
      prompts.push_back(read_text_prompt(list[i], param));
    } else if (list[i].is_array()) {
      prompts.push_back(read_token_prompt(list[i].get_array(), param, model));
    } else {
      throw invalid_field(param, "'" + param + "' must be an array of token ids (all prompts of one kind)",
                          "invalid_type");
    }
  }
  return prompts;
}

void read_completions_extras(const json_field& fields, const request_limits& limits, parsed_generation& out) {
  if (const auto logprobs = fields.get_int("logprobs", 0, limits.engine.max_top_logprobs)) {
    out.logprobs = true;
    out.top_logprobs = static_cast<int>(*logprobs);
  }
  out.echo = fields.get_bool("echo").value_or(false);
  if (out.echo && out.logprobs) {
    // OpenAI would report the prompt's logprobs too; the engine does not compute them.
    throw invalid_field("echo", "'echo' together with 'logprobs' is not supported (prompt logprobs are not computed)",
                        "unsupported_value");
  }
  if (const auto suffix = fields.get_string("suffix", 1 << 20); suffix && !suffix->empty()) {
    throw invalid_field("suffix", "'suffix' is not supported", "unsupported_value");
  }
  if (const auto best_of = fields.get_int("best_of", 1, limits.engine.max_n); best_of && *best_of != out.n) {
    throw invalid_field("best_of", "'best_of' different from 'n' is not supported", "unsupported_value");
  }
}

}  // namespace

parsed_generation parse_completions_request(const boost::json::value& body, const request_limits& limits,
                                            const model_info& model) {
  const json_field fields = request_fields(body);
  fields.reject_unknown(completions_keys());
  parsed_generation out;
  out.endpoint = endpoint_kind::completions;
  generation_request base;
  read_common_fields(fields, limits, model, out, base);
  read_max_tokens(fields, "max_tokens", model, base);  // default 16, as OpenAI
  read_min_tokens(fields, base);
  read_completions_extras(fields, limits, out);
  base.sampling.logprobs = out.logprobs;
  base.sampling.top_logprobs = out.top_logprobs;
  base.echo = out.echo;
  for (prompt_input& prompt : read_prompts(fields, limits, model)) {
    generation_request request = base;
    request.kind = prompt.is_text ? prompt_kind::text : prompt_kind::token_ids;
    request.prompt_text = std::move(prompt.text);
    request.prompt_token_ids = std::move(prompt.token_ids);
    out.prompts.push_back(std::move(request));
  }
  check_request_output_budget(out, limits, model);
  return out;
}

}  // namespace troupe::api
