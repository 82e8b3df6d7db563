#pragma once
// Draft trees for speculative decoding (kernels/step_batch.hpp's
// verify_group::parents): building one from a proposer's alternative
// continuations, cutting it to its first chain where a tree cannot be
// verified, and reading the verdict back. Nodes are numbered in depth-first
// order with first children first, so the first branch is the chain
// d1..dm at nodes 1..m: its K/V lands at the positions an accepted chain
// needs, and only a later branch's acceptance needs recomputing.

#include <cstdint>
#include <span>
#include <vector>

namespace troupe {

/// Drafts and their parents (parents[i - 1]: node of draft i's parent, 0 =
/// the sequence's next token t0); parents empty: a chain.
struct draft_tree {
  std::vector<std::int32_t> drafts;
  std::vector<std::int32_t> parents;
};

/// Merges `branches` (continuations of t0, likeliest first) into one tree,
/// shared prefixes once, in depth-first order with earlier branches' nodes
/// first, stopping at `max_nodes` nodes. A single branch (or one whose
/// merge is a chain) gives parents empty.
draft_tree merge_branches(std::span<const std::vector<std::int32_t>> branches, std::int32_t max_nodes);

/// Whether `parents` make a chain (every draft's parent the node before it).
bool is_chain(std::span<const std::int32_t> parents);

/// The tree's first chain: t0's first child, its first child, and so on.
std::vector<std::int32_t> first_chain(const draft_tree& tree);

/// Deepest node's depth (a chain: its length).
std::int32_t tree_depth(std::span<const std::int32_t> parents);

/// How many of the `accepted` drafts on the path (tokens `path`, root to
/// leaf) sit at nodes 1..n, i.e. at the K/V positions the emitted chain
/// needs; the rest of the path must be recomputed.
std::int32_t drafts_in_place(const draft_tree& tree, std::span<const std::int32_t> path);

/// For each node i = 1..j, the outputs followed by the drafts on the path
/// from t0 to node i, concatenated; `offsets[i - 1]` is where node i's run
/// starts (its length: outputs + depth(i)).
std::vector<std::int32_t> path_contexts(std::span<const std::int32_t> outputs, const draft_tree& tree,
                                        std::vector<std::size_t>& offsets);

}  // namespace troupe
