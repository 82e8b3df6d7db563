// Prefix-cache isolation: the cache salt the server puts on each request, by
// the knob prefix_cache_isolation and whether an API key is set.

#include <gtest/gtest.h>

#include "api/http/routes.hpp"
#include "config/config_store.hpp"
#include "server_fixture.hpp"

namespace troupe::testing {
namespace {

using CacheIsolation = server_fixture;

std::string completion_for(const std::string& user) {
  return R"({"prompt":"same prefix","max_tokens":2,"user":")" + user + R"("})";
}

TEST_F(CacheIsolation, WithoutAKeyEveryRequestSharesTheCacheByDefault) {
  ASSERT_EQ(post("/v1/completions", completion_for("alice")).status, 200);
  ASSERT_EQ(post("/v1/completions", completion_for("bob")).status, 200);
  ASSERT_EQ(engine.submitted().size(), 2u);
  EXPECT_EQ(engine.submitted()[0].cache_salt, 0u);
  EXPECT_EQ(engine.submitted()[1].cache_salt, 0u);
}

TEST_F(CacheIsolation, AnApiKeyIsolatesByKeyWhenTheKnobIsLeftAtItsDefault) {
  api::server_config config = test_server_config();
  config.api_key = "sekrit";
  start(config);
  ASSERT_EQ(post("/v1/completions", completion_for("alice"), "Authorization: Bearer sekrit\r\n").status, 200);
  ASSERT_EQ(engine.submitted().size(), 1u);
  EXPECT_EQ(engine.submitted()[0].cache_salt, api::cache_salt_of("api_key", "sekrit"));
  EXPECT_NE(engine.submitted()[0].cache_salt, 0u);
}

TEST_F(CacheIsolation, NoneSharesTheCacheEvenWithAKey) {
  api::server_config config = test_server_config();
  config.api_key = "sekrit";
  config.prefix_cache_isolation = "none";
  start(config);
  ASSERT_EQ(post("/v1/completions", completion_for("alice"), "Authorization: Bearer sekrit\r\n").status, 200);
  EXPECT_EQ(engine.submitted().at(0).cache_salt, 0u);
}

TEST_F(CacheIsolation, UserIsolatesByTheUserField) {
  api::server_config config = test_server_config();
  config.prefix_cache_isolation = "user";
  start(config);
  for (const char* user : {"alice", "bob", "alice"})
    ASSERT_EQ(post("/v1/completions", completion_for(user)).status, 200);
  const auto submitted = engine.submitted();
  ASSERT_EQ(submitted.size(), 3u);
  EXPECT_NE(submitted[0].cache_salt, submitted[1].cache_salt);
  EXPECT_EQ(submitted[0].cache_salt, submitted[2].cache_salt);
  EXPECT_NE(submitted[0].cache_salt, 0u);
}

TEST(CacheSaltOf, SeparatesDomainsAndIsNeverTheSharedPartition) {
  EXPECT_NE(api::cache_salt_of("api_key", "x"), api::cache_salt_of("user", "x"));
  EXPECT_NE(api::cache_salt_of("user", ""), 0u);
  EXPECT_EQ(api::parse_cache_isolation("", false), api::cache_isolation::none);
  EXPECT_EQ(api::parse_cache_isolation("", true), api::cache_isolation::api_key);
  EXPECT_EQ(api::parse_cache_isolation("user", true), api::cache_isolation::user);
  EXPECT_THROW(api::parse_cache_isolation("tenant", false), std::invalid_argument);
}

TEST(CacheIsolationKnob, LeftAtItsDefaultItDefersToTheApiKey) {
  config_store knobs(all_knobs());
  EXPECT_EQ(api::server_config(knobs, engine_config{}).prefix_cache_isolation, "");
  knobs.set("prefix_cache_isolation", "none", config_source::command_line);
  EXPECT_EQ(api::server_config(knobs, engine_config{}).prefix_cache_isolation, "none");
}

}  // namespace
}  // namespace troupe::testing
