// The troupe end to end on the CPU backend: requests go in through the
// engine facade and their events come back through sinks.

#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <thread>

#include "engine_fixture.hpp"
#include "model/batch_runner.hpp"
#include "model/checkpoint.hpp"
#include "model/text/tokenizer.hpp"

namespace troupe {
namespace {

using testing::recording_sink;
using testing::text_request;
using testing::tiny_engine_config;
using testing::tiny_model_dir;

// The tokens the plain batch runner generates for `prompt` alone, greedily.
std::vector<std::int32_t> reference_tokens(const std::vector<std::int32_t>& prompt, int max_tokens) {
  checkpoint_options options;
  options.show_progress = false;
  const checkpoint ckpt = checkpoint::open(tiny_model_dir(), options);
  auto cpu = make_backend("cpu", 2);
  llama_model model(ckpt.config(), ckpt.weights(), *cpu);
  batch_runner runner(model, runner_options{});
  runner_request r;
  r.prompt = prompt;
  r.params.temperature = 0.0f;
  r.max_tokens = max_tokens;
  return runner.generate({r})[0].tokens;
}

TEST(Engine, GreedyRequestMatchesTheReferenceRunner) {
  auto engine = engine::start(tiny_engine_config());
  auto sink = std::make_shared<recording_sink>();
  const std::string id = engine->submit(text_request("Hello there, troupe", 12), sink);
  ASSERT_TRUE(sink->wait());
  ASSERT_FALSE(sink->error) << sink->error->message;
  ASSERT_TRUE(sink->accepted);
  EXPECT_EQ(sink->accepted->request_id, id);
  ASSERT_EQ(sink->choices.size(), 1u);
  const auto prompt = text::tokenizer::load(tiny_model_dir())->encode("Hello there, troupe", true);
  EXPECT_EQ(sink->choices[0].tokens, reference_tokens(prompt, 12));
  EXPECT_EQ(sink->choices[0].finish->reason, finish_reason::length);
  EXPECT_EQ(sink->usage.prompt_tokens, static_cast<int>(prompt.size()));
  EXPECT_EQ(sink->usage.completion_tokens, 12);
  const std::string text = text::tokenizer::load(tiny_model_dir())->decode(sink->choices[0].tokens, true);
  EXPECT_EQ(sink->choices[0].text, text);
}

TEST(Engine, InvalidRequestsGetErrorsAndTheEngineKeepsServing) {
  auto engine = engine::start(tiny_engine_config());
  auto bad_n = std::make_shared<recording_sink>();
  auto request = text_request("x", 4);
  request.n = 1000;
  engine->submit(request, bad_n);
  ASSERT_TRUE(bad_n->wait());
  ASSERT_TRUE(bad_n->error);
  EXPECT_EQ(bad_n->error->kind, error_kind::invalid_request);
  EXPECT_EQ(bad_n->error->param, "n");

  auto empty = std::make_shared<recording_sink>();
  engine->submit(text_request("", 4), empty);
  ASSERT_TRUE(empty->wait());
  ASSERT_TRUE(empty->error);
  EXPECT_EQ(empty->error->param, "prompt");

  auto ok = std::make_shared<recording_sink>();
  engine->submit(text_request("still serving", 3), ok);
  ASSERT_TRUE(ok->wait());
  EXPECT_FALSE(ok->error);
  EXPECT_EQ(ok->choices[0].tokens.size(), 3u);
}

// An embedder's ids reach the engine without the HTTP layer's checks: ids
// outside the embedding table (negative, at vocab_size, the int32 maximum)
// are refused naming the field, before any step would index a row with them.
TEST(Engine, TokenIdsOutsideTheVocabularyAreRefusedNamingTheField) {
  auto engine = engine::start(tiny_engine_config());  // vocab_size 640
  const auto refused = [&](generation_request request) {
    auto sink = std::make_shared<recording_sink>();
    engine->submit(std::move(request), sink);
    EXPECT_TRUE(sink->wait());
    EXPECT_TRUE(sink->error);
    if (!sink->error) return std::string("accepted");
    EXPECT_EQ(sink->error->kind, error_kind::invalid_request);
    return sink->error->param;
  };
  for (const std::int32_t id : {-1, 640, std::numeric_limits<std::int32_t>::max()}) {
    generation_request ids = text_request("", 2);
    ids.kind = prompt_kind::token_ids;
    ids.prompt_token_ids = {1, id, 2};
    EXPECT_EQ(refused(ids), "prompt") << id;
    generation_request bias = text_request("x", 2);
    bias.sampling.logit_bias = {{id, 1.0f}};
    EXPECT_EQ(refused(bias), "logit_bias") << id;
    generation_request stop = text_request("x", 2);
    stop.stop_token_ids = {id};
    EXPECT_EQ(refused(stop), "stop_token_ids") << id;
  }
  auto ok = std::make_shared<recording_sink>();
  engine->submit(text_request("still serving", 3), ok);
  ASSERT_TRUE(ok->wait());
  EXPECT_FALSE(ok->error);
}

TEST(Engine, CancelMidDecodeFreesBlocks) {
  auto config = tiny_engine_config();
  auto engine = engine::start(config);
  const auto idle = engine->stats();
  auto sink = std::make_shared<recording_sink>();
  const std::string id = engine->submit(text_request("a long generation that we will cancel", 100000 / 1000), sink);
  while (true) {  // wait until decoding has started
    const auto stats = engine->stats();
    if (stats.generation_tokens > 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_LT(engine->stats().kv_blocks_free, idle.kv_blocks_free);
  engine->cancel(id);
  ASSERT_TRUE(sink->wait());
  EXPECT_EQ(sink->choices[0].finish->reason, finish_reason::abort);
  EXPECT_LT(sink->choices[0].tokens.size(), 100u);
  // Within one step the blocks are free again.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (engine->stats().kv_blocks_free != idle.kv_blocks_free && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(engine->stats().kv_blocks_free, idle.kv_blocks_free);
}

TEST(Engine, ParallelSamplesAndStats) {
  auto engine = engine::start(tiny_engine_config());
  auto sink = std::make_shared<recording_sink>();
  auto request = text_request("Three choices", 6);
  request.n = 3;
  request.sampling.temperature = 1.0f;
  request.seed = 11;
  engine->submit(request, sink);
  ASSERT_TRUE(sink->wait());
  ASSERT_EQ(sink->choices.size(), 3u);
  for (const auto& choice : sink->choices) EXPECT_EQ(choice.tokens.size(), 6u);
  EXPECT_EQ(sink->usage.completion_tokens, 18);
  const auto stats = engine->stats();
  EXPECT_TRUE(stats.healthy);
  EXPECT_EQ(stats.generation_tokens, 18u);
  EXPECT_EQ(stats.request_success.at("length"), 1u);

  auto again = std::make_shared<recording_sink>();
  engine->submit(request, again);
  ASSERT_TRUE(again->wait());
  for (std::size_t c = 0; c < 3; ++c)
    EXPECT_EQ(again->choices[c].tokens, sink->choices[c].tokens) << "seeded choice " << c;
}

}  // namespace
}  // namespace troupe

namespace troupe {
namespace {

TEST(Engine, LiveSettingsChangeAtTheNextStepAllOrNothing) {
  auto engine = engine::start(tiny_engine_config());
  settings_change change;
  change.policy = "mlfq";
  change.max_num_seqs = 2;
  change.preemption_mode = "recompute";
  EXPECT_EQ(engine->configure(change), "");
  live_settings now = engine->stats().settings;
  EXPECT_EQ(now.policy, "mlfq");
  EXPECT_EQ(now.max_num_seqs, 2);
  EXPECT_EQ(now.preemption_mode, "recompute");

  settings_change bad;
  bad.max_num_batched_tokens = 64;
  bad.policy = "lifo";
  EXPECT_NE(engine->configure(bad), "");
  EXPECT_EQ(engine->stats().settings.max_num_batched_tokens, now.max_num_batched_tokens) << "nothing of it applied";

  // Three requests under a limit of two running sequences still all finish.
  std::vector<std::shared_ptr<recording_sink>> sinks;
  for (int i = 0; i < 3; ++i) {
    sinks.push_back(std::make_shared<recording_sink>());
    engine->submit(text_request("limited " + std::to_string(i), 4), sinks.back());
  }
  for (const auto& sink : sinks) {
    ASSERT_TRUE(sink->wait());
    EXPECT_EQ(sink->usage.completion_tokens, 4);
  }
}

TEST(Engine, TheMlfqQuantumFlowsInAtStartAndChangesLive) {
  auto config = tiny_engine_config();
  config.policy = "mlfq";
  config.mlfq_quantum = 3;
  auto engine = engine::start(config);
  EXPECT_EQ(engine->stats().settings.mlfq_quantum, 3);

  settings_change change;
  change.mlfq_quantum = 7;
  EXPECT_EQ(engine->configure(change), "");
  EXPECT_EQ(engine->stats().settings.mlfq_quantum, 7);

  settings_change bad;
  bad.mlfq_quantum = 0;
  bad.max_num_seqs = 3;
  const std::string problem = engine->configure(bad);
  EXPECT_NE(problem.find("'mlfq_quantum'"), std::string::npos) << problem;
  const live_settings now = engine->stats().settings;
  EXPECT_EQ(now.mlfq_quantum, 7) << "nothing of it applied";
  EXPECT_EQ(now.max_num_seqs, config.max_num_seqs);

  auto sink = std::make_shared<recording_sink>();
  engine->submit(text_request("under a changed quantum", 6), sink);
  ASSERT_TRUE(sink->wait());
  EXPECT_EQ(sink->usage.completion_tokens, 6);
}

TEST(Engine, AStartValueOutsideTheRegistryRangeIsRefusedNamingTheKnob) {
  auto config = tiny_engine_config();
  config.mlfq_quantum = 0;
  try {
    engine::start(config);
    ADD_FAILURE() << "started with mlfq_quantum 0";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("'mlfq_quantum'"), std::string::npos) << error.what();
  }
}

TEST(Engine, AFailedExecutorMakesTheEngineUnhealthyAndFailsItsRequests) {
  auto config = testing::tiny_engine_config();
  config.test_fail_executor_after_steps = 3;
  auto engine = engine::start(config);
  EXPECT_TRUE(engine->stats().healthy);
  auto sink = std::make_shared<testing::recording_sink>();
  engine->submit(text_request("this request outlives the executor", 50), sink);
  ASSERT_TRUE(sink->wait());
  ASSERT_TRUE(sink->error);
  EXPECT_EQ(sink->error->kind, error_kind::internal);
  const auto stats = engine->stats();
  EXPECT_FALSE(stats.healthy);
  EXPECT_NE(stats.health_detail.find("executor failed"), std::string::npos) << stats.health_detail;
  auto late = std::make_shared<testing::recording_sink>();
  engine->submit(text_request("after the failure", 4), late);
  ASSERT_TRUE(late->wait());
  ASSERT_TRUE(late->error);
}

}  // namespace
}  // namespace troupe
