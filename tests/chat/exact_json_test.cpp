// parse_json_exact must give the correctly rounded double for every number
// (the reference is std::strtod, which glibc rounds correctly), where
// Boost.JSON 1.81's own parser is off by one ulp for some inputs.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include <boost/json/parse.hpp>

#include "model/chat/exact_json.hpp"

namespace troupe {
namespace {

TEST(ParseJsonExact, DoublesRoundLikeStrtod) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> exponent(-300, 300), mantissa(1, 10);
  for (int i = 0; i < 20000; ++i) {
    double d = mantissa(rng) * std::pow(10.0, std::floor(exponent(rng)));
    char text[64];
    std::snprintf(text, sizeof text, "[%.17g]", d);
    boost::system::error_code ec;
    boost::json::value v = parse_json_exact(text, ec);
    ASSERT_FALSE(ec) << text;
    double expected = std::strtod(text + 1, nullptr);
    ASSERT_EQ(v.as_array().at(0).to_number<double>(), expected) << text;
  }
}

TEST(ParseJsonExact, BuildsTheSameStructureAsBoost) {
  const char* text = R"({"a": [1, -2, 18446744073709551615, 1.5, "é\n", true, null, {"k": {}}], "b": ""})";
  boost::system::error_code ec;
  boost::json::value v = parse_json_exact(text, ec);
  ASSERT_FALSE(ec);
  EXPECT_EQ(v, boost::json::parse(text));
}

TEST(ParseJsonExact, ReportsErrors) {
  boost::system::error_code ec;
  parse_json_exact("{\"a\": [1, 2}", ec);
  EXPECT_TRUE(ec);
  ec.clear();
  parse_json_exact("[1] trailing", ec);
  EXPECT_TRUE(ec);
  ec.clear();
  parse_json_exact("\"bad \xff utf8\"", ec);
  EXPECT_TRUE(ec);
  ec.clear();
  parse_json_exact(std::string(1000, '[') + std::string(1000, ']'), ec);
  EXPECT_TRUE(ec);
}

}  // namespace
}  // namespace troupe
