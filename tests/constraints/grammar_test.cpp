// GBNF grammars: walks under the mask end in sentences of the grammar
// (checked by hand-written recognisers), sentences are accepted token by
// token, malformed or empty grammars are errors.

#include <gtest/gtest.h>

#include <regex>

#include "constraint_test_support.hpp"

namespace troupe::constraints::testing {
namespace {

const std::string arithmetic = R"gbnf(# integer arithmetic
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*
factor ::= [0-9]{1,3} | "(" expr ")"
)gbnf";

/// Recursive-descent recogniser of `arithmetic`.
class arithmetic_checker {
 public:
  explicit arithmetic_checker(const std::string& text) : text_(text) {}
  bool valid() { return expr() && pos_ == text_.size(); }

 private:
  bool expr() {
    if (!term()) return false;
    while (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) {
      ++pos_;
      if (!term()) return false;
    }
    return true;
  }
  bool term() {
    if (!factor()) return false;
    while (pos_ < text_.size() && (text_[pos_] == '*' || text_[pos_] == '/')) {
      ++pos_;
      if (!factor()) return false;
    }
    return true;
  }
  bool factor() {
    if (pos_ < text_.size() && text_[pos_] == '(') {
      ++pos_;
      if (!expr() || pos_ >= text_.size() || text_[pos_] != ')') return false;
      ++pos_;
      return true;
    }
    std::size_t digits = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_, ++digits;
    return digits >= 1 && digits <= 3;
  }
  const std::string& text_;
  std::size_t pos_ = 0;
};

const std::string brackets = "root ::= pair+\npair ::= \"(\" pair* \")\" | \"[\" pair* \"]\"\n";

bool balanced(const std::string& text) {
  std::string open;
  for (char c : text) {
    if (c == '(' || c == '[') {
      open.push_back(c);
    } else if (open.empty() || (c == ')' && open.back() != '(') || (c == ']' && open.back() != '[')) {
      return false;
    } else {
      open.pop_back();
    }
  }
  return open.empty() && !text.empty();
}

const std::string bullet_list = "root ::= item (\"\\n\" item){0,3}\nitem ::= \"- \" [a-z]{1,10} ('!' | \"?\")?\n";

TEST(GrammarConstraint, RandomWalksEndInSentences) {
  const std::wregex list_checker(L"- [a-z]{1,10}[!?]?(\\n- [a-z]{1,10}[!?]?){0,3}");
  for (const std::string name : {"llama3_1", "qwen3", "mistral_spm"}) {
    const auto& fixture = load_vocabulary(name);
    auto& compiler = shared_compiler(name);
    const auto compiled_arithmetic = compiler.compile({constraint_kind::grammar, arithmetic});
    const auto compiled_brackets = compiler.compile({constraint_kind::grammar, brackets});
    const auto compiled_list = compiler.compile({constraint_kind::grammar, bullet_list});
    for (std::uint32_t seed = 0; seed < 6; ++seed) {
      const auto a = random_walk(*compiled_arithmetic, fixture.vocab, {.seed = seed, .steps = 20});
      ASSERT_TRUE(a.failure.empty()) << name << ": " << a.failure;
      if (a.completed) {
        EXPECT_TRUE(arithmetic_checker(a.text).valid()) << a.text;
      }
      const auto b = random_walk(*compiled_brackets, fixture.vocab, {.seed = seed, .steps = 20});
      ASSERT_TRUE(b.failure.empty()) << name << ": " << b.failure;
      if (b.completed) {
        EXPECT_TRUE(balanced(b.text)) << b.text;
      }
      const auto l = random_walk(*compiled_list, fixture.vocab, {.seed = seed, .steps = 10});
      ASSERT_TRUE(l.failure.empty()) << name << ": " << l.failure;
      ASSERT_TRUE(l.completed);
      EXPECT_TRUE(std::regex_match(widen(l.text), list_checker)) << l.text;
    }
  }
}

TEST(GrammarConstraint, SentencesAreAcceptedTokenByToken) {
  for (const std::string name : {"llama3_1", "qwen3"}) {
    const auto& fixture = load_vocabulary(name);
    auto& compiler = shared_compiler(name);
    const auto compiled_arithmetic = compiler.compile({constraint_kind::grammar, arithmetic});
    for (const std::string sentence : {"1", "12+(3*45)-6/7", "((((1))))", "(1+2)*(3+4)*(5+6)"}) {
      ASSERT_TRUE(arithmetic_checker(sentence).valid());
      EXPECT_EQ(feed_document(*compiled_arithmetic, fixture, sentence), "") << sentence;
    }
    EXPECT_NE(feed_document(*compiled_arithmetic, fixture, "1+"), "");
    EXPECT_NE(feed_document(*compiled_arithmetic, fixture, "(1"), "");
    EXPECT_NE(feed_document(*compiled_arithmetic, fixture, "1234"), "");
    const auto compiled_brackets = compiler.compile({constraint_kind::grammar, brackets});
    EXPECT_EQ(feed_document(*compiled_brackets, fixture, "([()[]])()"), "");
    EXPECT_NE(feed_document(*compiled_brackets, fixture, "([)]"), "");
    const auto compiled_list = compiler.compile({constraint_kind::grammar, bullet_list});
    EXPECT_EQ(feed_document(*compiled_list, fixture, "- milk!\n- eggs\n- tea?"), "");
  }
}

TEST(GrammarConstraint, LeftRecursionIsBoundedByTheDepthLimit) {
  const auto& fixture = load_vocabulary("llama3_1");
  const auto compiled = shared_compiler("llama3_1").compile({constraint_kind::grammar, "root ::= root \"a\" | \"b\""});
  EXPECT_EQ(feed_document(*compiled, fixture, "baaa"), "");
  EXPECT_NE(feed_document(*compiled, fixture, "aaa"), "");
}

TEST(GrammarConstraint, MalformedGrammarsAreErrors) {
  auto& compiler = shared_compiler("llama3_1");
  for (const std::string grammar :
       {"", "start ::= \"a\"", "root ::= missing", "root ::= \"a", "root ::= (\"a\"", "root ::= \"a\"\nroot ::= \"b\"",
        "root ::= \"a\" root", "root = \"a\"", "root ::= [b-a]", "root ::= \"a\"{3,1}"}) {
    try {
      compiler.compile({constraint_kind::grammar, grammar});
      ADD_FAILURE() << grammar << " compiled";
    } catch (const constraint_error& error) {
      EXPECT_EQ(error.field(), "structured_outputs.grammar");
    }
  }
}

}  // namespace
}  // namespace troupe::constraints::testing
