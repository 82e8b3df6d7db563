// Each policy's ordering, preemption for urgency, admission, and switching
// policy between steps.

#include <gtest/gtest.h>

#include "tests/scheduler/harness.hpp"

namespace troupe::testing {
namespace {

/// Index of the first step that ran `request`, or -1.
int first_step(const harness& h, request_handle request) {
  for (std::size_t i = 0; i < h.steps.size(); ++i) {
    if (!harness::entries(h.steps[i], request).empty()) return static_cast<int>(i);
  }
  return -1;
}

request_spec with_priority(request_spec spec, int priority) {
  spec.priority = priority;
  return spec;
}

TEST(PolicyFcfs, ServesInArrivalOrder) {
  harness h(small_config({.max_seqs = 1}));
  const request_handle a = h.submit(make_spec({.prompt_len = 8, .max_tokens = 3, .first_token = 1}));
  h.now += 0.001;
  const request_handle b = h.submit(make_spec({.prompt_len = 8, .max_tokens = 3, .first_token = 100}));
  h.now += 0.001;
  const request_handle c = h.submit(make_spec({.prompt_len = 8, .max_tokens = 3, .first_token = 200}));
  h.run();
  EXPECT_LT(first_step(h, a), first_step(h, b));
  EXPECT_LT(first_step(h, b), first_step(h, c));
  EXPECT_TRUE(h.preempted.empty());
}

TEST(PolicyPriority, LowerValueRunsFirst) {
  harness h(small_config({.max_seqs = 1}), {.policy = "priority"});
  const request_handle p2 = h.submit(with_priority(make_spec({.prompt_len = 8, .max_tokens = 3, .first_token = 1}), 2));
  const request_handle p0 =
      h.submit(with_priority(make_spec({.prompt_len = 8, .max_tokens = 3, .first_token = 100}), 0));
  const request_handle p1 =
      h.submit(with_priority(make_spec({.prompt_len = 8, .max_tokens = 3, .first_token = 200}), 1));
  h.run();
  EXPECT_LT(first_step(h, p0), first_step(h, p1));
  EXPECT_LT(first_step(h, p1), first_step(h, p2));
}

TEST(PolicyPriority, AnUrgentArrivalPreemptsALowerPriorityRequest) {
  harness h(small_config({.max_seqs = 1}), {.policy = "priority"});
  const request_spec low_spec = with_priority(make_spec({.prompt_len = 8, .max_tokens = 12, .first_token = 1}), 5);
  const request_handle low = h.submit(low_spec);
  for (int i = 0; i < 4; ++i) h.step();
  h.submit(
      with_priority(make_spec({.prompt_len = 8, .max_tokens = 12, .first_token = 300}), 5));  // equal priority: waits
  h.step();
  EXPECT_TRUE(h.preempted.empty());
  const request_handle high =
      h.submit(with_priority(make_spec({.prompt_len = 8, .max_tokens = 3, .first_token = 100}), 0));
  const scheduled_step& s = h.step();
  ASSERT_EQ(s.events.preempted.size(), 1u);
  EXPECT_EQ(s.events.preempted[0].request, low);
  EXPECT_EQ(s.events.preempted[0].kind, preemption_kind::recompute);
  EXPECT_EQ(harness::entries(s, high).size(), 1u);
  EXPECT_TRUE(harness::entries(s, low).empty());
  h.run();
  EXPECT_EQ(
      h.output(low),
      reference_outputs({.prompt = low_spec.prompt, .request_seed = 7, .max_tokens = 12, .vocab = harness::kVocab}))
      << "a recomputed request keeps its outputs and its RNG counters";
}

TEST(PolicyPriority, ARequestIsNotPreemptedForUrgencyWithinItsGracePeriod) {
  scheduler_config config = small_config({.max_seqs = 1});
  config.preemption_grace_steps = 3;
  harness h(config, {.policy = "priority"});
  const request_handle low =
      h.submit(with_priority(make_spec({.prompt_len = 8, .max_tokens = 20, .first_token = 1}), 5));
  h.step();  // step 1 admits it
  h.submit(with_priority(make_spec({.prompt_len = 8, .max_tokens = 3, .first_token = 100}), 0));
  h.step();
  h.step();
  EXPECT_TRUE(h.preempted.empty()) << "steps 2 and 3 are within the grace period";
  const scheduled_step& s = h.step();  // step 4
  ASSERT_EQ(s.events.preempted.size(), 1u);
  EXPECT_EQ(s.events.preempted[0].request, low);
}

policy_config mlfq_test_config() {
  policy_config p;
  p.mlfq_levels = 3;
  p.mlfq_base_quantum = 2;  // quanta 2, 4, 8 decode iterations
  p.mlfq_quantum_growth = 2;
  p.mlfq_entry_prompt_tokens = 8;  // level 0 up to 8 prompt tokens, level 1 up to 16
  p.mlfq_promote_after_s = 1000;
  return p;
}

TEST(PolicyMlfq, EntryLevelFollowsPromptLength) {
  harness h(small_config(), {.policy = "mlfq", .policies = mlfq_test_config()});
  EXPECT_EQ(h.sched().find_request(h.submit(make_spec({.prompt_len = 5, .max_tokens = 1})))->mlfq_level, 0);
  EXPECT_EQ(h.sched().find_request(h.submit(make_spec({.prompt_len = 8, .max_tokens = 1})))->mlfq_level, 0);
  EXPECT_EQ(h.sched().find_request(h.submit(make_spec({.prompt_len = 12, .max_tokens = 1})))->mlfq_level, 1);
  EXPECT_EQ(h.sched().find_request(h.submit(make_spec({.prompt_len = 40, .max_tokens = 1})))->mlfq_level, 2);
}

TEST(PolicyMlfq, ARequestIsDemotedAfterItsQuantumOfDecodeIterations) {
  harness h(small_config(), {.policy = "mlfq", .policies = mlfq_test_config()});
  const request_handle r = h.submit(make_spec({.prompt_len = 4, .max_tokens = 40}));
  const auto level = [&] { return h.sched().find_request(r)->mlfq_level; };
  h.step();
  EXPECT_EQ(level(), 0);
  h.step();  // second iteration: quantum 2 used up
  EXPECT_EQ(level(), 1);
  for (int i = 0; i < 3; ++i) h.step();
  EXPECT_EQ(level(), 1);
  h.step();  // 4 iterations at level 1
  EXPECT_EQ(level(), 2);
  for (int i = 0; i < 20; ++i) h.step();
  EXPECT_EQ(level(), 2) << "the last level keeps its requests";
}

TEST(PolicyMlfq, ShorterPromptsJoinHigherLevelsAndRunFirst) {
  harness h(small_config({.max_seqs = 1}), {.policy = "mlfq", .policies = mlfq_test_config()});
  const request_handle big = h.submit(make_spec({.prompt_len = 40, .max_tokens = 3, .first_token = 1}));
  const request_handle small = h.submit(make_spec({.prompt_len = 4, .max_tokens = 3, .first_token = 100}));
  h.run();
  EXPECT_LT(first_step(h, small), first_step(h, big));
}

TEST(PolicyMlfq, ADemotedRequestIsPreemptedByANewShortOne) {
  harness h(small_config({.max_seqs = 1}), {.policy = "mlfq", .policies = mlfq_test_config()});
  const request_handle old = h.submit(make_spec({.prompt_len = 4, .max_tokens = 30, .first_token = 1}));
  h.step();
  h.step();
  ASSERT_EQ(h.sched().find_request(old)->mlfq_level, 1);
  const request_handle fresh = h.submit(make_spec({.prompt_len = 4, .max_tokens = 3, .first_token = 100}));
  const scheduled_step& s = h.step();
  ASSERT_EQ(s.events.preempted.size(), 1u);
  EXPECT_EQ(s.events.preempted[0].request, old);
  EXPECT_EQ(harness::entries(s, fresh).size(), 1u);
}

TEST(PolicyMlfq, ARequestWaitingTooLongIsPromotedToTheTopLevel) {
  policy_config p = mlfq_test_config();
  p.mlfq_promote_after_s = 0.05;
  harness h(small_config({.max_seqs = 1}), {.policy = "mlfq", .policies = p});
  const request_handle runner = h.submit(make_spec({.prompt_len = 4, .max_tokens = 200, .first_token = 1}));
  const request_handle starved =
      h.submit(make_spec({.prompt_len = 40, .max_tokens = 3, .first_token = 100}));  // joins level 2
  ASSERT_EQ(h.sched().find_request(starved)->mlfq_level, 2);
  int promoted_at = -1;
  for (int i = 0; i < 10 && promoted_at < 0; ++i) {
    const scheduled_step& s = h.step();
    if (!harness::entries(s, starved).empty()) promoted_at = static_cast<int>(s.id);
  }
  // Steps run at t = 0, 0.01, ...; the starved request has waited 0.05 s at
  // the step planned at t = 0.05 (step 6), is promoted, and preempts the
  // runner, which was demoted to level 1 after two iterations.
  EXPECT_EQ(promoted_at, 6);
  EXPECT_EQ(h.sched().find_request(starved)->mlfq_level, 0);
  ASSERT_FALSE(h.preempted.empty());
  EXPECT_EQ(h.preempted[0].request, runner);
}

TEST(PolicyMlfq, SetConfigChangesTheQuantaAndKeepsRequestLevels) {
  policy_config config = mlfq_test_config();
  mlfq_policy policy(config);
  EXPECT_EQ(policy.quantum(0), 2);
  config.mlfq_base_quantum = 5;
  policy.set_config(config);
  EXPECT_EQ(policy.quantum(0), 5);
  EXPECT_EQ(policy.quantum(1), 10);
}

TEST(PolicyMlfq, ALiveQuantumChangeAppliesFromTheNextStep) {
  harness h(small_config(), {.policy = "mlfq", .policies = mlfq_test_config()});
  const request_handle r = h.submit(make_spec({.prompt_len = 4, .max_tokens = 40}));
  const auto level = [&] { return h.sched().find_request(r)->mlfq_level; };
  h.step();
  scheduler_config changed = h.sched().config();
  changed.policies.mlfq_base_quantum = 4;  // was 2: level 0 now lasts four decode iterations
  ASSERT_EQ(h.sched().set_config(changed), "");
  EXPECT_EQ(h.sched().config().policies.mlfq_base_quantum, 4);
  EXPECT_EQ(level(), 0) << "the change keeps the request where it is";
  h.step();
  h.step();
  EXPECT_EQ(level(), 0) << "three iterations: past the old quantum, within the new one";
  h.step();
  EXPECT_EQ(level(), 1);

  changed.policies.mlfq_base_quantum = 0;
  EXPECT_EQ(h.sched().set_config(changed), "knob 'mlfq_quantum': 0 is outside [1, 65536]");
  EXPECT_EQ(h.sched().config().policies.mlfq_base_quantum, 4) << "a refused change changes nothing";
}

TEST(PolicyMlfq, APolicySwitchedToRunsWithTheConfiguredTunables) {
  harness h(small_config(), {.policy = "fcfs", .policies = mlfq_test_config()});
  ASSERT_TRUE(h.sched().set_policy("mlfq", h.now));
  const auto* mlfq = dynamic_cast<const mlfq_policy*>(&h.sched().policy());
  ASSERT_NE(mlfq, nullptr);
  EXPECT_EQ(mlfq->quantum(0), 2);
}

request_spec with_deadline(request_spec spec, std::optional<double> deadline_s) {
  spec.deadline_s = deadline_s;
  return spec;
}

TEST(PolicyDeadline, EarliestDeadlineRunsFirstAndNoDeadlineLast) {
  harness h(small_config({.max_seqs = 1}), {.policy = "deadline"});
  const request_handle none =
      h.submit(with_deadline(make_spec({.prompt_len = 8, .max_tokens = 2, .first_token = 1}), std::nullopt));
  const request_handle late =
      h.submit(with_deadline(make_spec({.prompt_len = 8, .max_tokens = 2, .first_token = 100}), 10.0));
  const request_handle soon =
      h.submit(with_deadline(make_spec({.prompt_len = 8, .max_tokens = 2, .first_token = 200}), 1.0));
  h.run();
  EXPECT_LT(first_step(h, soon), first_step(h, late));
  EXPECT_LT(first_step(h, late), first_step(h, none));
}

TEST(PolicyDeadline, AdmissionRejectsWhatCannotFinishInTime) {
  harness h(small_config({.budget = 64, .chunk = 32}), {.policy = "deadline"});
  h.sched().set_step_time_estimate(0.01);
  const submit_result hopeless =
      h.sched().submit(with_deadline(make_spec({.prompt_len = 10, .max_tokens = 100}), 0.5), h.now);
  EXPECT_FALSE(hopeless.accepted);
  EXPECT_EQ(hopeless.error, error_kind::overloaded);
  EXPECT_NE(hopeless.message.find("deadline"), std::string::npos) << hopeless.message;
  EXPECT_TRUE(h.sched().submit(with_deadline(make_spec({.prompt_len = 10, .max_tokens = 60}), 1.0), h.now).accepted)
      << "0.61 s of work, 1 s left";
  harness queued(small_config({.blocks = 1024}), {.policy = "deadline"});
  queued.sched().set_step_time_estimate(0.01);
  for (int i = 0; i < 3; ++i)
    queued.submit(with_deadline(make_spec({.prompt_len = 1000, .max_tokens = 1, .first_token = 1 + 1000 * i}), 0.7));
  EXPECT_FALSE(
      queued.sched().submit(with_deadline(make_spec({.prompt_len = 10, .max_tokens = 60}), 1.0), queued.now).accepted)
      << "3000 queued prompt tokens due earlier push it past its deadline";
  EXPECT_TRUE(queued.sched()
                  .submit(with_deadline(make_spec({.prompt_len = 10, .max_tokens = 60}), std::nullopt), queued.now)
                  .accepted);
}

TEST(PolicyDeadline, AnEarlierDeadlinePreemptsALaterOne) {
  harness h(small_config({.max_seqs = 1}), {.policy = "deadline"});
  const request_handle relaxed =
      h.submit(with_deadline(make_spec({.prompt_len = 8, .max_tokens = 20, .first_token = 1}), 100.0));
  h.step();
  const request_handle urgent =
      h.submit(with_deadline(make_spec({.prompt_len = 8, .max_tokens = 2, .first_token = 100}), 1.0));
  const scheduled_step& s = h.step();
  ASSERT_EQ(s.events.preempted.size(), 1u);
  EXPECT_EQ(s.events.preempted[0].request, relaxed);
  EXPECT_EQ(harness::entries(s, urgent).size(), 1u);
}

/// Tokens fed per tenant over the steps where both tenants still had queued requests.
std::pair<double, double> shares_while_backlogged(const std::string& policy) {
  policy_config p;
  p.fair_prompt_weight = 1;
  p.fair_output_weight = 1;
  harness h(small_config({.budget = 64, .max_seqs = 4, .chunk = 64, .blocks = 512}), {.policy = policy, .policies = p});
  std::map<request_handle, int> tenant;
  for (int i = 0; i < 40; ++i) {
    request_spec spec = make_spec({.prompt_len = 16, .max_tokens = 16, .first_token = 1 + 20 * i});
    spec.user = i < 30 ? "a" : "b";  // a floods the queue first
    tenant[h.submit(spec)] = i < 30 ? 0 : 1;
  }
  double served[2] = {0, 0};
  while (true) {
    int queued[2] = {0, 0};
    for (const auto& [handle, t] : tenant) {
      const request_state* r = h.sched().find_request(handle);
      queued[t] += r != nullptr && r->queued();
    }
    if (queued[0] == 0 || queued[1] == 0) break;
    for (const auto& s : h.step().sequences) served[tenant.at(s.request)] += static_cast<double>(s.tokens.size());
  }
  return {served[0] / (served[0] + served[1]), served[1] / (served[0] + served[1])};
}

TEST(PolicyFair, TwoTenantsGetEqualSharesWithinTenPercent) {
  const auto [a, b] = shares_while_backlogged("fair");
  EXPECT_NEAR(a, 0.5, 0.05);
  EXPECT_NEAR(b, 0.5, 0.05);
  const auto [fcfs_a, fcfs_b] = shares_while_backlogged("fcfs");
  EXPECT_GT(fcfs_a, 0.9) << "the same load under fcfs favours the tenant that queued first";
}

TEST(PolicySwitch, TakesEffectAtTheNextStep) {
  harness h(small_config({.max_seqs = 1}), {.policy = "fcfs"});
  const request_handle p3 =
      h.submit(with_priority(make_spec({.prompt_len = 8, .max_tokens = 20, .first_token = 1}), 3));
  const request_handle p1 =
      h.submit(with_priority(make_spec({.prompt_len = 8, .max_tokens = 3, .first_token = 100}), 1));
  const request_handle p2 =
      h.submit(with_priority(make_spec({.prompt_len = 8, .max_tokens = 3, .first_token = 200}), 2));
  h.step();
  h.step();
  EXPECT_EQ(std::string(h.sched().policy().name()), "fcfs");
  ASSERT_TRUE(h.sched().set_policy("priority", h.now));
  EXPECT_FALSE(h.sched().set_policy("lottery", h.now));
  EXPECT_EQ(std::string(h.sched().policy().name()), "priority");
  h.run();
  EXPECT_EQ(first_step(h, p1), 2) << "priority 1 preempts the running priority 3 at once";
  EXPECT_LT(first_step(h, p1), first_step(h, p2));
  ASSERT_FALSE(h.preempted.empty());
  EXPECT_EQ(h.preempted[0].request, p3);
}

}  // namespace
}  // namespace troupe::testing
