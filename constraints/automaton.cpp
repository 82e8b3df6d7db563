#include "constraints/automaton.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace troupe::constraints {
namespace {

/// Thompson automaton with epsilon, byte-range and call edges.
struct nfa {
  enum class edge_kind : std::uint8_t { epsilon, bytes, call };
  struct edge {
    edge_kind kind = edge_kind::epsilon;
    std::uint8_t lo = 0;
    std::uint8_t hi = 0;
    std::int32_t rule = 0;
    std::int32_t target = 0;
  };
  std::vector<std::vector<edge>> out;
  std::size_t state_limit = 0;
  compile_budget* budget = nullptr;

  std::int32_t add_state() {
    if (out.size() >= state_limit) budget->check_states(out.size() * 4, "constraint");
    budget->check();
    out.emplace_back();
    return static_cast<std::int32_t>(out.size() - 1);
  }
  void link(std::int32_t from, std::int32_t to) { out[from].push_back({edge_kind::epsilon, 0, 0, 0, to}); }

  void build(const expression& e, std::int32_t from, std::int32_t to);
  void build_repeat(const expression& e, std::int32_t from, std::int32_t to);
  void build_members(const expression& e, std::int32_t from, std::int32_t to);
};

void nfa::build(const expression& e, std::int32_t from, std::int32_t to) {
  switch (e.type) {
    case expression::kind::byte_set:
      for (auto r : e.ranges) out[from].push_back({edge_kind::bytes, r.lo, r.hi, 0, to});
      return;
    case expression::kind::sequence: {
      if (e.items.empty()) return link(from, to);
      std::int32_t at = from;
      for (std::size_t i = 0; i < e.items.size(); ++i) {
        const std::int32_t next = i + 1 == e.items.size() ? to : add_state();
        build(*e.items[i], at, next);
        at = next;
      }
      return;
    }
    case expression::kind::choice:
      for (const auto& item : e.items) build(*item, from, to);
      return;
    case expression::kind::repeat:
      return build_repeat(e, from, to);
    case expression::kind::call:
      out[from].push_back({edge_kind::call, 0, 0, static_cast<std::int32_t>(e.rule), to});
      return;
    case expression::kind::members:
      return build_members(e, from, to);
  }
}

void nfa::build_repeat(const expression& e, std::int32_t from, std::int32_t to) {
  const expression& item = *e.items[0];
  std::int32_t at = from;
  for (std::size_t i = 0; i < e.min; ++i) {
    const std::int32_t next = add_state();
    build(item, at, next);
    at = next;
  }
  if (e.max == unbounded) {
    // A fresh loop state keeps the loop's entry edges apart from `at`'s.
    const std::int32_t loop = add_state();
    link(at, loop);
    build(item, loop, loop);
    return link(loop, to);
  }
  for (std::size_t i = e.min; i < e.max; ++i) {
    const std::int32_t next = add_state();
    link(at, to);
    build(item, at, next);
    at = next;
  }
  link(at, to);
}

// Member k (after something was emitted) sits between chain[k] and
// chain[k + 1]; the first emitted member comes straight from `from`, so
// the automaton stays linear in the number of members.
void nfa::build_members(const expression& e, std::int32_t from, std::int32_t to) {
  const std::size_t count = e.items.size() - 1;
  std::vector<std::int32_t> chain(count + 1);
  for (auto& state : chain) state = add_state();
  link(chain[count], to);
  bool all_optional_so_far = true;
  for (std::size_t k = 0; k < count; ++k) {
    const expression& member = *e.items[k + 1];
    const std::int32_t after_separator = add_state();
    build(*e.items[0], chain[k], after_separator);
    build(member, after_separator, chain[k + 1]);
    if (!e.required[k]) link(chain[k], chain[k + 1]);
    if (all_optional_so_far) build(member, from, chain[k + 1]);
    all_optional_so_far = all_optional_so_far && !e.required[k];
  }
  if (all_optional_so_far) link(from, to);
}

using state_set = std::vector<std::int32_t>;

struct set_hash {
  std::size_t operator()(const state_set& s) const noexcept {
    std::size_t h = s.size();
    for (auto v : s) h = h * 1000003u ^ static_cast<std::size_t>(v);
    return h;
  }
};

/// Subset construction over all rules, sharing one state numbering.
class determinizer {
 public:
  determinizer(const nfa& machine, compile_budget& budget)
      : nfa_(machine), budget_(budget), mark_(machine.out.size()) {}

