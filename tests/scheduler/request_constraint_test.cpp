// Compiling a request's constraint at encode time with the compiler the
// tokenizer actors share: a real vocabulary's exact bytes, the document
// walked token by token, and bad constraints as 400s naming their field.

#include "actors/core/request_constraint.hpp"

#include <gtest/gtest.h>

#include <string>

namespace troupe {
namespace {

const text::tokenizer& llama3() {
  static const std::shared_ptr<const text::tokenizer> tok =
      text::tokenizer::load(std::string(TROUPE_FIXTURES_DIR) + "/text/tokenizers/llama3_1");
  return *tok;
}

constexpr std::int32_t eos = 128009;

generation_request constrained(constraints::constraint_kind kind, std::string text, std::string field) {
  generation_request request;
  request.request_id = "r";
  request.constraint = constraints::constraint_spec{kind, std::move(text)};
  request.constraint_field = std::move(field);
  return request;
}

TEST(RequestConstraint, CompilesAgainstTheTokenizersBytesAndWalksADocument) {
  const auto compiler = make_constraint_compiler(llama3(), {eos});
  const compiled_request_constraint compiled = compile_request_constraint(
      compiler.get(),
      constrained(constraints::constraint_kind::choice, R"(["yes please","no thanks"])", "structured_outputs.choice"));
  ASSERT_FALSE(compiled.error.has_value()) << compiled.error->message;
  ASSERT_NE(compiled.constraint, nullptr);
  EXPECT_EQ(compiled.vocab, llama3().vocab_size());
  auto matcher = compiled.constraint->start();
  std::vector<std::uint32_t> mask(static_cast<std::size_t>((compiled.vocab + 31) / 32));
  for (const std::int32_t id : llama3().encode("no thanks", false)) {
    matcher->fill_allowed(mask);
    EXPECT_TRUE(mask_allows(mask, id)) << "token " << id;
    EXPECT_FALSE(mask_allows(mask, eos));
    ASSERT_TRUE(matcher->accept_token(id));
  }
  EXPECT_TRUE(matcher->is_terminated());
  matcher->fill_allowed(mask);
  EXPECT_TRUE(mask_allows(mask, eos));
}

TEST(RequestConstraint, BadConstraintsAreInvalidRequestsNamingTheirField) {
  const auto compiler = make_constraint_compiler(llama3(), {eos});
  const compiled_request_constraint bad = compile_request_constraint(
      compiler.get(), constrained(constraints::constraint_kind::regex, "(unclosed", "guided_regex"));
  ASSERT_TRUE(bad.error.has_value());
  EXPECT_EQ(bad.error->kind, error_kind::invalid_request);
  EXPECT_EQ(bad.error->param, "guided_regex");
  EXPECT_EQ(bad.error->request_id, "r");
  EXPECT_EQ(bad.constraint, nullptr);
  const compiled_request_constraint recursive = compile_request_constraint(
      compiler.get(),
      constrained(constraints::constraint_kind::json_schema,
                  R"({"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/a"}}})", "response_format.json_schema.schema"));
  ASSERT_TRUE(recursive.error.has_value());
  EXPECT_EQ(recursive.error->param, "response_format.json_schema.schema");
}

TEST(RequestConstraint, FreeRequestsNeedNoCompilerAndConstrainedOnesDo) {
  generation_request free;
  const compiled_request_constraint none = compile_request_constraint(nullptr, free);
  EXPECT_EQ(none.constraint, nullptr);
  EXPECT_FALSE(none.error.has_value());
  const compiled_request_constraint unavailable = compile_request_constraint(
      nullptr, constrained(constraints::constraint_kind::json_object, "", "response_format"));
  ASSERT_TRUE(unavailable.error.has_value());
  EXPECT_EQ(unavailable.error->param, "response_format");
}

}  // namespace
}  // namespace troupe
