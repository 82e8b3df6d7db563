// Hostile input: ill-formed UTF-8, very long strings, malformed tokenizer
// files and ids outside the vocabulary give clear errors, never crashes.

#include <gtest/gtest.h>

#include <thread>

#include "model/text/incremental_detokenizer.hpp"
#include "tests/text/text_fixtures.hpp"

namespace troupe::text::testing {
namespace {

TEST(TokenizerHostile, InvalidUtf8NamesTheByteOffset) {
  const auto tok = real_tokenizer("llama3_1");
  const std::vector<std::pair<std::string, std::size_t>> cases = {
      {"abc\xFF", 3},
      {"\x80", 0},
      {"ok \xE2\x82", 3},
      {"\xC0\xAF overlong", 0},
      {"x\xED\xA0\x80 surrogate", 1},
      {"\xF4\x90\x80\x80 too big", 0},
      {"\xE2\x28\xA1", 0},
      {"fine \xF0\x9F\x98", 5},
  };
  for (const auto& [text, offset] : cases) {
    try {
      tok->encode(text, true);
      ADD_FAILURE() << "no error for offset " << offset;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), "encode: invalid UTF-8 at byte offset " + std::to_string(offset));
    }
  }
}

std::string ten_megabytes_of_mixed_text() {
  std::string text;
  const auto& strings = test_strings();
  for (std::size_t i = 0; text.size() < 10'000'000; i = (i + 1) % strings.size()) text += strings[i];
  return text;
}

TEST(TokenizerHostile, TenMegabyteStringsEncodeAndRoundTrip) {
  const std::string mixed = ten_megabytes_of_mixed_text();
  for (const std::string vocabulary : {"llama3_1", "deepseek_v3"}) {
    const auto tok = real_tokenizer(vocabulary);
    const auto ids = tok->encode(mixed, false);
    EXPECT_GT(ids.size(), mixed.size() / 10) << vocabulary;
    EXPECT_EQ(tok->decode(ids, false), mixed) << vocabulary << ": byte-level BPE is lossless";
  }
}

TEST(TokenizerHostile, LongSingleRunsEncode) {
  // One giant piece each (BPE over millions of symbols is O(n log n)): a
  // word, a whitespace run, a digit run, a CJK run.
  const auto tok = real_tokenizer("qwen3");
  for (const std::string& unit : {std::string("a"), std::string(" "), std::string("7"), std::string("\xE4\xB8\xAD")}) {
    std::string text;
    while (text.size() < 2'000'000) text += unit;
    const auto ids = tok->encode(text, false);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(tok->decode(ids, false), text);
  }
  const auto spm = real_tokenizer("mistral_spm");
  // Without a pre-tokenizer the whole text is one piece.
  const std::string words(2'000'000, 'x');
  EXPECT_FALSE(spm->encode(words, true).empty());
}

TEST(TokenizerHostile, UnknownIdsDecodeToNothing) {
  const auto tok = real_tokenizer("llama3_1");
  const std::vector<token_id> known = tok->encode("Hello world", false);
  std::vector<token_id> noisy = {-1, known[0], 128256, 200000, 2147483647, known[1], -2147483647 - 1};
  EXPECT_EQ(tok->decode(noisy, false), "Hello world");
  incremental_detokenizer stream(tok, true);
  std::string text = stream.push(noisy);
  text += stream.finish();
  EXPECT_EQ(text, "Hello world");
  EXPECT_FALSE(tok->id_to_token(-7).has_value());
  EXPECT_FALSE(tok->id_to_token(tok->vocab_size()).has_value());
}

TEST(TokenizerHostile, ConcurrentEncodersAgree) {
  const auto tok = real_tokenizer("qwen3");
  const auto& records = golden_records("qwen3");
  std::vector<std::size_t> failures(4, 0);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < failures.size(); ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t round = 0; round < 3; ++round) {
        for (std::size_t i = t; i < records.size(); i += 2) {
          if (tok->encode(records[i].text, false) != records[i].ids) ++failures[t];
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (const std::size_t count : failures) EXPECT_EQ(count, 0u);
}

}  // namespace
}  // namespace troupe::text::testing
