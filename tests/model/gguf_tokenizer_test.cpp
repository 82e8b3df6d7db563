// The GGUF embedded tokenizer against HF tokenizers' own ids: the real
// Llama 3.1 ("gpt2" / "llama-bpe"), Qwen 3 ("gpt2" / "qwen2") and Mistral
// ("llama", SentencePiece with scores) vocabularies are written into GGUF
// metadata the way llama.cpp's converter lays them out, loaded back, and
// must reproduce tests/fixtures/text/<vocab>.jsonl (made by HF tokenizers).
// Malformed tokenizer metadata gets errors naming the key.

#include <boost/json.hpp>
#include <sstream>

#include "model/gguf_tokenizer.hpp"
#include "tests/model/gguf_test_util.hpp"
#include "tests/model/model_test_util.hpp"

namespace troupe {
namespace {

using namespace testing;  // NOLINT: the byte builders
using ::testing::HasSubstr;

const std::filesystem::path text_fixtures = std::filesystem::path(TROUPE_FIXTURES_DIR) / "text";

std::string token_text(const boost::json::value& value) {
  return std::string(value.is_object() ? value.at("content").as_string() : value.as_string());
}

// tokenizer.json (+ tokenizer_config.json) as llama.cpp's converter writes
// them: every id's text, its type, merges "a b", special ids and flags.
std::vector<gguf_kv> tokenizer_metadata(const std::string& vocabulary, const std::string& model,
                                        const std::string& pre) {
  const auto dir = text_fixtures / "tokenizers" / vocabulary;
  const auto tok = boost::json::parse(read_file(dir / "tokenizer.json")).as_object();
  const auto config = boost::json::parse(read_file(dir / "tokenizer_config.json")).as_object();
  std::map<std::int64_t, std::string> texts;
  std::map<std::int64_t, std::int32_t> types;
  for (const auto& [text, id] : tok.at("model").at("vocab").as_object()) {
    texts[id.as_int64()] = std::string(text);
    types[id.as_int64()] = text.starts_with("<0x") && text.size() == 6 ? 6 : 1;
  }
  for (const auto& added : tok.at("added_tokens").as_array()) {
    texts[added.at("id").as_int64()] = std::string(added.at("content").as_string());
    types[added.at("id").as_int64()] = added.at("special").as_bool() ? 3 : 4;
  }
  std::vector<std::string> tokens;
  std::vector<std::int32_t> token_types;
  std::vector<float> scores;
  std::map<std::string, std::int64_t> ids;
  for (std::int64_t id = 0; id <= texts.rbegin()->first; ++id) {
    tokens.push_back(texts.contains(id) ? texts[id] : "[PAD" + std::to_string(id) + "]");
    token_types.push_back(texts.contains(id) ? types[id] : 5);
    ids[tokens.back()] = id;
  }
  // SentencePiece scores rank the merged pieces; HF's merges were derived
  // from them, so the rank of a piece's first merge stands in for its score.
  const auto& hf_merges = tok.at("model").at("merges").as_array();
  std::map<std::string, float> merged_rank;
  for (std::size_t rank = 0; rank < hf_merges.size(); ++rank) {
    const auto& merge = hf_merges[rank];
    std::string joined(merge.is_string() ? std::string(merge.as_string())
                                         : token_text(merge.at(0)) + " " + token_text(merge.at(1)));
    joined.erase(joined.find(' '), 1);
    merged_rank.emplace(joined, static_cast<float>(rank));
  }
  for (const std::string& token : tokens) scores.push_back(merged_rank.contains(token) ? -merged_rank[token] : -1e9f);
  std::vector<gguf_kv> kvs = {kv_string("tokenizer.ggml.model", model), kv_strings("tokenizer.ggml.tokens", tokens),
                              kv_i32s("tokenizer.ggml.token_type", token_types)};
  if (model == "gpt2") {
    kvs.push_back(kv_string("tokenizer.ggml.pre", pre));
    std::vector<std::string> merges;
    for (const auto& merge : tok.at("model").at("merges").as_array()) {
      merges.push_back(merge.is_string() ? std::string(merge.as_string())
                                         : token_text(merge.at(0)) + " " + token_text(merge.at(1)));
    }
    kvs.push_back(kv_strings("tokenizer.ggml.merges", merges));
  } else {
    kvs.push_back(kv_f32s("tokenizer.ggml.scores", scores));
    if (const auto* unk = tok.at("model").as_object().if_contains("unk_token"); unk && unk->is_string())
      kvs.push_back(kv_u32("tokenizer.ggml.unknown_token_id", static_cast<std::uint32_t>(ids.at(token_text(*unk)))));
  }
  for (const char* field : {"bos_token", "eos_token"}) {
    const auto* value = config.if_contains(field);
    if (value == nullptr || value->is_null()) continue;
    kvs.push_back(
        kv_u32(std::string("tokenizer.ggml.") + field + "_id", static_cast<std::uint32_t>(ids.at(token_text(*value)))));
  }
  const std::string post = boost::json::serialize(tok.at("post_processor"));
  const auto* bos = config.if_contains("bos_token");
  kvs.push_back(kv_bool("tokenizer.ggml.add_bos_token",
                        bos != nullptr && !bos->is_null() && post.find(token_text(*bos)) != std::string::npos));
  return kvs;
}

std::vector<std::int32_t> ids_of(const boost::json::value* value) {
  std::vector<std::int32_t> ids;
  if (value != nullptr)
    for (const auto& id : value->as_array()) ids.push_back(static_cast<std::int32_t>(id.as_int64()));
  return ids;
}

// Every fixture string: ids without and with special tokens, and the decode.
void expect_hf_ids(const std::string& vocabulary, const std::vector<gguf_kv>& kvs) {
  temp_dir dir;
  write_file(dir / "t.gguf", gguf_bytes(kvs, {}, ""));
  const auto tokenizer = load_gguf_tokenizer(gguf_file(dir / "t.gguf"));
  std::istringstream strings(read_file(text_fixtures / "strings.jsonl"));
  std::istringstream records(read_file(text_fixtures / (vocabulary + ".jsonl")));
  std::string text_line, record_line;
  int checked = 0, mismatched = 0;
  while (std::getline(strings, text_line) && std::getline(records, record_line)) {
    const std::string text(boost::json::parse(text_line).as_string());
    const auto record = boost::json::parse(record_line).as_object();
    const std::vector<std::int32_t> ids = ids_of(record.if_contains("ids"));
    std::vector<std::int32_t> special = ids_of(record.if_contains("pre"));
    special.insert(special.end(), ids.begin(), ids.end());
    const std::vector<std::int32_t> post = ids_of(record.if_contains("post"));
    special.insert(special.end(), post.begin(), post.end());
    if (const auto* full = record.if_contains("special")) special = ids_of(full);
    const bool same = tokenizer->encode(text, false) == ids && tokenizer->encode(text, true) == special;
    if (!same && ++mismatched <= 3) ADD_FAILURE() << vocabulary << ": " << text;
    if (const auto* decoded = record.if_contains("dec")) {
      EXPECT_EQ(tokenizer->decode(special, false), std::string(decoded->as_string())) << text;
    }
    ++checked;
  }
  EXPECT_EQ(mismatched, 0) << "of " << checked;
  EXPECT_GT(checked, 2000);
}

TEST(GgufTokenizer, Llama3VocabularyGivesHfIds) {
  expect_hf_ids("llama3_1", tokenizer_metadata("llama3_1", "gpt2", "llama-bpe"));
}

TEST(GgufTokenizer, Qwen3VocabularyGivesHfIds) { expect_hf_ids("qwen3", tokenizer_metadata("qwen3", "gpt2", "qwen2")); }

TEST(GgufTokenizer, SentencePieceVocabularyGivesHfIds) {
  expect_hf_ids("mistral_spm", tokenizer_metadata("mistral_spm", "llama", ""));
}

std::string tokenizer_error(const std::vector<gguf_kv>& kvs) {
  temp_dir dir;
  write_file(dir / "t.gguf", gguf_bytes(kvs, {}, ""));
  return error_of([&] { load_gguf_tokenizer(gguf_file(dir / "t.gguf")); });
}

TEST(GgufTokenizer, MalformedMetadataIsAClearError) {
  const gguf_kv model = kv_string("tokenizer.ggml.model", "gpt2");
  const gguf_kv tokens = kv_strings("tokenizer.ggml.tokens", {"a", "b", "ab"});
  EXPECT_EQ(tokenizer_error({}), "t.gguf: metadata key 'tokenizer.ggml.model': is missing (the file has no tokenizer)");
  EXPECT_THAT(tokenizer_error({kv_string("tokenizer.ggml.model", "bert"), tokens}),
              HasSubstr("'tokenizer.ggml.model': 'bert' is not supported (supported: gpt2, llama)"));
  EXPECT_THAT(tokenizer_error({model, tokens, kv_string("tokenizer.ggml.pre", "falcon")}),
              HasSubstr("'tokenizer.ggml.pre': 'falcon' is not supported"));
  EXPECT_THAT(tokenizer_error({model, tokens, kv_i32s("tokenizer.ggml.token_type", {1, 1})}),
              HasSubstr("'tokenizer.ggml.token_type': has 2 entries for 3 tokens"));
  EXPECT_THAT(tokenizer_error({model, tokens, kv_u32("tokenizer.ggml.bos_token_id", 3)}),
              HasSubstr("'tokenizer.ggml.bos_token_id': 3 is outside the 3 tokens"));
  EXPECT_THAT(tokenizer_error({model, kv_u32("tokenizer.ggml.tokens", 3)}),
              HasSubstr("'tokenizer.ggml.tokens': must be an array of string"));
  EXPECT_THAT(tokenizer_error({model, kv_strings("tokenizer.ggml.tokens", {"a", "\xff"})}),
              HasSubstr("'tokenizer.ggml.tokens': entry 1 is not valid UTF-8"));
  EXPECT_THAT(tokenizer_error({kv_string("tokenizer.ggml.model", "llama"), tokens}),
              HasSubstr("'tokenizer.ggml.scores': is missing"));
  EXPECT_THAT(tokenizer_error({model, tokens, kv_strings("tokenizer.ggml.merges", {"a c"})}),
              HasSubstr("t.gguf: embedded tokenizer: "));
}

TEST(GgufTokenizer, ChatTemplatesAndSpecialTokensComeFromMetadata) {
  temp_dir dir;
  write_file(
      dir / "t.gguf",
      gguf_bytes({kv_strings("tokenizer.ggml.tokens", {"<s>", "</s>", "x"}), kv_u32("tokenizer.ggml.bos_token_id", 0),
                  kv_u32("tokenizer.ggml.eos_token_id", 1), kv_string("tokenizer.chat_template", "{{ bos_token }}"),
                  kv_string("tokenizer.chat_template.tool_use", "tools"),
                  kv_string("tokenizer.chat_templates_unrelated", "no")},
                 {}, ""));
  const chat_template_source source = gguf_chat_template(gguf_file(dir / "t.gguf"));
  EXPECT_EQ(source.templates.size(), 2u);
  EXPECT_EQ(source.templates.at("default"), "{{ bos_token }}");
  EXPECT_EQ(source.templates.at("tool_use"), "tools");
  EXPECT_EQ(source.special_tokens.at("bos_token").as_string(), "<s>");
  EXPECT_EQ(source.special_tokens.at("eos_token").as_string(), "</s>");
}

}  // namespace
}  // namespace troupe
