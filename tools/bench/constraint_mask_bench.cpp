// troupe_bench_constraints: time to fill one allowed-token mask, per token,
// for a nested JSON schema (and json_object and a regex) on a real
// vocabulary. Feeds realistic documents token by token; the first pass
// pays for the token tables (cold), later passes find them cached (warm).
//
//   build/troupe_bench_constraints tests/fixtures/text/tokenizers/llama3_1 [passes]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "constraints/compiled_grammar.hpp"
#include "constraints/constraint.hpp"
#include "model/text/token_bytes.hpp"
#include "model/text/tokenizer.hpp"

namespace {

using namespace troupe;

const char* nested_schema = R"({"type": "object", "properties": {
  "id": {"type": "string", "format": "uuid"},
  "customer": {"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 40},
      "email": {"type": "string", "format": "email"},
      "address": {"type": "object", "properties": {
          "street": {"type": "string"}, "city": {"type": "string"},
          "zip": {"type": "string", "pattern": "[0-9]{5}"}},
        "required": ["street", "city", "zip"]}},
    "required": ["name", "address"]},
  "items": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {
      "sku": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1},
      "price": {"type": "number"}, "tags": {"type": "array", "items": {"enum": ["gift", "fragile", "bulk"]}}},
    "required": ["sku", "quantity", "price"]}},
  "status": {"enum": ["pending", "shipped", "delivered"]},
  "notes": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
 "required": ["id", "customer", "items", "status", "notes"]})";

const std::vector<std::string> nested_documents = {
    R"({"id": "123e4567-e89b-12d3-a456-426614174000", "customer": {"name": "Ada Lovelace", "email": "ada@example.com", "address": {"street": "12 Analytical Engine Road", "city": "London", "zip": "12345"}}, "items": [{"sku": "BK-001", "quantity": 2, "price": 19.99, "tags": ["gift"]}, {"sku": "PN-17", "quantity": 10, "price": 1.5}], "status": "shipped", "notes": "Leave the parcel with the neighbour if nobody answers the door."})",
    R"({"id": "00000000-0000-4000-8000-000000000001", "customer": {"name": "Grace Hopper", "address": {"street": "1 Navy Yard", "city": "Arlington", "zip": "22202"}}, "items": [{"sku": "COBOL-MANUAL", "quantity": 1, "price": 42.0, "tags": ["fragile", "bulk"]}], "status": "pending", "notes": null})",
};

struct timing {
  std::vector<double> micros;
  void report(const char* label) {
    std::sort(micros.begin(), micros.end());
    double sum = 0;
    for (double m : micros) sum += m;
    const auto at = [&](double q) {
      return micros[static_cast<std::size_t>(q * static_cast<double>(micros.size() - 1))];
    };
    std::printf("  %-28s tokens %5zu  mean %9.1f us  p50 %8.1f us  p99 %9.1f us  max %9.1f us\n", label, micros.size(),
                sum / static_cast<double>(micros.size()), at(0.5), at(0.99), micros.back());
    micros.clear();
  }
};

/// Feeds each document once, timing fill_allowed before every token.
void feed(const constraints::compiled_constraint& constraint, const text::tokenizer& tok,
          const std::vector<std::string>& documents, std::size_t vocab, timing& out) {
  std::vector<std::uint32_t> mask((vocab + 31) / 32);
  for (const auto& document : documents) {
    auto matcher = constraint.start();
    for (auto id : tok.encode(document, false)) {
      const auto start = std::chrono::steady_clock::now();
      matcher->fill_allowed(mask);
      out.micros.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
      if (!((mask[static_cast<std::size_t>(id) / 32] >> (id % 32)) & 1u) || !matcher->accept_token(id)) {
        std::fprintf(stderr, "token %d refused in: %s\n", id, document.c_str());
        std::exit(1);
      }
    }
  }
}

void bench(constraints::constraint_compiler& compiler, const text::tokenizer& tok, const char* name,
           const constraints::constraint_spec& spec, const std::vector<std::string>& documents, int passes) {
  const auto start = std::chrono::steady_clock::now();
  const auto compiled = compiler.compile(spec);
  const auto* grammar = dynamic_cast<const constraints::compiled_grammar*>(compiled.get());
  std::printf("%s: compiled in %.1f ms, %zu token tables precomputed\n", name,
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(),
              grammar->tables_precomputed());
  timing t;
  feed(*compiled, tok, documents, compiler.vocab_size(), t);
  std::printf("  tables built while matching: %zu\n", grammar->tables_built() - grammar->tables_precomputed());
  t.report("cold (first pass)");
  for (int pass = 1; pass < passes; ++pass) feed(*compiled, tok, documents, compiler.vocab_size(), t);
  if (passes > 1) t.report("warm (later passes)");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TOKENIZER_DIR [passes]\n", argv[0]);
    return 2;
  }
  const int passes = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  const auto tok = text::tokenizer::load(argv[1]);
  constraints::vocabulary vocab;
  vocab.token_bytes = text::vocabulary_bytes(*tok);
  if (tok->eos_token() && tok->eos_token()->id) vocab.eos_tokens.push_back(*tok->eos_token()->id);
  std::printf("vocabulary: %zu ids\n", vocab.token_bytes.size());
  constraints::constraint_compiler compiler(std::move(vocab));
  bench(compiler, *tok, "nested json_schema", {constraints::constraint_kind::json_schema, nested_schema},
        nested_documents, passes);
  bench(compiler, *tok, "json_object", {constraints::constraint_kind::json_object, ""}, nested_documents, passes);
  bench(compiler, *tok, "regex (phone list)",
        {constraints::constraint_kind::regex,
         "(\\+1 )?[0-9]{3}-[0-9]{3}-[0-9]{4}(, (\\+1 )?[0-9]{3}-[0-9]{3}-[0-9]{4})*"},
        {"+1 555-123-4567, 555-987-6543, +1 212-555-0000"}, passes);
  return 0;
}
