// The bounds on prompt preparation on the real engine (issue 15, defect 1):
// the global, per-connection and waiting-queue bounds refuse with their
// codes and admit again once work ends, a cancelled queued prompt is never
// prepared, one connection's flood does not hold back another's request,
// and /tokenize calls share the bound.
//
// One tokenizer worker and a prompt of megabytes ahead of the rest make
// the order deterministic: the test sends everything that follows within
// microseconds, long before that encode ends (it then fails: too long for
// the tiny model's context).

#include <gtest/gtest.h>

#include <future>

#include "engine_fixture.hpp"

namespace troupe {
namespace {

using testing::recording_sink;
using testing::text_request;
using testing::tiny_engine_config;
using namespace std::chrono_literals;

/// See the file comment.
const std::string& big_prompt() {
  static const std::string prompt = [] {
    std::string text;
    for (int i = 0; i < 600'000; ++i) text += " lorem" + std::to_string(i % 97);
    return text;
  }();
  return prompt;
}

engine_config one_worker(void (*adjust)(engine_config&)) {
  engine_config config = tiny_engine_config();
  config.tokenizer_workers = 1;
  adjust(config);
  return config;
}

struct submitted {
  std::string id;
  std::shared_ptr<recording_sink> sink;
};

submitted submit(engine& running, const std::string& prompt, std::uint64_t origin = 0, int max_tokens = 3) {
  generation_request request = text_request(prompt, max_tokens);
  request.origin = origin;
  auto sink = std::make_shared<recording_sink>();
  std::string id = running.submit(std::move(request), sink);
  return {std::move(id), std::move(sink)};
}

void expect_refused(const recording_sink& sink, const std::string& code) {
  ASSERT_TRUE(sink.error) << "not refused";
  EXPECT_EQ(sink.error->kind, error_kind::overloaded);
  EXPECT_EQ(sink.error->code, code);
}

void expect_complete(const recording_sink& sink) {
  ASSERT_FALSE(sink.error) << sink.error->message;
  ASSERT_EQ(sink.choices.size(), 1u);
  ASSERT_TRUE(sink.choices[0].finish);
  EXPECT_EQ(sink.choices[0].finish->reason, finish_reason::length);
}

// The big prompt ends with an error once encoded; then the queue is idle.
void expect_drained(engine& running, const submitted& big) {
  ASSERT_TRUE(big.sink->wait());
  ASSERT_TRUE(big.sink->error);
  EXPECT_EQ(big.sink->error->kind, error_kind::too_long);
  EXPECT_EQ(running.stats().num_prompts_pending, 0);
}

TEST(EnginePrepareQueue, TheGlobalBoundRefusesWithItsCodeAndAdmitsAgainAfterwards) {
  auto engine = engine::start(one_worker([](engine_config& c) { c.max_pending_prompts = 2; }));
  const submitted big = submit(*engine, big_prompt());
  const submitted queued = submit(*engine, "queued behind it");
  const submitted refused = submit(*engine, "one too many");
  ASSERT_TRUE(refused.sink->wait(10s));
  expect_refused(*refused.sink, "prompt_queue_full");
  EXPECT_NE(refused.sink->error->message.find("max_pending_prompts"), std::string::npos);
  ASSERT_TRUE(queued.sink->wait());
  expect_complete(*queued.sink);
  expect_drained(*engine, big);
  const submitted again = submit(*engine, "admitted again");
  ASSERT_TRUE(again.sink->wait());
  expect_complete(*again.sink);
}

TEST(EnginePrepareQueue, ThePerConnectionBoundRefusesOnlyThatConnection) {
  auto engine = engine::start(one_worker([](engine_config& c) { c.max_pending_prompts_per_connection = 2; }));
  const submitted big = submit(*engine, big_prompt(), 1);
  const submitted queued = submit(*engine, "the connection's second", 1);
  const submitted refused = submit(*engine, "the connection's third", 1);
  const submitted other = submit(*engine, "another connection", 2);
  const submitted embedder = submit(*engine, "no connection", 0);
  ASSERT_TRUE(refused.sink->wait(10s));
  expect_refused(*refused.sink, "connection_prompt_limit");
  for (const submitted& admitted : {queued, other, embedder}) {
    ASSERT_TRUE(admitted.sink->wait());
    expect_complete(*admitted.sink);
  }
  expect_drained(*engine, big);
  const submitted again = submit(*engine, "the connection again", 1);
  ASSERT_TRUE(again.sink->wait());
  expect_complete(*again.sink);
}

TEST(EnginePrepareQueue, PromptsAwaitingPreparationCountAgainstTheWaitingBound) {
  auto engine = engine::start(one_worker([](engine_config& c) { c.max_waiting_requests = 2; }));
  const submitted big = submit(*engine, big_prompt());
  const submitted queued = submit(*engine, "queued behind it");
  const submitted refused = submit(*engine, "a third waiting request");
  ASSERT_TRUE(refused.sink->wait(10s));
  expect_refused(*refused.sink, "");
  EXPECT_NE(refused.sink->error->message.find("waiting queue is full"), std::string::npos);
  ASSERT_TRUE(queued.sink->wait());
  expect_complete(*queued.sink);
  expect_drained(*engine, big);
}

// Were the cancelled prompt prepared, the fault hook would fail it (as it
// fails the uncancelled one); instead its choice finishes as aborted.
TEST(EnginePrepareQueue, ACancelledQueuedPromptIsNeverPrepared) {
  auto engine = engine::start(one_worker([](engine_config& c) {
    c.test_tokenizer_fault_marker = "POISON";
    c.test_tokenizer_fault = "throw";
  }));
  const submitted big = submit(*engine, big_prompt());
  const submitted cancelled = submit(*engine, "a POISON pill, cancelled while queued");
  const submitted poisoned = submit(*engine, "a POISON pill, prepared");
  engine->cancel(cancelled.id);
  ASSERT_TRUE(cancelled.sink->wait(10s));
  EXPECT_FALSE(cancelled.sink->error) << cancelled.sink->error->message;
  ASSERT_EQ(cancelled.sink->choices.size(), 1u);
  ASSERT_TRUE(cancelled.sink->choices[0].finish);
  EXPECT_EQ(cancelled.sink->choices[0].finish->reason, finish_reason::abort);
  EXPECT_TRUE(cancelled.sink->choices[0].tokens.empty());
  ASSERT_TRUE(poisoned.sink->wait());
  ASSERT_TRUE(poisoned.sink->error);
  EXPECT_NE(poisoned.sink->error->message.find("injected tokenizer fault"), std::string::npos);
  expect_drained(*engine, big);
}

// One connection's flood is prepared in turns with the other connection's
// request, not before it: that request ends before the flood's last
// prompt has even been prepared (it fails only once encoded).
TEST(EnginePrepareQueue, AFloodOnOneConnectionDoesNotHoldBackAnother) {
  auto engine = engine::start(one_worker([](engine_config&) {}));
  std::vector<submitted> flood;
  for (int i = 0; i < 6; ++i) flood.push_back(submit(*engine, big_prompt(), 1));
  const submitted small = submit(*engine, "a small request", 2, 4);
  ASSERT_TRUE(small.sink->wait());
  expect_complete(*small.sink);
  EXPECT_FALSE(flood.back().sink->wait(0s)) << "the small request waited for the whole flood";
  for (const submitted& big : flood) ASSERT_TRUE(big.sink->wait());
  EXPECT_EQ(engine->stats().num_prompts_pending, 0);
}

TEST(EnginePrepareQueue, TokenizeCallsShareTheBound) {
  auto engine = engine::start(one_worker([](engine_config& c) { c.max_pending_prompts = 2; }));
  const submitted big = submit(*engine, big_prompt());
  auto run = [&](const std::string& text) {
    auto answer = std::make_shared<std::promise<text_task_result>>();
    text_task task;
    task.text = text;
    engine->run_text_task(task, [answer](text_task_result result) { answer->set_value(std::move(result)); });
    return answer->get_future();
  };
  std::future<text_task_result> queued = run("hello");
  std::future<text_task_result> refused = run("one too many");
  ASSERT_EQ(refused.wait_for(10s), std::future_status::ready);
  const text_task_result refusal = refused.get();
  ASSERT_TRUE(refusal.error);
  EXPECT_EQ(refusal.error->code, "prompt_queue_full");
  ASSERT_EQ(queued.wait_for(60s), std::future_status::ready);
  const text_task_result answer = queued.get();
  EXPECT_FALSE(answer.error);
  EXPECT_FALSE(answer.ids.empty());
  expect_drained(*engine, big);
}

}  // namespace
}  // namespace troupe
