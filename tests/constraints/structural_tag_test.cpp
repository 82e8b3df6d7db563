// structural_tag: the forced tool-call format of every family
// (forced_tool_call_format) compiled as a structural tag. Random walks under
// the mask end in text the family's tool_call_parser reads as calls (and
// nothing else) whose arguments satisfy the tool's parameters schema;
// hand-written calls are accepted token by token; bad tags fail.

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "constraint_test_support.hpp"
#include "model/chat/tool_call_schema.hpp"
#include "schema_checker.hpp"

namespace troupe::constraints::testing {
namespace {

const boost::json::array& tools() {
  static const boost::json::array list = boost::json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
      "city": {"type": "string", "maxLength": 12}, "days": {"type": "integer", "minimum": 1, "maximum": 7},
      "unit": {"enum": ["C", "F"]}}, "required": ["city"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {
      "zone": {"type": "string", "format": "date"}, "exact": {"type": "boolean"}},
      "required": ["zone", "exact"]}}},
    {"type": "function", "function": {"name": "book", "parameters": {"type": "object",
      "$defs": {"seat": {"enum": ["A1", "B2"]}}, "properties": {"seat": {"$ref": "#/$defs/seat"}},
      "required": ["seat"]}}},
    {"type": "function", "function": {"name": "noop"}}])")
                                             .as_array();
  return list;
}

const boost::json::value& parameters_of(const std::string& name) {
  static const boost::json::value any = boost::json::object{{"type", "object"}};
  for (const auto& tool : tools()) {
    const auto& function = tool.at("function").as_object();
    if (function.at("name") == boost::json::value(name)) {
      const auto* parameters = function.if_contains("parameters");
      return parameters != nullptr ? *parameters : any;
    }
  }
  ADD_FAILURE() << "no tool " << name;
  return any;
}

struct family_case {
  tool_call_family family;
  std::string vocab;  // the fixture tokenizer of a model of that family
};

const std::vector<family_case>& families() {
  static const std::vector<family_case> cases = {{tool_call_family::llama3_json, "llama3_1"},
                                                 {tool_call_family::hermes, "qwen3"},
                                                 {tool_call_family::mistral, "mistral_spm"},
                                                 {tool_call_family::deepseek_v3, "deepseek_v3"}};
  return cases;
}

/// Empty when `text` parses as calls only, each allowed by `choice` and
/// valid under its tool's parameters; else what is wrong.
std::string call_problem(tool_call_family family, const std::string& text, const tool_choice& choice, bool parallel) {
  const parsed_tool_calls parsed = parse_tool_calls(family, text);
  if (!parsed.content.empty()) return "content '" + parsed.content + "'";
  if (parsed.calls.empty()) return "no call";
  if (!parallel && parsed.calls.size() != 1) return "several calls without parallel_tool_calls";
  for (const tool_call_event& call : parsed.calls) {
    if (choice.kind == tool_choice::mode::named && call.name != choice.function) return "called " + call.name;
    const boost::json::value& schema = parameters_of(call.name);
    const std::string violation = schema_violation(boost::json::parse(call.arguments), schema, schema);
    if (!violation.empty()) return call.name + " arguments violate the schema at " + violation;
  }
  return "";
}

TEST(StructuralTagConstraint, RandomWalksEndInValidToolCalls) {
  const std::vector<tool_choice> choices = {{tool_choice::mode::required, {}}, {tool_choice::mode::named, "get_time"}};
  for (const family_case& c : families()) {
    const auto& fixture = load_vocabulary(c.vocab);
    for (const tool_choice& choice : choices) {
      for (const bool parallel : {false, true}) {
        const std::string tag = structural_tag_json(forced_tool_call_format(tools(), choice, c.family, parallel));
        const auto compiled = shared_compiler(c.vocab).compile({constraint_kind::structural_tag, tag});
        int completed = 0;
        for (std::uint32_t seed = 0; seed < 6; ++seed) {
          const auto walk = random_walk(*compiled, fixture.vocab, {.seed = seed, .steps = 40});
          const std::string where = std::string(tool_call_family_name(c.family)) + " seed " + std::to_string(seed);
          ASSERT_TRUE(walk.failure.empty()) << where << ": " << walk.failure;
          if (!walk.completed) continue;
          ++completed;
          EXPECT_EQ(call_problem(c.family, walk.text, choice, parallel), "") << where << ": " << walk.text;
        }
        EXPECT_GE(completed, 4) << tool_call_family_name(c.family);
      }
    }
  }
}

