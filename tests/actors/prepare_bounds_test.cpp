// The bounds on prompt preparation on the real engine (issue 15, defect 1):
// the global, per-connection and waiting-queue bounds refuse with their
// codes and admit again once work ends, and each holds one full
// completions request; a queued prompt that is cancelled, aborted (the
// admin's call) or past its request's timeout is never prepared and ends
// as such a running request does; one connection's flood does not hold
// back another's request; /tokenize calls share the bound and a queued one
// can be cancelled. Requests ended before preparation count in the
// finished-as-abort total.
//
// One tokenizer worker and a prompt of megabytes ahead of the rest make
// the order deterministic: the test sends everything that follows within
// microseconds, long before that encode ends (it then fails: too long for
// the tiny model's context).

#include <gtest/gtest.h>

#include <future>
#include <stdexcept>

#include "config/config_store.hpp"
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

/// Ended as a cancelled (or timed-out) request does, with no output and no error.
void expect_aborted(const recording_sink& sink) {
  EXPECT_FALSE(sink.error) << sink.error->message;
  ASSERT_EQ(sink.choices.size(), 1u);
  ASSERT_TRUE(sink.choices[0].finish);
  EXPECT_EQ(sink.choices[0].finish->reason, finish_reason::abort);
  EXPECT_TRUE(sink.choices[0].tokens.empty());
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

/// The prompts of one full completions request: the big one, then the rest of `origin`.
std::vector<submitted> submit_full_request(engine& running, std::uint64_t origin) {
  std::vector<submitted> prompts{submit(running, big_prompt(), origin)};
  for (int i = 1; i < max_prompts_per_request; ++i)
    prompts.push_back(submit(running, "prompt " + std::to_string(i), origin));
  return prompts;
}

void expect_all_complete(const std::vector<submitted>& prompts) {
  for (std::size_t i = 1; i < prompts.size(); ++i) {
    ASSERT_TRUE(prompts[i].sink->wait());
    expect_complete(*prompts[i].sink);
  }
}

TEST(EnginePrepareQueue, ABoundBelowOneFullRequestIsRefusedAtStart) {
  for (void (*lower)(engine_config&) :
       {+[](engine_config& c) { c.max_pending_prompts = max_prompts_per_request - 1; },
        +[](engine_config& c) { c.max_pending_prompts_per_connection = max_prompts_per_request - 1; }}) {
    try {
      engine::start(one_worker(lower));
      ADD_FAILURE() << "started";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("63 is outside [64, "), std::string::npos) << e.what();
    }
  }
}

TEST(EnginePrepareQueue, TheGlobalBoundRefusesWithItsCodeAndAdmitsAgainAfterwards) {
  auto engine = engine::start(one_worker([](engine_config& c) { c.max_pending_prompts = max_prompts_per_request; }));
  const std::vector<submitted> full = submit_full_request(*engine, 0);
  const submitted refused = submit(*engine, "one too many");
  ASSERT_TRUE(refused.sink->wait(10s));
  expect_refused(*refused.sink, "prompt_queue_full");
  EXPECT_NE(refused.sink->error->message.find("max_pending_prompts"), std::string::npos);
  expect_all_complete(full);
  expect_drained(*engine, full[0]);
  const submitted again = submit(*engine, "admitted again");
  ASSERT_TRUE(again.sink->wait());
  expect_complete(*again.sink);
}

TEST(EnginePrepareQueue, ThePerConnectionBoundRefusesOnlyThatConnection) {
  auto engine = engine::start(
      one_worker([](engine_config& c) { c.max_pending_prompts_per_connection = max_prompts_per_request; }));
  const std::vector<submitted> full = submit_full_request(*engine, 1);
  const submitted refused = submit(*engine, "one past a full request", 1);
  const submitted other = submit(*engine, "another connection", 2);
  const submitted embedder = submit(*engine, "no connection", 0);
  ASSERT_TRUE(refused.sink->wait(10s));
  expect_refused(*refused.sink, "connection_prompt_limit");
  expect_all_complete(full);
  for (const submitted& admitted : {other, embedder}) {
    ASSERT_TRUE(admitted.sink->wait());
    expect_complete(*admitted.sink);
  }
  expect_drained(*engine, full[0]);
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
  expect_aborted(*cancelled.sink);
  EXPECT_EQ(engine->stats().request_success["abort"], 1u) << "counted as a request finished as aborted";
  ASSERT_TRUE(poisoned.sink->wait());
  ASSERT_TRUE(poisoned.sink->error);
  EXPECT_NE(poisoned.sink->error->message.find("injected tokenizer fault"), std::string::npos);
  expect_drained(*engine, big);
}

engine_config poisoned_one_worker() {
  return one_worker([](engine_config& c) {
    c.test_tokenizer_fault_marker = "POISON";
    c.test_tokenizer_fault = "throw";
  });
}

