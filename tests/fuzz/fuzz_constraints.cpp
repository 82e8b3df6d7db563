// Fuzzes structured-output constraint compilation and matching. Byte 0
// picks the kind (json_object, json_schema, regex, choice, grammar,
// structural_tag: byte 0 % 6) and the vocabulary (bit 3: Llama 3 byte-level
// or Mistral SentencePiece with byte fallback, each cut to its lowest 1024
// ids plus eos, so every byte string stays spellable and compiles are
// fast); the rest is the constraint text. Compiled under tight limits; an
// accepted constraint is walked for a few tokens chosen by the input,
// checking at each step that the mask agrees with accept_token for every
// id, that eos is allowed exactly when the document is complete, and that
// rollback restores the mask. Only constraint_error may escape.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "constraints/constraint.hpp"
#include "fuzz_input.hpp"
#include "model/text/token_bytes.hpp"
#include "model/text/tokenizer.hpp"

namespace {

using troupe::constraints::compiled_constraint;
using troupe::constraints::constraint_compiler;
using troupe::constraints::constraint_kind;
using troupe::constraints::token_matcher;

constexpr std::size_t kept_ids = 1024;
constexpr int walk_steps = 6;

// The lowest ids of a fixture tokenizer, with its eos moved to the first id after them.
troupe::constraints::vocabulary small_vocabulary(const std::string& name) {
  const auto tok = troupe::text::tokenizer::load(std::string(TROUPE_FIXTURES_DIR) + "/text/tokenizers/" + name);
  troupe::constraints::vocabulary vocab;
  vocab.token_bytes = troupe::text::vocabulary_bytes(*tok);
  vocab.token_bytes.resize(kept_ids);
  vocab.token_bytes.emplace_back();  // eos: no bytes
  vocab.eos_tokens.push_back(static_cast<std::int32_t>(kept_ids));
  return vocab;
}

std::vector<std::unique_ptr<constraint_compiler>>* compilers = nullptr;

bool allowed(const std::vector<std::uint32_t>& mask, std::size_t id) { return (mask[id / 32] >> (id % 32)) & 1u; }

std::vector<std::uint32_t> mask_of(const token_matcher& matcher, std::size_t vocab_size) {
  std::vector<std::uint32_t> mask((vocab_size + 31) / 32);
  matcher.fill_allowed(mask);
  return mask;
}

// One step's invariants; returns the allowed non-eos ids.
std::vector<std::int32_t> check_step(token_matcher& matcher, std::size_t vocab_size) {
  const std::vector<std::uint32_t> mask = mask_of(matcher, vocab_size);
  if (allowed(mask, kept_ids) != matcher.is_complete()) __builtin_trap();  // eos exactly when complete
  std::vector<std::int32_t> ids;
  for (std::size_t id = 0; id < kept_ids; ++id) {
    const bool accepted = matcher.accept_token(static_cast<std::int32_t>(id));
    if (accepted != allowed(mask, id)) __builtin_trap();  // the mask must agree with accept_token
    if (!accepted) continue;
    matcher.rollback(1);
    ids.push_back(static_cast<std::int32_t>(id));
  }
  if (mask_of(matcher, vocab_size) != mask) __builtin_trap();  // rollback must restore the state
  return ids;
}

void walk(const compiled_constraint& constraint, std::size_t vocab_size, std::string_view choices) {
  const std::unique_ptr<token_matcher> matcher = constraint.start();
  for (int step = 0; step < walk_steps && !matcher->is_terminated(); ++step) {
    const std::vector<std::int32_t> ids = check_step(*matcher, vocab_size);
    if (ids.empty()) return;
    const auto pick = static_cast<unsigned char>(choices.empty() ? 0 : choices[step % choices.size()]);
    if (!matcher->accept_token(ids[pick % ids.size()])) __builtin_trap();
  }
}

}  // namespace

// Loading the tokenizers takes seconds under the sanitizers: done here, not
// inside the first input, where libFuzzer's per-input timeout would count it.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  troupe::constraints::compile_limits limits;
  limits.max_states = 20000;
  limits.max_seconds = 1.0;
  limits.max_precomputed_tables = 64;
  compilers = new std::vector<std::unique_ptr<constraint_compiler>>;
  for (const char* name : {"llama3_1", "mistral_spm"})
    compilers->push_back(std::make_unique<constraint_compiler>(small_vocabulary(name), limits, 1));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  constraint_compiler& compiler = *(*compilers)[(data[0] >> 3) & 1];
  troupe::constraints::constraint_spec spec;
  spec.kind = static_cast<constraint_kind>(data[0] % 6);
  spec.text = std::string(troupe::fuzz::as_text(data + 1, size - 1));
  try {
    const auto compiled = compiler.compile(spec);
    // The walk's choices: the text's bytes from the end, so they vary with it.
    std::string choices(spec.text.rbegin(), spec.text.rend());
    walk(*compiled, compiler.vocab_size(), choices);
  } catch (const troupe::constraints::constraint_error&) {
    // refused with the field and offset or limit named
  }
  return 0;
}
