// Every real chat template over every fixture conversation must render
// byte-identically to transformers (renders/<template>.json), and fail with
// the same exception type and message where transformers raised.

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tests/chat/chat_test_support.hpp"

namespace troupe::chat_test {
namespace {

std::vector<std::string> template_names() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(fixture_dir() / "renders"))
    names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

/// Compares one render (or its failure) with the Python reference case.
void expect_matches_reference(const chat_template& tpl, const boost::json::object& context,
                              const boost::json::object& expected, const std::string& label) {
  SCOPED_TRACE(label);
  std::string output;
  try {
    output = tpl.render(context, fixed_clock_options());
  } catch (const chat_template_error& e) {
    if (const auto* error = expected.if_contains("error")) {
      EXPECT_EQ(e.python_type(), std::string(error->at("type").as_string()));
      EXPECT_EQ(e.message(), std::string(error->at("message").as_string()));
    } else {
      ADD_FAILURE() << "unexpected error: " << e.what();
    }
    return;
  }
  if (const auto* error = expected.if_contains("error")) {
    ADD_FAILURE() << "expected " << error->at("type").as_string() << ": " << error->at("message").as_string()
                  << "\nbut rendered: " << output;
    return;
  }
  EXPECT_EQ(output, std::string(expected.at("output").as_string()));
}

class FixtureRender : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureRender, MatchesTransformersOnEveryConversation) {
  const std::string name = GetParam();
  boost::json::object reference = read_json(fixture_dir() / "renders" / (name + ".json")).as_object();
  chat_template tpl = chat_template::compile(read_text(fixture_dir() / "templates" / (name + ".jinja")));
  boost::json::object conversations = conversations_by_name();
  const boost::json::object& tokens = reference.at("special_tokens").as_object();
  const boost::json::array& cases = reference.at("cases").as_array();
  ASSERT_GE(cases.size(), 30u);
  for (const auto& c : cases) {
    std::string conversation(c.at("conversation").as_string());
    boost::json::object context = make_chat_context(inputs_of(conversations.at(conversation).as_object(), tokens));
    expect_matches_reference(tpl, context, c.as_object(), name + " / " + conversation);
  }
}

INSTANTIATE_TEST_SUITE_P(Templates, FixtureRender, ::testing::ValuesIn(template_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string id = info.param;
                           std::replace_if(
                               id.begin(), id.end(),
                               [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
                           return id;
                         });

TEST(FixtureRender, CoversAllSeventeenTemplates) { EXPECT_EQ(template_names().size(), 17u); }

}  // namespace
}  // namespace troupe::chat_test
