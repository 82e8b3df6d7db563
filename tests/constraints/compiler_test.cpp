// The compiler's cache, limits and the matcher's bookkeeping (eos, special
// tokens, rollback) on a small byte vocabulary.

#include <gtest/gtest.h>

#include <thread>

#include "constraints/constraint.hpp"

namespace troupe::constraints {
namespace {

/// Ids 0..127 are the ASCII bytes, 128 "ab", 129 eos, 130 a special token.
vocabulary byte_vocabulary() {
  vocabulary vocab;
  for (int b = 0; b < 128; ++b) vocab.token_bytes.emplace_back(1, static_cast<char>(b));
  vocab.token_bytes.emplace_back("ab");
  vocab.token_bytes.emplace_back();
  vocab.token_bytes.emplace_back();
  vocab.eos_tokens = {129};
  return vocab;
}

bool allowed(const token_matcher& matcher, std::int32_t id) {
  std::vector<std::uint32_t> mask(5);
  matcher.fill_allowed(mask);
  return (mask[static_cast<std::size_t>(id) / 32] >> (id % 32)) & 1u;
}

TEST(ConstraintCompiler, CachesByKindAndText) {
  constraint_compiler compiler(byte_vocabulary(), {}, 2);
  const auto first = compiler.compile({constraint_kind::regex, "a+"});
  EXPECT_EQ(compiler.compile({constraint_kind::regex, "a+"}), first);
  EXPECT_NE(compiler.compile({constraint_kind::choice, "[\"a+\"]"}), first);
  EXPECT_EQ(compiler.vocab_size(), 131u);
}

TEST(ConstraintCompiler, EvictsTheLeastRecentlyUsed) {
  constraint_compiler compiler(byte_vocabulary(), {}, 2);
  const auto a = compiler.compile({constraint_kind::regex, "a"});
  const auto b = compiler.compile({constraint_kind::regex, "b"});
  EXPECT_EQ(compiler.compile({constraint_kind::regex, "a"}), a);  // a is now the most recent
  compiler.compile({constraint_kind::regex, "c"});                // evicts b
  EXPECT_EQ(compiler.compile({constraint_kind::regex, "a"}), a);
  EXPECT_NE(compiler.compile({constraint_kind::regex, "b"}), b);
}

TEST(ConstraintCompiler, ConcurrentCompilesAgree) {
  constraint_compiler compiler(byte_vocabulary());
  std::vector<std::shared_ptr<const compiled_constraint>> results(4);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = compiler.compile({constraint_kind::json_object, ""}); });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) {
    auto matcher = r->start();
    EXPECT_TRUE(matcher->accept_token('{'));
    EXPECT_TRUE(matcher->accept_token('}'));
    EXPECT_TRUE(matcher->is_terminated());
  }
}

TEST(ConstraintCompiler, OversizedTextIsAnError) {
  compile_limits limits;
  limits.max_text_bytes = 8;
  constraint_compiler compiler(byte_vocabulary(), limits);
  EXPECT_THROW(compiler.compile({constraint_kind::regex, "abcdefghij"}), constraint_error);
}

TEST(TokenMatcher, EosOnlyWhenCompleteAndSpecialTokensNever) {
  constraint_compiler compiler(byte_vocabulary());
  auto matcher = compiler.compile({constraint_kind::regex, "ab(c)?"})->start();
  EXPECT_TRUE(allowed(*matcher, 'a'));
  EXPECT_TRUE(allowed(*matcher, 128));
  EXPECT_FALSE(allowed(*matcher, 'b'));
  EXPECT_FALSE(allowed(*matcher, 129));
  EXPECT_FALSE(allowed(*matcher, 130));
  EXPECT_FALSE(matcher->accept_token(130));
  EXPECT_FALSE(matcher->accept_token(129));
  ASSERT_TRUE(matcher->accept_token(128));
  EXPECT_TRUE(matcher->is_complete());
  EXPECT_FALSE(matcher->is_terminated());
  EXPECT_TRUE(allowed(*matcher, 129));
  EXPECT_TRUE(allowed(*matcher, 'c'));
  ASSERT_TRUE(matcher->accept_token('c'));
  EXPECT_TRUE(matcher->is_terminated());
  ASSERT_TRUE(matcher->accept_token(129));
  EXPECT_FALSE(allowed(*matcher, 129));
  EXPECT_FALSE(matcher->accept_token('c'));
}

TEST(TokenMatcher, RollbackRestoresEarlierStates) {
  constraint_compiler compiler(byte_vocabulary());
  auto matcher = compiler.compile({constraint_kind::regex, "(ab)+x"})->start();
  ASSERT_TRUE(matcher->accept_token(128));
  ASSERT_TRUE(matcher->accept_token('a'));
  EXPECT_FALSE(allowed(*matcher, 'x'));
  matcher->rollback(1);
  EXPECT_TRUE(allowed(*matcher, 'x'));
  ASSERT_TRUE(matcher->accept_token('x'));
  EXPECT_TRUE(matcher->is_complete());
  matcher->rollback(10);  // clamps at the start
  EXPECT_TRUE(allowed(*matcher, 'a'));
  EXPECT_FALSE(allowed(*matcher, 'x'));
}

TEST(HostileConstraints, NestedQuantifiersCompileToASmallAutomaton) {
  constraint_compiler compiler(byte_vocabulary());
  auto matcher = compiler.compile({constraint_kind::regex, "(a+)+$"})->start();
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(matcher->accept_token('a'));
  EXPECT_TRUE(matcher->is_complete());
  EXPECT_FALSE(allowed(*matcher, 'b'));
}

TEST(HostileConstraints, ExponentialAutomataFailWithAnError) {
  compile_limits limits;
  limits.max_states = 5000;
  constraint_compiler compiler(byte_vocabulary(), limits);
  const std::vector<std::string> patterns = {"(a|b)*a(a|b){20}", "((a{1000}){1000}){1000}",
                                             std::string(5000, '(') + "a"};
  for (const auto& pattern : patterns) {
    try {
      compiler.compile({constraint_kind::regex, pattern});
      ADD_FAILURE() << pattern.substr(0, 40) << " compiled";
    } catch (const constraint_error& error) {
      EXPECT_EQ(error.field(), "structured_outputs.regex");
      EXPECT_FALSE(std::string(error.what()).empty());
    }
  }
  // A failed compile is cached: the second attempt fails the same way.
  EXPECT_THROW(compiler.compile({constraint_kind::regex, "(a|b)*a(a|b){20}"}), constraint_error);
}

TEST(HostileConstraints, MalformedRegexesNameTheOffset) {
  constraint_compiler compiler(byte_vocabulary());
  for (const std::string pattern : {"(a", "a)", "[a-", "a**", "\\b", "(?=a)", "a{3,1}", "(a)\\1", "a^b"}) {
    try {
      compiler.compile({constraint_kind::regex, pattern});
      ADD_FAILURE() << pattern << " compiled";
    } catch (const constraint_error& error) {
      EXPECT_NE(std::string(error.what()).find("offset"), std::string::npos) << error.what();
    }
  }
}

}  // namespace
}  // namespace troupe::constraints
