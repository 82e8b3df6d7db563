// The path-tracking JSON reader: what each read accepts, the path it
// reports, and that the failure reaches the caller's rules with every fact
// the caller words its error from.

#include <gtest/gtest.h>

#include <array>
#include <boost/json/parse.hpp>
#include <stdexcept>
#include <string>

#include "base/json_field.hpp"

namespace troupe {
namespace {

/// A failure as the rules saw it, with its views copied.
struct recorded_failure {
  json_problem problem;
  std::string path;
  std::string value;  ///< the value's JSON type name, "" when none
  std::string expected;
  std::string range;
  std::string key;
  std::string member_path;
  std::size_t limit;
  std::string message;
};

/// Rules that throw what they were given, so tests can inspect it.
class recording_rules final : public json_rules {
 public:
  [[noreturn]] void raise(const json_failure& failure) const override {
    throw recorded_failure{failure.problem,
                           std::string(failure.path),
                           failure.value ? std::string(json_type_name(*failure.value)) : std::string(),
                           std::string(expected_phrase(failure)),
                           std::string(failure.range),
                           std::string(failure.key),
                           std::string(failure.member_path),
                           failure.limit,
                           std::string(failure.message)};
  }
};

template <typename Read>
recorded_failure failure_of(Read read) {
  try {
    read();
  } catch (const recorded_failure& failure) {
    return failure;
  }
  ADD_FAILURE() << "the read succeeded";
  return {};
}

class JsonField : public ::testing::Test {
 protected:
  json_field root(const char* json) {
    document_ = boost::json::parse(json);
    return json_field(document_, rules_);
  }
  recording_rules rules_;
  boost::json::value document_;
};

TEST_F(JsonField, ReadsTypedMembersAndTreatsNullAsAbsent) {
  const json_field doc = root(R"({"b": true, "i": 7, "n": 0.5, "s": "x", "o": {"k": 1}, "a": [1, 2], "z": null})");
  EXPECT_EQ(doc.get_bool("b"), true);
  EXPECT_EQ(doc.get_int("i"), 7);
  EXPECT_EQ(doc.get_number("n"), 0.5);
  EXPECT_EQ(doc.get_number("i"), 7.0);
  EXPECT_EQ(doc.get_string("s"), "x");
  EXPECT_EQ(doc.get_object("o")->get_int("k"), 1);
  EXPECT_EQ(doc.get_array("a")->array().size(), 2u);
  EXPECT_FALSE(doc.get_int("z"));
  EXPECT_FALSE(doc.find("z"));
  EXPECT_FALSE(doc.has("absent"));
  EXPECT_TRUE(doc.has("s"));
  EXPECT_TRUE(doc.at("z").value().is_null());  // present: at() reads null unless the rules say otherwise
}

TEST_F(JsonField, PathsNameMembersAndElements) {
  const json_field doc = root(R"({"a": {"b": [0, 1, 2, {"c": "deep"}]}})");
  const json_field c = doc.at("a").at("b").at(std::size_t{3}).at("c");
  EXPECT_EQ(c.path(), "a.b[3].c");
  EXPECT_EQ(c.string(), "deep");
  EXPECT_EQ(doc.child_path("a"), "a");
  EXPECT_EQ(doc.at("a").child_path("x"), "a.x");
  EXPECT_EQ(json_field(document_, rules_, "messages[2]").child_path("role"), "messages[2].role");
}

TEST_F(JsonField, WrongTypeNamesWhatWasExpected) {
  const json_field doc = root(R"({"s": 5, "o": [1]})");
  const recorded_failure failure = failure_of([&] { doc.get_string("s"); });
  EXPECT_EQ(failure.problem, json_problem::wrong_type);
  EXPECT_EQ(failure.path, "s");
  EXPECT_EQ(failure.value, "integer");
  EXPECT_EQ(failure.expected, "a string");
  EXPECT_EQ(failure_of([&] { doc.get_object("o"); }).expected, "an object");
  EXPECT_EQ(failure_of([&] { doc.at("o").boolean(); }).expected, "a boolean");
  EXPECT_EQ(failure_of([&] { doc.at("o").fail_type("a list of names"); }).expected, "a list of names");
  EXPECT_EQ(failure_of([&] { doc.at("o").find("k"); }).expected, "an object");  // members need an object
}

TEST_F(JsonField, IntegersAreCheckedAgainstTheirRange) {
  const json_field doc = root(R"({"i": 11, "f": 2.0, "big": 18446744073709551615, "neg": -3})");
  EXPECT_EQ(doc.get_int("i", 0, 11), 11);
  recorded_failure failure = failure_of([&] { doc.get_int("i", 0, 10); });
  EXPECT_EQ(failure.problem, json_problem::out_of_range);
  EXPECT_EQ(failure.range, "[0, 10]");
  EXPECT_EQ(failure.expected, "an integer");
  EXPECT_EQ(failure_of([&] { doc.get_int("big"); }).problem, json_problem::out_of_range);
  EXPECT_EQ(failure_of([&] { doc.get_int("neg", 0, 5); }).range, "[0, 5]");
  EXPECT_EQ(failure_of([&] { doc.get_int("f"); }).problem, json_problem::wrong_type);
}

TEST_F(JsonField, IntegralDoublesAreIntegersWhenTheRulesSaySo) {
  rules_.integral_doubles = true;
  const json_field doc = root(R"({"f": 2.0, "half": 2.5, "s": "2"})");
  EXPECT_EQ(doc.get_int("f", 0, 5), 2);
  EXPECT_EQ(failure_of([&] { doc.get_int("half", 0, 5); }).problem, json_problem::out_of_range);
  EXPECT_EQ(failure_of([&] { doc.get_int("s", 0, 5); }).problem, json_problem::wrong_type);
}

TEST_F(JsonField, NumbersAreCheckedAgainstTheirRange) {
  const json_field doc = root(R"({"t": 2.5, "p": 0})");
  EXPECT_EQ(doc.get_number("t", 0.0, 2.5), 2.5);
  EXPECT_EQ(failure_of([&] { doc.get_number("t", 0.0, 2.0); }).range, "[0, 2]");
  const recorded_failure failure = failure_of([&] { doc.get_number("p", 0.0, 0.5, true); });
  EXPECT_EQ(failure.range, "(0, 0.5]");
  EXPECT_EQ(failure.expected, "a number");
}

TEST_F(JsonField, StringsAreCheckedAgainstTheirLength) {
  const json_field doc = root(R"({"s": "abcd"})");
  EXPECT_EQ(doc.get_string("s", 4), "abcd");
  const recorded_failure failure = failure_of([&] { doc.get_string("s", 3); });
  EXPECT_EQ(failure.problem, json_problem::too_long);
  EXPECT_EQ(failure.limit, 3u);
}

TEST_F(JsonField, MissingMembersAndElements) {
  const json_field doc = root(R"({"o": {"z": null}, "a": [1]})");
  recorded_failure failure = failure_of([&] { doc.at("o").at("k"); });
  EXPECT_EQ(failure.problem, json_problem::missing);
  EXPECT_EQ(failure.path, "o");
  EXPECT_EQ(failure.key, "k");
  EXPECT_EQ(failure.member_path, "o.k");
  failure = failure_of([&] { doc.at("a").at(std::size_t{1}); });
  EXPECT_EQ(failure.problem, json_problem::no_element);
  EXPECT_EQ(failure.path, "a");
  EXPECT_EQ(failure.limit, 1u);
  rules_.null_is_absent = true;
  EXPECT_EQ(failure_of([&] { doc.at("o").at("z"); }).member_path, "o.z");
}

TEST_F(JsonField, UnknownMembersAreRejected) {
  const json_field doc = root(R"({"known": 1, "typo": 2})");
  static constexpr std::array<std::string_view, 1> known = {"known"};
  const recorded_failure failure = failure_of([&] { doc.reject_unknown(known); });
  EXPECT_EQ(failure.problem, json_problem::unknown_member);
  EXPECT_EQ(failure.member_path, "typo");
  EXPECT_EQ(failure.value, "integer");
}

TEST_F(JsonField, CallersFailWithTheirOwnMessages) {
  const json_field doc = root(R"({"o": {"k": 1}})");
  recorded_failure failure = failure_of([&] { doc.at("o").fail("is odd"); });
  EXPECT_EQ(failure.problem, json_problem::custom);
  EXPECT_EQ(failure.path, "o");
  EXPECT_EQ(failure.message, "is odd");
  failure = failure_of([&] { doc.at("o").fail("k", "is odd too"); });
  EXPECT_EQ(failure.path, "o.k");
  EXPECT_EQ(failure.value, "integer");
  EXPECT_EQ(failure.message, "is odd too");
  EXPECT_EQ(failure_of([&] { doc.fail("absent", "is needed"); }).value, "");
}

TEST_F(JsonField, ClientKeysAreShortenedInPaths) {
  rules_.max_key_bytes = 4;
  const json_field doc = root(R"({"a": 1})");
  EXPECT_EQ(doc.child_path("abcdefgh"), "abcd...");
  EXPECT_EQ(doc.child_path("abc\xC3\xA9x"), "abc...");  // never inside a character
  EXPECT_EQ(doc.child_path("abc"), "abc");
}

std::string words_for_test(const json_failure& failure) {
  return std::string(failure.path) + " is " + std::string(json_kind_phrase(failure.expected)) + "?";
}

TEST(FileJsonRules, NameTheFileInTheCallersWords) {
  const file_json_rules rules("config.json", words_for_test);
  const boost::json::value document = boost::json::parse(R"({"a": [true]})");
  try {
    json_field(document, rules).at("a").at(std::size_t{0}).string();
    FAIL() << "the read succeeded";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "config.json: a[0] is a string?");
  }
}

TEST(JsonTypes, NamesAndIntegers) {
  EXPECT_EQ(json_type_name(boost::json::parse("null")), "null");
  EXPECT_EQ(json_type_name(boost::json::parse("true")), "boolean");
  EXPECT_EQ(json_type_name(boost::json::parse("1")), "integer");
  EXPECT_EQ(json_type_name(boost::json::parse("18446744073709551615")), "integer");
  EXPECT_EQ(json_type_name(boost::json::parse("1.5")), "number");
  EXPECT_EQ(json_type_name(boost::json::parse("\"s\"")), "string");
  EXPECT_EQ(json_type_name(boost::json::parse("[]")), "array");
  EXPECT_EQ(json_type_name(boost::json::parse("{}")), "object");
  EXPECT_EQ(json_integer(boost::json::parse("-4")), -4);
  EXPECT_EQ(json_integer(boost::json::parse("9223372036854775807")), INT64_MAX);
  EXPECT_EQ(json_integer(boost::json::parse("9223372036854775808")), std::nullopt);
  EXPECT_EQ(json_integer(boost::json::parse("3.0")), std::nullopt);
  EXPECT_EQ(json_integer(boost::json::parse("3.0"), true), 3);
  EXPECT_EQ(json_integer(boost::json::parse("3.5"), true), std::nullopt);
  EXPECT_EQ(json_integer(boost::json::parse("1e19"), true), std::nullopt);
  EXPECT_EQ(json_integer(boost::json::parse("\"3\""), true), std::nullopt);
}

}  // namespace
}  // namespace troupe
