// json_schema: walks under the mask end in documents that parse (Boost.JSON)
// and satisfy the schema (schema_checker.hpp); documents in the schema's
// property order are accepted token by token; hostile schemas fail fast.

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "constraint_test_support.hpp"
#include "schema_checker.hpp"

namespace troupe::constraints::testing {
namespace {

struct schema_case {
  std::string name;
  std::string schema;
  std::vector<std::string> valid;  // in property order, as a model writes them
};

const std::vector<schema_case>& schema_cases() {
  static const std::vector<schema_case> cases = {
      {"person",
       R"({"type": "object", "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "email": {"type": "string", "format": "email"},
            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
            "score": {"type": "number", "minimum": 0}},
          "required": ["name", "age"], "additionalProperties": false})",
       {R"({"name":"Ada","age":36})", R"({"name": "Bob", "age": 150, "tags": ["a", "c"], "score": 2.5e1})",
        R"({"name":"Zoë","age":0,"email":"z@x.org"})"}},
      {"nested",
       R"({"type": "object", "properties": {
            "id": {"type": "string", "format": "uuid"},
            "when": {"type": "string", "format": "date"},
            "owner": {"type": "object", "properties": {
                "login": {"type": "string", "pattern": "^[a-z][a-z0-9_]{2,8}$"},
                "admin": {"type": "boolean"}}, "required": ["login", "admin"]},
            "items": {"type": "array", "minItems": 1, "maxItems": 4, "items": {"type": "object",
                "properties": {"sku": {"type": "string", "maxLength": 6}, "qty": {"type": "integer"}},
                "required": ["sku", "qty"]}},
            "note": {"anyOf": [{"type": "string", "maxLength": 8}, {"type": "null"}]}},
          "required": ["id", "owner", "items", "note"]})",
       {R"({"id":"123e4567-e89b-12d3-a456-426614174000","owner":{"login":"ada_1","admin":true},"items":[{"sku":"X1","qty":-3}],"note":null})",
        R"({"id": "00000000-0000-0000-0000-000000000000", "when": "2024-02-29", "owner": {"login": "bob", "admin": false}, "items": [{"sku": "", "qty": 0}, {"sku": "abc", "qty": 12}], "note": "hi"})"}},
      {"tree",
       R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {
            "value": {"type": "integer"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
          "required": ["value", "children"]}}})",
       {R"({"value":1,"children":[]})",
        R"({"value": 1, "children": [{"value": 2, "children": [{"value": 3, "children": []}]}]})"}},
      {"enums",
       R"({"type": "object", "properties": {
            "kind": {"const": "event"},
            "level": {"enum": ["low", "high", 3, null, {"x": 1}]},
            "flags": {"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 2},
            "meta": {"type": "object", "additionalProperties": {"type": "integer"}}},
          "required": ["kind", "level", "flags"]})",
       {R"({"kind":"event","level":"low","flags":[true,false]})",
        R"({"kind": "event", "level": {"x":1}, "flags": [false, false], "meta": {"a": 1, "b": -2}})"}},
  };
  return cases;
}

TEST(JsonSchemaConstraint, RandomWalksEndInValidDocuments) {
  for (const std::string vocab_name : {"llama3_1", "qwen3", "mistral_spm"}) {
    const auto& fixture = load_vocabulary(vocab_name);
    for (const auto& c : schema_cases()) {
      const auto schema = boost::json::parse(c.schema);
      const auto compiled = shared_compiler(vocab_name).compile({constraint_kind::json_schema, c.schema});
      int completed = 0;
      for (std::uint32_t seed = 0; seed < 8; ++seed) {
        const auto walk = random_walk(*compiled, fixture.vocab, {.seed = seed, .steps = 40});
        ASSERT_TRUE(walk.failure.empty()) << vocab_name << " " << c.name << " seed " << seed << ": " << walk.failure;
        if (!walk.completed) continue;
        ++completed;
        boost::system::error_code error;
        const auto document = boost::json::parse(walk.text, error);
        ASSERT_FALSE(error) << c.name << ": '" << walk.text << "' does not parse";
        EXPECT_EQ(schema_violation(document, schema, schema), "") << c.name << ": " << walk.text;
      }
      EXPECT_GE(completed, 6) << vocab_name << " " << c.name;
    }
  }
}

