// Injected faults on the real engine (issue 15): the executor failing (an
// Injected faults on the real engine (issue 15): the executor failing (an
// error answer, a malformed result), hanging, or throwing inside one step
// (an allocation), a tokenizer worker throwing or dying while preparing a
// prompt, and an output shard throwing or dying while streaming. Each time
// the affected requests end with an error; where the engine cannot continue
// it reports itself unhealthy within 2 s, where it can the other requests
// finish untouched; and the KV pool is as full as when idle afterwards.

#include <gtest/gtest.h>

#include <chrono>
#include <new>
#include <stdexcept>
#include <thread>

#include "actors/executor_actor.hpp"
#include "engine_fixture.hpp"

namespace troupe {
namespace {

using testing::recording_sink;
using testing::text_request;
using testing::tiny_engine_config;
using namespace std::chrono_literals;

using testing::wait_for_stats;

// Every device block free again and nothing left in the swap pool, as at `idle`.
void expect_pool_idle(engine& running, const engine_stats& idle) {
  const engine_stats stats = wait_for_stats(
      running,
      [&](const engine_stats& s) { return s.kv_blocks_free == idle.kv_blocks_free && s.host_kv_cache_usage == 0; }, 2s);
  EXPECT_EQ(stats.kv_blocks_free, idle.kv_blocks_free) << "KV blocks leaked";
  EXPECT_EQ(stats.host_kv_cache_usage, 0.0) << "swapped blocks leaked";
  EXPECT_EQ(stats.num_requests_running, 0);
  EXPECT_EQ(stats.num_requests_waiting, 0);
}

std::shared_ptr<recording_sink> submit(engine& running, const std::string& prompt, int max_tokens) {
  auto sink = std::make_shared<recording_sink>();
  running.submit(text_request(prompt, max_tokens), sink);
  return sink;
}

void expect_complete(const recording_sink& sink, std::size_t tokens) {
  ASSERT_FALSE(sink.error) << sink.error->message;
  ASSERT_EQ(sink.choices.size(), 1u);
  EXPECT_EQ(sink.choices[0].tokens.size(), tokens);
  ASSERT_TRUE(sink.choices[0].finish);
  EXPECT_EQ(sink.choices[0].finish->reason, finish_reason::length);
}

// ---- executor -------------------------------------------------------------

// The engine cannot continue without its executor: every request in it
// fails, /health's source turns unhealthy within 2 s (a hung step within
// the step timeout), later requests are refused rather than left hanging,
// and the failed requests' blocks go back to the pool.
class EngineExecutorFault : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineExecutorFault, FailsTheRequestsTheHealthWithinTwoSecondsAndFreesTheBlocks) {
  auto config = tiny_engine_config();
  config.test_fail_executor_after_steps = 3;
  config.test_executor_fault = GetParam();
  config.step_timeout_s = 1;
  auto engine = engine::start(config);
  const engine_stats idle = engine->stats();
  ASSERT_TRUE(idle.healthy);
  const auto submitted = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<recording_sink>> sinks;
  for (int i = 0; i < 3; ++i) sinks.push_back(submit(*engine, "request " + std::to_string(i) + " meets the fault", 50));
  for (const auto& sink : sinks) {
    ASSERT_TRUE(sink->wait(10s)) << "a request outlived the executor without an answer";
    ASSERT_TRUE(sink->error);
    EXPECT_EQ(sink->error->kind, error_kind::internal);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - submitted, 5s) << "the fault was noticed late";
  const engine_stats failed = wait_for_stats(
      *engine, [](const engine_stats& s) { return !s.healthy; }, 2s);
  EXPECT_FALSE(failed.healthy);
  EXPECT_FALSE(failed.health_detail.empty());
  if (GetParam() == "hang") {
    EXPECT_NE(failed.health_detail.find("step_timeout"), std::string::npos) << failed.health_detail;
  }
  expect_pool_idle(*engine, idle);
  auto late = submit(*engine, "after the failure", 4);
  ASSERT_TRUE(late->wait(10s));
  ASSERT_TRUE(late->error);
}

INSTANTIATE_TEST_SUITE_P(Faults, EngineExecutorFault, ::testing::Values("error", "malformed", "hang"));

// A step that throws std::bad_alloc on the CPU backend (a workspace
// allocation) loses no backend state: the request in it fails, and the
// engine serves on. One sequence at a time (and one tokenizer worker, to
// keep the order), so the second request waits outside the failing step
// and must finish untouched.
TEST(EngineStepFailure, AThrowingStepFailsItsRequestOnlyAndTheEngineServesOn) {
  auto config = tiny_engine_config();
  config.max_num_seqs = 1;
  config.tokenizer_workers = 1;
  config.test_fail_executor_after_steps = 3;
  config.test_executor_fault = "throw";
  auto engine = engine::start(config);
  const engine_stats idle = engine->stats();
  auto failing = submit(*engine, "the request in the failing step", 50);
  auto waiting = submit(*engine, "the request waiting beside it", 6);
  ASSERT_TRUE(failing->wait(10s));
  ASSERT_TRUE(failing->error) << "the request in the failing step finished";
  EXPECT_EQ(failing->error->kind, error_kind::internal);
  EXPECT_NE(failing->error->message.find("bad_alloc"), std::string::npos) << failing->error->message;
  ASSERT_TRUE(waiting->wait(10s));
  expect_complete(*waiting, 6);
  auto later = submit(*engine, "a request after the failure", 4);
  ASSERT_TRUE(later->wait(10s));
  expect_complete(*later, 4);
  const engine_stats after = engine->stats();
  EXPECT_TRUE(after.healthy) << after.health_detail;
  EXPECT_EQ(after.step_failures, 1u);
  expect_pool_idle(*engine, idle);
}

// A draft step that throws std::bad_alloc costs its round's drafts only:
// the request's tokens are those of a run without speculation (greedy,
// batch-invariant), the engine stays healthy, and drafting goes on after
// the failure. The first round fails, so the next one is drafted whatever
// the turn-down thinks of the costs (no draft round has been timed yet);
// were the failure fatal to drafting, no draft would ever be verified.
TEST(EngineStepFailure, AThrowingDraftStepCostsOnlyItsRoundsDrafts) {
  auto config = tiny_engine_config();
  config.batch_invariant = true;
  const std::string prompt = "a greedy request whose first draft round fails";
  std::vector<std::int32_t> expected;
  {
    auto plain = engine::start(config);
    auto sink = submit(*plain, prompt, 40);
    ASSERT_TRUE(sink->wait());
    expect_complete(*sink, 40);
    expected = sink->choices[0].tokens;
  }
  config.speculative = "draft";
  config.draft_model = config.model_dir;
  config.num_speculative_tokens = 4;
  config.speculative_max_batch = 16;
  config.test_fail_executor_after_steps = 0;  // the draft executor's first step
  config.test_executor_fault = "draft_throw";
  auto engine = engine::start(config);
  const engine_stats idle = engine->stats();
  auto sink = submit(*engine, prompt, 40);
  ASSERT_TRUE(sink->wait());
  expect_complete(*sink, 40);
  EXPECT_EQ(sink->choices[0].tokens, expected);
  const engine_stats after = engine->stats();
  EXPECT_TRUE(after.healthy) << after.health_detail;
  EXPECT_EQ(after.step_failures, 0u) << "no target step failed";
  EXPECT_GE(after.spec_decode_num_drafts, 1u) << "drafting stopped at the failure";
  EXPECT_EQ(after.spec_decode_num_accepted_tokens, after.spec_decode_num_draft_tokens)
      << "a self-draft is always right";
  expect_pool_idle(*engine, idle);
}

// A target step that throws while speculating: the requests in the failing
// step fail, every other one gets its tokens of a run without speculation
// (greedy, batch-invariant), and the engine and the pool are as before.
// The layer-skipping drafter works in the target's KV (busy blocks). A
// step abandoned while its drafts are out is the loop's to settle
// (LoopStepFailure.AStepAbandonedWhileItsDraftsWereOutDoesNotRun): steps
// this small rarely overlap a round.
class EngineStepFailureWhileDrafting : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineStepFailureWhileDrafting, FailsOnlyTheFailingStepsRequests) {
  auto config = tiny_engine_config();
  config.batch_invariant = true;
  const std::vector<std::string> prompts = {"the first of six requests",
                                            "a second one, a little longer than that",
                                            "three",
                                            "and a fourth request beside them",
                                            "five",
                                            "the last of six"};
  std::vector<std::vector<std::int32_t>> expected;
  {
    auto plain = engine::start(config);
    for (const std::string& prompt : prompts) {
      auto sink = submit(*plain, prompt, 24);
      ASSERT_TRUE(sink->wait());
      expect_complete(*sink, 24);
      expected.push_back(sink->choices[0].tokens);
    }
  }
  config.speculative = GetParam();
  if (GetParam() == "draft") config.draft_model = config.model_dir;
  config.num_speculative_tokens = 3;
  config.speculative_max_batch = 16;
  config.test_fail_executor_after_steps = 6;
  config.test_executor_fault = "throw";
  config.max_num_seqs = 2;  // the others wait outside the failing step
  auto engine = engine::start(config);
  const engine_stats idle = engine->stats();
  std::vector<std::shared_ptr<recording_sink>> sinks;
  for (const std::string& prompt : prompts) sinks.push_back(submit(*engine, prompt, 24));
  std::size_t failed = 0;
  for (std::size_t i = 0; i < sinks.size(); ++i) {
    ASSERT_TRUE(sinks[i]->wait(20s)) << "request " << i;
    if (sinks[i]->error) {
      ++failed;
      EXPECT_NE(sinks[i]->error->message.find("bad_alloc"), std::string::npos) << sinks[i]->error->message;
      continue;
    }
    expect_complete(*sinks[i], 24);
    EXPECT_EQ(sinks[i]->choices[0].tokens, expected[i]) << "request " << i << " beside the failure";
  }
  EXPECT_GE(failed, 1u);
  EXPECT_LT(failed, sinks.size()) << "every request was in the failing step";
  const engine_stats after = engine->stats();
  EXPECT_TRUE(after.healthy) << after.health_detail;
  EXPECT_EQ(after.step_failures, 1u);
  EXPECT_GE(after.spec_decode_num_drafts, 1u);
  expect_pool_idle(*engine, idle);
}

