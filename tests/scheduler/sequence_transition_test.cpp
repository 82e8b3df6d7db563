// A sequence's transitions between waiting, running, swapped and finished,
// each checked against the invariants of the status it ends in.

#include <gtest/gtest.h>

#include "actors/core/request_state.hpp"

namespace troupe::testing {
namespace {

constexpr std::int32_t block_size = 4;

struct SequenceTransition : ::testing::Test {
  SequenceTransition() {
    request.spec.prompt = {1, 2, 3, 4, 5, 6};
    request.spec.n = 2;
    seq.request = &request;
    parent.request = &request;
  }

  /// `s` resident with 6 computed tokens in two blocks, its last block shared.
  void make_running(sequence& s) {
    s.request = &request;
    s.to_allocated(/*shared_prefix_blocks=*/1);
    s.block_table = {3, 7};
    s.num_computed = 6;
    s.may_share_last_block = true;
    ASSERT_EQ(s.invariant_problem(block_size), "");
  }

  request_state request;
  sequence seq;
  sequence parent;
};

TEST_F(SequenceTransition, ANewSequenceWaitsWithoutKv) {
  EXPECT_EQ(seq.status, sequence_status::waiting);
  EXPECT_EQ(seq.invariant_problem(block_size), "");
}

TEST_F(SequenceTransition, AllocatedItRunsWithItsCachedPrefixShared) {
  seq.to_allocated(1);
  seq.block_table = {3, 7};
  seq.num_computed = 6;
  EXPECT_EQ(seq.status, sequence_status::running);
  EXPECT_TRUE(seq.kv_known);
  EXPECT_EQ(seq.shared_prefix_blocks, 1);
  EXPECT_FALSE(seq.may_share_last_block);
  EXPECT_EQ(seq.invariant_problem(block_size), "");
}

TEST_F(SequenceTransition, ForkedItSharesEveryBlockOfItsParent) {
  parent.to_allocated(0);
  parent.block_table = {3, 7};
  parent.num_computed = 6;
  seq.to_forked_from(parent);
  EXPECT_EQ(seq.status, sequence_status::running);
  EXPECT_TRUE(seq.kv_known);
  EXPECT_EQ(seq.block_table, parent.block_table);
  EXPECT_EQ(seq.num_computed, 6);
  EXPECT_EQ(seq.shared_prefix_blocks, 2);
  EXPECT_EQ(parent.shared_prefix_blocks, 2);
  EXPECT_TRUE(seq.may_share_last_block);
  EXPECT_TRUE(parent.may_share_last_block);
  EXPECT_EQ(seq.invariant_problem(block_size), "");
  EXPECT_EQ(parent.invariant_problem(block_size), "");
}

TEST_F(SequenceTransition, SwappedOutItsBlocksAreOnTheHostAndNothingIsShared) {
  make_running(seq);
  seq.to_swapped(2);
  EXPECT_EQ(seq.status, sequence_status::swapped);
  EXPECT_EQ(seq.host_blocks, 2);
  EXPECT_TRUE(seq.block_table.empty());
  EXPECT_EQ(seq.shared_prefix_blocks, 0);
  EXPECT_FALSE(seq.may_share_last_block);
  EXPECT_EQ(seq.num_computed, 6) << "swap-in resumes where it stopped";
  EXPECT_TRUE(seq.kv_known);
  EXPECT_EQ(seq.invariant_problem(block_size), "");
}

TEST_F(SequenceTransition, SwappedInItRunsInTheBlocksTheKvReplyGaveIt) {
  make_running(seq);
  seq.to_swapped(2);
  seq.block_table = {9, 10};  // the KV reply's delta, applied before the grant commits
  seq.to_swapped_in();
  EXPECT_EQ(seq.status, sequence_status::running);
  EXPECT_EQ(seq.host_blocks, 0);
  EXPECT_EQ(seq.num_computed, 6);
  EXPECT_EQ(seq.invariant_problem(block_size), "");
}

TEST_F(SequenceTransition, RecomputedFromRunningItDropsEveryBlock) {
  make_running(seq);
  seq.to_recompute();
  EXPECT_EQ(seq.status, sequence_status::waiting);
  EXPECT_FALSE(seq.kv_known);
  EXPECT_EQ(seq.num_computed, 0);
  EXPECT_TRUE(seq.block_table.empty());
  EXPECT_EQ(seq.shared_prefix_blocks, 0) << "stale sharing would be a wrong free-block estimate if it ran again";
  EXPECT_FALSE(seq.may_share_last_block);
  EXPECT_EQ(seq.invariant_problem(block_size), "");
}

TEST_F(SequenceTransition, RecomputedFromSwappedItDropsItsHostBlocks) {
  make_running(seq);
  seq.to_swapped(2);
  seq.to_recompute();
  EXPECT_EQ(seq.status, sequence_status::waiting);
  EXPECT_EQ(seq.host_blocks, 0);
  EXPECT_EQ(seq.num_computed, 0);
  EXPECT_EQ(seq.invariant_problem(block_size), "");
}

TEST_F(SequenceTransition, FinishedItHoldsNoKvWhereverItWas) {
  make_running(seq);
  seq.to_finished();
  EXPECT_EQ(seq.status, sequence_status::finished);
  EXPECT_EQ(seq.invariant_problem(block_size), "");

  sequence swapped;
  make_running(swapped);
  swapped.to_swapped(2);
  swapped.to_finished();
  EXPECT_EQ(swapped.host_blocks, 0);
  EXPECT_FALSE(swapped.kv_known);
  EXPECT_EQ(swapped.invariant_problem(block_size), "");
}

TEST_F(SequenceTransition, BrokenInvariantsAreNamed) {
  make_running(seq);
  seq.num_computed = 9;  // two blocks of four cannot hold nine tokens
  EXPECT_EQ(seq.invariant_problem(block_size), "a running sequence's blocks do not cover its computed tokens");
  seq.to_recompute();
  seq.kv_known = true;
  EXPECT_EQ(seq.invariant_problem(block_size), "a waiting or finished sequence with KV state left");
}

}  // namespace
}  // namespace troupe::testing
