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

}  // namespace

token_table compute_token_table(const automaton& machine, const vocab_trie& trie,
                                const std::vector<std::int32_t>& frames, std::size_t max_depth) {
  token_table table;
  table.accepted.assign((trie.vocab_size + 31) / 32, 0);
  pushdown runner(machine, max_depth);
  std::int32_t parent = -1;
  for (std::size_t i = frames.size(); i-- > 1;) parent = runner.pool().intern(frames[i], parent);
  // closed[d] / context[d]: the stacks after the first d bytes of the
  // current trie path, and whether some path returned below `frames`.
  std::vector<closed_configuration> closed(1);
  std::vector<bool> context(1);
  runner.close(configuration{{frames[0], parent}}, closed[0]);
  context[0] = closed[0].context;
  configuration stepped;
  for (std::uint32_t i = 1; i < trie.nodes.size();) {
    const auto& node = trie.nodes[i];
    const std::uint32_t d = node.depth;
    runner.step(closed[d - 1].live, node.byte, stepped);
    if (stepped.empty()) {
      if (context[d - 1]) add_range(trie, trie.subtree_tokens(i), table.uncertain);
      i = node.end;
      continue;
    }
    const auto own = trie.node_tokens(i);
    for (auto t = own.first; t < own.second; ++t) set_bit(table.accepted, trie.token_ids[t]);
    if (closed.size() <= d) {
      closed.resize(d + 1);
      context.resize(d + 1);
    }
    runner.close(stepped, closed[d]);
    context[d] = context[d - 1] || closed[d].context;
    if (closed[d].live.empty()) {
      if (context[d]) add_range(trie, {own.second, trie.subtree_tokens(i).second}, table.uncertain);
      i = node.end;
      continue;
    }
    ++i;
  }
  store_sparse_when_small(table);
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
  key.append(reinterpret_cast<const char*>(&max_depth), sizeof max_depth);
  {
    std::lock_guard lock(mutex_);
    if (auto it = tables_.find(key); it != tables_.end()) return it->second;
  }
  auto table = std::make_shared<const token_table>(compute_token_table(machine, trie, frames, max_depth));
  std::lock_guard lock(mutex_);
  if (tables_.size() < capacity_) tables_.emplace(std::move(key), table);
  return table;
}

}  // namespace troupe::constraints
