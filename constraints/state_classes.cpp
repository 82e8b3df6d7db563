#include "constraints/state_classes.hpp"

#include <numeric>
#include <string>
#include <unordered_map>

namespace troupe::constraints {
namespace {

void append(std::string& signature, std::int64_t value) {
  signature.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

/// What a state does without reading a byte: may its rule end here, is that
/// the document's end, and which rules it calls returning where.
std::string initial_signature(const automaton& machine, std::int32_t state) {
  std::string signature;
  append(signature, machine.accepting[state]);
  append(signature, machine.rule_of[state] == machine.start_rule);
  for (auto i = machine.call_begin[state]; i < machine.call_begin[state + 1]; ++i) {
    append(signature, machine.calls[i].rule);
    append(signature, machine.calls[i].target);
  }
  return signature;
}

/// The state's class and its byte edges by target class; adjacent ranges
/// into one class are merged so equal behaviour gives equal signatures.
std::string refined_signature(const automaton& machine, std::int32_t state, const std::vector<std::int32_t>& classes) {
  std::string signature;
  append(signature, classes[state]);
  std::int64_t lo = -1;
  std::int64_t hi = -1;
  std::int64_t target = -1;
  for (auto i = machine.transition_begin[state]; i < machine.transition_begin[state + 1]; ++i) {
    const auto& t = machine.transitions[i];
    if (t.lo == hi + 1 && classes[t.target] == target) {
      hi = t.hi;
      continue;
    }
    if (lo >= 0) append(signature, (lo << 40) | (hi << 32) | target);
    lo = t.lo;
    hi = t.hi;
    target = classes[t.target];
  }
  if (lo >= 0) append(signature, (lo << 40) | (hi << 32) | target);
  return signature;
}

/// Numbers the distinct signatures; returns how many there are.
template <typename signature_of>
std::size_t assign_classes(std::size_t states, signature_of&& signature, std::vector<std::int32_t>& classes) {
  std::unordered_map<std::string, std::int32_t> ids;
  std::vector<std::int32_t> next(states);
  for (std::size_t s = 0; s < states; ++s) {
    next[s] =
        ids.try_emplace(signature(static_cast<std::int32_t>(s)), static_cast<std::int32_t>(ids.size())).first->second;
  }
  classes.swap(next);
  return ids.size();
}

}  // namespace

std::vector<std::int32_t> bounded_equivalent_states(const automaton& machine, std::size_t rounds,
                                                    const compile_budget& budget) {
  const std::size_t states = machine.size();
  std::vector<std::int32_t> own(states);
  std::iota(own.begin(), own.end(), 0);
  std::vector<std::int32_t> classes;
  std::size_t count = assign_classes(
      states, [&](std::int32_t s) { return initial_signature(machine, s); }, classes);
  for (std::size_t round = 0; round < rounds && count < states; ++round) {
    if (budget.expired()) return own;
    const std::size_t refined = assign_classes(
        states, [&](std::int32_t s) { return refined_signature(machine, s, classes); }, classes);
    if (refined == count) break;
    count = refined;
  }
  std::vector<std::int32_t> first(count, -1);
  std::vector<std::int32_t> representative(states);
  for (std::size_t s = 0; s < states; ++s) {
    auto& rep = first[static_cast<std::size_t>(classes[s])];
    if (rep < 0) rep = static_cast<std::int32_t>(s);
    representative[s] = rep;
  }
  return representative;
}

}  // namespace troupe::constraints
