// Tenants: the fair policy's state stays O(active tenants) whatever `user`
// values clients send, and the prefix cache is shared only between requests
// of equal cache salt.

#include <gtest/gtest.h>

#include "tests/scheduler/harness.hpp"

namespace troupe::testing {
namespace {

const fair_policy& fair_of(harness& h) { return dynamic_cast<const fair_policy&>(h.sched().policy()); }

request_spec for_user(request_spec spec, std::string user) {
  spec.user = std::move(user);
  return spec;
}

/// Two long requests of tenants "a" and "b" stay live while 100,000
/// requests of distinct users arrive and are cancelled in batches.
void churn_distinct_users(harness& h) {
  h.submit(for_user(make_spec({.prompt_len = 8, .max_tokens = 1000, .first_token = 1}), "a"));
  h.submit(for_user(make_spec({.prompt_len = 8, .max_tokens = 1000, .first_token = 100}), "b"));
  h.step();
  constexpr int total = 100'000, batch = 1000;
  std::vector<request_handle> handles;
  for (int i = 0; i < total; ++i) {
    handles.push_back(h.submit(for_user(make_spec({.prompt_len = 4, .max_tokens = 4}), "u" + std::to_string(i))));
    if (handles.size() < batch) continue;
    for (request_handle handle : handles) h.record(h.sched().cancel(handle, h.now));
    handles.clear();
  }
  h.step();
}

TEST(FairTenants, TheMapReturnsToTheActiveTenantsAfterManyDistinctUsers) {
  policy_config p;
  p.fair_idle_tenants = 0;
  harness h(small_config({.max_seqs = 2}), {.policy = "fair", .policies = p});
  churn_distinct_users(h);
  EXPECT_EQ(fair_of(h).num_tenants(), 2u);
  EXPECT_GT(fair_of(h).counter("a"), 0.0);
}

TEST(FairTenants, IdleTenantsAreKeptUpToTheBound) {
  harness h(small_config({.max_seqs = 2}), {.policy = "fair", .policies = policy_config{}});
  churn_distinct_users(h);
  EXPECT_EQ(fair_of(h).num_tenants(), 2u + policy_config{}.fair_idle_tenants);
  EXPECT_EQ(fair_of(h).counter("u0"), 0.0) << "the least recently active idle tenants were forgotten";
}

/// Cached prompt tokens of a request of `salt` run alone to completion.
int cached_tokens_with_salt(harness& h, std::uint64_t salt) {
  request_spec spec = make_spec({.prompt_len = 17, .max_tokens = 2, .first_token = 5});
  spec.cache_salt = salt;
  const request_handle handle = h.submit(std::move(spec));
  h.run();
  return h.finished.at({handle, 0}).usage.cached_prompt_tokens;
}

TEST(CacheSalt, RequestsOfDifferentSaltsShareNoCachedTokens) {
  harness h(small_config(), {.real_kv = true});
  EXPECT_EQ(cached_tokens_with_salt(h, 11), 0);
  EXPECT_EQ(cached_tokens_with_salt(h, 22), 0) << "another tenant's prefix must not be reported as cached";
  EXPECT_EQ(cached_tokens_with_salt(h, 0), 0);
  EXPECT_EQ(cached_tokens_with_salt(h, 11), 16) << "the same tenant reuses its own prefix";
  EXPECT_EQ(cached_tokens_with_salt(h, 0), 16);
}

}  // namespace
}  // namespace troupe::testing
