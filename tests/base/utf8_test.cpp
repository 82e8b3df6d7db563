// The UTF-8 codec on well-formed and hostile input: overlongs, surrogates,
// sequences cut short, code points above U+10FFFF and bytes that start
// nothing. Each caller picks its behaviour on ill-formed text: reject it
// (find_invalid_utf8), decode it leniently (decode_utf8), or repair it per
// subpart (the tokenizer) or per byte (the HTTP layer).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/utf8.hpp"

namespace troupe {
namespace {

const std::string replacement = "\xEF\xBF\xBD";

std::string replacements(std::size_t count) {
  std::string out;
  for (std::size_t i = 0; i < count; ++i) out += replacement;
  return out;
}

/// One hostile sequence and what every reading of it gives.
struct hostile_case {
  const char* name;
  std::string bytes;
  std::u32string lenient;     ///< decode_utf8 / to_code_points
  std::size_t subparts;       ///< U+FFFDs of utf8_lossy per subpart
  std::size_t invalid_bytes;  ///< U+FFFDs of utf8_lossy per byte
};

const std::vector<hostile_case>& hostile_cases() {
  static const std::vector<hostile_case> cases = {
      {"overlong NUL", "\xC0\x80", {0}, 2, 2},
      {"overlong slash", "\xE0\x80\xAF", {0x2F}, 3, 3},
      {"overlong four bytes", "\xF0\x80\x80\xAF", {0x2F}, 4, 4},
      {"high surrogate", "\xED\xA0\x80", {0xD800}, 3, 3},
      {"low surrogate", "\xED\xBF\xBF", {0xDFFF}, 3, 3},
      {"above U+10FFFF", "\xF4\x90\x80\x80", {0x110000}, 4, 4},
      {"lead F5", "\xF5\x80\x80\x80", {0x140000}, 4, 4},
      {"lead F8", "\xF8\x88\x80\x80\x80", {0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD}, 5, 5},
      {"lone continuation", "\x80", {0xFFFD}, 1, 1},
      {"lone FF", "\xFF", {0xFFFD}, 1, 1},
      {"cut short at the end", "\xE2\x82", {0xFFFD, 0xFFFD}, 1, 2},
      {"cut short four bytes", "\xF0\x9F\x98", {0xFFFD, 0xFFFD, 0xFFFD}, 1, 3},
  };
  return cases;
}

TEST(Utf8Hostile, IsRejectedAtItsFirstByte) {
  for (const hostile_case& c : hostile_cases()) {
    EXPECT_EQ(find_invalid_utf8("ok" + c.bytes), 2u) << c.name;
    EXPECT_FALSE(is_valid_utf8(c.bytes)) << c.name;
  }
}

TEST(Utf8Hostile, DecodesLenientlyAsWritten) {
  for (const hostile_case& c : hostile_cases()) EXPECT_EQ(to_code_points(c.bytes), c.lenient) << c.name;
}

TEST(Utf8Hostile, RepairsPerSubpartOrPerByte) {
  for (const hostile_case& c : hostile_cases()) {
    EXPECT_EQ(utf8_lossy(c.bytes), replacements(c.subparts)) << c.name;
    EXPECT_EQ(utf8_lossy(c.bytes, utf8_repair::per_byte), replacements(c.invalid_bytes)) << c.name;
  }
}

TEST(Utf8Hostile, SubpartsAreMaximal) {
  // E2 82 is one subpart (a valid prefix), then 'z'; F0 9F 98 then 'x'.
  EXPECT_EQ(utf8_lossy("\xE2\x82z"), replacement + "z");
  EXPECT_EQ(utf8_lossy("\xE2\x82z", utf8_repair::per_byte), replacements(2) + "z");
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98x"), replacement + "x");
  EXPECT_EQ(utf8_lossy("a\xC3\xA9\xFF\xC3\xA9"), "a\xC3\xA9" + replacement + "\xC3\xA9");
}

TEST(Utf8Valid, FindsNothingInWellFormedText) {
  EXPECT_EQ(find_invalid_utf8(""), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("plain ASCII longer than eight bytes"), std::nullopt);
  EXPECT_EQ(find_invalid_utf8("\x7F\xC2\x80\xDF\xBF\xE0\xA0\x80\xEF\xBF\xBF\xF0\x90\x80\x80\xF4\x8F\xBF\xBF"),
            std::nullopt);
  EXPECT_EQ(find_invalid_utf8("eight ok\xC3"), 8u);  // after the ASCII fast path
}

TEST(Utf8Valid, DecodesAndEncodesEveryLength) {
  const std::u32string code_points = {U'a', 0x7F, 0x80, 0x7FF, 0x800, 0xFFFF, 0x10000, 0x10FFFF};
  const std::string text = to_utf8(code_points);
  EXPECT_EQ(text, "a\x7F\xC2\x80\xDF\xBF\xE0\xA0\x80\xEF\xBF\xBF\xF0\x90\x80\x80\xF4\x8F\xBF\xBF");
  EXPECT_EQ(to_code_points(text), code_points);
  EXPECT_EQ(code_point_count(text), code_points.size());
  std::size_t pos = 1;
  EXPECT_EQ(decode_utf8(text, pos), U'\x7F');
  EXPECT_EQ(pos, 2u);
  EXPECT_EQ(decode_utf8(text, pos), U'\x80');
  EXPECT_EQ(pos, 4u);
}

TEST(Utf8Valid, SurrogatesRoundTripAsPythonWritesThem) {
  std::string text;
  append_utf8(text, 0xD800);  // Python's chr(0xD800)
  EXPECT_EQ(text, "\xED\xA0\x80");
  EXPECT_EQ(to_code_points(text), std::u32string(1, 0xD800));
}

TEST(Utf8Valid, LengthsAndAscii) {
  EXPECT_EQ(utf8_length('a'), 1u);
  EXPECT_EQ(utf8_length(0x80), 1u);
  EXPECT_EQ(utf8_length(0xC3), 2u);
  EXPECT_EQ(utf8_length(0xE2), 3u);
  EXPECT_EQ(utf8_length(0xF0), 4u);
  EXPECT_TRUE(is_ascii("abc\x7F"));
  EXPECT_FALSE(is_ascii("ab\xC3\xA9"));
}

TEST(Utf8Stream, HoldsBackOnlyWhatMoreBytesCouldComplete) {
  std::string out;
  EXPECT_EQ(utf8_lossy_stream("ab\xE2\x82", out), 2u);
  EXPECT_EQ(out, "ab");
  out.clear();
  EXPECT_EQ(utf8_lossy_stream("a\xFF\xE2\x82\xAC", out), 5u);
  EXPECT_EQ(out, "a" + replacement + "\xE2\x82\xAC");
  out.clear();
  EXPECT_EQ(utf8_lossy_stream("\xE2\x82z", out), 3u);  // 'z' ends the sequence: it cannot complete
  EXPECT_EQ(out, replacement + "z");
}

TEST(Utf8Repair, SanitizeAndTruncateKeepValidCharacters) {
  EXPECT_EQ(utf8_lossy("a\xC3\xA9z", utf8_repair::per_byte), "a\xC3\xA9z");
  EXPECT_EQ(utf8_lossy("a\xFFz", utf8_repair::per_byte), "a\xEF\xBF\xBDz");
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80", utf8_repair::per_byte), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98\x80", utf8_repair::per_byte), "\xF0\x9F\x98\x80");
  EXPECT_EQ(truncate_utf8("\xC3\xA9\xC3\xA9\xC3\xA9", 3), "\xC3\xA9...");
  EXPECT_EQ(truncate_utf8("short", 10), "short");
}

TEST(Utf8Repair, TruncateRepairsFirstAndNeverCutsACharacter) {
  EXPECT_EQ(truncate_utf8("\xFF\xFF", 10), replacements(2));
  EXPECT_EQ(truncate_utf8("ab\xE2\x82\xAC", 4), "ab...");
  EXPECT_EQ(truncate_utf8("abc", 0), "...");
}

}  // namespace
}  // namespace troupe
