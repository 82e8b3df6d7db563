// Block manager behaviour on hand-worked cases (block_size 4 unless said).
// Free blocks are handed out in id order at first, so expected block ids
// below follow from the pool's documented free-list order.

#include <gtest/gtest.h>

#include "tests/memory/block_manager_fixture.hpp"

namespace troupe::testing {
namespace {

using BlockManager = block_manager_fixture;

using ids = std::vector<std::int32_t>;

TEST_F(BlockManager, AllocationGivesATableSizedForTheChunk) {
  make();
  const kv_reply reply = allocate(1, iota_tokens(100, 10), 6);
  ASSERT_EQ(reply.allocated.size(), 1u);
  EXPECT_EQ(reply.allocated[0].cached_tokens, 0);
  EXPECT_EQ(reply.allocated[0].num_tokens, 6);
  EXPECT_EQ(table(1), (ids{0, 1}));
  ASSERT_EQ(reply.deltas.size(), 1u);
  EXPECT_EQ(reply.deltas[0].keep, 0);
  EXPECT_EQ(reply.deltas[0].appended, (ids{0, 1}));
  EXPECT_EQ(reply.usage.device_free_blocks, 14);

  const kv_reply more = append(1, {106, 107, 108, 109});
  EXPECT_EQ(table(1), (ids{0, 1, 2}));
  ASSERT_EQ(more.deltas.size(), 1u);
  EXPECT_EQ(more.deltas[0].keep, 2);
  EXPECT_EQ(more.deltas[0].appended, (ids{2}));
  EXPECT_EQ(kv().num_tokens(1), 10);
  EXPECT_TRUE(append(1, {}).deltas.empty());
}

TEST_F(BlockManager, ALaterRequestReusesEveryCachedLeadingBlock) {
  make();
  allocate(1, iota_tokens(100, 10), 10);  // blocks 0 [100..103], 1 [104..107], 2 partial
  std::vector<std::int32_t> other = iota_tokens(100, 9);
  other.push_back(7);
  const kv_reply reply = allocate(2, other, 10);
  ASSERT_EQ(reply.allocated.size(), 1u);
  EXPECT_EQ(reply.allocated[0].cached_tokens, 8);
  EXPECT_EQ(reply.allocated[0].num_tokens, 10);
  EXPECT_EQ(table(2), (ids{0, 1, 3}));
  EXPECT_EQ(kv().device_pool().ref_count(0), 2);
  EXPECT_EQ(kv().device_pool().ref_count(1), 2);
  EXPECT_EQ(kv().device_pool().ref_count(2), 1);
  EXPECT_EQ(reply.usage.prefix_query_tokens, 20u);
  EXPECT_EQ(reply.usage.prefix_hit_tokens, 8u);
}

TEST_F(BlockManager, HitsStopAtTheFirstDifferingTokenAndNeverCrossAdapters) {
  make();
  allocate(1, iota_tokens(100, 12), 12);
  std::vector<std::int32_t> changed = iota_tokens(100, 12);
  changed[5] = 1;
  EXPECT_EQ(allocate(2, changed, 12).allocated.at(0).cached_tokens, 4);
  std::vector<std::int32_t> first_differs = iota_tokens(100, 12);
  first_differs[0] = 1;
  EXPECT_EQ(allocate(3, first_differs, 12).allocated.at(0).cached_tokens, 0);
  EXPECT_EQ(allocate(4, iota_tokens(100, 12), 12, /*adapter=*/7).allocated.at(0).cached_tokens, 0);
  // The adapter's own blocks are cached under its id.
  EXPECT_EQ(allocate(5, iota_tokens(100, 12), 12, 7).allocated.at(0).cached_tokens, 8);
}

TEST_F(BlockManager, AtLeastOneTokenIsLeftToCompute) {
  make();
  allocate(1, iota_tokens(0, 8), 8);
  const kv_reply reply = allocate(2, iota_tokens(0, 8), 8);
  EXPECT_EQ(reply.allocated.at(0).cached_tokens, 4);
  EXPECT_EQ(reply.allocated.at(0).num_tokens, 8);
}

TEST_F(BlockManager, BlocksPlannedInTheSameRequestAreNotHits) {
  make();
  kv_request request;
  request.allocations.push_back({1, iota_tokens(0, 9), 9, 0, true});
  request.allocations.push_back({2, iota_tokens(0, 9), 9, 0, true});
  const kv_reply reply = send(request);
  ASSERT_EQ(reply.allocated.size(), 2u);
  EXPECT_EQ(reply.allocated[1].cached_tokens, 0);
}

TEST_F(BlockManager, CachedFreeBlocksAreHitAndForgottenOnRequest) {
  make();
  allocate(1, iota_tokens(0, 9), 9);
  free(1);
  EXPECT_EQ(kv().usage().device_cached_free_blocks, 2);
  EXPECT_EQ(allocate(2, iota_tokens(0, 9), 9).allocated.at(0).cached_tokens, 8);
  EXPECT_EQ(table(2), (ids{0, 1, 3}));
  kv_request forget;
  forget.frees.push_back({2, true});
  send(forget);
  EXPECT_EQ(kv().usage().device_cached_free_blocks, 0);
  EXPECT_EQ(allocate(3, iota_tokens(0, 9), 9).allocated.at(0).cached_tokens, 0);
}

TEST_F(BlockManager, CopyOnWriteCopiesASharedPartialBlockOncePerWriter) {
  make();
  allocate(1, iota_tokens(0, 6), 6);  // block 0 full, block 1 holds 2 tokens
  kv_request forks;
  forks.forks.push_back({1, 2});
  forks.forks.push_back({1, 3});
  const kv_reply forked = send(forks);
  EXPECT_EQ(table(2), (ids{0, 1}));
  EXPECT_EQ(forked.deltas.size(), 2u);
  EXPECT_TRUE(forked.copies.empty());
  EXPECT_EQ(kv().device_pool().ref_count(1), 3);

  const kv_reply first = append(2, {50});
  ASSERT_EQ(first.copies.size(), 1u);
  EXPECT_EQ(first.copies[0].from, block_location::device);
  EXPECT_EQ(first.copies[0].src, 1);
  EXPECT_EQ(first.copies[0].to, block_location::device);
  EXPECT_EQ(first.copies[0].dst, 2);
  EXPECT_EQ(table(2), (ids{0, 2}));
  EXPECT_EQ(first.deltas.at(0).keep, 1);
  EXPECT_EQ(first.deltas.at(0).appended, (ids{2}));

  const kv_reply second = append(3, {60, 61, 62});  // copy, then a new block for the overflow
  ASSERT_EQ(second.copies.size(), 1u);
  EXPECT_EQ(second.copies[0].src, 1);
  EXPECT_EQ(second.copies[0].dst, 3);
  EXPECT_EQ(table(3), (ids{0, 3, 4}));

  const kv_reply last = append(1, {70});  // the parent is the last holder: no copy
  EXPECT_TRUE(last.copies.empty());
  EXPECT_EQ(table(1), (ids{0, 1}));
  EXPECT_EQ(kv().device_pool().ref_count(0), 3);
  EXPECT_EQ(kv().device_pool().ref_count(1), 1);
}

TEST_F(BlockManager, FullSharedBlocksAreNeverCopied) {
  make();
  allocate(1, iota_tokens(0, 8), 8);
  kv_request fork;
  fork.forks.push_back({1, 2});
  send(fork);
  const kv_reply reply = append(2, {9});
  EXPECT_TRUE(reply.copies.empty());
  EXPECT_EQ(table(2), (ids{0, 1, 2}));
}

TEST_F(BlockManager, CachedFreeBlocksAreEvictedLeastRecentlyReleasedFirst) {
  make({.device_blocks = 6, .host_blocks = 0});
  allocate(1, iota_tokens(0, 8), 8);  // blocks 0, 1
  free(1);
  EXPECT_EQ(kv().device_pool().free_list_in_eviction_order(), (ids{2, 3, 4, 5, 1, 0}));
  allocate(2, iota_tokens(100, 8), 8);  // blocks 2, 3
  free(2);
  EXPECT_EQ(kv().device_pool().free_list_in_eviction_order(), (ids{4, 5, 1, 0, 3, 2}));
  std::vector<std::int32_t> touch = iota_tokens(0, 8);
  touch.push_back(999);
  EXPECT_EQ(allocate(3, touch, 9).allocated.at(0).cached_tokens, 8);  // hits 0, 1; takes 4
  free(3);
  EXPECT_EQ(kv().device_pool().free_list_in_eviction_order(), (ids{5, 4, 3, 2, 1, 0}));
  allocate(4, iota_tokens(200, 12), 12);  // takes 5, 4, then evicts 3
  EXPECT_EQ(table(4), (ids{5, 4, 3}));
  EXPECT_EQ(kv().device_pool().free_list_in_eviction_order(), (ids{2, 1, 0}));
  EXPECT_EQ(allocate(5, iota_tokens(100, 9), 1).allocated.at(0).cached_tokens, 4);  // block 2 survived, 3 did not
}

TEST_F(BlockManager, SwapOutAndInPlanTheRightCopies) {
  make({.prefix_caching = false});
  allocate(1, iota_tokens(0, 10), 10);  // blocks 0, 1, 2
  kv_request out;
  out.swap_outs.push_back({1});
  const kv_reply swapped = send(out);
  ASSERT_EQ(swapped.copies.size(), 3u);
  for (std::int32_t i = 0; i < 3; ++i) {
    const block_copy& c = swapped.copies[static_cast<std::size_t>(i)];
    EXPECT_EQ(c.from, block_location::device);
    EXPECT_EQ(c.src, i);
    EXPECT_EQ(c.to, block_location::host);
    EXPECT_EQ(c.dst, i);
  }
  EXPECT_TRUE(table(1).empty());
  EXPECT_TRUE(kv().is_swapped(1));
  EXPECT_EQ(swapped.usage.device_free_blocks, 16);
  EXPECT_EQ(swapped.usage.host_free_blocks, 5);

  allocate(2, iota_tokens(50, 12), 12);  // takes 3, 4, 5
  kv_request in;
  in.swap_ins.push_back({1, {10}});
  const kv_reply back = send(in);
  ASSERT_EQ(back.copies.size(), 3u);
  const ids expected_dst{6, 7, 8};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back.copies[i].from, block_location::host);
    EXPECT_EQ(back.copies[i].src, static_cast<std::int32_t>(i));
    EXPECT_EQ(back.copies[i].to, block_location::device);
    EXPECT_EQ(back.copies[i].dst, expected_dst[i]);
  }
  EXPECT_EQ(table(1), expected_dst);
  EXPECT_EQ(kv().num_tokens(1), 11);
  EXPECT_EQ(back.usage.host_free_blocks, 8);
}

