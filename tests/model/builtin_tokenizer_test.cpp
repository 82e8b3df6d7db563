// The built-in tokenizer's files are a well-formed byte-level BPE in the HF
// layout (that HF `tokenizers` loads them is checked by hand; see
// tools/fixtures/README.md).

#include "model/builtin_tokenizer.hpp"

#include <boost/json.hpp>
#include <set>

#include "tests/model/model_test_util.hpp"

namespace troupe {
namespace {

TEST(BuiltinTokenizer, IsDeterministic) {
  const builtin_tokenizer a = make_builtin_tokenizer(4096);
  const builtin_tokenizer b = make_builtin_tokenizer(4096);
  EXPECT_EQ(a.tokenizer_json, b.tokenizer_json);
  EXPECT_EQ(a.tokenizer_config_json, b.tokenizer_config_json);
}

TEST(BuiltinTokenizer, ByteLevelVocabularyMergesAndSpecialTokens) {
  const builtin_tokenizer tokenizer = make_builtin_tokenizer(4096);
  const boost::json::value json = boost::json::parse(tokenizer.tokenizer_json);
  const boost::json::object& model = json.at("model").as_object();
  EXPECT_EQ(model.at("type").as_string(), "BPE");
  const boost::json::object& vocab = model.at("vocab").as_object();
  // GPT-2's byte table: '!' (0x21) is the first token; the space byte is U+0120 'Ġ', newline U+010A 'Ċ'.
  EXPECT_EQ(vocab.at("!").as_int64(), 0);
  EXPECT_EQ(vocab.at("\xC4\xA0").as_int64(), 220);
  EXPECT_EQ(vocab.at("\xC4\x8A").as_int64(), 198);
  std::set<std::int64_t> ids;
  for (const auto& [token, id] : vocab) ids.insert(id.as_int64());
  ASSERT_EQ(ids.size(), vocab.size());
  EXPECT_EQ(*ids.begin(), 0);
  EXPECT_EQ(*ids.rbegin(), static_cast<std::int64_t>(vocab.size()) - 1);
  const boost::json::array& merges = model.at("merges").as_array();
  EXPECT_GE(merges.size(), 250u);
  for (const auto& merge : merges) {
    const std::string text(merge.as_string());
    const std::size_t space = text.find(' ');
    ASSERT_NE(space, std::string::npos) << text;
    const std::string left = text.substr(0, space), right = text.substr(space + 1);
    EXPECT_TRUE(vocab.contains(left) && vocab.contains(right) && vocab.contains(left + right)) << text;
  }
  const boost::json::array& added = json.at("added_tokens").as_array();
  const std::vector<std::string> specials = {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                                             "<|end_header_id|>", "<|eot_id|>"};
  ASSERT_EQ(added.size(), specials.size());
  for (std::size_t k = 0; k < specials.size(); ++k) {
    EXPECT_EQ(added[k].at("content").as_string(), specials[k]);
    EXPECT_EQ(added[k].at("id").as_int64(), static_cast<std::int64_t>(vocab.size() + k));
    EXPECT_TRUE(added[k].at("special").as_bool());
  }
  EXPECT_EQ(tokenizer.size, static_cast<std::int64_t>(vocab.size() + specials.size()));
  EXPECT_EQ(tokenizer.begin_of_text_id, static_cast<std::int64_t>(vocab.size()));
  EXPECT_EQ(tokenizer.eot_id, tokenizer.size - 1);
  EXPECT_EQ(json.at("decoder").at("type").as_string(), "ByteLevel");
  EXPECT_EQ(json.at("pre_tokenizer").at("pretokenizers").as_array()[1].at("type").as_string(), "ByteLevel");
}

TEST(BuiltinTokenizer, LearnsCommonEnglishPieces) {
  const boost::json::value json = boost::json::parse(make_builtin_tokenizer(4096).tokenizer_json);
  const boost::json::object& vocab = json.at("model").at("vocab").as_object();
  for (const char* piece : {"\xC4\xA0"
                            "the",
                            "\xC4\xA0"
                            "and",
                            "ing"})
    EXPECT_TRUE(vocab.contains(piece)) << piece;
}

TEST(BuiltinTokenizer, ConfigNamesBosEosAndChatTemplate) {
  const boost::json::value config = boost::json::parse(make_builtin_tokenizer(4096).tokenizer_config_json);
  EXPECT_EQ(config.at("bos_token").as_string(), "<|begin_of_text|>");
  EXPECT_EQ(config.at("eos_token").as_string(), "<|eot_id|>");
  EXPECT_EQ(config.at("model_max_length").as_int64(), 4096);
  EXPECT_EQ(config.at("chat_template").as_string(), builtin_chat_template());
  EXPECT_EQ(config.at("added_tokens_decoder").as_object().size(), 5u);
}

}  // namespace
}  // namespace troupe
