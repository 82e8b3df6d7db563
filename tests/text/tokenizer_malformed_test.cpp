// Malformed tokenizer.json / tokenizer_config.json: each defect gives a
// std::runtime_error that names the file and the field.

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <functional>

#include "model/text/tokenizer.hpp"

namespace troupe::text {
namespace {

constexpr const char* base_tokenizer = R"({
  "version": "1.0",
  "added_tokens": [{"id": 4, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false,
                    "normalized": false, "special": true}],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "post_processor": {"type": "TemplateProcessing",
                     "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                     "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [4], "tokens": ["<s>"]}}},
  "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3}, "merges": ["a b"]}
})";

using edit = std::function<void(boost::json::object&)>;

std::string load_error(const edit& change, const std::string& config = {}) {
  boost::json::value root = boost::json::parse(base_tokenizer);
  change(root.as_object());
  try {
    tokenizer::from_json(boost::json::serialize(root), config);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "<loaded without error>";
}

boost::json::object& model(boost::json::object& root) { return root["model"].as_object(); }

TEST(TokenizerMalformed, BaseFileLoads) {
  const auto tok = tokenizer::from_json(base_tokenizer);
  EXPECT_EQ(tok->encode("ab a", true), (std::vector<token_id>{4, 2, 3, 0}));
  EXPECT_EQ(tok->decode(tok->encode("ab a", true), true), "ab a");
}

struct malformed_case {
  const char* name;
  edit change;
  const char* message;
};

void expect_errors(const std::vector<malformed_case>& cases) {
  for (const malformed_case& c : cases) {
    const std::string error = load_error(c.change);
    EXPECT_NE(error.find(c.message), std::string::npos) << c.name << "\n  got:  " << error << "\n  want: " << c.message;
  }
}

TEST(TokenizerMalformed, ModelDefectsNameTheField) {
  const std::vector<malformed_case> cases = {
      {"no model", [](auto& r) { r.erase("model"); }, "tokenizer.json: missing field \"model\""},
      {"no vocab", [](auto& r) { model(r).erase("vocab"); }, "tokenizer.json: model: missing field \"vocab\""},
      {"vocab is an array", [](auto& r) { model(r)["vocab"] = boost::json::array{1}; },
       "tokenizer.json: model.vocab: expected an object, got an array"},
      {"negative id", [](auto& r) { model(r)["vocab"].as_object()["a"] = -1; },
       "tokenizer.json: model.vocab[\"a\"]: integer -1 out of range [0, 16777215]"},
      {"huge id", [](auto& r) { model(r)["vocab"].as_object()["b"] = 4000000000000LL; },
       "tokenizer.json: model.vocab[\"b\"]: integer 4000000000000 out of range [0, 16777215]"},
      {"sparse ids", [](auto& r) { model(r)["vocab"].as_object()["b"] = 16000000; },
       "tokenizer.json: model.vocab: ids are too sparse: largest id 16000000 for 4 entries"},
      {"invalid UTF-8 in a token", [](auto& r) { model(r)["vocab"].as_object()["\xC3"] = 5; },
       "tokenizer.json: invalid JSON"},
      {"id is a string", [](auto& r) { model(r)["vocab"].as_object()["b"] = "1"; },
       "tokenizer.json: model.vocab[\"b\"]: expected an integer, got a string"},
      {"no merges", [](auto& r) { model(r).erase("merges"); }, "tokenizer.json: model: missing field \"merges\""},
      {"merge of unknown token", [](auto& r) { model(r)["merges"].as_array().push_back("a zz"); },
       "tokenizer.json: model.merges[1]: token \"zz\" is not in the vocabulary"},
      {"merge result unknown", [](auto& r) { model(r)["merges"] = boost::json::array{"b a"}; },
       "tokenizer.json: model.merges[0]: token \"ba\" is not in the vocabulary"},
      {"merge with two spaces", [](auto& r) { model(r)["merges"] = boost::json::array{"a b c"}; },
       "tokenizer.json: model.merges[0]: expected \"left right\" with exactly one space"},
      {"merge is a number", [](auto& r) { model(r)["merges"].as_array().push_back(7); },
       "tokenizer.json: model.merges[1]: expected a string \"left right\" or a pair [left, right]"},
      {"merge pair of numbers",
       [](auto& r) {
         model(r)["merges"] = boost::json::array{boost::json::array{1, 2}};
       },
       "tokenizer.json: model.merges[0][0]: expected a string, got a number"},
      // Found by fuzz_tokenizer_json: loaded, then every text needing the unknown token failed to encode.
      {"unk token not in the vocabulary", [](auto& r) { model(r)["unk_token"] = "<unk>"; },
       "tokenizer.json: model.unk_token: token \"<unk>\" is not in the vocabulary"},
      {"unigram model", [](auto& r) { model(r)["type"] = "Unigram"; },
       "tokenizer.json: model: unsupported model type \"Unigram\" (only BPE)"},
      {"dropout", [](auto& r) { model(r)["dropout"] = 0.1; },
       "tokenizer.json: model.dropout: BPE dropout is not supported"},
  };
  expect_errors(cases);
}

TEST(TokenizerMalformed, ComponentDefectsNameTheField) {
  const std::vector<malformed_case> cases = {
      {"unknown pre_tokenizer",
       [](auto& r) {
         r["pre_tokenizer"] = boost::json::object{{"type", "Punctuation"}};
       },
       "tokenizer.json: pre_tokenizer: unsupported pre_tokenizer type \"Punctuation\""},
      {"bad split regex",
       [](auto& r) {
         r["pre_tokenizer"] = boost::json::parse(
             R"({"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated", "invert": false})");
       },
       "tokenizer.json: pre_tokenizer.pattern.Regex: bad regex \"(unclosed\": missing closing parenthesis"},
      {"bad split behavior",
       [](auto& r) {
         r["pre_tokenizer"] = boost::json::parse(
             R"({"type": "Split", "pattern": {"String": " "}, "behavior": "Sideways", "invert": false})");
       },
       "tokenizer.json: pre_tokenizer.behavior: unknown split behavior \"Sideways\""},
      {"pattern without kind",
       [](auto& r) {
         r["pre_tokenizer"] =
             boost::json::parse(R"({"type": "Split", "pattern": {"Glob": "*"}, "behavior": "Isolated"})");
       },
       "tokenizer.json: pre_tokenizer.pattern: expected {\"String\": ...} or {\"Regex\": ...}"},
      {"unknown normalizer",
       [](auto& r) {
         r["normalizer"] = boost::json::object{{"type", "Precompiled"}};
       },
       "tokenizer.json: normalizer: unsupported normalizer type \"Precompiled\""},
      {"added token without content", [](auto& r) { r["added_tokens"].as_array()[0].as_object().erase("content"); },
       "tokenizer.json: added_tokens[0]: missing field \"content\""},
      {"added token huge id", [](auto& r) { r["added_tokens"].as_array()[0].as_object()["id"] = 1LL << 40; },
       "tokenizer.json: added_tokens[0].id: integer 1099511627776 out of range"},
      {"added tokens not an array", [](auto& r) { r["added_tokens"] = "none"; },
       "tokenizer.json: added_tokens: expected an array, got a string"},
      {"template names a missing token",
       [](auto& r) { r["post_processor"].as_object()["special_tokens"] = boost::json::object{}; },
       "tokenizer.json: post_processor.single[0].SpecialToken: special token \"<s>\" is missing from special_tokens"},
      {"template id out of range",
       [](auto& r) {
         r["post_processor"].as_object()["special_tokens"].as_object()["<s>"].as_object()["ids"] =
             boost::json::array{-3};
       },
       "tokenizer.json: post_processor.special_tokens.<s>.ids[0]: integer -3 out of range"},
      {"unknown decoder",
       [](auto& r) {
         r["decoder"] = boost::json::object{{"type", "WordPiece"}};
       },
       "tokenizer.json: decoder: unsupported decoder type \"WordPiece\""},
      {"strip of two characters",
       [](auto& r) {
         r["decoder"] = boost::json::parse(R"({"type": "Strip", "content": "ab", "start": 1, "stop": 0})");
       },
       "tokenizer.json: decoder.content: expected one character"},
      {"component without type",
       [](auto& r) {
         r["decoder"] = boost::json::object{{"kind", "Fuse"}};
       },
       "tokenizer.json: decoder: missing field \"type\""},
  };
  expect_errors(cases);
}

TEST(TokenizerMalformed, BrokenJsonReportsThePosition) {
  EXPECT_THROW(tokenizer::from_json("{\"model\": "), std::runtime_error);
  try {
    tokenizer::from_json("{\n  \"model\": {,}\n}");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.json: invalid JSON at line 2, column 13"), std::string::npos)
        << e.what();
  }
  try {
    tokenizer::from_json("[1, 2]");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "tokenizer.json: expected an object, got an array");
  }
}

TEST(TokenizerMalformed, ConfigErrorsNameTheConfigFile) {
  const edit none = [](auto&) {};
  EXPECT_NE(load_error(none, "{oops").find("tokenizer_config.json: invalid JSON at line 1"), std::string::npos);
  EXPECT_EQ(load_error(none, R"({"bos_token": 5})"),
            "tokenizer_config.json: bos_token: expected a string, got a number");
  EXPECT_EQ(load_error(none, R"({"eos_token": {"text": "x"}})"),
            "tokenizer_config.json: eos_token: missing field \"content\"");
}

TEST(TokenizerMalformed, MissingDirectoryIsAClearError) {
  try {
    tokenizer::load("/nonexistent/model/dir");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "/nonexistent/model/dir/tokenizer.json: cannot open file");
  }
}

}  // namespace
}  // namespace troupe::text
