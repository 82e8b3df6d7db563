// Edited copies of the real tokenizer.json files (other normalizers,
// pre-tokenizers, split behaviours, added-token flags, post-processors,
// decoders) against HF `tokenizers` golden records from variants.json.

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "model/text/incremental_detokenizer.hpp"
#include "tests/text/text_fixtures.hpp"

namespace troupe::text::testing {
namespace {

struct variant {
  std::string name;
  std::shared_ptr<const tokenizer> tok;
  std::vector<golden_record> cases;
  std::optional<bool> transformers_adds_special_tokens;  ///< set for variants that edit the config
};

/// Applies a variant's edits to its base tokenizer.json, exactly as the
/// generator did before handing the JSON to HF.
std::string edited_tokenizer_json(const boost::json::object& spec) {
  const std::string base(spec.at("base").as_string());
  boost::json::value root = boost::json::parse(read_text_file(fixture_path("tokenizers/" + base + "/tokenizer.json")));
  auto& top = root.as_object();
  if (const auto* patch = spec.if_contains("patch")) {
    for (const auto& [key, value] : patch->as_object()) top[key] = value;
  }
  if (const auto* patch = spec.if_contains("model_patch")) {
    for (const auto& [key, value] : patch->as_object()) top["model"].as_object()[key] = value;
  }
  if (const auto* extra = spec.if_contains("added_tokens")) {
    for (const auto& token : extra->as_array()) top["added_tokens"].as_array().push_back(token);
  }
  return boost::json::serialize(root);
}

/// The base tokenizer_config.json with the variant's edits, or "" if none.
std::string edited_config_json(const boost::json::object& spec) {
  const auto* patch = spec.if_contains("config_patch");
  if (patch == nullptr) return {};
  const std::string base(spec.at("base").as_string());
  boost::json::value config =
      boost::json::parse(read_text_file(fixture_path("tokenizers/" + base + "/tokenizer_config.json")));
  for (const auto& [key, value] : patch->as_object()) config.as_object()[key] = value;
  return boost::json::serialize(config);
}

const std::vector<variant>& variants() {
  static const std::vector<variant> loaded = [] {
    std::vector<variant> result;
    const auto root = boost::json::parse(read_text_file(fixture_path("variants.json")));
    for (const auto& entry : root.as_array()) {
      const auto& spec = entry.as_object();
      variant v;
      v.name = std::string(spec.at("name").as_string());
      v.tok = tokenizer::from_json(edited_tokenizer_json(spec), edited_config_json(spec));
      if (const auto* adds = spec.if_contains("transformers_adds_special_tokens")) {
        v.transformers_adds_special_tokens = adds->as_bool();
      }
      for (const auto& item : spec.at("cases").as_array()) {
        const auto& fields = item.as_object();
        v.cases.push_back(parse_record(fields, std::string(fields.at("text").as_string())));
      }
      result.push_back(std::move(v));
    }
    return result;
  }();
  return loaded;
}

/// Variant names only (cheap: test discovery lists them without loading).
std::vector<std::string> variant_names() {
  std::vector<std::string> names;
  const auto root = boost::json::parse(read_text_file(fixture_path("variants.json")));
  for (const auto& entry : root.as_array()) names.emplace_back(entry.as_object().at("name").as_string());
  return names;
}

const variant& variant_named(const std::string& name) {
  const auto& all = variants();
  const auto found = std::find_if(all.begin(), all.end(), [&](const variant& v) { return v.name == name; });
  if (found == all.end()) throw std::runtime_error("no variant " + name);
  return *found;
}

class TokenizerVariants : public ::testing::TestWithParam<std::string> {
 protected:
  const variant& current() const { return variant_named(GetParam()); }
};

TEST_P(TokenizerVariants, EncodeAndDecodeMatchHf) {
  const variant& v = current();
  ASSERT_GT(v.cases.size(), 300u);
  std::size_t failures = 0;
  for (const golden_record& record : v.cases) {
    const bool ok = v.tok->encode(record.text, false) == record.ids &&
                    v.tok->encode(record.text, true) == record.special_ids &&
                    v.tok->decode(record.special_ids, false) == record.decoded &&
                    v.tok->decode(record.special_ids, true) == record.decoded_skip &&
                    v.tok->decode(record.ids, false) == record.decoded_plain;
    if (!ok && failures++ < 5)
      ADD_FAILURE() << v.name << ": mismatch on " << boost::json::serialize(boost::json::value(record.text));
  }
  EXPECT_EQ(failures, 0u) << v.name;
}

TEST_P(TokenizerVariants, IncrementalDetokenizationEqualsFullDecode) {
  const variant& v = current();
  std::size_t failures = 0;
  for (const golden_record& record : v.cases) {
    incremental_detokenizer stream(v.tok, false);
    std::string text;
    for (const token_id id : record.special_ids) text += stream.push(id);
    text += stream.finish();
    if (text != record.decoded && failures++ < 5) ADD_FAILURE() << v.name << ": incremental decode differs";
  }
  EXPECT_EQ(failures, 0u) << v.name;
}

INSTANTIATE_TEST_SUITE_P(EditedVocabularies, TokenizerVariants, ::testing::ValuesIn(variant_names()),
                         [](const auto& info) { return info.param; });

TEST(TokenizerVariants, ConfigFlagsAddSpecialTokensOnlyLikeTransformers) {
  const auto& all = variants();
  const auto found =
      std::find_if(all.begin(), all.end(), [](const variant& v) { return v.name == "mistral_config_flags"; });
  ASSERT_NE(found, all.end());
  ASSERT_TRUE(found->transformers_adds_special_tokens.has_value());
  EXPECT_EQ(found->tok->add_bos_token(), true);
  for (const golden_record& record : found->cases) {
    const bool adds = found->tok->encode(record.text, true) != found->tok->encode(record.text, false);
    EXPECT_EQ(adds, *found->transformers_adds_special_tokens) << record.text;
  }
}

}  // namespace
}  // namespace troupe::text::testing
