// Single-feature templates (snippets.json) rendered by transformers' own
// sandboxed jinja2 environment: whitespace control, literals, operators,
// undefined semantics, statements, filters, tests, methods, globals and
// syntax errors. Each must give the same text, or the same exception type
// and message.

#include <gtest/gtest.h>

#include "tests/chat/chat_test_support.hpp"

namespace troupe::chat_test {
namespace {

struct snippet_outcome {
  bool failed = false;
  std::string text;  ///< output, or "<type>: <message>"
};

snippet_outcome run_snippet(const boost::json::object& snippet) {
  snippet_outcome out;
  try {
    chat_template tpl = chat_template::compile(std::string(snippet.at("template").as_string()));
    out.text = tpl.render(snippet.at("context").as_object(), fixed_clock_options());
  } catch (const chat_template_error& e) {
    out.failed = true;
    out.text = e.python_type() + ": " + e.message();
  }
  return out;
}

class ChatTemplateSnippet : public ::testing::TestWithParam<std::size_t> {
 public:
  static const boost::json::array& all() {
    static const boost::json::array snippets = read_json(fixture_dir() / "snippets.json").as_array();
    return snippets;
  }
};

TEST_P(ChatTemplateSnippet, MatchesPythonReference) {
  const boost::json::object& s = all().at(GetParam()).as_object();
  SCOPED_TRACE(std::string(s.at("name").as_string()) + ": " + std::string(s.at("template").as_string()));
  snippet_outcome got = run_snippet(s);
  if (const auto* error = s.if_contains("error")) {
    std::string expected =
        std::string(error->at("type").as_string()) + ": " + std::string(error->at("message").as_string());
    EXPECT_TRUE(got.failed) << "rendered: " << got.text;
    EXPECT_EQ(got.text, expected);
  } else {
    EXPECT_FALSE(got.failed) << got.text;
    EXPECT_EQ(got.text, std::string(s.at("output").as_string()));
  }
}

std::vector<std::size_t> snippet_indices() {
  std::vector<std::size_t> indices(ChatTemplateSnippet::all().size());
  for (std::size_t i = 0; i < indices.size(); ++i) indices[i] = i;
  return indices;
}

INSTANTIATE_TEST_SUITE_P(Python, ChatTemplateSnippet, ::testing::ValuesIn(snippet_indices()),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return std::string(ChatTemplateSnippet::all().at(info.param).at("name").as_string());
                         });

}  // namespace
}  // namespace troupe::chat_test
