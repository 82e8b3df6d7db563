#include "constraints/vocab_trie.hpp"

#include <algorithm>

namespace troupe::constraints {

vocab_trie vocab_trie::build(const vocabulary& vocab) {
  vocab_trie trie;
  trie.vocab_size = vocab.token_bytes.size();
  trie.eos_tokens = vocab.eos_tokens;
  trie.token_bytes = vocab.token_bytes;
  std::vector<std::int32_t> order;
  for (std::size_t id = 0; id < vocab.token_bytes.size(); ++id) {
    const bool eos = std::find(vocab.eos_tokens.begin(), vocab.eos_tokens.end(), id) != vocab.eos_tokens.end();
    if (!vocab.token_bytes[id].empty() && !eos) order.push_back(static_cast<std::int32_t>(id));
  }
  std::sort(order.begin(), order.end(),
            [&](std::int32_t a, std::int32_t b) { return vocab.token_bytes[a] < vocab.token_bytes[b]; });
  trie.nodes.push_back({0, 0, 0, 0});
  std::vector<std::uint32_t> path{0};  // node per depth along the current token
  const std::string* previous = nullptr;
  for (auto id : order) {
    const std::string& bytes = vocab.token_bytes[id];
    std::size_t common = 0;
    if (previous) {
      const std::size_t limit = std::min(previous->size(), bytes.size());
      while (common < limit && (*previous)[common] == bytes[common]) ++common;
    }
    while (path.size() > common + 1) {
      trie.nodes[path.back()].end = static_cast<std::uint32_t>(trie.nodes.size());
      path.pop_back();
    }
    for (std::size_t d = common; d < bytes.size(); ++d) {
      path.push_back(static_cast<std::uint32_t>(trie.nodes.size()));
      trie.nodes.push_back({static_cast<std::uint8_t>(bytes[d]), static_cast<std::uint32_t>(d + 1), 0,
                            static_cast<std::uint32_t>(trie.token_ids.size())});
    }
    trie.token_ids.push_back(id);
    trie.max_token_bytes = std::max(trie.max_token_bytes, bytes.size());
    previous = &bytes;
  }
  while (!path.empty()) {
    trie.nodes[path.back()].end = static_cast<std::uint32_t>(trie.nodes.size());
    path.pop_back();
  }
  return trie;
}

std::pair<std::uint32_t, std::uint32_t> vocab_trie::subtree_tokens(std::uint32_t i) const {
  const std::uint32_t end = nodes[i].end;
  const auto last = end < nodes.size() ? nodes[end].first_token : static_cast<std::uint32_t>(token_ids.size());
  return {nodes[i].first_token, last};
}

std::pair<std::uint32_t, std::uint32_t> vocab_trie::node_tokens(std::uint32_t i) const {
  const auto last = i + 1 < nodes.size() ? nodes[i + 1].first_token : static_cast<std::uint32_t>(token_ids.size());
  return {nodes[i].first_token, last};
}

}  // namespace troupe::constraints
