// Property tests of regex and choice constraints on real vocabularies: walks
// under the mask end in matches (checked by std::regex), and matches are
// accepted token by token.

#include <gtest/gtest.h>

#include <regex>

#include "constraint_test_support.hpp"

namespace troupe::constraints::testing {
namespace {

struct regex_case {
  std::string pattern;
  std::vector<std::string> matches;  // documents the pattern matches
};

const std::vector<regex_case>& regex_cases() {
  static const std::vector<regex_case> cases = {
      {"[0-9]{3}-[0-9]{4}", {"555-1234", "000-0000"}},
      {"(yes|no|maybe)", {"yes", "maybe"}},
      {"[A-Z][a-z]{1,8}( [A-Z][a-z]{1,8}){0,2}", {"Alice", "Bob Smith", "Ann Lee Wu"}},
      {"\\d+(\\.\\d{1,2})?", {"3", "42.5", "1000.25"}},
      {"[a-z_]\\w{0,10}@example\\.(com|org)", {"joe@example.com", "a_b9@example.org"}},
      {"(ab|a)(bc|c)?x*", {"ab", "abc", "abcxxx", "ax"}},
      {"[^\\n\"]{0,12};", {"hello world;", ";"}},
      {"\\s?(true|false)\\s?", {"true", " false "}},
  };
  return cases;
}

/// std::regex (ECMAScript) over code points, the independent checker.
bool full_match(const std::string& pattern, const std::string& text) {
  return std::regex_match(widen(text), std::wregex(widen(pattern), std::regex::ECMAScript));
}

const std::vector<std::string> walked_vocabularies = {"llama3_1", "qwen3", "mistral_spm"};

TEST(RegexConstraint, RandomWalksEndInMatches) {
  for (const auto& name : walked_vocabularies) {
    const auto& fixture = load_vocabulary(name);
    for (const auto& c : regex_cases()) {
      const auto compiled = shared_compiler(name).compile({constraint_kind::regex, c.pattern});
      int completed = 0;
      for (std::uint32_t seed = 0; seed < 12; ++seed) {
        const auto walk = random_walk(*compiled, fixture.vocab, {.seed = seed, .steps = 12});
        ASSERT_TRUE(walk.failure.empty()) << name << " /" << c.pattern << "/ seed " << seed << ": " << walk.failure;
        if (!walk.completed) continue;
        ++completed;
        EXPECT_TRUE(full_match(c.pattern, walk.text))
            << name << " /" << c.pattern << "/ produced '" << walk.text << "'";
      }
      EXPECT_EQ(completed, 12) << name << " /" << c.pattern << "/";
    }
  }
}

TEST(RegexConstraint, MatchesAreAcceptedTokenByToken) {
  for (const std::string name : {"llama3_1", "qwen3"}) {
    const auto& fixture = load_vocabulary(name);
    for (const auto& c : regex_cases()) {
      const auto compiled = shared_compiler(name).compile({constraint_kind::regex, c.pattern});
      for (const auto& document : c.matches) {
        ASSERT_TRUE(full_match(c.pattern, document)) << document;
        EXPECT_EQ(feed_document(*compiled, fixture, document), "")
            << name << " /" << c.pattern << "/ on '" << document << "'";
      }
    }
  }
}

TEST(RegexConstraint, NonMatchesAreRefused) {
  const auto& fixture = load_vocabulary("llama3_1");
  const auto compiled = shared_compiler("llama3_1").compile({constraint_kind::regex, "[0-9]{3}-[0-9]{4}"});
  EXPECT_NE(feed_document(*compiled, fixture, "555-123"), "");    // incomplete
  EXPECT_NE(feed_document(*compiled, fixture, "555-12345"), "");  // too long
  EXPECT_NE(feed_document(*compiled, fixture, "5a5-1234"), "");
}

TEST(RegexConstraint, UnicodeClassesWalkWholeCharacters) {
  const auto& fixture = load_vocabulary("llama3_1");
  const auto compiled = shared_compiler("llama3_1").compile({constraint_kind::regex, "[à-ÿ]{2,4}|[α-ω]+!"});
  EXPECT_EQ(feed_document(*compiled, fixture, "éàü"), "");
  EXPECT_EQ(feed_document(*compiled, fixture, "αβγ!"), "");
  for (std::uint32_t seed = 0; seed < 8; ++seed) {
    const auto walk = random_walk(*compiled, fixture.vocab, {.seed = seed, .steps = 6});
    ASSERT_TRUE(walk.failure.empty()) << walk.failure;
    ASSERT_TRUE(walk.completed);
    EXPECT_TRUE(full_match("[à-ÿ]{2,4}|[α-ω]+!", walk.text)) << walk.text;
  }
}

TEST(ChoiceConstraint, WalksEndInOneOfTheChoices) {
  const std::vector<std::string> choices = {"positive", "negative", "neutral", "pos"};
  const std::string spec = R"(["positive", "negative", "neutral", "pos"])";
  for (const auto& name : walked_vocabularies) {
    const auto& fixture = load_vocabulary(name);
    const auto compiled = shared_compiler(name).compile({constraint_kind::choice, spec});
    for (std::uint32_t seed = 0; seed < 16; ++seed) {
      const auto walk = random_walk(*compiled, fixture.vocab, {.seed = seed, .steps = 8});
      ASSERT_TRUE(walk.failure.empty()) << walk.failure;
      ASSERT_TRUE(walk.completed);
      EXPECT_NE(std::find(choices.begin(), choices.end(), walk.text), choices.end()) << walk.text;
    }
    if (name != "mistral_spm") {
      for (const auto& choice : choices) EXPECT_EQ(feed_document(*compiled, fixture, choice), "") << choice;
    }
  }
}

TEST(ChoiceConstraint, StopsOnlyAfterTheLongestChoice) {
  const auto& fixture = load_vocabulary("llama3_1");
  const auto compiled = shared_compiler("llama3_1").compile({constraint_kind::choice, R"(["pos", "positive"])"});
  auto matcher = compiled->start();
  for (auto id : fixture.tok->encode("pos", false)) ASSERT_TRUE(matcher->accept_token(id));
  EXPECT_TRUE(matcher->is_complete());
  EXPECT_FALSE(matcher->is_terminated());
  for (auto id : fixture.tok->encode("itive", false)) ASSERT_TRUE(matcher->accept_token(id));
  EXPECT_TRUE(matcher->is_terminated());
}

TEST(ChoiceConstraint, MalformedListsAreErrors) {
  auto& compiler = shared_compiler("llama3_1");
  for (const std::string text : {"[]", "\"a\"", "[1, 2]", "[\"a\""}) {
    try {
      compiler.compile({constraint_kind::choice, text});
      ADD_FAILURE() << text << " compiled";
    } catch (const constraint_error& error) {
      EXPECT_EQ(error.field(), "structured_outputs.choice");
    }
  }
}

}  // namespace
}  // namespace troupe::constraints::testing
