// A draft model must share the target's tokenizer (issue 15, defect 4): a
// draft (--draft-model) whose tokenizer files differ from the target's is
// refused at load with a message naming the draft's file and what differs
// (vocab_size, a token's spelling, a special token, or how text encodes),
// rather than proposing ids that mean other tokens to the target.

#include <gtest/gtest.h>

#include "engine_fixture.hpp"

namespace troupe::testing {
namespace {

/// The message engine::start refuses a draft at `dir` with (empty if it starts).
std::string draft_start_error(const std::filesystem::path& dir) {
  engine_config config = tiny_engine_config();
  config.speculative = "draft";
  config.num_speculative_tokens = 2;
  config.draft_model = dir.string();
  try {
    engine::start(config);
  } catch (const std::runtime_error& error) {
    return error.what();
  }
  return {};
}

TEST(DraftTokenizerCheck, ATokenSpelledDifferentlyIsRefusedNamingTheIdAndFile) {
  // The last special token (id 576) gets another spelling.
  const auto dir = edited_model("-draft-token", "tokenizer.json", "\"<|eot_id|>\"", "\"<|eom_id|>\"");
  const std::string error = draft_start_error(dir);
  EXPECT_NE(error.find((dir / "tokenizer.json").string()), std::string::npos) << error;
  EXPECT_NE(error.find("token id 576 is '<|eom_id|>'"), std::string::npos) << error;
  EXPECT_NE(error.find("'<|eot_id|>'"), std::string::npos) << error;
  std::filesystem::remove_all(dir);
}

TEST(DraftTokenizerCheck, TheSameVocabularyEncodingDifferentlyIsRefused) {
  const auto dir = edited_model("-draft-normalizer", "tokenizer.json", "\"normalizer\": null",
                                R"("normalizer": {"type": "Prepend", "prepend": "X"})");
  const std::string error = draft_start_error(dir);
  EXPECT_NE(error.find((dir / "tokenizer.json").string()), std::string::npos) << error;
  EXPECT_NE(error.find("encodes text differently"), std::string::npos) << error;
  std::filesystem::remove_all(dir);
}

TEST(DraftTokenizerCheck, AnotherEosTokenIsRefusedNamingTheField) {
  const auto dir = edited_model("-draft-eos", "tokenizer_config.json", "\"eos_token\": \"<|eot_id|>\"",
                                "\"eos_token\": \"<|end_of_text|>\"");
  const std::string error = draft_start_error(dir);
  EXPECT_NE(error.find((dir / "tokenizer_config.json").string()), std::string::npos) << error;
  EXPECT_NE(error.find("field 'eos_token'"), std::string::npos) << error;
  std::filesystem::remove_all(dir);
}

TEST(DraftTokenizerCheck, AnotherVocabSizeIsRefusedNamingConfigJson) {
  // A checkpoint of its own, with a vocabulary of 320 ids.
  const auto dir = std::filesystem::path(TROUPE_FIXTURES_DIR) / "tool_call_models" / "hermes";
  const std::string error = draft_start_error(dir);
  EXPECT_NE(error.find((dir / "config.json").string()), std::string::npos) << error;
  EXPECT_NE(error.find("field 'vocab_size' is 320, the target's is 640"), std::string::npos) << error;
}

TEST(DraftTokenizerCheck, TheTargetsOwnFilesAreAccepted) { EXPECT_EQ(draft_start_error(tiny_model_dir()), ""); }

}  // namespace
}  // namespace troupe::testing
