// generation_config.json: eos forms, sampling defaults, absence and bad input.

#include "model/generation_config.hpp"

#include "tests/model/model_test_util.hpp"

namespace troupe {
namespace {

using testing::error_of;

TEST(GenerationConfig, EosAsSingleInteger) {
  const generation_config config = parse_generation_config(R"({"bos_token_id": 1, "eos_token_id": 2})");
  EXPECT_EQ(config.eos_token_ids, std::vector<std::int64_t>{2});
  EXPECT_EQ(config.bos_token_id, 1);
  EXPECT_FALSE(config.temperature.has_value());
  EXPECT_FALSE(config.do_sample.has_value());
}

TEST(GenerationConfig, EosAsList) {
  const generation_config config = parse_generation_config(R"({"eos_token_id": [128001, 128008, 128009]})");
  EXPECT_EQ(config.eos_token_ids, (std::vector<std::int64_t>{128001, 128008, 128009}));
}

TEST(GenerationConfig, SamplingDefaults) {
  // Qwen3's published generation_config.json.
  const generation_config config = parse_generation_config(
      R"({"bos_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643], "pad_token_id": 151643,
          "temperature": 0.6, "top_k": 20, "top_p": 0.95, "transformers_version": "4.51.0"})");
  EXPECT_EQ(config.do_sample, true);
  EXPECT_EQ(config.temperature, 0.6);
  EXPECT_EQ(config.top_k, 20);
  EXPECT_EQ(config.top_p, 0.95);
  EXPECT_EQ(config.pad_token_id, 151643);
  const generation_config more = parse_generation_config(
      R"({"min_p": 0.05, "repetition_penalty": 1.1, "max_new_tokens": 256, "do_sample": false})");
  EXPECT_EQ(more.min_p, 0.05);
  EXPECT_EQ(more.repetition_penalty, 1.1);
  EXPECT_EQ(more.max_new_tokens, 256);
  EXPECT_EQ(more.do_sample, false);
}

TEST(GenerationConfig, NullFieldsCountAsUnset) {
  const generation_config config = parse_generation_config(R"({"eos_token_id": null, "temperature": null})");
  EXPECT_TRUE(config.eos_token_ids.empty());
  EXPECT_FALSE(config.temperature.has_value());
}

TEST(GenerationConfig, AbsentFileGivesEmptyConfig) {
  testing::temp_dir dir;
  const generation_config config = load_generation_config(dir.path());
  EXPECT_TRUE(config.eos_token_ids.empty());
  EXPECT_FALSE(config.bos_token_id.has_value());
}

TEST(GenerationConfig, ReadsTheFileTransformersSaved) {
  const generation_config config =
      load_generation_config(std::filesystem::path(TROUPE_FIXTURES_DIR) / "model/hf_tiny/llama");
  EXPECT_EQ(config.bos_token_id, 1);
  EXPECT_EQ(config.eos_token_ids, std::vector<std::int64_t>{2});
}

TEST(GenerationConfigHostile, WrongTypesAndRanges) {
  const auto error = [](const std::string& text) { return error_of([&] { parse_generation_config(text); }); };
  EXPECT_EQ(error(R"({"eos_token_id": "2"})"),
            "generation_config.json: field 'eos_token_id' must be an integer or a list of integers, got string");
  EXPECT_EQ(error(R"({"temperature": "hot"})"),
            "generation_config.json: field 'temperature' must be a number, got string");
  EXPECT_EQ(error(R"({"top_p": 1.5})"), "generation_config.json: field 'top_p' (1.5) is out of range (0.0, 1.0]");
  EXPECT_EQ(error(R"({"top_k": -1})"), "generation_config.json: field 'top_k' (-1) must not be negative");
  EXPECT_EQ(error(R"({"do_sample": "yes"})"),
            "generation_config.json: field 'do_sample' must be true or false, got string");
  EXPECT_EQ(error(R"({"max_new_tokens": 0})"), "generation_config.json: field 'max_new_tokens' must be positive");
}

}  // namespace
}  // namespace troupe