  std::int32_t intern(state_set states, std::int32_t rule) {
    closure(states);
    auto [it, inserted] = ids_.try_emplace(states, static_cast<std::int32_t>(sets_.size()));
    if (inserted) {
      budget_.check_states(sets_.size() + 1, "constraint");
      sets_.push_back(std::move(states));
      rules_.push_back(rule);
    }
    return it->second;
  }

  automaton run(const std::vector<std::int32_t>& starts, const std::vector<std::int32_t>& ends) {
    automaton out;
    for (std::size_t r = 0; r < starts.size(); ++r) out.rule_start.push_back(intern({starts[r]}, r));
    out.transition_begin.push_back(0);
    out.call_begin.push_back(0);
    for (std::size_t d = 0; d < sets_.size(); ++d) {
      budget_.check();
      const std::int32_t rule = rules_[d];
      const state_set current = sets_[d];
      out.rule_of.push_back(rule);
      out.accepting.push_back(std::binary_search(current.begin(), current.end(), ends[rule]) ? 1 : 0);
      add_bytes(current, rule, out);
      add_calls(current, rule, out);
      out.transition_begin.push_back(static_cast<std::uint32_t>(out.transitions.size()));
      out.call_begin.push_back(static_cast<std::uint32_t>(out.calls.size()));
    }
    return out;
  }

 private:
  void closure(state_set& states) {
    ++generation_;
    std::vector<std::int32_t> work(states.begin(), states.end());
    states.clear();
    while (!work.empty()) {
      const auto s = work.back();
      work.pop_back();
      if (mark_[s] == generation_) continue;
      mark_[s] = generation_;
      states.push_back(s);
      for (const auto& e : nfa_.out[s]) {
        if (e.kind == nfa::edge_kind::epsilon) work.push_back(e.target);
      }
    }
    std::sort(states.begin(), states.end());
  }

  void add_bytes(const state_set& current, std::int32_t rule, automaton& out) {
    std::vector<state_set> by_byte(256);
    for (auto s : current) {
      for (const auto& e : nfa_.out[s]) {
        if (e.kind != nfa::edge_kind::bytes) continue;
        for (int b = e.lo; b <= e.hi; ++b) by_byte[b].push_back(e.target);
      }
    }
    std::int32_t previous_target = -1;
    state_set previous_set;
    for (int b = 0; b < 256; ++b) {
      auto& targets = by_byte[b];
      if (targets.empty()) continue;
      std::sort(targets.begin(), targets.end());
      targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
      const bool same = !out.transitions.empty() && previous_target >= 0 && targets == previous_set &&
                        out.transitions.size() > out.transition_begin.back() && out.transitions.back().hi + 1 == b;
      if (same) {
        out.transitions.back().hi = static_cast<std::uint8_t>(b);
        continue;
      }
      previous_set = targets;
      previous_target = intern(targets, rule);
      out.transitions.push_back({static_cast<std::uint8_t>(b), static_cast<std::uint8_t>(b), previous_target});
    }
  }

  void add_calls(const state_set& current, std::int32_t rule, automaton& out) {
    std::vector<std::pair<std::int32_t, std::int32_t>> edges;
    for (auto s : current) {
      for (const auto& e : nfa_.out[s]) {
        if (e.kind == nfa::edge_kind::call) edges.emplace_back(e.rule, e.target);
      }
    }
    std::sort(edges.begin(), edges.end());
    for (std::size_t i = 0; i < edges.size();) {
      state_set targets;
      std::size_t j = i;
      for (; j < edges.size() && edges[j].first == edges[i].first; ++j) targets.push_back(edges[j].second);
      out.calls.push_back({edges[i].first, intern(std::move(targets), rule)});
      i = j;
    }
  }

