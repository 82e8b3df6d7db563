// Prefix-cache isolation: the per-request cache salt partitions the cache,
// and the digest key is secret (drawn per manager unless a test fixes it).

#include <gtest/gtest.h>

#include "tests/memory/block_manager_fixture.hpp"

namespace troupe::testing {
namespace {

using BlockManagerIsolation = block_manager_fixture;

/// One allocation of `tokens` (all computed) in the partition `salt`.
kv_request salted_allocation(sequence_id seq, const std::vector<std::int32_t>& tokens, std::uint64_t salt) {
  kv_request request;
  kv_allocate op{seq, tokens, static_cast<std::int32_t>(tokens.size()), 0, true};
  op.cache_salt = salt;
  request.allocations.push_back(std::move(op));
  return request;
}

TEST_F(BlockManagerIsolation, DifferentSaltsShareNoBlock) {
  make();
  send(salted_allocation(1, iota_tokens(100, 12), 11));
  EXPECT_EQ(send(salted_allocation(2, iota_tokens(100, 12), 22)).allocated.at(0).cached_tokens, 0);
  EXPECT_EQ(send(salted_allocation(3, iota_tokens(100, 12), 0)).allocated.at(0).cached_tokens, 0)
      << "the unsalted partition is a partition of its own";
  EXPECT_EQ(kv().usage().prefix_hit_tokens, 0u);
}

TEST_F(BlockManagerIsolation, EqualSaltsShareTheirPrefix) {
  make();
  send(salted_allocation(1, iota_tokens(100, 12), 11));
  EXPECT_EQ(send(salted_allocation(2, iota_tokens(100, 12), 11)).allocated.at(0).cached_tokens, 8);
  EXPECT_EQ(allocate(3, iota_tokens(100, 12), 12).allocated.at(0).cached_tokens, 0);
  EXPECT_EQ(allocate(4, iota_tokens(100, 12), 12).allocated.at(0).cached_tokens, 8) << "salt 0 shares with salt 0";
}

TEST_F(BlockManagerIsolation, ASwappedSequenceReusesOnlyBlocksOfItsOwnSalt) {
  make({.device_blocks = 8, .host_blocks = 8});
  send(salted_allocation(1, iota_tokens(100, 8), 11));
  kv_request out;
  out.swap_outs.push_back({1});
  send(out);
  kv_request in;
  in.swap_ins.push_back({1, {}});
  const kv_reply reply = send(in);
  EXPECT_EQ(reply.copies.size(), 0u) << "its blocks were still cached on the device under its salt";
  send(salted_allocation(2, iota_tokens(100, 9), 11));
  EXPECT_EQ(kv().device_pool().ref_count(table(1)[0]), 2);
}

TEST(BlockManagerKey, ManagersWithoutAKeyDrawDifferentRandomKeys) {
  block_manager_config config;
  config.num_device_blocks = 4;
  const block_manager a(config), b(config);
  EXPECT_TRUE(a.hash_key().k0 != b.hash_key().k0 || a.hash_key().k1 != b.hash_key().k1);
  const siphash_key reference;
  EXPECT_FALSE(a.hash_key().k0 == reference.k0 && a.hash_key().k1 == reference.k1)
      << "the public reference key must not be the default";
}

TEST(BlockManagerKey, AnExplicitKeyIsKept) {
  block_manager_config config;
  config.num_device_blocks = 4;
  config.hash_key = siphash_key{1, 2};
  const block_manager manager(config);
  EXPECT_EQ(manager.hash_key().k0, 1u);
  EXPECT_EQ(manager.hash_key().k1, 2u);
}

}  // namespace
}  // namespace troupe::testing
