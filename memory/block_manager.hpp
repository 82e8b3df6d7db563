#pragma once
// The KV manager's pure core: per-sequence block tables over the device
// pool, prefix caching by hash chains of full blocks, copy-on-write for
// forked choices, and the host swap tier. It plans block ids and copies;
// the executor runs the copies. No threads, no clocks: one kv_request in,
// one kv_reply out (kv_protocol.hpp).

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "memory/block_pool.hpp"
#include "memory/kv_protocol.hpp"

namespace troupe {

/// Sizes and switches of a block manager.
struct block_manager_config {
  /// block_size and enable_prefix_caching at the registry defaults of the
  /// knobs of those names (config/knobs.cpp); no pools.
  block_manager_config();

  std::int32_t block_size;              ///< tokens per block
  std::int32_t num_device_blocks = 0;   ///< device pool size in blocks
  std::int32_t num_host_blocks = 0;     ///< host swap pool size in blocks (0: no swapping)
  bool enable_prefix_caching;           ///< reuse full blocks of identical prefixes
  std::optional<siphash_key> hash_key;  ///< key of the block digests; none: a random key per manager
};

/// Block tables, prefix cache, copy-on-write and swap planning.
class block_manager final : public kv_planner {
 public:
  /// Throws std::invalid_argument when a size is not positive (host blocks may be 0).
  explicit block_manager(const block_manager_config& config);

  /// Applies the request (see kv_protocol.hpp for the order and the rules).
  kv_reply plan(const kv_request& request) override;

  /// Occupancy and cumulative prefix counters now.
  kv_usage usage() const;
  /// The sizes it was built with.
  const block_manager_config& config() const { return config_; }
  /// The key of its block digests: config().hash_key, or the random one it drew.
  const siphash_key& hash_key() const { return hash_key_; }
  /// The device block table of a resident sequence (empty when swapped or unknown).
  std::span<const std::int32_t> block_table(sequence_id seq) const;
  /// The host slots of a swapped sequence (empty otherwise).
  std::span<const std::int32_t> host_table(sequence_id seq) const;
  /// Settled slots (tokens) a sequence has, 0 when unknown.
  std::int32_t num_tokens(sequence_id seq) const;
  /// Unsettled speculative slots after its tokens, 0 when none or unknown.
  std::int32_t num_speculative(sequence_id seq) const;
  /// Whether it holds `seq` (on device or host).
  bool has_sequence(sequence_id seq) const { return seqs_.count(seq) != 0; }
  /// Whether `seq` is in the host pool.
  bool is_swapped(sequence_id seq) const;
  /// Sequences it holds.
  std::size_t num_sequences() const { return seqs_.size(); }
  /// Read access to the pool (reference counts, free-list order), for tests and stats.
  const device_block_pool& device_pool() const { return pool_; }
  const host_slot_pool& host_pool() const { return host_; }
  /// Forgets every cached-but-free block (an admin action).
  void reset_prefix_cache() { pool_.clear_cached_free(); }
  /// Cross-checks the tables, reference counts, free lists and host slots;
  /// empty when consistent, else what is wrong.
  std::string check_invariants() const;

 private:
  struct sequence_kv {
    std::vector<std::int32_t> blocks;       ///< device table while resident
    std::vector<std::int32_t> host_blocks;  ///< host slots while swapped
    bool swapped = false;
    std::vector<std::int32_t> tokens;  ///< ids of every settled slot, in order
    std::int32_t speculative = 0;      ///< unsettled slots after `tokens` (resident only)
    std::vector<digest128> digests;    ///< chain digest of each block full of settled tokens
    std::int32_t adapter_id = 0;
    std::uint64_t cache_salt = 0;  ///< prefix-cache partition (kv_allocate::cache_salt)
    bool cache_blocks = true;
  };
  void do_settle(const kv_settle& op, kv_reply& reply);
  void do_fork(const kv_fork& op, kv_reply& reply);
  void do_free(const kv_free& op, kv_reply& reply);
  void do_swap_out(const kv_swap_out& op, kv_reply& reply);
  void do_append(const kv_append& op, kv_reply& reply);
  void do_swap_in(const kv_swap_in& op, kv_reply& reply);
  void do_allocate(const kv_allocate& op, kv_reply& reply);

  /// Blocks needed to hold `tokens` slots.
  std::int32_t blocks_for(std::int64_t tokens) const;
  /// Key of full block `index` of `seq` given its token ids.
  cached_block_key block_key(const sequence_kv& seq, std::size_t index, std::span<const std::int32_t> tokens) const;
  /// Leading blocks of `tokens` found in the cache (at most `max_blocks`).
  std::vector<std::int32_t> find_cached_prefix(const kv_allocate& op, std::int32_t max_blocks,
                                               std::vector<digest128>& digests) const;
  /// Adds slots for `tokens`, then `speculative` unsettled ones, to a
  /// resident sequence whose capacity and copy-on-write were already
  /// checked; records the table change.
  void grow(sequence_id id, sequence_kv& seq, std::span<const std::int32_t> tokens, std::int32_t speculative,
            std::int32_t keep_from, kv_reply& reply);
  /// Releases the blocks past those its settled tokens need (after dropping
  /// its speculative slots); the number released.
  std::int32_t trim_to_tokens(sequence_kv& seq);
  /// Indexes every newly full block of `seq`.
  void cache_full_blocks(sequence_kv& seq);
  /// Whether appending to `seq` must first copy its partially filled last
  /// block: shared with another table, or in the prefix cache.
  bool needs_copy_on_write(const sequence_kv& seq) const;
  void release_device_blocks(sequence_kv& seq, bool forget_prefix);

  block_manager_config config_;
  siphash_key hash_key_;
  device_block_pool pool_;
  host_slot_pool host_;
  std::unordered_map<sequence_id, sequence_kv> seqs_;
  std::uint64_t plan_counter_ = 0;
  std::uint64_t prefix_query_tokens_ = 0;
  std::uint64_t prefix_hit_tokens_ = 0;
};

}  // namespace troupe
