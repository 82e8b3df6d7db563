#include "actors/core/draft_tree.hpp"

#include <algorithm>

#include "kernels/step_batch.hpp"

namespace troupe {

namespace {

// Nodes in insertion order (a trie), before depth-first numbering.
struct trie_node {
  std::int32_t token = 0;
  std::vector<std::size_t> children;  ///< into the trie, in insertion order
};

void number_depth_first(const std::vector<trie_node>& trie, std::size_t at, std::int32_t parent, draft_tree& out) {
  for (std::size_t child : trie[at].children) {
    out.drafts.push_back(trie[child].token);
    out.parents.push_back(parent);
    number_depth_first(trie, child, static_cast<std::int32_t>(out.drafts.size()), out);
  }
}

}  // namespace

draft_tree merge_branches(std::span<const std::vector<std::int32_t>> branches, std::int32_t max_nodes) {
  std::vector<trie_node> trie(1);  // the root: t0
  for (const std::vector<std::int32_t>& branch : branches) {
    std::size_t at = 0;
    for (std::int32_t token : branch) {
      const auto& children = trie[at].children;
      const auto found =
          std::find_if(children.begin(), children.end(), [&](std::size_t c) { return trie[c].token == token; });
      if (found != children.end()) {
        at = *found;
        continue;
      }
      if (static_cast<std::int32_t>(trie.size()) - 1 >= max_nodes) break;
      trie.push_back({token, {}});
      trie[at].children.push_back(trie.size() - 1);
      at = trie.size() - 1;
    }
  }
  draft_tree out;
  number_depth_first(trie, 0, 0, out);
  if (is_chain(out.parents)) out.parents.clear();
  return out;
}

bool is_chain(std::span<const std::int32_t> parents) {
  for (std::size_t i = 1; i <= parents.size(); ++i) {
    if (parents[i - 1] != static_cast<std::int32_t>(i) - 1) return false;
  }
  return true;
}

std::vector<std::int32_t> first_chain(const draft_tree& tree) {
  if (tree.parents.empty()) return tree.drafts;
  std::vector<std::int32_t> chain;
  std::int32_t node = 0;
  for (std::size_t i = 1; i <= tree.drafts.size(); ++i) {
    if (tree.parents[i - 1] != node) continue;
    chain.push_back(tree.drafts[i - 1]);
    node = static_cast<std::int32_t>(i);
  }
  return chain;
}

std::int32_t tree_depth(std::span<const std::int32_t> parents) {
  const std::vector<std::int32_t> depths = draft_tree_depths(parents);
  return *std::max_element(depths.begin(), depths.end());
}

std::int32_t drafts_in_place(const draft_tree& tree, std::span<const std::int32_t> path) {
  if (tree.parents.empty()) return static_cast<std::int32_t>(path.size());
  std::int32_t in_place = 0;
  for (std::int32_t token : path) {
    const auto node = static_cast<std::size_t>(in_place) + 1;  // in place: the path's next node is the next number
    if (node > tree.drafts.size() || tree.parents[node - 1] != in_place || tree.drafts[node - 1] != token) break;
    ++in_place;
  }
  return in_place;
}

std::vector<std::int32_t> path_contexts(std::span<const std::int32_t> outputs, const draft_tree& tree,
                                        std::vector<std::size_t>& offsets) {
  const std::vector<std::int32_t> depths = draft_tree_depths(tree.parents);
  std::size_t total = 0;
  for (std::size_t i = 1; i < depths.size(); ++i) total += outputs.size() + static_cast<std::size_t>(depths[i]);
  std::vector<std::int32_t> contexts;
  contexts.reserve(total);
  offsets.clear();
  for (std::size_t i = 1; i <= tree.drafts.size(); ++i) {
    offsets.push_back(contexts.size());
    contexts.insert(contexts.end(), outputs.begin(), outputs.end());
    const std::size_t path_start = contexts.size();
    for (std::size_t node = i; node > 0; node = static_cast<std::size_t>(tree.parents[node - 1]))
      contexts.push_back(tree.drafts[node - 1]);
    std::reverse(contexts.begin() + static_cast<std::ptrdiff_t>(path_start), contexts.end());
  }
  return contexts;
}

}  // namespace troupe