TEST(StructuralTagConstraint, CallsInTheFamilyFormatAreAcceptedTokenByToken) {
  const tool_choice required{tool_choice::mode::required, {}};
  const std::vector<std::tuple<family_case, std::string, bool>> documents = {
      {families()[0], R"({"name": "get_weather", "parameters": {"city": "Paris", "days": 3}})", true},
      {families()[0], R"({"name": "noop", "parameters": {}}; {"name": "get_weather", "parameters": {"city": "Rome"}})",
       true},
      {families()[1], "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
       false},
      {families()[1], "<tool_call>\n{\"name\": \"book\", \"arguments\": {\"seat\": \"B2\"}}\n</tool_call>", false},
      {families()[1],
       "<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
       "\"arguments\": {\"zone\": \"2024-01-31\", \"exact\": true}}\n</tool_call>",
       true},
      // SentencePiece adds a leading space to a text tokenised alone: this one goes through Llama's.
      {{tool_call_family::mistral, "llama3_1"},
       R"([{"name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}}, {"name": "noop", "arguments": {}}])",
       true},
      {families()[3],
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": "
       "\"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       false},
  };
  for (const auto& [c, document, parallel] : documents) {
    ASSERT_EQ(call_problem(c.family, document, required, parallel), "") << document;
    const std::string tag = structural_tag_json(forced_tool_call_format(tools(), required, c.family, parallel));
    const auto compiled = shared_compiler(c.vocab).compile({constraint_kind::structural_tag, tag});
    EXPECT_EQ(feed_document(*compiled, load_vocabulary(c.vocab), document), "") << document;
  }
}

TEST(StructuralTagConstraint, TextOutsideTheStructuresIsRefused) {
  const auto& fixture = load_vocabulary("qwen3");
  const tool_choice named{tool_choice::mode::named, "get_weather"};
  const std::string one = structural_tag_json(forced_tool_call_format(tools(), named, tool_call_family::hermes, false));
  const auto compiled = shared_compiler("qwen3").compile({constraint_kind::structural_tag, one});
  const std::string call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  EXPECT_EQ(feed_document(*compiled, fixture, call), "");
  for (const std::string& document : std::vector<std::string>{
           "Sure! " + call, call + "\n" + call, call + " done",
           "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"2024-01-31\", \"exact\": "
           "true}}\n</tool_call>",
           "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"x\": 1}}\n</tool_call>",
           "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"}) {
    EXPECT_NE(feed_document(*compiled, fixture, document), "") << document;
  }
}

TEST(StructuralTagConstraint, BadOrHostileTagsFailNamingTheField) {
  auto& compiler = shared_compiler("llama3_1");
  std::string many = R"({"structures": [{"begin": "<a>", "end": "</a>", "schema": {"type": "object", "properties": {)";
  for (int i = 0; i < 10000; ++i)
    many += (i ? "," : "") + std::string("\"p") + std::to_string(i) + R"(": {"type": "string"}})";
  many += "}}}]}";
  for (const std::string& tag :
       {many, std::string(R"({"structures": []})"), std::string(R"({"structures": [{"begin": "a", "end": "b"}]})"),
        std::string(R"({"structures": [{"begin": 1, "schema": {}, "end": ""}]})"),
        std::string(R"({"structures": [{"schema": {"not": {}}}]})"),
        std::string(R"({"structures": [{"schema": {"$ref": "#"}}]})"),
        std::string(R"({"structures": [{"schema": {}}], "extra": 1})"), std::string("[")}) {
    try {
      compiler.compile({constraint_kind::structural_tag, tag});
      ADD_FAILURE() << tag.substr(0, 80) << " compiled";
    } catch (const constraint_error& error) {
      EXPECT_EQ(error.field(), "structured_outputs.structural_tag") << tag.substr(0, 80);
    }
  }
}

}  // namespace
}  // namespace troupe::constraints::testing
