#pragma once
// Shared helpers of the constraint tests: fixture vocabularies, seeded
// random walks under the mask, and feeding a document's tokenisation.

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "constraints/constraint.hpp"
#include "model/text/tokenizer.hpp"

namespace troupe::constraints::testing {

/// A fixture tokenizer with its constraint vocabulary, loaded once.
struct fixture_vocabulary {
  std::shared_ptr<const text::tokenizer> tok;  ///< the real tokenizer
  vocabulary vocab;                            ///< bytes per id and eos ids
};

/// The tokenizer under tests/fixtures/text/tokenizers/`name`.
const fixture_vocabulary& load_vocabulary(const std::string& name);

/// A compiler for `name`'s vocabulary, shared by the tests of one binary.
constraint_compiler& shared_compiler(const std::string& name);

/// UTF-8 text as code points (wchar_t is 32 bits here), for std::wregex.
std::wstring widen(const std::string& text);

/// The ids whose bit is set in `mask`.
std::vector<std::int32_t> allowed_ids(const std::vector<std::uint32_t>& mask, std::size_t vocab_size);

/// Outcome of one random walk.
struct walk_result {
  std::string text;        ///< bytes of the accepted tokens
  bool completed = false;  ///< ended by an accepted eos
  std::string failure;     ///< non-empty when a property broke on the way
};

/// How one random walk is drawn.
struct walk_spec {
  std::uint32_t seed = 0;  ///< seeds the sampler
  std::size_t steps = 16;  ///< free steps before steering towards the end
};

/// Samples tokens under the mask (seeded) until eos; after `steps` it
/// steers towards completion. Checks on the way that every allowed token
/// is accepted, that sampled forbidden tokens are refused, and that the
/// mask is never empty before the end.
walk_result random_walk(const compiled_constraint& constraint, const vocabulary& vocab, const walk_spec& spec);

/// Feeds the tokenisation of `document` token by token; returns an empty
/// string when every token was allowed and the end is complete, else what
/// went wrong.
std::string feed_document(const compiled_constraint& constraint, const fixture_vocabulary& fixture,
                          const std::string& document);

}  // namespace troupe::constraints::testing
