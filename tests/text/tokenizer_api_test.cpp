// Vocabulary lookups and tokenizer_config.json fields of the real
// tokenizers; expected values are HF `tokenizers` answers and the contents
// of the fixture files.

#include <gtest/gtest.h>

#include "tests/text/text_fixtures.hpp"

namespace troupe::text::testing {
namespace {

TEST(TokenizerApi, VocabSizeMatchesHfWithAddedTokens) {
  // HF: Tokenizer.get_vocab_size(with_added_tokens=True).
  EXPECT_EQ(real_tokenizer("llama3_1")->vocab_size(), 128256);
  EXPECT_EQ(real_tokenizer("qwen3")->vocab_size(), 151669);
  EXPECT_EQ(real_tokenizer("deepseek_v3")->vocab_size(), 128815);
  EXPECT_EQ(real_tokenizer("mistral_spm")->vocab_size(), 32000);
}

TEST(TokenizerApi, TokenLookupsMatchHf) {
  const auto llama = real_tokenizer("llama3_1");
  EXPECT_EQ(llama->token_to_id("\xC4\xA0the"), 279);  // "Ġthe"
  EXPECT_EQ(llama->id_to_token(13), ".");
  EXPECT_EQ(llama->token_to_id("<|eot_id|>"), 128009);
  EXPECT_EQ(llama->id_to_token(128009), "<|eot_id|>");
  EXPECT_FALSE(llama->token_to_id("<0x0A>").has_value());
  EXPECT_TRUE(llama->is_special(128009));
  EXPECT_FALSE(llama->is_special(279));
  const auto deepseek = real_tokenizer("deepseek_v3");
  EXPECT_EQ(deepseek->token_to_id("\xC4\xA0the"), 270);
  EXPECT_EQ(deepseek->id_to_token(13), "+");
  const auto mistral = real_tokenizer("mistral_spm");
  EXPECT_EQ(mistral->token_to_id("<0x0A>"), 13);
  EXPECT_EQ(mistral->id_to_token(13), "<0x0A>");
  EXPECT_TRUE(mistral->is_special(1));
  const auto qwen = real_tokenizer("qwen3");
  EXPECT_FALSE(qwen->is_special(151657)) << "<tool_call> is added but not special";
  EXPECT_TRUE(qwen->is_special(151645));
}

TEST(TokenizerApi, ConfigSpecialTokens) {
  const auto llama = real_tokenizer("llama3_1");
  ASSERT_TRUE(llama->bos_token() && llama->eos_token());
  EXPECT_EQ(llama->bos_token()->text, "<|begin_of_text|>");
  EXPECT_EQ(llama->bos_token()->id, 128000);
  EXPECT_EQ(llama->eos_token()->text, "<|eot_id|>");
  EXPECT_EQ(llama->eos_token()->id, 128009);
  EXPECT_FALSE(llama->add_bos_token().has_value());

  const auto deepseek = real_tokenizer("deepseek_v3");  // tokens given as {"content": ...} objects
  ASSERT_TRUE(deepseek->bos_token());
  EXPECT_EQ(deepseek->bos_token()->text,
            "<\xEF\xBD\x9C"
            "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>");
  EXPECT_EQ(deepseek->bos_token()->id, 0);
  EXPECT_EQ(deepseek->eos_token()->id, 1);
  EXPECT_EQ(deepseek->add_bos_token(), true);
  EXPECT_EQ(deepseek->add_eos_token(), false);

  const auto qwen = real_tokenizer("qwen3");  // "bos_token": null
  EXPECT_FALSE(qwen->bos_token().has_value());
  EXPECT_EQ(qwen->eos_token()->id, 151645);
  EXPECT_EQ(qwen->pad_token()->id, 151643);

  const auto mistral = real_tokenizer("mistral_spm");
  EXPECT_EQ(mistral->bos_token()->id, 1);
  EXPECT_EQ(mistral->eos_token()->id, 2);
  EXPECT_FALSE(mistral->pad_token().has_value());
}

}  // namespace
}  // namespace troupe::text::testing
