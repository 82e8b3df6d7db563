#pragma once
// The contract between the constraint engine (this folder) and the engine
// that applies it: a compiled constraint is immutable and shared by every
// request that asks for the same constraint; each sequence walks it with a
// matcher of its own. The engine asks a matcher for the allowed-token
// bitmask before each sampled row and advances it by the sampled token.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace troupe::constraints {

/// What kind of text a constraint_spec holds (new kinds go at the end:
/// the value is part of the cache key).
enum class constraint_kind { json_object, json_schema, regex, choice, grammar, structural_tag };

/// A constraint as the client sent it; kind + text is the cache key.
struct constraint_spec {
  constraint_kind kind = constraint_kind::json_object;
  /// Schema JSON, regular expression, GBNF/EBNF grammar, a JSON array of
  /// choice strings, or a structural tag's JSON (constraints/README.md);
  /// empty for json_object.
  std::string text;
};

/// The tokenizer's view the compiler needs.
struct vocabulary {
  /// [vocab] the exact bytes each id decodes to; empty for special and
  /// control ids, which a constraint never allows (except eos_tokens).
  std::vector<std::string> token_bytes;
  /// Ids that end generation; allowed exactly where the document is complete.
  std::vector<std::int32_t> eos_tokens;
};

/// One sequence's position in a compiled constraint. Not thread-safe.
class token_matcher {
 public:
  virtual ~token_matcher() = default;
  /// Writes the allowed-next-token bitmask: bit (t % 32) of word t / 32 is
  /// set when id t may come next. `allowed` has (vocab + 31) / 32 words.
  virtual void fill_allowed(std::span<std::uint32_t> allowed) const = 0;
  /// Advances by one token; returns false (and stays put) when the token
  /// is not allowed here.
  virtual bool accept_token(std::int32_t token) = 0;
  /// Undoes the last `count` accepted tokens (rejected speculative drafts).
  virtual void rollback(std::size_t count) = 0;
  /// True when the text so far is a complete document (eos is allowed).
  virtual bool is_complete() const = 0;
  /// True when nothing but eos may follow: generation stops here.
  virtual bool is_terminated() const = 0;
};

/// A constraint compiled against one vocabulary; immutable, shareable.
class compiled_constraint {
 public:
  virtual ~compiled_constraint() = default;
  /// A matcher at the start of the document.
  virtual std::unique_ptr<token_matcher> start() const = 0;
};

/// Limits on compilation: a hostile constraint fails fast with a
/// constraint_error instead of stalling the server.
struct compile_limits {
  std::size_t max_text_bytes = 1 << 20;  ///< bytes of constraint text
  std::size_t max_states = 200000;       ///< automaton states / grammar items
  std::size_t max_depth = 64;            ///< nesting of schemas, $ref chains, grammar rules
  double max_seconds = 2.0;              ///< wall-clock compile time
  /// Token tables built at compile time (the rest are built on first use);
  /// precomputation also stops, without failing, at the compile deadline.
  std::size_t max_precomputed_tables = 2048;
};

/// An invalid or too costly constraint. what() is the client-facing
/// message; field() the request field it concerns (e.g. "response_format").
class constraint_error : public std::runtime_error {
 public:
  constraint_error(std::string field, const std::string& message)
      : std::runtime_error(message), field_(std::move(field)) {}
  /// The request field path the error is about.
  const std::string& field() const noexcept { return field_; }

 private:
  std::string field_;
};

/// Compiles constraints against one vocabulary, caching the results
/// (bounded, least recently used, keyed by kind + text). Thread-safe.
class constraint_compiler {
 public:
  constraint_compiler(vocabulary vocab, compile_limits limits = {}, std::size_t cache_entries = 64);
  ~constraint_compiler();
  constraint_compiler(const constraint_compiler&) = delete;
  constraint_compiler& operator=(const constraint_compiler&) = delete;

  /// The compiled constraint, from the cache when present. Throws
  /// constraint_error for invalid or hostile constraints.
  std::shared_ptr<const compiled_constraint> compile(const constraint_spec& spec);
  /// Number of ids in the vocabulary (the mask covers them all).
  std::size_t vocab_size() const noexcept;

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace troupe::constraints
