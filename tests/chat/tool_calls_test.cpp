// Tool-call parsers: complete outputs, every split of them streamed,
// malformed calls falling back to content, parallel calls, detection of the
// family from the fixture templates.

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "model/chat/tool_calls.hpp"

namespace troupe {
namespace {

struct call {
  int index;
  std::string name;
  std::string arguments;
  bool operator==(const call&) const = default;
};

struct outcome {
  std::string content;
  std::vector<call> calls;
  bool operator==(const outcome&) const = default;
};

void collect(const std::vector<tool_call_event>& events, outcome& out) {
  for (const tool_call_event& event : events) {
    if (event.index < 0) {
      EXPECT_FALSE(event.text.empty()) << "empty content events are never reported";
      out.content += event.text;
    } else {
      out.calls.push_back({event.index, event.name, event.arguments});
    }
  }
}

outcome complete(tool_call_family family, std::string_view text) {
  const parsed_tool_calls parsed = parse_tool_calls(family, text);
  outcome out{parsed.content, {}};
  collect(parsed.calls, out);
  return out;
}

/// Feeds `text` cut at each of `cuts` (ascending offsets).
outcome streamed(tool_call_family family, std::string_view text, const std::vector<std::size_t>& cuts) {
  tool_call_parser parser(family);
  outcome out;
  std::size_t from = 0;
  for (const std::size_t cut : cuts) {
    collect(parser.feed(text.substr(from, cut - from)), out);
    from = cut;
  }
  collect(parser.feed(text.substr(from)), out);
  collect(parser.finish(), out);
  return out;
}

/// Complete parsing, byte-by-byte streaming and every two-piece split agree.
outcome parse_every_way(tool_call_family family, std::string_view text) {
  const outcome whole = complete(family, text);
  std::vector<std::size_t> every_byte;
  for (std::size_t i = 1; i < text.size(); ++i) every_byte.push_back(i);
  EXPECT_EQ(streamed(family, text, every_byte), whole) << "byte by byte: " << text;
  for (std::size_t i = 1; i < text.size(); ++i) {
    EXPECT_EQ(streamed(family, text, {i}), whole) << "split at " << i << ": " << text;
  }
  return whole;
}

const std::string weather_args = R"({"city": "Paris", "days": 3})";
const std::string time_args = R"({"zone": "CET"})";

TEST(ToolCallParser, LlamaSingleCall) {
  const outcome out = parse_every_way(tool_call_family::llama3_json,
                                      R"({"name": "get_weather", "parameters": {"city":"Paris","days":3}})");
  EXPECT_EQ(out.content, "");
  EXPECT_EQ(out.calls, (std::vector<call>{{0, "get_weather", weather_args}}));
}

TEST(ToolCallParser, LlamaPythonTagAndParallelCalls) {
  const outcome out = parse_every_way(
      tool_call_family::llama3_json,
      "\n<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 3}}; "
      "{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}");
  EXPECT_EQ(out.content, "");
  EXPECT_EQ(out.calls, (std::vector<call>{{0, "get_weather", weather_args}, {1, "get_time", time_args}}));
}

TEST(ToolCallParser, LlamaJsonInsideTextIsContent) {
  const std::string text = R"(Call it like {"name": "get_weather", "parameters": {}} please)";
  EXPECT_EQ(parse_every_way(tool_call_family::llama3_json, text), (outcome{text, {}}));
}

TEST(ToolCallParser, LlamaObjectsThatAreNotCallsAreContent) {
  for (const std::string text : {R"({"city": "Paris"})", R"({"name": "f"})", R"({"name": 3, "parameters": {}})",
                                 R"({"name": "f", "parameters": [1]})", R"({"name": "f", "parameters": {"a": })",
                                 R"({"name": "get_weather", "parameters": {"city": "Par)", "<|python_tag|>print(1)"}) {
    EXPECT_EQ(parse_every_way(tool_call_family::llama3_json, text), (outcome{text, {}})) << text;
  }
}

TEST(ToolCallParser, LlamaTextAfterACallIsContent) {
  const outcome out = parse_every_way(tool_call_family::llama3_json,
                                      R"({"name": "get_time", "parameters": {"zone": "CET"}} and then {"x": 1})");
  EXPECT_EQ(out.content, R"( and then {"x": 1})");
  EXPECT_EQ(out.calls, (std::vector<call>{{0, "get_time", time_args}}));
}

TEST(ToolCallParser, HermesContentAndParallelCalls) {
  const outcome out = parse_every_way(tool_call_family::hermes,
                                      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                      "{\"city\": \"Paris\", \"days\": 3}}\n</tool_call>\n<tool_call>\n{\"name\": "
                                      "\"get_time\", \"arguments\": {\"zone\": \"CET\"}}\n</tool_call>");
  EXPECT_EQ(out.content, "Let me check.\n");
  EXPECT_EQ(out.calls, (std::vector<call>{{0, "get_weather", weather_args}, {1, "get_time", time_args}}));
}

TEST(ToolCallParser, HermesMalformedCallIsContentAndLaterCallsStillParse) {
  const std::string bad = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call>";
  const std::string good = "<tool_call>{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}</tool_call>";
  const outcome out = parse_every_way(tool_call_family::hermes, bad + " then " + good);
  EXPECT_EQ(out.content, bad + " then ");
  EXPECT_EQ(out.calls, (std::vector<call>{{0, "get_time", time_args}}));
}

TEST(ToolCallParser, HermesUnclosedTags) {
  // A complete call whose close tag never came (generation stopped) is still a call.
  const outcome closed_by_end =
      parse_every_way(tool_call_family::hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n");
  EXPECT_EQ(closed_by_end, (outcome{"", {{0, "f", "{}"}}}));
  for (const std::string text :
       {"<tool_call>\n{\"name\": \"f\", \"argu", "a <tool_ca", "<tool_call>", "x</tool_call>"}) {
    EXPECT_EQ(parse_every_way(tool_call_family::hermes, text), (outcome{text, {}})) << text;
  }
}

TEST(ToolCallParser, HermesKeepsUnicodeAndNumbersAsJsonDumpsWrites) {
  const outcome out = parse_every_way(tool_call_family::hermes,
                                      "<tool_call>{\"name\": \"set\", \"arguments\": {\"city\": \"Z\\u00fcrich\", "
                                      "\"t\": 0.1, \"n\": [1,2]}}</tool_call>");
  EXPECT_EQ(out.calls, (std::vector<call>{{0, "set", "{\"city\": \"Zürich\", \"t\": 0.1, \"n\": [1, 2]}"}}));
}

TEST(ToolCallParser, MistralParallelCalls) {
  const outcome out = parse_every_way(
      tool_call_family::mistral,
      "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}, \"id\": "
      "\"abcDEF123\"}, {\"name\": \"get_time\", \"arguments\": \"{\\\"zone\\\": \\\"CET\\\"}\"}]");
  EXPECT_EQ(out.content, "");
  EXPECT_EQ(out.calls, (std::vector<call>{{0, "get_weather", weather_args}, {1, "get_time", time_args}}));
}

TEST(ToolCallParser, MistralArrayWithoutItsControlTokenCountsOnlyAtTheStart) {
  const outcome out =
      parse_every_way(tool_call_family::mistral, "[{\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}]");
  EXPECT_EQ(out, (outcome{"", {{0, "get_time", time_args}}}));
  for (const std::string text : {"[1] First, [{\"name\": \"f\", \"arguments\": {}}]", "[TOOL", "[", "[{\"a\": 1}]",
                                 "Use [{\"name\": \"f\", \"arguments\": {}}]"}) {
    EXPECT_EQ(parse_every_way(tool_call_family::mistral, text), (outcome{text, {}})) << text;
  }
}

TEST(ToolCallParser, MistralMalformedIsContent) {
  for (const std::string text : {"[TOOL_CALLS] I cannot", "[TOOL_CALLS][{\"name\": 3}]", "[TOOL_CALLS][]",
                                 "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {]", "[TOOL_CALLS][{\"name\": \"f\""}) {
    EXPECT_EQ(parse_every_way(tool_call_family::mistral, text), (outcome{text, {}})) << text;
  }
}

const std::string deepseek_weather =
    "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\", \"days\": "
    "3}\n```<｜tool▁call▁end｜>";
const std::string deepseek_time =
    "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{\"zone\": \"CET\"}\n```<｜tool▁call▁end｜>";

TEST(ToolCallParser, DeepSeekParallelCalls) {
  const outcome out = parse_every_way(tool_call_family::deepseek_v3, "Sure.<｜tool▁calls▁begin｜>" + deepseek_weather +
                                                                         "\n" + deepseek_time + "<｜tool▁calls▁end｜>");
  EXPECT_EQ(out.content, "Sure.");
  EXPECT_EQ(out.calls, (std::vector<call>{{0, "get_weather", weather_args}, {1, "get_time", time_args}}));
}

TEST(ToolCallParser, DeepSeekMalformedIsContent) {
  const std::string bad =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": "
      "nope}\n```<｜tool▁call▁end｜>";
  EXPECT_EQ(parse_every_way(tool_call_family::deepseek_v3, bad), (outcome{bad, {}}));
  const std::string unfinished = "<｜tool▁calls▁begin｜>" + deepseek_weather.substr(0, 40);
  EXPECT_EQ(parse_every_way(tool_call_family::deepseek_v3, unfinished), (outcome{unfinished, {}}));
}

TEST(ToolCallParser, NoneFamilyPassesEverythingThrough) {
  const std::string text = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
  EXPECT_EQ(parse_every_way(tool_call_family::none, text), (outcome{text, {}}));
}

TEST(ToolCallParser, PlainTextIsNotHeldBackLongerThanAMarkerPrefix) {
  tool_call_parser parser(tool_call_family::hermes);
  outcome out;
  collect(parser.feed("Hello <tool"), out);
  EXPECT_EQ(out.content, "Hello ");
  collect(parser.feed("box> done"), out);
  EXPECT_EQ(out.content, "Hello <toolbox> done");
  tool_call_parser llama(tool_call_family::llama3_json);
  outcome llama_out;
  collect(llama.feed("Hi"), llama_out);
  EXPECT_EQ(llama_out.content, "Hi");
}

/// Random texts stitched from marker pieces and JSON fragments: streaming
/// in random pieces gives what parsing the whole gives, and without calls
/// the content is the text itself.
TEST(ToolCallParser, RandomTextsStreamLikeWholeParses) {
  const std::vector<std::string> pieces = {"<tool_call>",
                                           "</tool_call>",
                                           "[TOOL_CALLS]",
                                           "<|python_tag|>",
                                           "<｜tool▁calls▁begin｜>",
                                           "<｜tool▁call▁begin｜>",
                                           "<｜tool▁call▁end｜>",
                                           "<｜tool▁sep｜>function",
                                           "{\"name\": \"f\", ",
                                           "\"arguments\": {\"a\": 1}}",
                                           "\"parameters\": {}}",
                                           "[",
                                           "]",
                                           "{",
                                           "}",
                                           "\"",
                                           "\\",
                                           ";",
                                           " ",
                                           "\n",
                                           "```json\n",
                                           "text",
                                           "<tool",
                                           "[TOOL",
                                           "é"};
  std::mt19937 random(1234);
  for (const tool_call_family family : {tool_call_family::llama3_json, tool_call_family::hermes,
                                        tool_call_family::mistral, tool_call_family::deepseek_v3}) {
    for (int round = 0; round < 1000; ++round) {
      std::string text;
      const int count = static_cast<int>(random() % 12) + 1;
      for (int i = 0; i < count; ++i) text += pieces[random() % pieces.size()];
      std::vector<std::size_t> cuts;
      for (std::size_t i = 1; i < text.size(); ++i) {
        if (random() % 3 == 0) cuts.push_back(i);
      }
      const outcome whole = complete(family, text);
      EXPECT_EQ(streamed(family, text, cuts), whole) << text;
      if (whole.calls.empty()) {
        EXPECT_EQ(whole.content, text);
      }
    }
  }
}

TEST(ToolCallFamily, NamesRoundTrip) {
  for (const tool_call_family family : {tool_call_family::none, tool_call_family::llama3_json, tool_call_family::hermes,
                                        tool_call_family::mistral, tool_call_family::deepseek_v3}) {
    EXPECT_EQ(parse_tool_call_family(tool_call_family_name(family)), family);
  }
  EXPECT_FALSE(parse_tool_call_family("auto").has_value());
  EXPECT_FALSE(parse_tool_call_family("pythonic").has_value());
  EXPECT_EQ(resolve_tool_call_family("auto", "<tool_call>"), tool_call_family::hermes);
  EXPECT_EQ(resolve_tool_call_family("mistral", "<tool_call>"), tool_call_family::mistral);
  EXPECT_FALSE(resolve_tool_call_family("bogus", "").has_value());
}

}  // namespace
}  // namespace troupe