// The admin's abort (engine::abort, what POST /admin/requests/{id}/abort
// calls) reaches a prompt still queued: the poison would fail it if it were
// prepared. Once it has ended, no live request has its id.
TEST(EnginePrepareQueue, AnAbortedQueuedPromptIsNeverPrepared) {
  auto engine = engine::start(poisoned_one_worker());
  const submitted big = submit(*engine, big_prompt());
  const submitted aborted = submit(*engine, "a POISON pill, aborted while queued");
  EXPECT_TRUE(engine->abort(aborted.id));
  ASSERT_TRUE(aborted.sink->wait(10s));
  expect_aborted(*aborted.sink);
  EXPECT_FALSE(engine->abort(aborted.id));
  expect_drained(*engine, big);
}

// Past the prepare queue the abort is the scheduler's, as before.
TEST(EnginePrepareQueue, AnAbortReachesARequestPastPreparation) {
  auto engine = engine::start(one_worker([](engine_config&) {}));
  const submitted running = submit(*engine, "a long generation", 0, 1500);
  ASSERT_TRUE(running.sink->wait_for_deltas(1));
  EXPECT_TRUE(engine->abort(running.id));
  ASSERT_TRUE(running.sink->wait());
  EXPECT_FALSE(running.sink->error);
  ASSERT_TRUE(running.sink->choices[0].finish);
  EXPECT_EQ(running.sink->choices[0].finish->reason, finish_reason::abort);
  EXPECT_FALSE(engine->abort("no-such-request"));
}

// A request's timeout counts from its arrival: one that runs out while its
// prompt waits ends as a timed-out running request does (reason abort, no
// error) and is never prepared (the poison would fail it).
TEST(EnginePrepareQueue, AQueuedPromptPastItsTimeoutEndsUnprepared) {
  auto engine = engine::start(poisoned_one_worker());
  const submitted big = submit(*engine, big_prompt());
  generation_request request = text_request("a POISON pill that times out while queued", 3);
  request.timeout_s = 0.05;
  auto sink = std::make_shared<recording_sink>();
  engine->submit(std::move(request), sink);
  ASSERT_TRUE(sink->wait(10s));
  expect_aborted(*sink);
  EXPECT_EQ(engine->stats().num_prompts_pending, 1) << "only the big prompt is left";
  EXPECT_EQ(engine->stats().request_success["abort"], 1u);
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

/// Runs a text task encoding `text` (cancellable by `id`); its answer.
std::future<text_task_result> run_text(engine& running, const std::string& text, const std::string& id = {}) {
  auto answer = std::make_shared<std::promise<text_task_result>>();
  text_task task;
  task.text = text;
  task.id = id;
  running.run_text_task(task, [answer](text_task_result result) { answer->set_value(std::move(result)); });
  return answer->get_future();
}

TEST(EnginePrepareQueue, TokenizeCallsShareTheBound) {
  auto engine = engine::start(one_worker([](engine_config& c) { c.max_pending_prompts = max_prompts_per_request; }));
  const submitted big = submit(*engine, big_prompt());
  std::vector<std::future<text_task_result>> queued;
  for (int i = 1; i < max_prompts_per_request; ++i) queued.push_back(run_text(*engine, "hello"));
  std::future<text_task_result> refused = run_text(*engine, "one too many");
  ASSERT_EQ(refused.wait_for(10s), std::future_status::ready);
  const text_task_result refusal = refused.get();
  ASSERT_TRUE(refusal.error);
  EXPECT_EQ(refusal.error->code, "prompt_queue_full");
  for (std::future<text_task_result>& call : queued) {
    ASSERT_EQ(call.wait_for(60s), std::future_status::ready);
    const text_task_result answer = call.get();
    EXPECT_FALSE(answer.error);
    EXPECT_FALSE(answer.ids.empty());
  }
  expect_drained(*engine, big);
}

// What the HTTP server does for a /tokenize call whose client left: the
// queued task answers that it was cancelled, and a task without an id
// (not cancellable) still runs.
TEST(EnginePrepareQueue, ACancelledQueuedTokenizeCallAnswersCancelledWithoutRunning) {
  auto engine = engine::start(one_worker([](engine_config&) {}));
  const submitted big = submit(*engine, big_prompt());
  std::future<text_task_result> cancelled = run_text(*engine, "hello", "text-1");
  std::future<text_task_result> kept = run_text(*engine, "hello");
  engine->cancel("text-1");
  ASSERT_EQ(cancelled.wait_for(10s), std::future_status::ready);
  const text_task_result answer = cancelled.get();
  ASSERT_TRUE(answer.error);
  EXPECT_EQ(answer.error->kind, error_kind::cancelled);
  EXPECT_EQ(answer.error->request_id, "text-1");
  EXPECT_TRUE(answer.ids.empty());
  EXPECT_EQ(kept.wait_for(0s), std::future_status::timeout) << "the big prompt ahead is still being prepared";
  ASSERT_EQ(kept.wait_for(60s), std::future_status::ready);
  EXPECT_FALSE(kept.get().ids.empty());
  expect_drained(*engine, big);
}

}  // namespace
}  // namespace troupe