TEST_F(BlockManager, SwapInReusesBlocksStillInThePrefixCache) {
  make();
  allocate(1, iota_tokens(0, 10), 10);  // 0, 1 full and cached; 2 partial
  kv_request out;
  out.swap_outs.push_back({1});
  send(out);
  kv_request in;
  in.swap_ins.push_back({1, {}});
  const kv_reply back = send(in);
  ASSERT_EQ(back.copies.size(), 1u);  // only the partial block travels back
  EXPECT_EQ(back.copies[0].src, 2);
  EXPECT_EQ(back.copies[0].dst, 3);
  EXPECT_EQ(table(1), (ids{0, 1, 3}));
}

TEST_F(BlockManager, SwapOutBeyondHostCapacityIsRefusedAndChangesNothing) {
  make({.host_blocks = 2});
  allocate(1, iota_tokens(0, 10), 10);
  kv_request out;
  out.swap_outs.push_back({1});
  const kv_reply reply = send(out);
  ASSERT_EQ(reply.refused.size(), 1u);
  EXPECT_EQ(reply.refused[0].op, kv_op::swap_out);
  EXPECT_EQ(reply.refused[0].why, kv_refusal::no_host_blocks);
  EXPECT_TRUE(reply.copies.empty());
  EXPECT_EQ(table(1), (ids{0, 1, 2}));
  EXPECT_EQ(reply.usage.host_free_blocks, 2);
  EXPECT_EQ(reply.usage.device_free_blocks, 13);
}

