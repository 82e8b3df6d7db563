// Tree attention (step_batch::tree_parent) on the CPU backend: every node of
// a draft tree, fed in one step beside other sequences, gives the same bits
// as its root-to-node path fed as a plain chain and decoded alone (its
// keys copied to consecutive positions of other blocks), at every dispatch
// level, with and without batch-invariant numerics, across block
// boundaries and the 256-token chunking. The tree key map and the
// validation of tree batches are checked beside.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/tree_attention.hpp"
#include "tests/kernels/paged_scenario.hpp"

namespace troupe {
namespace {

using test::attention_case;
using test::filled_cache;
using test::random_source;

/// Parents of draft nodes 1..j (node 0 is the root, t0).
struct tree_shape {
  int cached = 0;                     ///< tokens before the root
  std::vector<std::int32_t> parents;  ///< [j]
};

std::vector<std::int32_t> depths_of(const std::vector<std::int32_t>& parents) { return draft_tree_depths(parents); }

/// Copies the K and V rows (every layer and kv head) of cache position
/// `from` of `from_pages` to position `to` of `to_pages`, in the host copy.
void copy_row(filled_cache& cache, const std::vector<std::int32_t>& from_pages, int from,
              const std::vector<std::int32_t>& to_pages, int to) {
  const kv_cache_spec& spec = cache.spec;
  const std::size_t bytes = static_cast<std::size_t>(spec.head_dim) * dtype_size(spec.type);
  auto* src_block = static_cast<std::uint8_t*>(cache.host->block_data(from_pages[from / spec.block_size]));
  auto* dst_block = static_cast<std::uint8_t*>(cache.host->block_data(to_pages[to / spec.block_size]));
  for (int layer = 0; layer < spec.num_layers; ++layer) {
    for (int value = 0; value < 2; ++value) {
      for (int head = 0; head < spec.num_kv_heads; ++head) {
        const auto row = [&](int offset) {
          const std::int64_t e = spec.layer_offset(layer) + (value ? spec.tile_elements() : 0) +
                                 (std::int64_t{head} * spec.block_size + offset) * spec.head_dim;
          return static_cast<std::size_t>(e) * dtype_size(spec.type);
        };
        std::memcpy(dst_block + row(to % spec.block_size), src_block + row(from % spec.block_size), bytes);
      }
    }
  }
}

/// Uploads host blocks `blocks` to the device cache.
void upload(backend& b, filled_cache& cache, const std::vector<std::int32_t>& blocks) {
  std::vector<block_copy> copies;
  for (std::int32_t block : blocks) copies.push_back({block_location::host, block, block_location::device, block});
  b.copy_blocks(*cache.cache, cache.host.get(), copies);
}

/// A step of ordinary sequences `before`, then the tree's sequence, then
/// `after`, on consecutive blocks from `next_block`; returns the first
/// token of the tree's sequence.
std::int32_t add_tree_sequence(test::paged_step& step, const tree_shape& tree, int block_size,
                               std::int32_t& next_block) {
  step_batch& b = step.batch;
  const auto j = static_cast<std::int32_t>(tree.parents.size());
  const int length = tree.cached + j + 1;
  const int blocks = (length + block_size - 1) / block_size;
  std::vector<std::int32_t> pages;
  for (int i = 0; i < blocks; ++i) pages.push_back(next_block++);
  const auto first = static_cast<std::int32_t>(b.token_ids.size());
  const std::vector<std::int32_t> depths = depths_of(tree.parents);
  b.tree_parent.resize(b.token_ids.size(), -1);
  for (std::int32_t node = 0; node <= j; ++node) {
    const int slot_position = tree.cached + node;
    b.token_ids.push_back(node);
    b.positions.push_back(tree.cached + depths[static_cast<std::size_t>(node)]);
    b.slot_mapping.push_back(std::int64_t{pages[static_cast<std::size_t>(slot_position / block_size)]} * block_size +
                             slot_position % block_size);
    b.tree_parent.push_back(node == 0 ? -1 : first + tree.parents[static_cast<std::size_t>(node) - 1]);
  }
  test::close_sequence(step, std::move(pages), length, block_size);
  return first;
}

/// Appends ordinary sequences to a step (causal tokens, tree_parent -1 once it has any).
void add_plain_sequences(test::paged_step& step, const std::vector<test::sequence_shape>& shapes, int block_size,
                         std::int32_t& next_block) {
  std::vector<std::int32_t> ids;
  for (std::int64_t i = 0; i < test::blocks_needed(shapes, block_size); ++i) ids.push_back(next_block++);
  const test::paged_step more = test::build_step(shapes, block_size, ids);
  step_batch& b = step.batch;
  const auto tokens = static_cast<std::int32_t>(b.token_ids.size());
  const auto pages = static_cast<std::int32_t>(b.kv_indices.size());
  b.token_ids.insert(b.token_ids.end(), more.batch.token_ids.begin(), more.batch.token_ids.end());
  b.positions.insert(b.positions.end(), more.batch.positions.begin(), more.batch.positions.end());
  b.slot_mapping.insert(b.slot_mapping.end(), more.batch.slot_mapping.begin(), more.batch.slot_mapping.end());
  for (std::size_t s = 1; s < more.batch.query_start.size(); ++s) {
    b.query_start.push_back(tokens + more.batch.query_start[s]);
    b.kv_indptr.push_back(pages + more.batch.kv_indptr[s]);
    b.logits_indices.push_back(tokens + more.batch.logits_indices[s - 1]);
  }
  b.seq_lens.insert(b.seq_lens.end(), more.batch.seq_lens.begin(), more.batch.seq_lens.end());
  b.kv_indices.insert(b.kv_indices.end(), more.batch.kv_indices.begin(), more.batch.kv_indices.end());
  b.kv_last_page_len.insert(b.kv_last_page_len.end(), more.batch.kv_last_page_len.begin(),
                            more.batch.kv_last_page_len.end());
  if (!b.tree_parent.empty()) b.tree_parent.resize(b.token_ids.size(), -1);
  step.pages.insert(step.pages.end(), more.pages.begin(), more.pages.end());
}

test::paged_step empty_step() {
  test::paged_step step;
  step.batch.query_start.push_back(0);
  step.batch.kv_indptr.push_back(0);
  return step;
}

/// Node `node`'s path as a chain: the tree's cached tokens, then the path's
/// keys at consecutive positions (in blocks from `first_block` on), decoded
/// alone at the node's position.
std::vector<float> chain_output(backend& b, filled_cache& cache, const attention_case& c, const tree_shape& tree,
                                const std::vector<std::int32_t>& tree_pages, std::int32_t node,
                                const std::vector<float>& q_row, std::int32_t first_block) {
  std::vector<std::int32_t> path;  // root-to-node, root first
  for (std::int32_t at = node; at > 0; at = tree.parents[static_cast<std::size_t>(at) - 1]) path.push_back(at);
  path.push_back(0);
  std::reverse(path.begin(), path.end());
  const int length = tree.cached + static_cast<int>(path.size());
  const int blocks = (length + c.block_size - 1) / c.block_size;
  std::vector<std::int32_t> pages;
  for (int i = 0; i < blocks; ++i) pages.push_back(first_block + i);
  for (int x = 0; x < tree.cached; ++x) copy_row(cache, tree_pages, x, pages, x);
  for (std::size_t d = 0; d < path.size(); ++d)
    copy_row(cache, tree_pages, tree.cached + path[d], pages, tree.cached + static_cast<int>(d));
  upload(b, cache, pages);
  test::paged_step step = empty_step();
  step_batch& s = step.batch;
  s.token_ids.push_back(0);
  s.positions.push_back(length - 1);
  s.slot_mapping.push_back(std::int64_t{pages.back()} * c.block_size + (length - 1) % c.block_size);
  s.query_start.push_back(1);
  s.seq_lens.push_back(length);
  s.kv_indices = pages;
  s.kv_indptr.push_back(static_cast<std::int32_t>(pages.size()));
  s.kv_last_page_len.push_back(length - (blocks - 1) * c.block_size);
  s.logits_indices.push_back(0);
  return test::run_attention(b, cache, s, c, q_row, 1);
}

std::unique_ptr<backend> backend_at(cpu::isa_level level, bool invariant) {
  cpu::cpu_backend_options options;
  options.threads = 2;
  options.max_isa = level;
  options.batch_invariant = invariant;
  return cpu::make_cpu_backend(options);
}

const std::vector<tree_shape> trees = {
    {5, {0, 1, 2, 0, 4, 0}},          // three branches from the root, two of depth > 1
    {14, {0, 0, 1, 1, 2, 3, 3, 6}},   // crosses a block boundary, nodes out of depth order
    {300, {0, 1, 1, 0, 4, 5, 6, 2}},  // past the 256-token chunk
    {0, {0, 0, 0}},                   // no cached tokens: siblings only
    {250, {0, 1, 2, 3, 4, 5, 0, 7}},  // a path that crosses the chunk boundary
};

class TreeAttentionAtLevel : public ::testing::TestWithParam<cpu::isa_level> {};

TEST_P(TreeAttentionAtLevel, EveryNodeMatchesItsPathFedAsAChainBitForBit) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const attention_case cases[] = {{8, 2, 64, 16, dtype::f32}, {4, 4, 32, 16, dtype::bf16}, {6, 3, 20, 5, dtype::f16}};
  for (bool invariant : {false, true}) {
    auto b = backend_at(GetParam(), invariant);
    for (const attention_case& c : cases) {
      for (const tree_shape& tree : trees) {
        SCOPED_TRACE("cached=" + std::to_string(tree.cached) + " block=" + std::to_string(c.block_size) + " " +
                     std::string(dtype_name(c.type)) + (invariant ? " invariant" : ""));
        filled_cache cache = test::make_filled_cache(*b, test::spec_for(c, 240), rng);
        std::int32_t next_block = 0;
        test::paged_step step = empty_step();
        add_plain_sequences(step, {{30, 12}, {270, 1}}, c.block_size, next_block);
        const std::int32_t first = add_tree_sequence(step, tree, c.block_size, next_block);
        const std::vector<std::int32_t> tree_pages = step.pages.back();
        add_plain_sequences(step, {{7, 1}}, c.block_size, next_block);
        ASSERT_EQ(validate_step_batch(step.batch, cache.spec), "");
        const std::size_t width = static_cast<std::size_t>(c.q_heads * c.head_dim);
        const std::vector<float> q = rng.floats(step.batch.token_ids.size() * width, -2.0f, 2.0f);
        const std::vector<float> got = test::run_attention(*b, cache, step.batch, c, q, 1);
        for (std::int32_t node = 0; node <= static_cast<std::int32_t>(tree.parents.size()); ++node) {
          const std::size_t row = static_cast<std::size_t>(first + node) * width;
          const std::vector<float> q_row(q.begin() + static_cast<std::ptrdiff_t>(row),
                                         q.begin() + static_cast<std::ptrdiff_t>(row + width));
          const std::vector<float> want = chain_output(*b, cache, c, tree, tree_pages, node, q_row, next_block);
          EXPECT_EQ(std::memcmp(got.data() + row, want.data(), width * sizeof(float)), 0) << "node " << node;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, TreeAttentionAtLevel, ::testing::ValuesIn(test::supported_levels()),
                         [](const auto& info) { return std::string(cpu::isa_name(info.param)); });

TEST(TreeKeyMap, MapsEachTreeTokenToItsPathsCachePositions) {
  test::paged_step step = empty_step();
  std::int32_t next_block = 0;
  add_plain_sequences(step, {{3, 2}}, 4, next_block);
  add_tree_sequence(step, {6, {0, 1, 0, 3}}, 4, next_block);
  const tree_key_map map = map_tree_keys(step.batch);
  ASSERT_EQ(map.start.size(), 7u);
  // The plain sequence's tokens and the root see only the cache's own keys.
  EXPECT_EQ(map.start[0], 4);
  EXPECT_EQ(map.start[1], 5);
  EXPECT_EQ(map.start[2], 7);
  // Node 2 (token 4): path node 1 at cache position 7, itself at 8.
  EXPECT_EQ(map.start[4], 7);
  EXPECT_EQ(std::vector<std::int32_t>(map.keys.begin() + map.offset[4], map.keys.begin() + map.offset[4] + 2),
            (std::vector<std::int32_t>{7, 8}));
  // Node 4 (token 6): path node 3 at 9, itself at 10.
  EXPECT_EQ(std::vector<std::int32_t>(map.keys.begin() + map.offset[6], map.keys.begin() + map.offset[6] + 2),
            (std::vector<std::int32_t>{9, 10}));
  EXPECT_TRUE(map_tree_keys(empty_step().batch).start.empty());
}

TEST(TreeBatchValidation, RejectsMalformedTrees) {
  const kv_cache_spec spec{.num_layers = 1, .num_kv_heads = 1, .head_dim = 2, .block_size = 4, .num_blocks = 8};
  const auto make = [] {
    test::paged_step step = empty_step();
    std::int32_t next_block = 0;
    add_tree_sequence(step, {2, {0, 1, 0}}, 4, next_block);
    return step.batch;
  };
  EXPECT_EQ(validate_step_batch(make(), spec), "");
  step_batch wrong_length = make();
  wrong_length.tree_parent.pop_back();
  EXPECT_EQ(validate_step_batch(wrong_length, spec), "tree_parent and token_ids differ in length");
  step_batch later_parent = make();
  later_parent.tree_parent[1] = 2;
  EXPECT_EQ(validate_step_batch(later_parent, spec), "a tree token's parent is not an earlier token of its sequence");
  step_batch wrong_position = make();
  wrong_position.positions[3] = 4;
  EXPECT_EQ(validate_step_batch(wrong_position, spec), "a tree token's position is not its parent's plus one");
  step_batch causal_after_tree = make();
  causal_after_tree.tree_parent[3] = -1;
  EXPECT_EQ(validate_step_batch(causal_after_tree, spec), "a causal token follows a tree token in its sequence");
  step_batch shifted_root = make();
  shifted_root.positions = {1, 2, 3, 2};
  EXPECT_EQ(validate_step_batch(shifted_root, spec),
            "a causal token of a sequence with a tree is not at its cache position");
}

}  // namespace
}  // namespace troupe
