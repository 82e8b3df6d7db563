// The per-request output budget (knob max_request_output_tokens): n choices
// of max_tokens each, unset max_tokens counting as the context length.

#include <gtest/gtest.h>

#include "actors/core/admission.hpp"

namespace troupe::testing {
namespace {

generation_request text_request(int n, int max_tokens) {
  generation_request r;
  r.prompt_text = "hello";
  r.n = n;
  r.max_tokens = max_tokens;
  return r;
}

admission_limits budget_limits(std::int64_t budget, int context) {
  engine_config engine;
  engine.max_request_output_tokens = budget;
  admission_limits limits(engine);
  limits.max_model_len = context;
  return limits;
}

TEST(OutputBudget, TheKnobReachesTheLimits) {
  EXPECT_EQ(admission_limits{}.max_request_output_tokens, engine_config{}.max_request_output_tokens);
  EXPECT_EQ(budget_limits(1000, 4096).max_request_output_tokens, 1000);
}

TEST(OutputBudget, ChoicesTimesMaxTokensOverTheBudgetAreRefusedNamingMaxTokens) {
  const admission_limits limits = budget_limits(8192, 4096);
  EXPECT_FALSE(check_request(text_request(16, 512), limits).has_value());  // 8192 exactly
  const auto error = check_request(text_request(16, 513), limits);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->kind, error_kind::invalid_request);
  EXPECT_EQ(error->param, "max_tokens");
  EXPECT_NE(error->message.find("8192"), std::string::npos) << error->message;
  EXPECT_NE(error->message.find("max_request_output_tokens"), std::string::npos) << error->message;
}

TEST(OutputBudget, UnsetMaxTokensCountsAsTheContextLength) {
  const admission_limits limits = budget_limits(8192, 4096);
  EXPECT_FALSE(check_request(text_request(2, -1), limits).has_value());
  const auto error = check_request(text_request(3, -1), limits);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->param, "max_tokens");
}

TEST(OutputBudget, OneChoiceUpToTheContextAlwaysFits) {
  const admission_limits limits = budget_limits(100, 4096);
  EXPECT_FALSE(check_request(text_request(1, -1), limits).has_value());
  EXPECT_FALSE(check_request(text_request(1, 4096), limits).has_value());
  EXPECT_TRUE(check_output_budget(2, 4096, limits).has_value());
}

TEST(OutputBudget, ManyPromptsCountEveryChoice) {
  const admission_limits limits = budget_limits(262144, 4096);
  EXPECT_FALSE(check_output_budget(64, 4096, limits).has_value());
  EXPECT_TRUE(check_output_budget(64 * 16, -1, limits).has_value());
  EXPECT_FALSE(check_output_budget(64 * 16, 256, limits).has_value());
}

TEST(OutputBudget, TheDefaultsAdmitTheLargestSingleChoiceRequests) {
  admission_limits limits;
  limits.max_model_len = 16384;
  EXPECT_FALSE(check_request(text_request(limits.max_n, -1), limits).has_value());
}

}  // namespace
}  // namespace troupe::testing
