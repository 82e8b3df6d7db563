// Workspace growth from live budgets (issue 15, defect 4): the step
// workspace's limit is fixed at start (knob max_step_workspace_bytes), the
// starting budgets must fit under it, and a live max_num_batched_tokens or
// max_num_seqs whose steps would need more is refused naming the knobs,
// with nothing applied.

#include <gtest/gtest.h>

#include "engine_fixture.hpp"

namespace troupe::testing {
namespace {

// The tiny model's step workspace: 7.5 KiB per token and 3 KiB per logits
// row (f32), so the default budgets (2048 tokens, 256 sequences) need
// about 15.8 MiB.
constexpr std::int64_t limit_bytes = 32 << 20;

TEST(EngineWorkspaceLimit, StartingBudgetsPastAnExplicitLimitAreRefused) {
  engine_config config = tiny_engine_config();
  config.max_step_workspace_bytes = 1 << 20;
  try {
    engine::start(config);
    FAIL() << "the engine started with budgets its workspace limit cannot hold";
  } catch (const std::runtime_error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("knob 'max_step_workspace_bytes'"), std::string::npos) << message;
    EXPECT_NE(message.find("max_num_batched_tokens 2048"), std::string::npos) << message;
    EXPECT_NE(message.find("max_num_seqs 256"), std::string::npos) << message;
  }
}

TEST(EngineWorkspaceLimit, ALiveBudgetPastTheLimitIsRefusedAndOneUnderItApplies) {
  engine_config config = tiny_engine_config();
  config.max_step_workspace_bytes = limit_bytes;
  auto engine = engine::start(config);
  settings_change huge;
  huge.max_num_batched_tokens = 1 << 20;
  const std::string refused = engine->configure(huge);
  EXPECT_NE(refused.find("max_num_batched_tokens 1048576"), std::string::npos) << refused;
  EXPECT_NE(refused.find("max_step_workspace_bytes"), std::string::npos) << refused;
  EXPECT_EQ(engine->stats().settings.max_num_batched_tokens, 2048) << "a refused change applied";

  settings_change many;
  many.max_num_seqs = 65536;
  many.max_num_batched_tokens = 4000;
  EXPECT_NE(engine->configure(many).find("max_num_seqs 65536"), std::string::npos);

  settings_change modest;
  modest.max_num_batched_tokens = 3000;
  EXPECT_EQ(engine->configure(modest), "");
  EXPECT_EQ(engine->stats().settings.max_num_batched_tokens, 3000);
  auto sink = std::make_shared<recording_sink>();
  engine->submit(text_request("served under the raised budget", 4), sink);
  ASSERT_TRUE(sink->wait());
  EXPECT_FALSE(sink->error);
}

}  // namespace
}  // namespace troupe::testing
