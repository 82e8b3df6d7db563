// Compile-time token tables: after compile, matching documents builds no
// table (the engine's mask fills never pay for one); precomputation stops at
// its table budget and at the compile deadline without failing the compile;
// hostile constraints still fail within the limit.

#include <gtest/gtest.h>

#include <chrono>

#include "constraint_test_support.hpp"
#include "constraints/compiled_grammar.hpp"

namespace troupe::constraints::testing {
namespace {

const char* order_schema = R"({"type": "object", "properties": {
    "id": {"type": "string", "format": "uuid"},
    "customer": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 20},
        "zip": {"type": "string", "pattern": "[0-9]{5}"}}, "required": ["name", "zip"]},
    "items": {"type": "array", "items": {"type": "object", "properties": {
        "sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}, "price": {"type": "number"}},
      "required": ["sku", "qty", "price"]}},
    "status": {"enum": ["pending", "shipped"]},
    "notes": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
  "required": ["id", "customer", "items", "status", "notes"]})";

const char* order_document =
    R"({"id": "123e4567-e89b-12d3-a456-426614174000", "customer": {"name": "Ada Lovelace", "zip": "12345"}, )"
    R"("items": [{"sku": "BK-001", "qty": 2, "price": 19.99}, {"sku": "PN", "qty": 10, "price": 1.5e2}], )"
    R"("status": "shipped", "notes": "Leave it with the neighbour."})";

const char* tree_schema = R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {
    "value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
  "required": ["value", "children"]}}})";

struct precompute_case {
  constraint_spec spec;
  std::vector<std::string> documents;
};

std::vector<precompute_case> precompute_cases() {
  return {
      {{constraint_kind::json_schema, order_schema}, {order_document}},
      {{constraint_kind::json_schema, tree_schema},
       {R"({"value": 1, "children": [{"value": 2, "children": [{"value": 3, "children": []}]}]})"}},
      {{constraint_kind::json_object, ""}, {order_document, R"({"a": [1, {"b": null}], "c": {"d": "e"}})"}},
      {{constraint_kind::regex, "(\\+1 )?[0-9]{3}-[0-9]{4}(, [0-9]{3}-[0-9]{4})*"}, {"+1 555-1234, 555-9876"}},
      {{constraint_kind::choice, R"(["positive", "negative", "neutral"])"}, {"negative"}},
      {{constraint_kind::grammar, "root ::= item (\",\" item)*\nitem ::= [a-z]+ | \"(\" root \")\""}, {"ab,(c,(d)),e"}},
  };
}

const compiled_grammar& grammar_of(const std::shared_ptr<const compiled_constraint>& compiled) {
  return dynamic_cast<const compiled_grammar&>(*compiled);
}

