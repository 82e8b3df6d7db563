// Incremental detokenization: deltas are complete UTF-8, appear as early as
// the decoder allows, and always concatenate to the full decode (whose
// agreement with HF is checked by the golden tests).

#include "model/text/incremental_detokenizer.hpp"

#include <gtest/gtest.h>

#include <random>

#include "base/utf8.hpp"
#include "tests/text/text_fixtures.hpp"

namespace troupe::text::testing {
namespace {

std::vector<std::string> deltas_of(const std::shared_ptr<const tokenizer>& tok, const std::vector<token_id>& ids,
                                   bool skip_special) {
  incremental_detokenizer stream(tok, skip_special);
  std::vector<std::string> deltas;
  for (const token_id id : ids) deltas.push_back(stream.push(id));
  deltas.push_back(stream.finish());
  return deltas;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string text;
  for (const auto& part : parts) text += part;
  return text;
}

TEST(IncrementalDetokenizer, ByteLevelTextAppearsPerToken) {
  const auto tok = real_tokenizer("llama3_1");
  const auto deltas = deltas_of(tok, tok->encode("Hello world", true), true);
  EXPECT_EQ(deltas, (std::vector<std::string>{"", "Hello", " world", ""}));
}

TEST(IncrementalDetokenizer, SentencePieceDropsOnlyTheFirstLeadingSpace) {
  const auto tok = real_tokenizer("mistral_spm");
  const auto ids = tok->encode("Hello world", true);
  EXPECT_EQ(deltas_of(tok, ids, true), (std::vector<std::string>{"", "Hello", " world", ""}));
  EXPECT_EQ(joined(deltas_of(tok, ids, false)), tok->decode(ids, false));
}

TEST(IncrementalDetokenizer, MultiTokenCharactersWaitUntilComplete) {
  for (const std::string vocabulary : {"llama3_1", "mistral_spm"}) {
    const auto tok = real_tokenizer(vocabulary);
    const auto ids = tok->encode("\xF0\x9F\xA6\x99\xF0\x9F\xA6\x99 a", false);  // two rare emoji, then " a"
    const auto deltas = deltas_of(tok, ids, false);
    for (const auto& delta : deltas) EXPECT_FALSE(find_invalid_utf8(delta)) << vocabulary;
    EXPECT_EQ(joined(deltas), tok->decode(ids, false)) << vocabulary;
    EXPECT_GT(ids.size(), 3u) << vocabulary << ": the emoji should need several tokens";
  }
}

TEST(IncrementalDetokenizer, TruncatedCharacterBecomesReplacementAtFinish) {
  const auto tok = real_tokenizer("llama3_1");
  auto ids = tok->encode("ok \xF0\x9F\xA6\x99", false);
  ids.pop_back();
  incremental_detokenizer stream(tok, false);
  std::string text = stream.push(ids);
  EXPECT_EQ(text, "ok ");
  text += stream.finish();
  EXPECT_EQ(text, tok->decode(ids, false));
  EXPECT_TRUE(text.ends_with("\xEF\xBF\xBD"));
}

TEST(IncrementalDetokenizer, IllFormedByteFallbackRun) {
  const auto tok = real_tokenizer("mistral_spm");
  const std::vector<token_id> ids = {*tok->token_to_id("<0xE4>"), *tok->token_to_id("<0xBD>"), *tok->token_to_id("▁a"),
                                     *tok->token_to_id("<0xC3>"), *tok->token_to_id("<0xA9>")};
  EXPECT_EQ(joined(deltas_of(tok, ids, false)), tok->decode(ids, false));
  EXPECT_EQ(tok->decode(ids, false), "\xEF\xBF\xBD\xEF\xBF\xBD a\xC3\xA9");
}

TEST(IncrementalDetokenizer, FinishTwiceAndPushAfterFinish) {
  incremental_detokenizer stream(real_tokenizer("qwen3"), false);
  EXPECT_EQ(stream.push(9707), "Hello");
  EXPECT_EQ(stream.finish(), "");
  EXPECT_EQ(stream.finish(), "");
  EXPECT_THROW(stream.push(9707), std::logic_error);
}

class IncrementalDetokenizer : public ::testing::TestWithParam<std::string> {};

TEST_P(IncrementalDetokenizer, AnyIdSequenceStreamsToTheFullDecode) {
  const auto tok = real_tokenizer(GetParam());
  std::mt19937 rng(777);
  // Mostly small ids (bytes, byte-fallback tokens, short pieces), some
  // special and out-of-range ones.
  std::uniform_int_distribution<token_id> small(0, 600);
  std::uniform_int_distribution<token_id> any(-3, tok->vocab_size() + 3);
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<token_id> ids(std::uniform_int_distribution<int>(0, 30)(rng));
    for (token_id& id : ids) id = rng() % 3 == 0 ? any(rng) : small(rng);
    for (const bool skip : {false, true}) {
      incremental_detokenizer stream(tok, skip);
      std::string text;
      std::size_t position = 0;
      while (position < ids.size()) {
        const std::size_t count = std::min<std::size_t>(ids.size() - position, 1 + rng() % 3);
        const std::string delta = stream.push(std::span<const token_id>(ids.data() + position, count));
        ASSERT_FALSE(find_invalid_utf8(delta));
        text += delta;
        position += count;
      }
      text += stream.finish();
      ASSERT_EQ(text, tok->decode(ids, skip)) << GetParam() << " trial " << trial;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RealVocabularies, IncrementalDetokenizer, ::testing::ValuesIn(vocabularies),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace troupe::text::testing
