// Load-time consistency of the tokenizer, the special ids and the model's
// vocabulary: a checkpoint whose ids fall outside the embedding table is
// refused by engine::start with a message naming the file and field, rather
// than throwing in the forward pass or sampler on the first request.

#include <gtest/gtest.h>

#include "engine_fixture.hpp"

namespace troupe::testing {
namespace {

// The tiny model: vocab_size 640, tokenizer ids below 577 (edited_model).

/// The message engine::start refuses `dir` with (empty if it starts).
std::string start_error(const std::filesystem::path& dir) {
  engine_config config = tiny_engine_config();
  config.model_dir = dir.string();
  try {
    engine::start(config);
  } catch (const std::runtime_error& error) {
    return error.what();
  }
  return {};
}

TEST(VocabularyCheck, ATokenizerIdBeyondTheVocabularyIsRefusedNamingConfigJson) {
  // 100 more added tokens: HF numbers them after the others, up to id 676.
  std::string extra_tokens = "\"added_tokens\": [";
  for (int i = 0; i < 100; ++i)
    extra_tokens += R"({"id": 0, "content": "<|extra_)" + std::to_string(i) + R"(|>", "special": true},)";
  const auto dir = edited_model("-tokenizer", "tokenizer.json", "\"added_tokens\": [", extra_tokens);
  const std::string error = start_error(dir);
  EXPECT_NE(error.find((dir / "config.json").string()), std::string::npos) << error;
  EXPECT_NE(error.find("vocab_size 640"), std::string::npos) << error;
  EXPECT_NE(error.find("677"), std::string::npos) << error;
  EXPECT_NE(error.find("tokenizer"), std::string::npos) << error;
  std::filesystem::remove_all(dir);
}

TEST(VocabularyCheck, AnEosIdOutsideTheVocabularyIsRefusedNamingFileAndField) {
  const auto dir = edited_model("-eos", "generation_config.json", "576", "700");
  const std::string error = start_error(dir);
  EXPECT_NE(error.find((dir / "generation_config.json").string()), std::string::npos) << error;
  EXPECT_NE(error.find("eos_token_id 700"), std::string::npos) << error;
  std::filesystem::remove_all(dir);
}

TEST(VocabularyCheck, ABosIdOutsideTheVocabularyIsRefusedNamingFileAndField) {
  const auto dir = edited_model("-bos", "config.json", "\"bos_token_id\": 572", "\"bos_token_id\": 640");
  const std::string error = start_error(dir);
  EXPECT_NE(error.find((dir / "config.json").string()), std::string::npos) << error;
  EXPECT_NE(error.find("bos_token_id 640"), std::string::npos) << error;
  std::filesystem::remove_all(dir);
}

TEST(VocabularyCheck, TheUneditedModelStarts) { EXPECT_EQ(start_error(tiny_model_dir()), ""); }

}  // namespace
}  // namespace troupe::testing