INSTANTIATE_TEST_SUITE_P(Drafters, EngineStepFailureWhileDrafting, ::testing::Values("draft", "layerskip"));

TEST(StepFailureIsRecoverable, AllocationsAndRejectedInputsOnTheCpuBackendOnly) {
  const std::shared_ptr<backend> cpu = make_backend("cpu", 1);
  EXPECT_TRUE(step_failure_is_recoverable(std::bad_alloc(), *cpu));
  EXPECT_TRUE(step_failure_is_recoverable(std::invalid_argument("token id 9999 is outside the vocabulary"), *cpu));
  EXPECT_TRUE(step_failure_is_recoverable(std::out_of_range("row"), *cpu));
  EXPECT_TRUE(step_failure_is_recoverable(std::length_error("workspace limit"), *cpu));
  EXPECT_FALSE(step_failure_is_recoverable(std::runtime_error("block copies failed: ..."), *cpu))
      << "a runtime error may have left the pools half written";
}

// ---- tokenizer ------------------------------------------------------------

// `workers` tokenizer workers (and output shards); a prompt with "POISON"
// makes its worker or shard fail as `fault` says.
engine_config poisoned_tokenizer_config(int workers, const std::string& fault) {
  auto config = tiny_engine_config();
  config.tokenizer_workers = workers;
  config.test_tokenizer_fault_marker = "POISON";
  config.test_tokenizer_fault = fault;
  return config;
}