  const nfa& nfa_;
  compile_budget& budget_;
  std::vector<std::uint32_t> mark_;
  std::uint32_t generation_ = 0;
  std::unordered_map<state_set, std::int32_t, set_hash> ids_;
  std::vector<state_set> sets_;
  std::vector<std::int32_t> rules_;
};

/// True when some rule body calls `rule`.
bool is_called(const rule_set& rules, std::size_t rule) {
  std::unordered_set<const expression*> seen;
  std::vector<const expression*> work;
  for (const auto& body : rules.bodies) work.push_back(body.get());
  while (!work.empty()) {
    const expression* e = work.back();
    work.pop_back();
    if (!seen.insert(e).second) continue;
    if (e->type == expression::kind::call && e->rule == rule) return true;
    for (const auto& item : e->items) work.push_back(item.get());
  }
  return false;
}

/// Removes edges into states from which no document can be finished (and
/// calls of rules that never end), so a walk under the mask cannot reach
/// a dead end. Returns false when the start state itself is dead.
bool trim(automaton& machine, compile_budget& budget) {
  const std::size_t count = machine.size();
  std::vector<std::uint8_t> live(machine.accepting.begin(), machine.accepting.end());
  auto call_live = [&](const automaton::call_edge& e) { return live[machine.rule_start[e.rule]] && live[e.target]; };
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t s = count; s-- > 0;) {
      budget.check();
      if (live[s]) continue;
      bool reaches = false;
      for (auto i = machine.transition_begin[s]; i < machine.transition_begin[s + 1] && !reaches; ++i) {
        reaches = live[machine.transitions[i].target];
      }
      for (auto i = machine.call_begin[s]; i < machine.call_begin[s + 1] && !reaches; ++i) {
        reaches = call_live(machine.calls[i]);
      }
      if (reaches) live[s] = 1, changed = true;
    }
  }
  automaton trimmed = machine;
  trimmed.transitions.clear();
  trimmed.calls.clear();
  trimmed.transition_begin.assign(1, 0);
  trimmed.call_begin.assign(1, 0);
  for (std::size_t s = 0; s < count; ++s) {
    for (auto i = machine.transition_begin[s]; i < machine.transition_begin[s + 1]; ++i) {
      if (live[machine.transitions[i].target]) trimmed.transitions.push_back(machine.transitions[i]);
    }
    for (auto i = machine.call_begin[s]; i < machine.call_begin[s + 1]; ++i) {
      if (call_live(machine.calls[i])) trimmed.calls.push_back(machine.calls[i]);
    }
    trimmed.transition_begin.push_back(static_cast<std::uint32_t>(trimmed.transitions.size()));
    trimmed.call_begin.push_back(static_cast<std::uint32_t>(trimmed.calls.size()));
  }
  machine = std::move(trimmed);
  return live[machine.rule_start[machine.start_rule]] != 0;
}

/// States up to which next() is a table lookup (16 MiB of table).
constexpr std::size_t max_tabulated_states = 16384;

void tabulate(automaton& machine) {
  if (machine.size() > max_tabulated_states) return;
  machine.dense_next.assign(machine.size() * 256, -1);
  for (std::size_t s = 0; s < machine.size(); ++s) {
    for (auto i = machine.transition_begin[s]; i < machine.transition_begin[s + 1]; ++i) {
      const auto& t = machine.transitions[i];
      for (int b = t.lo; b <= t.hi; ++b) machine.dense_next[s * 256 + static_cast<std::size_t>(b)] = t.target;
    }
  }
}

}  // namespace

automaton compile_automaton(const rule_set& input, compile_budget& budget) {
  rule_set rules = input;
  for (std::size_t r = 0; r < rules.bodies.size(); ++r) {
    if (!rules.bodies[r]) budget.fail("rule '" + rules.names[r] + "' is used but never defined");
  }
  std::size_t start = rules.root;
  if (is_called(rules, rules.root)) {
    // The bottom frame must belong to a rule nothing calls.
    start = rules.add_rule("(start)");
    rules.bodies[start] = call(rules.root);
  }
  nfa machine;
  machine.budget = &budget;
  machine.state_limit = budget.limits().max_states * 4;
  std::vector<std::int32_t> starts;
  std::vector<std::int32_t> ends;
  for (std::size_t r = 0; r < rules.bodies.size(); ++r) {
    starts.push_back(machine.add_state());
    ends.push_back(machine.add_state());
    machine.build(*rules.bodies[r], starts.back(), ends.back());
  }
  determinizer dfa(machine, budget);
  automaton out = dfa.run(starts, ends);
  out.start_rule = static_cast<std::int32_t>(start);
  if (!trim(out, budget)) budget.fail("the constraint matches no document");
  tabulate(out);
  return out;
}

}  // namespace troupe::constraints