/// An object schema with properties p0, p1, ... each of schema `property`.
std::string string_properties(int count, const std::string& property) {
  std::string schema = R"({"type": "object", "properties": {)";
  for (int i = 0; i < count; ++i) schema += (i ? ",\"p" : "\"p") + std::to_string(i) + "\": " + property;
  return schema + "}}";
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(PrecomputedTables, MatchingDocumentsBuildsNoTable) {
  const auto& fixture = load_vocabulary("llama3_1");
  compile_limits limits;
  limits.max_seconds = 60;  // precomputation must not stop at the deadline (a sanitizer build is slower)
  constraint_compiler compiler(fixture.vocab, limits);
  for (const auto& c : precompute_cases()) {
    const auto compiled = compiler.compile(c.spec);
    const auto& grammar = grammar_of(compiled);
    EXPECT_GT(grammar.tables_precomputed(), 0u) << c.spec.text;
    EXPECT_EQ(grammar.tables_built(), grammar.tables_precomputed()) << c.spec.text;
    for (const auto& document : c.documents) EXPECT_EQ(feed_document(*compiled, fixture, document), "") << document;
    EXPECT_EQ(grammar.tables_built(), grammar.tables_precomputed()) << c.spec.text;
  }
}

TEST(PrecomputedTables, PositionsNoTokenTellsApartShareATable) {
  // Letters, and a few two- and three-byte tokens: positions more than
  // three bytes from the end of a long string read the same tokens.
  fixture_vocabulary fixture;
  for (char c = 'a'; c <= 'z'; ++c) fixture.vocab.token_bytes.emplace_back(1, c);
  for (const char* token : {"\"", "ab", "abc", "c\"", "\"}"}) fixture.vocab.token_bytes.emplace_back(token);
  fixture.vocab.token_bytes.emplace_back();  // eos
  fixture.vocab.eos_tokens = {static_cast<std::int32_t>(fixture.vocab.token_bytes.size() - 1)};
  compile_limits limits;
  limits.max_seconds = 30;  // room for a loaded machine: every table must be built
  constraint_compiler compiler(fixture.vocab, limits);
  const auto compiled = compiler.compile({constraint_kind::json_schema, R"({"type": "string", "minLength": 1000})"});
  const auto& grammar = grammar_of(compiled);
  EXPECT_GT(grammar.machine().size(), 1000u);
  EXPECT_LT(grammar.tables_precomputed(), 200u);
  auto matcher = compiled->start();
  std::vector<std::int32_t> text{26};                // the opening quote
  for (int i = 0; i < 334; ++i) text.push_back(28);  // "abc"
  text.push_back(29);                                // "c\""
  for (auto id : text) ASSERT_TRUE(matcher->accept_token(id));
  EXPECT_TRUE(matcher->is_complete());
  std::vector<std::uint32_t> mask(2);
  matcher->fill_allowed(mask);
  EXPECT_EQ(grammar.tables_built(), grammar.tables_precomputed());
}

TEST(PrecomputedTables, BeyondTheTableBudgetTablesAreBuiltOnFirstUse) {
  const auto& fixture = load_vocabulary("llama3_1");
  compile_limits limits;
  limits.max_precomputed_tables = 5;
  constraint_compiler compiler(fixture.vocab, limits);
  const auto compiled = compiler.compile({constraint_kind::json_schema, order_schema});
  const auto& grammar = grammar_of(compiled);
  EXPECT_EQ(grammar.tables_precomputed(), 5u);
  EXPECT_EQ(feed_document(*compiled, fixture, order_document), "");
  EXPECT_GT(grammar.tables_built(), 5u);
}

TEST(PrecomputedTables, PrecomputationStopsAtTheCompileDeadline) {
  const auto& fixture = load_vocabulary("llama3_1");
  // About 400 free-text positions, each a walk of the whole vocabulary
  // (milliseconds each). The deadline is set from this build's speed:
  // halfway between compiling without tables and compiling with all of
  // them, so that load (or a sanitizer) slows both alike.
  const std::string schema = string_properties(10, R"({"type": "string", "maxLength": 40})");
  const auto timed_compile = [&](const compile_limits& limits) {
    const auto start = std::chrono::steady_clock::now();
    auto compiled = constraint_compiler(fixture.vocab, limits).compile({constraint_kind::json_schema, schema});
    return std::make_pair(seconds_since(start), grammar_of(compiled).tables_precomputed());
  };
  compile_limits unhurried;
  unhurried.max_seconds = 120;
  unhurried.max_precomputed_tables = 0;
  const double without_tables_s = timed_compile(unhurried).first;
  unhurried.max_precomputed_tables = compile_limits{}.max_precomputed_tables;
  const auto [with_tables_s, all_tables] = timed_compile(unhurried);
  ASSERT_GT(all_tables, 100u);

  compile_limits limits;
  limits.max_seconds = (without_tables_s + with_tables_s) / 2;
  constraint_compiler compiler(fixture.vocab, limits);
  const auto start = std::chrono::steady_clock::now();
  const auto compiled = compiler.compile({constraint_kind::json_schema, schema});
  // The deadline plus one table build, with room for a loaded machine.
  EXPECT_LT(seconds_since(start), limits.max_seconds + 1.5);
  const auto& grammar = grammar_of(compiled);
  EXPECT_LT(grammar.tables_precomputed(), all_tables);
  EXPECT_EQ(feed_document(*compiled, fixture, R"({"p0": "the last characters of a long value"})"), "");
  EXPECT_GT(grammar.tables_built(), grammar.tables_precomputed());  // the rest were built on first use
}

TEST(PrecomputedTables, HostileConstraintsStillFailWithinTheLimit) {
  const auto& fixture = load_vocabulary("llama3_1");
  compile_limits limits;
  limits.max_seconds = 0.5;
  constraint_compiler compiler(fixture.vocab, limits);
  const std::string many = string_properties(10000, R"({"type": "string"})");
  const std::vector<constraint_spec> hostile = {{constraint_kind::regex, "(a|b)*a(a|b){30}"},
                                                {constraint_kind::json_schema, many},
                                                {constraint_kind::json_schema, R"({"$ref": "#"})"}};
  for (const auto& spec : hostile) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(compiler.compile(spec), constraint_error) << spec.text.substr(0, 40);
    EXPECT_LT(seconds_since(start), 1.5) << spec.text.substr(0, 40);
  }
}

}  // namespace
}  // namespace troupe::constraints::testing
