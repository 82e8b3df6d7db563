// Hostile templates: runaway recursion, huge loops, huge strings and lists,
// deep nesting and broken syntax must each fail with a clear error of the
// right kind (never a crash or a hang), carrying the template position.

#include <gtest/gtest.h>

#include <string>

#include "tests/chat/chat_test_support.hpp"

namespace troupe::chat_test {
namespace {

/// Renders `source` with no variables and returns the error it must raise.
chat_template_error render_error(const std::string& source, const chat_render_options& options = {}) {
  try {
    chat_template::compile(source).render({}, options);
  } catch (const chat_template_error& e) {
    return e;
  }
  ADD_FAILURE() << "expected an error from: " << source;
  return chat_template_error(chat_template_error_kind::render, "", "", 0, 0);
}

TEST(ChatTemplateHostile, UnboundedMacroRecursionHitsTheDepthLimit) {
  chat_template_error e = render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_EQ(e.kind(), chat_template_error_kind::limit);
  EXPECT_NE(e.message().find("recursion"), std::string::npos) << e.what();
  EXPECT_EQ(e.line(), 1u);
}

TEST(ChatTemplateHostile, MutualRecursionHitsTheDepthLimit) {
  chat_template_error e =
      render_error("{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}");
  EXPECT_EQ(e.kind(), chat_template_error_kind::limit);
}

TEST(ChatTemplateHostile, RecursiveLoopWithoutEndHitsTheDepthLimit) {
  chat_template_error e = render_error("{% for x in [1] recursive %}{{ loop([x]) }}{% endfor %}");
  EXPECT_EQ(e.kind(), chat_template_error_kind::limit);
}

TEST(ChatTemplateHostile, GiantRangeIsRefusedLikeTheSandbox) {
  chat_template_error e = render_error("{% for i in range(10**9) %}x{% endfor %}");
  EXPECT_EQ(e.kind(), chat_template_error_kind::render);
  EXPECT_EQ(e.python_type(), "OverflowError");
  EXPECT_EQ(e.message(), "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
}

TEST(ChatTemplateHostile, NestedLoopsHitTheIterationLimit) {
  chat_template_error e =
      render_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  EXPECT_EQ(e.kind(), chat_template_error_kind::limit);
  EXPECT_NE(e.message().find("loop iterations"), std::string::npos) << e.what();
}

TEST(ChatTemplateHostile, StringRepetitionIsCappedBeforeAllocation) {
  chat_template_error e = render_error("{{ 'x' * 10**9 }}");
  EXPECT_EQ(e.kind(), chat_template_error_kind::limit);
  EXPECT_EQ(e.column(), 8u);  // the '*'
}

TEST(ChatTemplateHostile, OutputGrowthIsCapped) {
  chat_template_error e = render_error("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}");
  EXPECT_EQ(e.kind(), chat_template_error_kind::limit);
  EXPECT_NE(e.message().find("output"), std::string::npos) << e.what();
}

TEST(ChatTemplateHostile, DoublingStringsAndListsAreCapped) {
  EXPECT_EQ(
      render_error("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}")
          .kind(),
      chat_template_error_kind::limit);
  EXPECT_EQ(
      render_error("{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}")
          .kind(),
      chat_template_error_kind::limit);
  EXPECT_EQ(
      render_error("{{ 'ab'.replace('', 'x' * 1000000)|length }}{{ ('y' * 30000000).replace('y', 'yy') }}").kind(),
      chat_template_error_kind::limit);
}

TEST(ChatTemplateHostile, CopyingHugeValuesInALoopRunsOutOfSteps) {
  chat_template_error e =
      render_error("{% set big = 'x' * 30000000 %}{% for i in range(100000) %}{% set y = big ~ i %}{% endfor %}");
  EXPECT_EQ(e.kind(), chat_template_error_kind::limit);
  EXPECT_NE(e.message().find("steps"), std::string::npos) << e.what();
  EXPECT_EQ(render_error("{% for c in 'x' * 30000000 %}{% endfor %}").kind(), chat_template_error_kind::limit);
}

TEST(ChatTemplateHostile, StepLimitStopsLongComputations) {
  chat_render_options options;
  options.limits.max_steps = 10'000;
  chat_template_error e =
      render_error("{% for i in range(5000) %}{% if i > 0 and i < 0 %}{% endif %}{% endfor %}", options);
  EXPECT_EQ(e.kind(), chat_template_error_kind::limit);
  EXPECT_NE(e.message().find("steps"), std::string::npos) << e.what();
}

TEST(ChatTemplateHostile, DeeplyNestedValuesFailInsteadOfOverflowingTheStack) {
  chat_template_error e = render_error(
      "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}");
  EXPECT_EQ(e.python_type(), "RecursionError");
  chat_template_error cycle = render_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}");
  EXPECT_EQ(cycle.python_type(), "RecursionError");
}

TEST(ChatTemplateHostile, DeepSyntaxNestingIsASyntaxError) {
  std::string parens = "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
  EXPECT_EQ(render_error(parens).kind(), chat_template_error_kind::syntax);
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  EXPECT_EQ(render_error(ifs).kind(), chat_template_error_kind::syntax);
  std::string lists = "{{ " + std::string(50000, '[') + std::string(50000, ']') + " }}";
  EXPECT_EQ(render_error(lists).kind(), chat_template_error_kind::syntax);
}

TEST(ChatTemplateHostile, SyntaxErrorsCarryLineAndColumn) {
  chat_template_error e = render_error("line one\n{% for x in y %}\n  {% endif %}");
  EXPECT_EQ(e.kind(), chat_template_error_kind::syntax);
  EXPECT_EQ(e.line(), 3u);
  EXPECT_EQ(e.column(), 6u);
  EXPECT_EQ(std::string(e.what()).rfind("chat template error at line 3, column 6: Encountered unknown tag 'endif'.", 0),
            0u)
      << e.what();
  chat_template_error unclosed = render_error("{{ 'never closed }}");
  EXPECT_EQ(unclosed.line(), 1u);
  EXPECT_EQ(unclosed.column(), 4u);
}

TEST(ChatTemplateHostile, RuntimeErrorsCarryLineAndColumn) {
  chat_template_error e = render_error("a\n\n  {{ 'text' + 1 }}");
  EXPECT_EQ(e.kind(), chat_template_error_kind::render);
  EXPECT_EQ(e.python_type(), "TypeError");
  EXPECT_EQ(e.line(), 3u);
  EXPECT_EQ(e.column(), 13u);
  EXPECT_EQ(std::string(e.what()),
            "chat template error at line 3, column 13: can only concatenate str (not \"int\") to str");
}

TEST(ChatTemplateHostile, RaiseExceptionKeepsTheMessageExactly) {
  chat_template_error e =
      render_error("{% if true %}\n{{ raise_exception('Roles must alternate: ' ~ 'user/assistant') }}{% endif %}");
  EXPECT_EQ(e.kind(), chat_template_error_kind::render);
  EXPECT_EQ(e.python_type(), "TemplateError");
  EXPECT_EQ(e.message(), "Roles must alternate: user/assistant");
  EXPECT_EQ(e.line(), 2u);
}

TEST(ChatTemplateHostile, InvalidUtf8IsRejected) {
  chat_template_error e = render_error(std::string("ok\n{{ 'a\xff' }}"));
  EXPECT_EQ(e.kind(), chat_template_error_kind::syntax);
  EXPECT_EQ(e.line(), 2u);
  boost::json::object context;
  context["x"] = boost::json::string("bad \xc3\x28 utf8");
  try {
    chat_template::compile("{{ x }}").render(context);
    ADD_FAILURE() << "expected an input error";
  } catch (const chat_template_error& err) {
    EXPECT_EQ(err.kind(), chat_template_error_kind::input);
  }
}

TEST(ChatTemplateHostile, DeeplyNestedContextIsRejected) {
  boost::json::value deep = boost::json::array();
  for (int i = 0; i < 2000; ++i) {
    boost::json::array wrapper;
    wrapper.push_back(std::move(deep));
    deep = std::move(wrapper);
  }
  boost::json::object context;
  context["x"] = std::move(deep);
  try {
    chat_template::compile("{{ x|length }}").render(context);
    ADD_FAILURE() << "expected an input error";
  } catch (const chat_template_error& e) {
    EXPECT_EQ(e.kind(), chat_template_error_kind::input);
  }
}

TEST(ChatTemplateHostile, SandboxForbidsMutationAndPrivateAttributes) {
  EXPECT_EQ(render_error("{% set l = [] %}{{ l.append(1) }}").python_type(), "SecurityError");
  EXPECT_EQ(render_error("{{ ''.__class__.__mro__ }}").python_type(), "SecurityError");
  EXPECT_EQ(render_error("{% set ns = namespace() %}{% set ns.__dict__ = 1 %}").python_type(), "SecurityError");
  EXPECT_EQ(render_error("{% include 'x' %}").kind(), chat_template_error_kind::syntax);
}

}  // namespace
}  // namespace troupe::chat_test