TEST_F(BlockManager, ItemsThatDoNotFitChangeNothingWhileOthersProceed) {
  make({.device_blocks = 4, .host_blocks = 0});
  allocate(1, iota_tokens(0, 11), 11);  // 3 blocks, 1 free
  kv_request request;
  request.appends.push_back({1, {11, 12, 13, 14, 15, 16}});            // needs 2
  request.allocations.push_back({2, iota_tokens(40, 8), 8, 0, true});  // needs 2
  request.allocations.push_back({3, iota_tokens(80, 3), 3, 0, true});  // needs 1
  const kv_reply reply = send(request);
  ASSERT_EQ(reply.refused.size(), 2u);
  EXPECT_EQ(reply.refused[0].op, kv_op::append);
  EXPECT_EQ(reply.refused[0].seq, 1u);
  EXPECT_EQ(reply.refused[0].why, kv_refusal::no_device_blocks);
  EXPECT_EQ(reply.refused[1].op, kv_op::allocate);
  EXPECT_EQ(reply.refused[1].seq, 2u);
  EXPECT_EQ(kv().num_tokens(1), 11);
  EXPECT_EQ(table(1), (ids{0, 1, 2}));
  EXPECT_FALSE(kv().has_sequence(2));
  EXPECT_EQ(table(3), (ids{3}));
}

