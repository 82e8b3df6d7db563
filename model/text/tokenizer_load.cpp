// Reading tokenizer.json and tokenizer_config.json into tokenizer::impl.

#include "model/text/tokenizer_impl.hpp"
#include "model/text/tokenizer_json.hpp"

namespace troupe::text {

namespace {

/// A token field of tokenizer_config.json: a string, {"content": ...} or null.
std::optional<special_token> config_token(const json_field& config, std::string_view key,
                                          const tokenizer::impl& parts) {
  const auto field = config.find(key);
  if (!field) return std::nullopt;
  special_token token;
  token.text = field->value().is_object() ? field->at("content").string() : field->string();
  if (const auto added = parts.added->token_to_id(token.text)) {
    token.id = added;
  } else {
    token.id = parts.model->token_to_id(token.text);
  }
  return token;
}

std::optional<bool> config_flag(const json_field& config, std::string_view key) {
  const auto field = config.find(key);
  if (!field) return std::nullopt;
  return field->boolean();
}

/// Special tokens and flags of tokenizer_config.json. add_bos_token and
/// add_eos_token are reported but do not change encode(): tokenizer.json's
/// post-processor decides, as in HF tokenizers and transformers 5 (checked by
/// the mistral_config_flags fixture).
void apply_config(tokenizer::impl& parts, std::string_view config_json) {
  if (config_json.empty()) return;
  const boost::json::value root = parse_json_document(config_json, "tokenizer_config.json");
  const file_json_rules rules = tokenizer_json_rules("tokenizer_config.json");
  const json_field config(root, rules);
  config.object();
  parts.bos = config_token(config, "bos_token", parts);
  parts.eos = config_token(config, "eos_token", parts);
  parts.pad = config_token(config, "pad_token", parts);
  parts.add_bos_token = config_flag(config, "add_bos_token");
  parts.add_eos_token = config_flag(config, "add_eos_token");
}

}  // namespace

std::unique_ptr<tokenizer::impl> load_tokenizer_parts(std::string_view tokenizer_json,
                                                      std::string_view tokenizer_config_json) {
  const boost::json::value root = parse_json_document(tokenizer_json, "tokenizer.json");
  const file_json_rules rules = tokenizer_json_rules("tokenizer.json");
  const json_field top(root, rules);
  top.object();
  auto parts = std::make_unique<tokenizer::impl>();
  if (const auto node = top.find("normalizer")) parts->norm = make_normalizer(*node);
  pre_tokenizer_info info;
  if (const auto node = top.find("pre_tokenizer")) parts->pre = make_pre_tokenizer(*node, info);
  parts->model = std::make_unique<bpe_model>(top.at("model"), info.ends_with_byte_level);
  const auto added_tokens = top.find("added_tokens");
  parts->added =
      std::make_unique<added_vocabulary>(added_tokens ? &*added_tokens : nullptr, *parts->model, parts->norm.get());
  if (const auto post = top.find("post_processor")) {
    sequence_template ids = parse_post_processor(*post);
    if (!ids.before.empty() || !ids.after.empty()) parts->post = std::move(ids);
  }
  if (const auto node = top.find("decoder")) parts->decoder = parse_decoder(*node);
  apply_config(*parts, tokenizer_config_json);
  return parts;
}

}  // namespace troupe::text