// An exception while preparing a prompt fails that request; the worker
// survives, so the request it streams meanwhile finishes untouched.
TEST(EngineTokenizerFault, AThrowingEncodeFailsOnlyItsRequest) {
  auto engine = engine::start(poisoned_tokenizer_config(1, "throw"));
  const engine_stats idle = engine->stats();
  auto running = submit(*engine, "a long generation streamed by the only worker", 1500);
  ASSERT_TRUE(running->wait_for_deltas(2));
  auto poisoned = submit(*engine, "a POISON pill", 8);
  ASSERT_TRUE(poisoned->wait(10s));
  ASSERT_TRUE(poisoned->error);
  EXPECT_EQ(poisoned->error->kind, error_kind::internal);
  EXPECT_NE(poisoned->error->message.find("injected tokenizer fault"), std::string::npos) << poisoned->error->message;
  ASSERT_TRUE(running->wait());
  expect_complete(*running, 1500);
  auto after = submit(*engine, "after the fault", 4);
  ASSERT_TRUE(after->wait());
  expect_complete(*after, 4);
  EXPECT_TRUE(engine->stats().healthy);
  expect_pool_idle(*engine, idle);
}

// A worker that dies while preparing a prompt holds no streams (the output
// shards do): only the request it prepared fails, and the restarted worker
// prepares new requests again.
TEST(EngineTokenizerFault, ADeadWorkerIsRestartedAndOnlyItsRequestFails) {
  auto engine = engine::start(poisoned_tokenizer_config(2, "exit"));
  const engine_stats idle = engine->stats();
  auto first = submit(*engine, "the first long generation", 1500);
  auto second = submit(*engine, "the second long generation", 1500);
  ASSERT_TRUE(first->wait_for_deltas(1));
  ASSERT_TRUE(second->wait_for_deltas(1));
  auto poisoned = submit(*engine, "a POISON pill", 8);
  ASSERT_TRUE(poisoned->wait(10s));
  ASSERT_TRUE(poisoned->error);
  EXPECT_EQ(poisoned->error->kind, error_kind::internal);
  EXPECT_NE(poisoned->error->message.find("preparing the prompt failed"), std::string::npos)
      << poisoned->error->message;
  std::vector<std::shared_ptr<recording_sink>> after;
  for (int i = 0; i < 4; ++i) after.push_back(submit(*engine, "after the restart " + std::to_string(i), 4));
  for (const auto& sink : after) {
    ASSERT_TRUE(sink->wait(10s));
    expect_complete(*sink, 4);
  }
  for (const auto& sink : {first, second}) {
    ASSERT_TRUE(sink->wait());
    expect_complete(*sink, 1500);
  }
  EXPECT_TRUE(engine->stats().healthy);
  expect_pool_idle(*engine, idle);
}

