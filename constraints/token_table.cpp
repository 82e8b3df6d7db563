#include "constraints/token_table.hpp"

#include <algorithm>
#include <bit>

#include "constraints/pushdown.hpp"

namespace troupe::constraints {
namespace {

void set_bit(std::vector<std::uint32_t>& bits, std::int32_t id) {
  bits[static_cast<std::size_t>(id) / 32] |= 1u << (static_cast<std::uint32_t>(id) % 32);
}

void add_range(const vocab_trie& trie, std::pair<std::uint32_t, std::uint32_t> range, std::vector<std::int32_t>& out) {
  for (auto t = range.first; t < range.second; ++t) out.push_back(trie.token_ids[t]);
}

/// Few accepted ids (structural positions) are kept as a list: a table
/// then costs bytes, not vocab / 8.
void store_sparse_when_small(token_table& table) {
  std::size_t count = 0;
  for (auto word : table.accepted) count += static_cast<std::size_t>(std::popcount(word));
  if (count >= table.accepted.size() / 2) return;
  for (std::size_t w = 0; w < table.accepted.size(); ++w) {
    for (std::uint32_t word = table.accepted[w]; word != 0; word &= word - 1) {
      table.accepted_ids.push_back(
          static_cast<std::int32_t>(w * 32 + static_cast<std::size_t>(std::countr_zero(word))));
    }
  }
  table.accepted = {};
}

/// One walk of the vocabulary trie from a stack. Level d holds the stacks
/// after the first d bytes of the current trie path; when they are a
/// single stack its top is kept directly, so the common case (one stack
/// inside a rule) costs one transition lookup per trie node.
class table_walker {
 public:
  table_walker(const automaton& machine, const vocab_trie& trie, std::size_t max_depth)
      : machine_(machine), trie_(trie), runner_(machine, max_depth) {}

  token_table run(const std::vector<std::int32_t>& frames) {
    table_.accepted.assign((trie_.vocab_size + 31) / 32, 0);
    std::int32_t parent = -1;
    for (std::size_t i = frames.size(); i-- > 1;) parent = runner_.pool().intern(frames[i], parent);
    stepped_ = {{frames[0], parent}};
    if (!close_level(0, false)) return finish();
    for (std::uint32_t i = 1; i < trie_.nodes.size();) i = visit(i);
    return finish();
  }

 private:
  struct level {
    std::int32_t state = -1;  ///< the single live stack's top, or -1 (see closed)
    std::int32_t parent = -1;
    bool context = false;  ///< some path returned below the known frames
    closed_configuration closed;
  };

  /// Handles node `i`; returns the next node to visit.
  std::uint32_t visit(std::uint32_t i) {
    const auto& node = trie_.nodes[i];
    const std::uint32_t d = node.depth;
    if (levels_.size() <= d) levels_.resize(d + 1);
    const level& up = levels_[d - 1];
    if (up.state >= 0) {
      const std::int32_t next = machine_.next(up.state, node.byte);
      if (next >= 0 && !machine_.has_calls(next) && !machine_.accepting[next]) {
        accept_node(i);
        levels_[d].state = next;
        levels_[d].parent = up.parent;
        levels_[d].context = up.context;
        return i + 1;
      }
      stepped_.clear();
      if (next >= 0) stepped_.push_back({next, up.parent});
    } else {
      runner_.step(up.closed.live, node.byte, stepped_);
    }
    if (stepped_.empty()) {
      if (up.context) add_range(trie_, trie_.subtree_tokens(i), table_.uncertain);
      return node.end;
    }
    const auto own = accept_node(i);
    if (close_level(d, up.context)) return i + 1;
    if (levels_[d].context) add_range(trie_, {own.second, trie_.subtree_tokens(i).second}, table_.uncertain);
    return node.end;
  }

  /// Closes `stepped_` into level d; false when no stack can read on.
  bool close_level(std::uint32_t d, bool context_above) {
    if (levels_.size() <= d) levels_.resize(d + 1);
    level& here = levels_[d];
    runner_.close(stepped_, here.closed);
    here.context = context_above || here.closed.context;
    const bool single = here.closed.live.size() == 1;
    here.state = single ? here.closed.live[0].state : -1;
    here.parent = single ? here.closed.live[0].parent : -1;
    return !here.closed.live.empty();
  }

  std::pair<std::uint32_t, std::uint32_t> accept_node(std::uint32_t i) {
    const auto own = trie_.node_tokens(i);
    for (auto t = own.first; t < own.second; ++t) set_bit(table_.accepted, trie_.token_ids[t]);
    return own;
  }

  token_table finish() {
    store_sparse_when_small(table_);
    table_.deepest = runner_.deepest();
    table_.capped = runner_.depth_capped();
    return std::move(table_);
  }

  const automaton& machine_;
  const vocab_trie& trie_;
  pushdown runner_;
  std::vector<level> levels_;
  configuration stepped_;
  token_table table_;
};

}  // namespace

token_table compute_token_table(const automaton& machine, const vocab_trie& trie,
                                const std::vector<std::int32_t>& frames, std::size_t max_depth) {
  token_table table = table_walker(machine, trie, max_depth).run(frames);
  table.depth_cap = max_depth;
  return table;
}

void token_table::add_accepted(std::span<std::uint32_t> mask) const {
  const std::size_t words = std::min(mask.size(), accepted.size());
  for (std::size_t w = 0; w < words; ++w) mask[w] |= accepted[w];
  for (auto id : accepted_ids) {
    const auto word = static_cast<std::size_t>(id) / 32;
    if (word < mask.size()) mask[word] |= 1u << (static_cast<std::uint32_t>(id) % 32);
  }
}

std::shared_ptr<const token_table> token_table_cache::get(const automaton& machine, const vocab_trie& trie,
                                                          const std::vector<std::int32_t>& frames,
                                                          std::size_t max_depth) {
  std::string key(reinterpret_cast<const char*>(frames.data()), frames.size() * sizeof(std::int32_t));
  {
    std::lock_guard lock(mutex_);
    if (auto it = tables_.find(key); it != tables_.end()) {
      for (const auto& table : it->second) {
        if (table->valid_for(max_depth)) return table;
      }
    }
  }
  auto table = std::make_shared<const token_table>(compute_token_table(machine, trie, frames, max_depth));
  built_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(mutex_);
  if (size_ < capacity_) {
    tables_[key].push_back(table);
    ++size_;
  }
  return table;
}

}  // namespace troupe::constraints