TEST(JsonSchemaConstraint, ValidDocumentsAreAcceptedTokenByToken) {
  for (const std::string vocab_name : {"llama3_1", "qwen3"}) {
    const auto& fixture = load_vocabulary(vocab_name);
    for (const auto& c : schema_cases()) {
      const auto schema = boost::json::parse(c.schema);
      const auto compiled = shared_compiler(vocab_name).compile({constraint_kind::json_schema, c.schema});
      for (const auto& document : c.valid) {
        ASSERT_EQ(schema_violation(boost::json::parse(document), schema, schema), "") << document;
        EXPECT_EQ(feed_document(*compiled, fixture, document), "") << vocab_name << " " << c.name << ": " << document;
      }
    }
  }
}

TEST(JsonSchemaConstraint, InvalidDocumentsAreRefused) {
  const auto& fixture = load_vocabulary("llama3_1");
  const auto compiled = shared_compiler("llama3_1").compile({constraint_kind::json_schema, schema_cases()[0].schema});
  for (const std::string document :
       {R"({"age":3,"name":"x"})", R"({"name":"x"})", R"({"name":"","age":1})", R"({"name":"x","age":151})",
        R"({"name":"x","age":1,"extra":1})", R"({"name":"x","age":1,"tags":["d"]})", R"({"name":"x","age":-1})"}) {
    EXPECT_NE(feed_document(*compiled, fixture, document), "") << document;
  }
}

TEST(JsonSchemaConstraint, OpenAiWrapperIsUnwrapped) {
  const auto& fixture = load_vocabulary("llama3_1");
  const auto compiled =
      shared_compiler("llama3_1")
          .compile({constraint_kind::json_schema, R"({"name": "x", "strict": true, "schema": {"type": "object",
        "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": false}})"});
  EXPECT_EQ(feed_document(*compiled, fixture, R"({"ok":true})"), "");
  EXPECT_NE(feed_document(*compiled, fixture, R"({})"), "");
}

TEST(JsonSchemaConstraint, HostileSchemasFailFastOrStayBounded) {
  auto& compiler = shared_compiler("llama3_1");
  std::string many = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 10000; ++i)
    many += (i ? "," : "") + std::string("\"p") + std::to_string(i) + R"(": {"type": "string"}})";
  many += "}}";
  EXPECT_THROW(compiler.compile({constraint_kind::json_schema, many}), constraint_error);
  for (const std::string schema :
       {R"({"$ref": "#"})", R"({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}})",
        R"({"type": "array", "items": {"type": "string"}, "minItems": 1000000})",
        R"({"type": "string", "pattern": "(a|b)*a(a|b){30}"})", R"({"type": "fish"})", R"({"not": {}})",
        R"({"$ref": "http://example.com/s.json"})", "{"}) {
    try {
      compiler.compile({constraint_kind::json_schema, schema});
      ADD_FAILURE() << schema << " compiled";
    } catch (const constraint_error& error) {
      EXPECT_EQ(error.field(), "response_format") << schema;
    }
  }
}

TEST(JsonSchemaConstraint, RecursionIsBoundedByTheDepthLimit) {
  const auto& fixture = load_vocabulary("llama3_1");
  const auto compiled = shared_compiler("llama3_1").compile({constraint_kind::json_schema, schema_cases()[2].schema});
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += R"({"value":1,"children":[)";
  EXPECT_NE(feed_document(*compiled, fixture, deep), "");  // refused somewhere below the limit, not a crash
}

}  // namespace
}  // namespace troupe::constraints::testing
