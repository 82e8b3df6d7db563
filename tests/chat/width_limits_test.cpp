// Padding and width primitives (str.center/ljust/rjust/zfill/expandtabs, the
// center/indent/tojson filters, format-spec and %-format widths and
// precisions): a size past the render's string limit fails with the limit
// error before anything is allocated, a size just inside it still renders, and
// small cases render exactly as Python 3.11 / jinja2 3.1.6 do. Widths that do
// not fit 64 bits give Python's ValueError, never signed overflow.

#include <gtest/gtest.h>

#include <string>

#include "tests/chat/chat_test_support.hpp"

namespace troupe::chat_test {
namespace {

/// A small string limit keeps "just inside the limit" cases cheap.
constexpr std::size_t small_limit = 1000;

chat_render_options small_limit_options() {
  chat_render_options options;
  options.limits.max_output_bytes = small_limit;
  return options;
}

std::string render(const std::string& source) {
  return chat_template::compile(source).render({}, small_limit_options());
}

chat_template_error render_error(const std::string& source) {
  try {
    render(source);
  } catch (const chat_template_error& e) {
    return e;
  }
  ADD_FAILURE() << "expected an error from: " << source;
  return chat_template_error(chat_template_error_kind::render, "", "", 0, 0);
}

/// The render fails with the string-limit error, whose message names the limit.
void expect_string_limit(const std::string& source) {
  SCOPED_TRACE(source);
  chat_template_error e = render_error(source);
  EXPECT_EQ(e.kind(), chat_template_error_kind::limit) << e.what();
  EXPECT_NE(e.message().find("limit of 1000 bytes"), std::string::npos) << e.what();
}

void expect_python_error(const std::string& source, const std::string& type, const std::string& message) {
  SCOPED_TRACE(source);
  chat_template_error e = render_error(source);
  EXPECT_EQ(e.kind(), chat_template_error_kind::render) << e.what();
  EXPECT_EQ(e.python_type(), type);
  EXPECT_EQ(e.message(), message);
}

TEST(ChatTemplateWidthLimits, JustifyMethodsPadLikePythonWithinTheLimit) {
  EXPECT_EQ(render("{{ 'ab'.center(6, '*') }}|{{ 'abc'.center(6, '*') }}|{{ 'ab'.ljust(5, '-') }}|{{ 'ab'.rjust(5) }}|"
                   "{{ 'ab'.center(-3) }}|{{ 'ab'.center(5, 'é') }}"),
            "**ab**|*abc**|ab---|   ab|ab|ééabé");
  EXPECT_EQ(render("{{ 'ab'.center(1000)|length }}{{ 'ab'.ljust(1000)|length }}{{ 'ab'.rjust(1000)|length }}"),
            "100010001000");
  EXPECT_EQ(render("{{ 'ab'.center(500, 'é')|length }}"), "500");  // 998 bytes
}

TEST(ChatTemplateWidthLimits, JustifyMethodsRefuseWidthsPastTheLimit) {
  expect_string_limit("{{ 'ab'.center(1001) }}");
  expect_string_limit("{{ 'ab'.ljust(10**18) }}");
  expect_string_limit("{{ 'ab'.rjust(9223372036854775807, 'x') }}");
  expect_string_limit("{{ 'ab'.center(502, 'é') }}");  // 1002 bytes: the fill's UTF-8 size counts
}

TEST(ChatTemplateWidthLimits, ZfillPadsLikePythonAndRefusesWidthsPastTheLimit) {
  EXPECT_EQ(render("{{ '5'.zfill(3) }}|{{ '-5'.zfill(4) }}|{{ '+x'.zfill(4) }}|{{ 'abc'.zfill(-1) }}"),
            "005|-005|+00x|abc");
  EXPECT_EQ(render("{{ '5'.zfill(1000)|length }}"), "1000");
  expect_string_limit("{{ '5'.zfill(1001) }}");
  expect_string_limit("{{ '5'.zfill(9223372036854775807) }}");
}

TEST(ChatTemplateWidthLimits, ExpandtabsSizesItsResultBeforeBuildingIt) {
  EXPECT_EQ(render("{{ 'a\\tb'.expandtabs(4) }}|{{ 'ab\\tc\\n\\td'.expandtabs(3) }}|{{ 'a\\tb'.expandtabs(0) }}|"
                   "{{ 'a\\tb'.expandtabs(-2) }}|{{ 'a\\tb'.expandtabs() }}"),
            "a   b|ab c\n   d|ab|ab|a       b");
  EXPECT_EQ(render("{{ 'x\\t'.expandtabs(1000)|length }}{{ '\\t\\t'.expandtabs(500)|length }}"), "10001000");
  expect_string_limit("{{ '\\t'.expandtabs(1001) }}");
  expect_string_limit("{{ 'a\\tb'.expandtabs(2147483647) }}");
  expect_string_limit("{{ ('\\t' * 100).expandtabs(11) }}");
  expect_python_error("{{ 'ab'.expandtabs(2**31) }}", "OverflowError", "Python int too large to convert to C int");
}

TEST(ChatTemplateWidthLimits, CenterFilterRefusesWidthsPastTheLimit) {
  EXPECT_EQ(render("{{ 'ab'|center(6) }}|{{ 'ab'|center(-1) }}|{{ 'ab'|center(1000)|length }}"), "  ab  |ab|1000");
  expect_string_limit("{{ 'ab'|center(1001) }}");
  expect_string_limit("{{ 'ab'|center(10**12) }}");
}

TEST(ChatTemplateWidthLimits, IndentFilterSizesAllLinesBeforeBuilding) {
  EXPECT_EQ(render("{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb\\n\\nc'|indent(2, true) }}|"
                   "{{ 'a\\nb\\n\\nc'|indent(2, blank=true) }}|{{ 'a\\nb'|indent('> ') }}|{{ 'a\\nb'|indent(-3) }}"),
            "a\n  b\n\n  c|  a\n  b\n\n  c|a\n  b\n  \n  c|a\n> b|a\nb");
  EXPECT_EQ(render("{{ 'a\\nb'|indent(997)|length }}"), "1000");
  expect_string_limit("{{ 'a\\nb'|indent(998) }}");
  expect_string_limit("{{ 'a'|indent(10**12) }}");
  expect_string_limit("{{ ('x\\n' * 100)|indent(20) }}");        // 99 indented lines
  expect_string_limit("{{ ('x\\n' * 10)|indent('y' * 200) }}");  // a string indent, times the lines
}

TEST(ChatTemplateWidthLimits, TojsonIndentTimesNestingIsBounded) {
  EXPECT_EQ(render("{{ {'a': [1, {'b': 2}]}|tojson(indent=2) }}|{{ [1, 2]|tojson(indent=-1) }}|"
                   "{{ [1]|tojson(indent='\\t') }}"),
            "{\n  \"a\": [\n    1,\n    {\n      \"b\": 2\n    }\n  ]\n}|[\n1,\n2\n]|[\n\t1\n]");
  expect_string_limit("{{ [[[[1]]]]|tojson(indent=300) }}");
  expect_string_limit("{{ [1]|tojson(indent=10**12) }}");
  expect_string_limit("{{ ([1] * 100)|tojson(separators=('x' * 20, ':')) }}");
  expect_string_limit("{{ (['x' * 100] * 100)|tojson }}");
}

TEST(ChatTemplateWidthLimits, FormatSpecWidthsPadLikePythonWithinTheLimit) {
  EXPECT_EQ(render("{{ '{:>5}'.format('x') }}|{{ '{:*^7}'.format('ab') }}|{{ '{:05d}'.format(-3) }}|"
                   "{{ '{:>{}}'.format('x', 4) }}|{{ '{:.3f}'.format(1.5) }}|{{ '{:é<4}'.format(7) }}|"
                   "{{ '{:=+6}'.format(3) }}"),
            "    x|**ab***|-0003|   x|1.500|7ééé|+    3");
  EXPECT_EQ(render("{{ '{:>1000}'.format('x')|length }}{{ '{:^1000}'.format(1.5)|length }}"), "10001000");
}

TEST(ChatTemplateWidthLimits, FormatSpecWidthsAndPrecisionsPastTheLimitAreRefused) {
  expect_string_limit("{{ '{:>1001}'.format('x') }}");
  expect_string_limit("{{ '{:>999999999}'.format('x') }}");
  expect_string_limit("{{ '{:>{}}'.format('x', 10**18) }}");
  expect_string_limit("{{ '{:0999999999d}'.format(5) }}");
  expect_string_limit("{{ '{:.2000f}'.format(1.0) }}");
  expect_string_limit("{{ '{:#.2000g}'.format(1.0) }}");  // '#' keeps the trailing zeros
  expect_string_limit("{{ '{}{}'.format('x' * 600, 'y' * 600) }}");
}

TEST(ChatTemplateWidthLimits, HugeGeneralPrecisionsPrintTheExactDigitsLikePython) {
  const std::string tenth = "0.1000000000000000055511151231257827021181583404541015625";
  EXPECT_EQ(render("{{ '{:.999999999g}'.format(0.1) }}|{{ '{:.900}'.format(0.1) }}|{{ '%.900g' % 0.1 }}"),
            tenth + "|" + tenth + "|" + tenth);
  EXPECT_EQ(render("{{ '{:.99999999999s}'.format('x') }}"), "x");
}

TEST(ChatTemplateWidthLimits, FormatNumbersPast64BitsAreValueErrors) {
  const std::string digits = "Too many decimal digits in format string";
  expect_python_error("{{ '{:>99999999999999999999}'.format('x') }}", "ValueError", digits);
  expect_python_error("{{ '{:.99999999999999999999}'.format('x') }}", "ValueError", digits);
  expect_python_error("{{ '{99999999999999999999}'.format(1) }}", "ValueError", digits);
  expect_python_error("{{ '{0[99999999999999999999]}'.format([1]) }}", "ValueError", digits);
  expect_python_error("{{ '{:.99999999999}'.format(1.0) }}", "ValueError", "precision too big");
  expect_python_error("{{ '{:.99999999999f}'.format(1.0) }}", "ValueError", "precision too big");
}

TEST(ChatTemplateWidthLimits, PercentWidthsPadLikePythonWithinTheLimit) {
  EXPECT_EQ(render("{{ '%5d' % 3 }}|{{ '%-5d|' % 3 }}|{{ '%05d' % -3 }}|{{ '%*d' % (-4, 7) }}|{{ '%.3d' % 7 }}|"
                   "{{ '%*s|' % (-1, '') }}|{{ '%.*f' % (-2, 1.25) }}|{{ '%+.2e' % 12345.678 }}"),
            "    3|3    ||-0003|7   |007| ||1|+1.23e+04");
  EXPECT_EQ(render("{{ ('%1000d' % 3)|length }}{{ ('%.999d' % 3)|length }}{{ ('%*s' % (-1000, 'x'))|length }}"),
            "10009991000");
}

TEST(ChatTemplateWidthLimits, PercentWidthsAndPrecisionsPastTheLimitAreRefused) {
  expect_string_limit("{{ '%1001d' % 3 }}");
  expect_string_limit("{{ '%999999999s' % 'x' }}");
  expect_string_limit("{{ '%.2000d' % 3 }}");
  expect_string_limit("{{ '%.2000f' % 1.0 }}");
  expect_string_limit("{{ '%*d' % (10**18, 3) }}");
  expect_string_limit("{{ '%*d' % (-9223372036854775807 - 1, 3) }}");  // |INT64_MIN| does not fit
  expect_string_limit("{{ ('%s' * 3) % ('x' * 400, 'y' * 400, 'z' * 400) }}");
  expect_python_error("{{ '%99999999999999999999d' % 3 }}", "ValueError", "width too big");
  expect_python_error("{{ '%.99999999999d' % 3 }}", "ValueError", "precision too big");
  expect_python_error("{{ '%.*f' % (10**10, 1.0) }}", "OverflowError", "Python int too large to convert to C int");
}

// Found by fuzz_chat_template: a float past the 64-bit range reached a cast.
TEST(ChatTemplateWidthLimits, PercentDOfHugeOrNonFiniteFloatsIsAnError) {
  EXPECT_EQ(render("{{ '%d' % -7.9 }}"), "-7");
  expect_python_error("{{ '%d' % 57e308 }}", "OverflowError",
                      "%d format: the number is too large for a 64-bit integer");
  expect_python_error("{{ '%d' % 1e19 }}", "OverflowError", "%d format: the number is too large for a 64-bit integer");
}

TEST(ChatTemplateWidthLimits, RepetitionAndBatchFillAreBoundedBeforeAllocation) {
  EXPECT_EQ(render("{{ ('ab' * 500)|length }}|{{ [1]|batch(3, 0)|list }}"), "1000|[[1, 0, 0]]");
  EXPECT_EQ(render("{{ ('' * 10**18)|length }}{{ ([] * 10**18)|length }}{{ ((),) * 0 }}"), "00()");
  expect_string_limit("{{ 'ab' * 501 }}");
  chat_template_error e = render_error("{{ [1]|batch(10**12, 0)|list }}");
  EXPECT_EQ(e.kind(), chat_template_error_kind::limit) << e.what();
  EXPECT_NE(e.message().find("exceeds the limit of"), std::string::npos) << e.what();
}

TEST(ChatTemplateWidthLimits, ContainerTextIsBoundedWhileItIsBuilt) {
  EXPECT_EQ(render("{{ ['ab'] * 3 }}|{{ {'k': ('x',) * 2} }}"), "['ab', 'ab', 'ab']|{'k': ('x', 'x')}");
  // One 900-byte string shared by 100000 items: refused long before 90 MB of text is built.
  expect_string_limit("{% set s = 'x' * 900 %}{{ ([s] * 100000)|string|length }}");
  expect_string_limit("{% set s = 'x' * 900 %}{{ '%s' % ({'k': [s] * 100000},) }}");
  expect_string_limit("{% set s = 'x' * 900 %}{% set ns = namespace(a=s, b=s) %}{{ ns|string|length }}");
}

TEST(ChatTemplateWidthLimits, CountsPast64BitsNeverOverflow) {
  EXPECT_EQ(render("{{ 'abc'|truncate(9223372036854775807) }}"), "abc");
  expect_python_error("{{ [{'a': 1}]|map(attribute='99999999999999999999')|list }}", "OverflowError",
                      "integer 99999999999999999999 does not fit in 64 bits (the template engine's int range)");
}

}  // namespace
}  // namespace troupe::chat_test