// An exception while streaming one request (detokenizing, matching stop
// strings) fails that request only: its sink gets the error, the scheduler
// aborts it (its blocks come back), and the other stream of the same shard
// finishes untouched.
TEST(EngineTokenizerFault, AThrowingOutputPathFailsOnlyItsRequest) {
  auto engine = engine::start(poisoned_tokenizer_config(1, "output"));
  const engine_stats idle = engine->stats();
  auto running = submit(*engine, "a long generation on the only shard", 1500);
  ASSERT_TRUE(running->wait_for_deltas(2));
  auto poisoned = submit(*engine, "a POISON pill", 1500);
  ASSERT_TRUE(poisoned->wait(10s));
  ASSERT_TRUE(poisoned->error);
  EXPECT_EQ(poisoned->error->kind, error_kind::internal);
  EXPECT_NE(poisoned->error->message.find("injected output fault"), std::string::npos) << poisoned->error->message;
  EXPECT_TRUE(poisoned->choices.empty()) << "no output after the failure";
  ASSERT_TRUE(running->wait());
  expect_complete(*running, 1500);
  auto after = submit(*engine, "after the fault", 4);
  ASSERT_TRUE(after->wait());
  expect_complete(*after, 4);
  EXPECT_TRUE(engine->stats().healthy);
  expect_pool_idle(*engine, idle);
}

// A shard that dies takes the streams it held with it: of two running
// requests (consecutive handles, so one streamed by each shard) exactly the
// dead shard's fails, the other finishes untouched, and the restarted
// shard streams new requests again.
TEST(EngineTokenizerFault, ADeadOutputShardIsRestartedAndOnlyItsStreamsFail) {
  auto engine = engine::start(poisoned_tokenizer_config(2, "output_exit"));
  const engine_stats idle = engine->stats();
  auto first = submit(*engine, "the first long generation", 3000);
  ASSERT_TRUE(first->wait_for_deltas(1));
  auto second = submit(*engine, "the second long generation", 3000);
  ASSERT_TRUE(second->wait_for_deltas(1));
  // Handles count up: the third request is streamed by the first's shard.
  auto poisoned = submit(*engine, "a POISON pill", 8);
  ASSERT_TRUE(poisoned->wait(10s));
  ASSERT_TRUE(poisoned->error);
  ASSERT_TRUE(first->wait());
  ASSERT_TRUE(second->wait());
  EXPECT_EQ(static_cast<int>(bool(first->error)) + static_cast<int>(bool(second->error)), 1)
      << "exactly the request streamed by the dead shard fails";
  for (const auto& sink : {first, second}) {
    if (sink->error) {
      EXPECT_EQ(sink->error->kind, error_kind::internal);
      EXPECT_NE(sink->error->message.find("output shard"), std::string::npos) << sink->error->message;
    } else {
      expect_complete(*sink, 3000);
    }
  }
  std::vector<std::shared_ptr<recording_sink>> after;
  for (int i = 0; i < 4; ++i) after.push_back(submit(*engine, "after the restart " + std::to_string(i), 4));
  for (const auto& sink : after) {
    ASSERT_TRUE(sink->wait(10s));
    expect_complete(*sink, 4);
  }
  EXPECT_TRUE(engine->stats().healthy);
  expect_pool_idle(*engine, idle);
}

// A one-token request's token and finish go to its shard in one batch, and
// the token kills the shard: the finish dies with it. The scheduler keeps a
// finished request registered until its shard answers for the batch, so the
// request still gets an error. (It used to forget the request as it sent the
// finish: neither the shard's failure nor its restart answered it, and the
// client waited for good; the test above hit this whenever the poisoned
// request's last token went out before the shard's death was noticed.)
TEST(EngineTokenizerFault, ARequestWhoseFinishDiesWithItsShardStillGetsAnAnswer) {
  auto engine = engine::start(poisoned_tokenizer_config(2, "output_exit"));
  const engine_stats idle = engine->stats();
  auto poisoned = submit(*engine, "a POISON pill", 1);
  ASSERT_TRUE(poisoned->wait(10s));
  ASSERT_TRUE(poisoned->error);
  EXPECT_EQ(poisoned->error->kind, error_kind::internal);
  EXPECT_NE(poisoned->error->message.find("output shard"), std::string::npos) << poisoned->error->message;
  auto after = submit(*engine, "after the restart", 4);
  ASSERT_TRUE(after->wait(10s));
  expect_complete(*after, 4);
  EXPECT_TRUE(engine->stats().healthy);
  expect_pool_idle(*engine, idle);
}

}  // namespace
}  // namespace troupe