TEST_F(BlockManager, ARefusedAllocationLeavesItsPrefixHitsUntouched) {
  make({.device_blocks = 4, .host_blocks = 0});
  allocate(1, iota_tokens(0, 8), 8);
  free(1);                                                     // blocks 0, 1 cached and free
  allocate(2, iota_tokens(100, 5), 5);                         // takes 2, 3
  const kv_reply reply = allocate(3, iota_tokens(0, 13), 13);  // hits 2 blocks, needs 2 fresh: none left
  ASSERT_EQ(reply.refused.size(), 1u);
  EXPECT_EQ(kv().device_pool().ref_count(0), 0);
  EXPECT_EQ(kv().device_pool().ref_count(1), 0);
  EXPECT_EQ(kv().usage().device_cached_free_blocks, 2);
  EXPECT_EQ(kv().usage().prefix_query_tokens, 13u) << "a refused lookup is not counted";
}

TEST_F(BlockManager, BadItemsAreRefusedWithAReason) {
  make();
  allocate(1, iota_tokens(0, 5), 5);
  kv_request out;
  out.swap_outs.push_back({1});
  send(out);
  kv_request request;
  request.forks.push_back({1, 2});                         // parent swapped
  request.forks.push_back({99, 3});                        // unknown parent
  request.appends.push_back({1, {5}});                     // swapped
  request.appends.push_back({98, {5}});                    // unknown
  request.swap_ins.push_back({97, {}});                    // unknown
  request.allocations.push_back({1, {1, 2}, 1, 0, true});  // exists
  request.allocations.push_back({4, {}, 1, 0, true});      // no tokens
  request.allocations.push_back({5, {1, 2}, 0, 0, true});  // nothing to compute
  const kv_reply reply = send(request);
  ASSERT_EQ(reply.refused.size(), 8u);
  const kv_refusal expected[] = {kv_refusal::invalid,          kv_refusal::unknown_sequence, kv_refusal::invalid,
                                 kv_refusal::unknown_sequence, kv_refusal::unknown_sequence, kv_refusal::invalid,
                                 kv_refusal::invalid,          kv_refusal::invalid};
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(reply.refused[i].why, expected[i]) << "item " << i;
  EXPECT_EQ(kv().num_sequences(), 1u);
}

TEST(DeviceBlockPool, ADigestMatchWithOtherContentsIsNotAHit) {
  device_block_pool pool(2, 4);
  const std::int32_t block = pool.allocate();
  const std::vector<std::int32_t> tokens{1, 2, 3, 4};
  cached_block_key key{{11, 22}, {0, 0}, 0, tokens};
  ASSERT_TRUE(pool.register_block(block, key, /*plan=*/1));
  EXPECT_EQ(pool.lookup(key, 2), block);
  EXPECT_FALSE(pool.lookup(key, 1)) << "registered by the current plan";
  const std::vector<std::int32_t> other{1, 2, 3, 5};
  cached_block_key forged = key;
  forged.tokens = other;
  EXPECT_FALSE(pool.lookup(forged, 2));
  forged = key;
  forged.parent = {1, 0};
  EXPECT_FALSE(pool.lookup(forged, 2));
  forged = key;
  forged.adapter_id = 3;
  EXPECT_FALSE(pool.lookup(forged, 2));
  EXPECT_FALSE(pool.register_block(pool.allocate(), key, 2)) << "a digest is indexed once";
}

}  // namespace
}  // namespace troupe::testing
