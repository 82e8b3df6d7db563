// token_bytes: the raw bytes each id stands for, as constraints need them.

#include <gtest/gtest.h>

#include "model/text/token_bytes.hpp"
#include "text_fixtures.hpp"

namespace troupe::text::testing {
namespace {

TEST(TokenBytes, ByteLevelPiecesGiveTheirBytes) {
  const auto tok = real_tokenizer("llama3_1");
  EXPECT_EQ(token_bytes(*tok, *tok->token_to_id("Ġthe")), " the");
  EXPECT_EQ(token_bytes(*tok, *tok->token_to_id("Ċ")), "\n");
  // A lone UTF-8 lead byte stays a raw byte instead of becoming U+FFFD.
  EXPECT_EQ(token_bytes(*tok, *tok->token_to_id("Ã")), "\xC3");
  EXPECT_EQ(token_bytes(*tok, *tok->eos_token()->id), "");
  EXPECT_EQ(token_bytes(*tok, -1), "");
}

TEST(TokenBytes, SentencePieceKeepsLeadingSpacesAndByteFallback) {
  const auto tok = real_tokenizer("mistral_spm");
  EXPECT_EQ(token_bytes(*tok, *tok->token_to_id("▁the")), " the");
  EXPECT_EQ(token_bytes(*tok, *tok->token_to_id("<0x0A>")), "\n");
  EXPECT_EQ(token_bytes(*tok, *tok->token_to_id("<0xE2>")), "\xE2");
  EXPECT_EQ(token_bytes(*tok, *tok->token_to_id("</s>")), "");
}

TEST(TokenBytes, EveryNonSpecialIdSpellsItsEncoding) {
  for (const std::string name : {"llama3_1", "qwen3"}) {
    const auto tok = real_tokenizer(name);
    const auto bytes = vocabulary_bytes(*tok);
    ASSERT_EQ(bytes.size(), static_cast<std::size_t>(tok->vocab_size()));
    for (const std::string text : {"Hello, world!", "{\"key\": [1, 2.5]}", "naïve café 日本"}) {
      std::string joined;
      for (auto id : tok->encode(text, false)) joined += bytes[static_cast<std::size_t>(id)];
      EXPECT_EQ(joined, text) << name;
    }
  }
}

}  // namespace
}  // namespace troupe::text::testing
