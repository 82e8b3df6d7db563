// json_object: walks under the mask end in JSON objects (Boost.JSON is the
// independent parser), objects as models write them are accepted.

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <thread>

#include "constraint_test_support.hpp"

namespace troupe::constraints::testing {
namespace {

TEST(JsonObjectConstraint, RandomWalksEndInObjects) {
  for (const std::string name : {"llama3_1", "qwen3", "mistral_spm"}) {
    const auto& fixture = load_vocabulary(name);
    const auto compiled = shared_compiler(name).compile({constraint_kind::json_object, ""});
    int completed = 0;
    for (std::uint32_t seed = 0; seed < 16; ++seed) {
      const auto walk = random_walk(*compiled, fixture.vocab, {.seed = seed, .steps = 24});
      ASSERT_TRUE(walk.failure.empty()) << name << " seed " << seed << ": " << walk.failure;
      if (!walk.completed) continue;
      ++completed;
      boost::system::error_code error;
      const auto parsed = boost::json::parse(walk.text, error);
      ASSERT_FALSE(error) << name << ": '" << walk.text << "' does not parse";
      EXPECT_TRUE(parsed.is_object()) << walk.text;
    }
    EXPECT_GE(completed, 14) << name;
  }
}

TEST(JsonObjectConstraint, MatchersShareOneCompiledConstraintAcrossThreads) {
  const auto& fixture = load_vocabulary("qwen3");
  constraint_compiler compiler(fixture.vocab);  // fresh: the threads race to build the same tables
  const auto compiled = compiler.compile({constraint_kind::json_object, ""});
  std::vector<walk_result> walks(4);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < walks.size(); ++i) {
    threads.emplace_back([&, i] {
      walks[i] = random_walk(*compiled, fixture.vocab, {.seed = 100 + static_cast<std::uint32_t>(i), .steps = 16});
    });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& walk : walks) {
    EXPECT_TRUE(walk.failure.empty()) << walk.failure;
    if (walk.completed) {
      EXPECT_TRUE(boost::json::parse(walk.text).is_object()) << walk.text;
    }
  }
}

TEST(JsonObjectConstraint, ObjectsAreAcceptedTokenByToken) {
  const std::vector<std::string> documents = {
      R"({})",
      R"({"a":1})",
      R"({"name": "Ada", "age": 36, "tags": ["x", "y"], "ok": true, "none": null})",
      R"({ "nested": {"deep": [1, -2.5e3, {"k": "\"quoted\" \u00e9"}]} })",
      "{\n\"lines\": [\n1,\n2\n]\n}",
      R"({"unicode": "日本語 ✓"})",
  };
  for (const std::string name : {"llama3_1", "qwen3"}) {
    const auto& fixture = load_vocabulary(name);
    const auto compiled = shared_compiler(name).compile({constraint_kind::json_object, ""});
    for (const auto& document : documents) {
      ASSERT_NO_THROW((void)boost::json::parse(document));
      EXPECT_EQ(feed_document(*compiled, fixture, document), "") << name << " on " << document;
    }
  }
}

TEST(JsonObjectConstraint, RefusesWhatIsNotAnObject) {
  const auto& fixture = load_vocabulary("llama3_1");
  const auto compiled = shared_compiler("llama3_1").compile({constraint_kind::json_object, ""});
  for (const std::string document :
       {"[1]", "\"a\"", "{\"a\":}", "{\"a\":1,}", "{\"a\":  1}", "{'a':1}", "{\"a\":1}}"}) {
    EXPECT_NE(feed_document(*compiled, fixture, document), "") << document;
  }
}

TEST(JsonObjectConstraint, NestingStopsAtTheDepthLimit) {
  vocabulary vocab;
  for (int b = 0; b < 128; ++b) vocab.token_bytes.emplace_back(1, static_cast<char>(b));
  vocab.token_bytes.emplace_back();  // eos
  vocab.eos_tokens = {128};
  compile_limits limits;
  limits.max_depth = 10;
  constraint_compiler compiler(vocab, limits);
  auto matcher = compiler.compile({constraint_kind::json_object, ""})->start();
  ASSERT_TRUE(matcher->accept_token('{'));
  ASSERT_TRUE(matcher->accept_token('"'));
  ASSERT_TRUE(matcher->accept_token('"'));
  ASSERT_TRUE(matcher->accept_token(':'));
  int opened = 0;
  while (matcher->accept_token('[')) ++opened;
  EXPECT_GT(opened, 2);
  EXPECT_LT(opened, 10);
  std::vector<std::uint32_t> mask(5);
  matcher->fill_allowed(mask);
  EXPECT_FALSE((mask['[' / 32] >> ('[' % 32)) & 1u);
  EXPECT_TRUE((mask[']' / 32] >> (']' % 32)) & 1u);
}

}  // namespace
}  // namespace troupe::constraints::testing
