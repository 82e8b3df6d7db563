// Speculative slots in the block manager (block_size 4): appends with
// num_speculative, settles, and what frees, swap-outs and forks do with
// slots that are not settled yet. Free blocks are handed out in id order at
// first, so the expected block ids follow from the pool's free-list order.

#include <gtest/gtest.h>

#include "tests/memory/block_manager_fixture.hpp"

namespace troupe::testing {
namespace {

using ids = std::vector<std::int32_t>;

class SpeculativeBlockManager : public block_manager_fixture {
 protected:
  kv_reply speculate(sequence_id seq, std::vector<std::int32_t> tokens, std::int32_t slots) {
    kv_request request;
    request.appends.push_back({seq, std::move(tokens), slots});
    return send(request);
  }
  kv_reply settle(sequence_id seq, std::vector<std::int32_t> accepted) {
    kv_request request;
    request.settles.push_back({seq, static_cast<std::int32_t>(accepted.size()), std::move(accepted)});
    return send(request);
  }
  kv_reply fork(sequence_id parent, sequence_id child) {
    kv_request request;
    request.forks.push_back({parent, child});
    return send(request);
  }
  bool cached(std::int32_t block) { return kv().device_pool().is_cached(block); }
  std::vector<std::int32_t> cached_tokens(std::int32_t block) {
    const auto tokens = kv().device_pool().cached_tokens(block);
    return {tokens.begin(), tokens.end()};
  }
};

TEST_F(SpeculativeBlockManager, SpeculativeSlotsGetBlocksButNoBlockWithThemIsCached) {
  make();
  allocate(1, iota_tokens(100, 2), 2);
  const kv_reply reply = speculate(1, {102}, 5);  // 3 settled + 5 unsettled slots: blocks 0 and 1
  EXPECT_TRUE(reply.refused.empty());
  EXPECT_EQ(table(1), (ids{0, 1}));
  EXPECT_EQ(kv().num_tokens(1), 3);
  EXPECT_EQ(kv().num_speculative(1), 5);
  EXPECT_FALSE(cached(0)) << "block 0 holds an unsettled slot";
  EXPECT_FALSE(cached(1));
  EXPECT_EQ(reply.usage.device_free_blocks, 14);
}

TEST_F(SpeculativeBlockManager, SettleKeepsTheAcceptedSlotsAndCachesBlocksTheyFill) {
  make();
  allocate(1, iota_tokens(100, 2), 2);
  speculate(1, {102}, 5);
  const kv_reply reply = settle(1, {103, 104});  // 5 settled: still two blocks, block 0 now full
  EXPECT_TRUE(reply.refused.empty());
  EXPECT_TRUE(reply.deltas.empty()) << "no block was released";
  EXPECT_EQ(table(1), (ids{0, 1}));
  EXPECT_EQ(kv().num_tokens(1), 5);
  EXPECT_EQ(kv().num_speculative(1), 0);
  EXPECT_TRUE(cached(0));
  EXPECT_EQ(cached_tokens(0), iota_tokens(100, 4));
  EXPECT_FALSE(cached(1));
}

TEST_F(SpeculativeBlockManager, SettleReleasesRejectedSlotsAndReportsTheTruncation) {
  make();
  allocate(1, iota_tokens(100, 2), 2);
  speculate(1, {102}, 5);
  const kv_reply reply = settle(1, {});
  ASSERT_EQ(reply.deltas.size(), 1u);
  EXPECT_EQ(reply.deltas[0].seq, 1u);
  EXPECT_EQ(reply.deltas[0].keep, 1);
  EXPECT_TRUE(reply.deltas[0].appended.empty());
  EXPECT_EQ(table(1), (ids{0}));
  EXPECT_EQ(kv().num_tokens(1), 3);
  EXPECT_EQ(reply.usage.device_free_blocks, 15);
  EXPECT_FALSE(cached(0)) << "the rejected slot's block is not full of settled tokens";
}

TEST_F(SpeculativeBlockManager, ARejectedDraftNeverBecomesAPrefixHit) {
  make();
  allocate(1, iota_tokens(100, 3), 3);
  speculate(1, {103}, 4);  // block 0 full and cached at once; block 1 holds only unsettled slots
  settle(1, {});           // the draft 7 at position 4 was rejected
  append(1, {104, 105, 106, 107});
  std::vector<std::int32_t> with_draft = iota_tokens(100, 4);
  with_draft.insert(with_draft.end(), {7, 105, 106, 107, 1});
  EXPECT_EQ(allocate(2, with_draft, 9).allocated.at(0).cached_tokens, 4);
  EXPECT_EQ(allocate(3, iota_tokens(100, 9), 9).allocated.at(0).cached_tokens, 8);
}

TEST_F(SpeculativeBlockManager, SettleAndAppendInOneRequestSettleFirst) {
  make();
  allocate(1, iota_tokens(100, 2), 2);
  speculate(1, {102}, 3);
  kv_request request;
  request.appends.push_back({1, {104}, 2});
  request.settles.push_back({1, 1, {103}});
  const kv_reply reply = send(request);
  EXPECT_TRUE(reply.refused.empty());
  EXPECT_EQ(kv().num_tokens(1), 5);
  EXPECT_EQ(kv().num_speculative(1), 2);
  EXPECT_EQ(table(1), (ids{0, 2})) << "the settle released block 1 before the append took a block";
}

TEST_F(SpeculativeBlockManager, MalformedSpeculativeItemsAreRefusedAndChangeNothing) {
  make();
  allocate(1, iota_tokens(100, 2), 2);
  EXPECT_EQ(speculate(1, {}, 2).refused.at(0).why, kv_refusal::invalid) << "slots need a token before them";
  speculate(1, {102}, 2);
  EXPECT_EQ(append(1, {103}).refused.at(0).why, kv_refusal::invalid) << "unsettled slots come first";
  kv_request too_many;
  too_many.settles.push_back({1, 3, {1, 2, 3}});
  EXPECT_EQ(send(too_many).refused.at(0).why, kv_refusal::invalid);
  kv_request mismatched;
  mismatched.settles.push_back({1, 1, {}});
  EXPECT_EQ(send(mismatched).refused.at(0).why, kv_refusal::invalid);
  kv_request unknown;
  unknown.settles.push_back({9, 0, {}});
  const kv_reply reply = send(unknown);
  EXPECT_EQ(reply.refused.at(0).op, kv_op::settle);
  EXPECT_EQ(reply.refused.at(0).why, kv_refusal::unknown_sequence);
  EXPECT_EQ(kv().num_tokens(1), 3);
  EXPECT_EQ(kv().num_speculative(1), 2);
}

TEST_F(SpeculativeBlockManager, FreeDropsUnsettledSlotsWithEverythingElse) {
  make();
  allocate(1, iota_tokens(100, 2), 2);
  speculate(1, {102}, 9);
  const kv_reply reply = free(1);
  EXPECT_EQ(reply.usage.device_free_blocks, 16);
  EXPECT_EQ(reply.usage.device_cached_free_blocks, 0);
}

TEST_F(SpeculativeBlockManager, SwapOutDropsUnsettledSlotsAndSwapsTheRest) {
  make();
  allocate(1, iota_tokens(100, 2), 2);
  speculate(1, {102}, 6);  // blocks 0, 1, 2
  kv_request out;
  out.swap_outs.push_back({1});
  const kv_reply reply = send(out);
  EXPECT_EQ(reply.copies.size(), 1u) << "only the block with settled tokens goes to the host";
  EXPECT_EQ(kv().host_table(1).size(), 1u);
  EXPECT_EQ(kv().num_speculative(1), 0);
  EXPECT_EQ(reply.usage.device_free_blocks, 16);
  kv_request in;
  in.swap_ins.push_back({1, {103}});
  EXPECT_TRUE(send(in).refused.empty());
  EXPECT_EQ(kv().num_tokens(1), 4);
}

TEST_F(SpeculativeBlockManager, ASwapOutThatDoesNotFitKeepsTheUnsettledSlots) {
  make({.device_blocks = 16, .host_blocks = 1});
  allocate(1, iota_tokens(100, 6), 6);
  speculate(1, {106}, 3);  // 7 settled tokens need two host blocks; the host has one
  kv_request out;
  out.swap_outs.push_back({1});
  EXPECT_EQ(send(out).refused.at(0).why, kv_refusal::no_host_blocks);
  EXPECT_EQ(kv().num_speculative(1), 3);
  EXPECT_EQ(table(1), (ids{0, 1, 2}));
}

TEST_F(SpeculativeBlockManager, AForkSharesOnlyTheSettledSlots) {
  make();
  allocate(1, iota_tokens(100, 4), 4);
  speculate(1, {104}, 5);  // blocks 0 (full), 1 (104 + 3 unsettled), 2 (2 unsettled)
  fork(1, 2);
  EXPECT_EQ(table(2), (ids{0, 1}));
  EXPECT_EQ(kv().num_tokens(2), 5);
  EXPECT_EQ(kv().num_speculative(2), 0);
  EXPECT_EQ(kv().device_pool().ref_count(1), 2);
  EXPECT_EQ(kv().device_pool().ref_count(2), 1);
  settle(1, {105, 106, 107});  // fills the shared block 1 for the parent
  EXPECT_EQ(table(1), (ids{0, 1}));
  // The child's first write copies the shared, partially filled block.
  const kv_reply child = append(2, {200});
  ASSERT_EQ(child.copies.size(), 1u);
  EXPECT_EQ(child.copies[0].src, 1);
  EXPECT_EQ(table(2), (ids{0, 3})) << "block 2, released by the settle, went to the back of the free list";
}

TEST_F(SpeculativeBlockManager, AChildNeverWritesIntoABlockItsParentsSettleCached) {
  make();
  allocate(1, iota_tokens(100, 4), 4);
  speculate(1, {104}, 3);  // block 1: 104 and three drafts, written before the fork
  fork(1, 2);
  settle(1, {105, 106, 107});  // block 1 is full for the parent and cached
  free(1);                     // the child alone holds block 1, filled to one slot in its view
  ASSERT_TRUE(cached(1));
  const kv_reply reply = append(2, {200});
  ASSERT_EQ(reply.copies.size(), 1u) << "writing into a cached block would corrupt the cache";
  EXPECT_EQ(reply.copies[0].src, 1);
  EXPECT_TRUE(cached(1));
  EXPECT_EQ(cached_tokens(1), iota_tokens(104, 4));
}

TEST_F(SpeculativeBlockManager, ASpeculativeAppendCopiesASharedLastBlockFirst) {
  make();
  allocate(1, iota_tokens(100, 5), 5);
  fork(1, 2);
  const kv_reply reply = speculate(2, {105}, 4);  // 6 settled + 4: blocks 0 (shared), copy of 1, new 2
  ASSERT_EQ(reply.copies.size(), 1u);
  EXPECT_EQ(reply.copies[0].src, 1);
  EXPECT_EQ(reply.copies[0].dst, 2);
  EXPECT_EQ(table(2), (ids{0, 2, 3}));
  EXPECT_EQ(kv().device_pool().ref_count(1), 1);
  settle(2, {});
  EXPECT_EQ(table(2), (ids{0, 2}));
}

}  // namespace
}  // namespace troupe::testing
