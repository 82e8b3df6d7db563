#include <list>
#include <mutex>
#include <unordered_map>
#include <variant>

#include "constraints/compiled_grammar.hpp"
#include "constraints/constraint.hpp"
#include "constraints/constraint_rules.hpp"

namespace troupe::constraints {
namespace {

/// The request field a constraint kind comes from (vLLM's and OpenAI's names).
std::string field_of(constraint_kind kind) {
  switch (kind) {
    case constraint_kind::json_object:
    case constraint_kind::json_schema:
      return "response_format";
    case constraint_kind::regex:
      return "structured_outputs.regex";
    case constraint_kind::choice:
      return "structured_outputs.choice";
    case constraint_kind::grammar:
      return "structured_outputs.grammar";
    case constraint_kind::structural_tag:
      return "structured_outputs.structural_tag";
  }
  return "response_format";
}

rule_set rules_of(const constraint_spec& spec, compile_budget& budget) {
  switch (spec.kind) {
    case constraint_kind::json_object:
      return json_object_rules();
    case constraint_kind::json_schema:
      return json_schema_rules(spec.text, budget);
    case constraint_kind::regex:
      return regex_rules(spec.text, budget);
    case constraint_kind::choice:
      return choice_rules(spec.text, budget);
    case constraint_kind::grammar:
      return gbnf_rules(spec.text, budget);
    case constraint_kind::structural_tag:
      return structural_tag_rules(spec.text, budget);
  }
  budget.fail("unknown constraint kind");
}

/// A cached outcome: the compiled constraint, or the error to repeat.
using outcome = std::variant<std::shared_ptr<const compiled_constraint>, constraint_error>;

}  // namespace

struct constraint_compiler::state {
  std::shared_ptr<const vocab_trie> trie;
  compile_limits limits;
  std::size_t capacity = 0;
  std::mutex mutex;
  std::list<std::string> recency;  // most recent first
  std::unordered_map<std::string, std::pair<std::list<std::string>::iterator, outcome>> entries;

  outcome build(const constraint_spec& spec) const {
    compile_budget budget(limits, field_of(spec.kind));
    try {
      if (spec.text.size() > limits.max_text_bytes) {
        budget.fail("the constraint is longer than " + std::to_string(limits.max_text_bytes) + " bytes");
      }
      automaton machine = compile_automaton(rules_of(spec, budget), budget);
      auto grammar = std::make_shared<compiled_grammar>(std::move(machine), trie, limits.max_depth);
      // Tables are built here, in the compiling (tokenizer) thread, so the
      // engine's mask fills find them ready.
      grammar->precompute(budget, limits.max_precomputed_tables);
      return std::shared_ptr<const compiled_constraint>(std::move(grammar));
    } catch (const constraint_error& error) {
      return error;
    }
  }
};

constraint_compiler::constraint_compiler(vocabulary vocab, compile_limits limits, std::size_t cache_entries)
    : state_(std::make_unique<state>()) {
  state_->trie = std::make_shared<const vocab_trie>(vocab_trie::build(vocab));
  state_->limits = limits;
  state_->capacity = std::max<std::size_t>(cache_entries, 1);
}

constraint_compiler::~constraint_compiler() = default;

std::shared_ptr<const compiled_constraint> constraint_compiler::compile(const constraint_spec& spec) {
  std::string key(1, static_cast<char>(spec.kind));
  key += spec.text;
  auto unwrap = [](const outcome& result) {
    if (const auto* error = std::get_if<constraint_error>(&result)) throw *error;
    return std::get<std::shared_ptr<const compiled_constraint>>(result);
  };
  {
    std::lock_guard lock(state_->mutex);
    if (auto it = state_->entries.find(key); it != state_->entries.end()) {
      state_->recency.splice(state_->recency.begin(), state_->recency, it->second.first);
      return unwrap(it->second.second);
    }
  }
  // Compiled outside the lock: a slow constraint does not block cache hits.
  outcome result = state_->build(spec);
  std::lock_guard lock(state_->mutex);
  if (!state_->entries.contains(key)) {
    state_->recency.push_front(key);
    state_->entries.emplace(key, std::make_pair(state_->recency.begin(), result));
    if (state_->entries.size() > state_->capacity) {
      state_->entries.erase(state_->recency.back());
      state_->recency.pop_back();
    }
  }
  return unwrap(result);
}

std::size_t constraint_compiler::vocab_size() const noexcept { return state_->trie->vocab_size; }

}  // namespace troupe::constraints
