#pragma once
// A block manager under test plus helpers; the teardown frees every
// sequence the test created and asserts the pools are whole again (no leak).

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <set>
#include <vector>

#include "memory/block_manager.hpp"

namespace troupe::testing {

/// Tokens first, first+1, ... (length `count`).
inline std::vector<std::int32_t> iota_tokens(std::int32_t first, std::int32_t count) {
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(count));
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

/// The pool a test's block manager manages.
struct pool_sizes {
  std::int32_t device_blocks = 16;
  std::int32_t host_blocks = 8;
  std::int32_t block_size = 4;  ///< tokens per block
  bool prefix_caching = true;
};

class block_manager_fixture : public ::testing::Test {
 protected:
  /// Builds the manager; call at the start of each test.
  void make(const pool_sizes& sizes = {}) {
    block_manager_config config;
    config.block_size = sizes.block_size;
    config.num_device_blocks = sizes.device_blocks;
    config.num_host_blocks = sizes.host_blocks;
    config.enable_prefix_caching = sizes.prefix_caching;
    manager_ = std::make_unique<block_manager>(config);
  }

  block_manager& kv() { return *manager_; }

  /// One request holding one allocation.
  kv_reply allocate(sequence_id seq, std::vector<std::int32_t> tokens, std::int32_t new_tokens,
                    std::int32_t adapter = 0) {
    kv_request request;
    request.allocations.push_back({seq, std::move(tokens), new_tokens, adapter, true});
    return send(request);
  }
  kv_reply append(sequence_id seq, std::vector<std::int32_t> tokens) {
    kv_request request;
    request.appends.push_back({seq, std::move(tokens)});
    return send(request);
  }
  kv_reply free(sequence_id seq) {
    kv_request request;
    request.frees.push_back({seq, false});
    return send(request);
  }
  /// Sends a request, remembers the sequences it names, checks invariants.
  kv_reply send(const kv_request& request) {
    for (const auto& op : request.allocations) created_.insert(op.seq);
    for (const auto& op : request.forks) created_.insert(op.child);
    kv_reply reply = manager_->plan(request);
    EXPECT_EQ(manager_->check_invariants(), "");
    return reply;
  }
  std::vector<std::int32_t> table(sequence_id seq) const {
    const auto t = manager_->block_table(seq);
    return {t.begin(), t.end()};
  }

  void TearDown() override {
    if (!manager_) return;
    kv_request request;
    for (sequence_id seq : created_) {
      if (manager_->has_sequence(seq)) request.frees.push_back({seq, false});
    }
    manager_->plan(request);
    EXPECT_EQ(manager_->num_sequences(), 0u);
    EXPECT_EQ(manager_->usage().device_free_blocks, manager_->config().num_device_blocks) << "device blocks leaked";
    EXPECT_EQ(manager_->usage().host_free_blocks, manager_->config().num_host_blocks) << "host blocks leaked";
    EXPECT_EQ(manager_->check_invariants(), "");
  }

  std::unique_ptr<block_manager> manager_;
  std::set<sequence_id> created_;
};

}  // namespace troupe::testing
