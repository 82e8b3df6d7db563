// The host-side attention partition (no GPU needed, so these run in CI):
// every query row and every key is covered exactly once, splits never come
// out empty, and the split count follows the device and the lengths.

// Built only with the CUDA backend (TROUPE_HAVE_CUDA comes with troupe_kernels).
#if defined(TROUPE_HAVE_CUDA)

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <tuple>

#include "kernels/cuda/attention_plan.hpp"

namespace troupe::cuda {
namespace {

// A batch of sequences given as (cached tokens, new tokens).
step_batch make_batch(const std::vector<std::pair<int, int>>& shapes) {
  step_batch b;
  b.query_start.push_back(0);
  for (const auto& [cached, fresh] : shapes) {
    for (int p = cached; p < cached + fresh; ++p) b.positions.push_back(p);
    b.token_ids.resize(b.positions.size(), 0);
    b.query_start.push_back(static_cast<std::int32_t>(b.positions.size()));
    b.seq_lens.push_back(cached + fresh);
  }
  return b;
}

attention_geometry geometry(int q_heads, int kv_heads, int head_dim) {
  attention_geometry g;
  g.num_q_heads = q_heads;
  g.num_kv_heads = kv_heads;
  g.head_dim = head_dim;
  g.scale = 1.0f;
  return g;
}

// Checks the partition against the batch: prefill tiles cover each
// multi-token sequence's rows once with the right key range; decode splits
// tile [0, position + 1) without gaps or overlaps.
void expect_covers(const step_batch& b, const attention_work& w) {
  std::map<std::int32_t, int> rows_seen;
  for (const prefill_work_item& item : w.prefill) {
    ASSERT_GE(item.q_count, 1);
    ASSERT_LE(item.q_count, w.tokens_per_tile);
    int last = 0;
    for (int t = item.q_begin; t < item.q_begin + item.q_count; ++t) {
      ++rows_seen[t];
      ASSERT_GE(t, b.query_start[item.seq]);
      ASSERT_LT(t, b.query_start[item.seq + 1]);
      last = std::max(last, b.positions[t]);
    }
    EXPECT_EQ(item.kv_end, last + 1);
  }
  std::map<std::int32_t, std::vector<std::pair<int, int>>> ranges;
  for (const decode_work_item& item : w.decode) {
    EXPECT_LT(item.kv_begin, item.kv_end) << "empty split";
    ranges[item.token].push_back({item.kv_begin, item.kv_end});
    ++rows_seen[item.token];
  }
  for (std::size_t s = 0; s + 1 < b.query_start.size(); ++s) {
    for (int t = b.query_start[s]; t < b.query_start[s + 1]; ++t) {
      EXPECT_GE(rows_seen[t], 1) << "row " << t << " not covered";
      const bool decode = b.query_start[s + 1] - b.query_start[s] == 1;
      if (!decode) {
        EXPECT_EQ(rows_seen[t], 1);
      } else {
        auto spans = ranges[t];
        std::sort(spans.begin(), spans.end());
        int next = 0;
        for (const auto& [begin, end] : spans) {
          EXPECT_EQ(begin, next);
          next = end;
        }
        EXPECT_EQ(next, b.positions[t] + 1);
      }
    }
  }
}

TEST(AttentionPlan, PrefillTilesPackGqaGroupsIntoRows) {
  const step_batch b = make_batch({{0, 37}, {100, 64}, {5, 1}});
  const attention_work w = partition_attention(b, geometry(32, 8, 128), {132, 0});
  EXPECT_EQ(w.heads_per_tile, 4);
  EXPECT_EQ(w.group_parts, 1);
  EXPECT_EQ(w.tokens_per_tile, 16);  // 64 rows / 4 heads
  EXPECT_EQ(w.prefill.size(), 3u + 4u);
  expect_covers(b, w);
}

TEST(AttentionPlan, GroupsLargerThanATileSplitAcrossBlocks) {
  const attention_work w = partition_attention(make_batch({{0, 3}}), geometry(80, 1, 64), {132, 0});
  EXPECT_EQ(w.heads_per_tile, 64);
  EXPECT_EQ(w.group_parts, 2);
  EXPECT_EQ(w.tokens_per_tile, 1);
  const attention_work odd = partition_attention(make_batch({{0, 3}}), geometry(14, 2, 96), {132, 0});
  EXPECT_EQ(odd.heads_per_tile, 7);
  EXPECT_EQ(odd.tokens_per_tile, 4);  // generic head_dim: 32-row tiles, 32 / 7, the last 4 rows padding
  const attention_work wide = partition_attention(make_batch({{0, 3}}), geometry(8, 1, 256), {132, 0});
  EXPECT_EQ(wide.tokens_per_tile, 4);  // 32-row tiles for head_dim 256
}

TEST(AttentionPlan, ADraftTreesTokensEachGetDecodeItemsOverTheirDepthsKeys) {
  step_batch b = make_batch({{0, 37}, {300, 5}});
  // The second sequence feeds a tree: root at 300, nodes 1..4 with parents 0, 1, 0, 3.
  b.tree_parent.assign(b.token_ids.size(), -1);
  const std::int32_t root = b.query_start[1];
  const std::vector<std::int32_t> parents = {0, 1, 0, 3}, depths = {0, 1, 2, 1, 2};
  for (std::int32_t i = 1; i <= 4; ++i) {
    b.tree_parent[static_cast<std::size_t>(root + i)] = root + parents[static_cast<std::size_t>(i) - 1];
    b.positions[static_cast<std::size_t>(root + i)] = 300 + depths[static_cast<std::size_t>(i)];
  }
  const attention_work w = partition_attention(b, geometry(32, 8, 128), {132, 0});
  std::map<std::int32_t, int> keys;  // token -> keys covered by its decode items
  for (const decode_work_item& item : w.decode) keys[item.token] += item.kv_end - item.kv_begin;
  for (std::int32_t i = 0; i <= 4; ++i) EXPECT_EQ(keys[root + i], 301 + depths[static_cast<std::size_t>(i)]);
  for (const prefill_work_item& item : w.prefill) EXPECT_EQ(item.seq, 0) << "the tree's sequence has no tiles";
}

TEST(AttentionPlan, LongLonelyDecodesAreSplitShortCrowdedOnesAreNot) {
  const step_batch lonely = make_batch({{8191, 1}});
  const attention_work split = partition_attention(lonely, geometry(32, 8, 128), {132, 0});
  EXPECT_GT(split.decode.size(), 1u);
  EXPECT_LE(split.decode.size(), static_cast<std::size_t>(8192 / min_keys_per_split));
  ASSERT_EQ(split.merges.size(), 1u);
  EXPECT_EQ(split.merges[0].num_partials, static_cast<int>(split.decode.size()));
  EXPECT_EQ(split.num_partials, static_cast<int>(split.decode.size()));
  expect_covers(lonely, split);

  std::vector<std::pair<int, int>> many(300, {999, 1});
  const step_batch crowded = make_batch(many);
  const attention_work whole = partition_attention(crowded, geometry(32, 8, 128), {132, 0});
  EXPECT_EQ(whole.decode.size(), 300u);
  EXPECT_TRUE(whole.merges.empty());
  EXPECT_EQ(whole.num_partials, 0);

  const attention_work short_one = partition_attention(make_batch({{10, 1}}), geometry(32, 8, 128), {132, 0});
  EXPECT_EQ(short_one.decode.size(), 1u);
  EXPECT_EQ(short_one.decode[0].partial, -1);
}

TEST(AttentionPlan, ForcedSplitsCoverRaggedRandomBatches) {
  std::mt19937 rng(std::random_device{}());
  for (int round = 0; round < 50; ++round) {
    std::vector<std::pair<int, int>> shapes;
    const int sequences = 1 + static_cast<int>(rng() % 12);
    for (int s = 0; s < sequences; ++s) {
      const int cached = static_cast<int>(rng() % 9000);
      const int fresh = rng() % 2 == 0 ? 1 : 1 + static_cast<int>(rng() % 300);
      shapes.push_back({cached, fresh});
    }
    const step_batch b = make_batch(shapes);
    const int forced = static_cast<int>(rng() % 9);  // 0 = planned
    const attention_work w = partition_attention(b, geometry(16, 2, 64), {108, forced});
    expect_covers(b, w);
    int partials = 0;
    for (const decode_merge_item& m : w.merges) {
      EXPECT_EQ(m.first_partial, partials);
      partials += m.num_partials;
      EXPECT_GE(m.num_partials, 2);
    }
    EXPECT_EQ(partials, w.num_partials);
  }
}

}  // namespace
}  // namespace troupe::cuda

#endif  // TROUPE_HAVE_CUDA
