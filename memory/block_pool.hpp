#pragma once
// The device block pool: ref-counted blocks, the prefix-cache index of full
// blocks, and the free list in eviction order. The free list is two lists
// read as one: blocks holding nothing worth keeping (taken first), then
// cached-but-free blocks from least to most recently released (evicted LRU).
// Also the host swap pool's slot accounting.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "memory/siphash.hpp"

namespace troupe {

/// What a cached block holds: its chain digest and what the digest was made
/// from, kept to verify a hit (a digest match alone never shares K/V).
struct cached_block_key {
  digest128 digest;
  digest128 parent;  ///< digest of the previous block of the chain (zero for the first)
  std::int32_t adapter_id = 0;
  std::span<const std::int32_t> tokens;  ///< [block_size] the block's token ids
};

/// Device blocks: reference counts, prefix index, free lists.
class device_block_pool {
 public:
  /// A pool of `num_blocks` blocks of `block_size` tokens, all free.
  device_block_pool(std::int32_t num_blocks, std::int32_t block_size);

  /// Pool size in blocks.
  std::int32_t num_blocks() const { return static_cast<std::int32_t>(meta_.size()); }
  /// Tokens per block.
  std::int32_t block_size() const { return block_size_; }
  /// Blocks an allocation can take now: unused plus cached-but-free.
  std::int32_t num_free() const { return plain_.size + cached_.size; }
  /// Free blocks that still hold a cached prefix.
  std::int32_t num_cached_free() const { return cached_.size; }
  /// Tables (sequences) holding `block`.
  std::int32_t ref_count(std::int32_t block) const { return meta_[static_cast<std::size_t>(block)].ref; }
  /// Whether `block` is in the prefix index.
  bool is_cached(std::int32_t block) const { return meta_[static_cast<std::size_t>(block)].cached; }
  /// [block_size] the token ids a cached block was indexed with; empty when it is not cached.
  std::span<const std::int32_t> cached_tokens(std::int32_t block) const {
    return is_cached(block) ? tokens_of(block) : std::span<const std::int32_t>{};
  }

  /// Takes a free block with reference count 1: an unused one first, else
  /// evicts the least recently released cached one. Requires num_free() > 0.
  std::int32_t allocate();
  /// Adds a reference (taking the block off the free list if it was free).
  void retain(std::int32_t block);
  /// Drops a reference; at zero the block joins the free list (cached
  /// blocks at the most-recent end of the LRU list).
  void release(std::int32_t block);

  /// The cached block matching `key` exactly (digest, parent, adapter and
  /// tokens), unless it was registered in plan `current_plan`: K/V planned
  /// in the same request is not there yet.
  std::optional<std::int32_t> lookup(const cached_block_key& key, std::uint64_t current_plan) const;
  /// Indexes full block `block` under `key` (registered in plan `plan`).
  /// Returns false, changing nothing, when the digest is already indexed or
  /// the block already is.
  bool register_block(std::int32_t block, const cached_block_key& key, std::uint64_t plan);
  /// Removes `block` from the prefix index (a no-op when it is not indexed).
  void unregister(std::int32_t block);
  /// Drops every cached-but-free block from the index.
  void clear_cached_free();

  /// Free blocks in eviction order (next taken first), for tests.
  std::vector<std::int32_t> free_list_in_eviction_order() const;
  /// Checks the lists and the index against the reference counts; empty when consistent.
  std::string check_invariants() const;

 private:
  enum class list_id : std::uint8_t { none, plain, cached };
  struct block_meta {
    std::int32_t ref = 0;
    bool cached = false;
    list_id list = list_id::none;
    std::int32_t prev = -1, next = -1;
    std::uint64_t registered_plan = 0;
    digest128 digest, parent;
    std::int32_t adapter_id = 0;
  };
  struct block_list {
    std::int32_t head = -1, tail = -1, size = 0;
  };

  block_list& list_of(list_id id) { return id == list_id::plain ? plain_ : cached_; }
  void push_back(list_id id, std::int32_t block);
  void unlink(std::int32_t block);
  std::span<const std::int32_t> tokens_of(std::int32_t block) const;

  std::int32_t block_size_;
  std::vector<block_meta> meta_;
  std::vector<std::int32_t> tokens_;  ///< [num_blocks * block_size] token ids of cached blocks
  block_list plain_, cached_;
  std::unordered_map<digest128, std::int32_t, digest128_hash> index_;
};

/// Host swap pool slots: which host blocks are free. Swapped-out blocks are
/// owned by exactly one sequence, so no reference counts.
class host_slot_pool {
 public:
  explicit host_slot_pool(std::int32_t num_blocks);
  /// Pool size in blocks.
  std::int32_t num_blocks() const { return total_; }
  /// Slots not holding a swapped block.
  std::int32_t num_free() const { return static_cast<std::int32_t>(free_.size()); }
  /// Takes `count` free slots (requires num_free() >= count), lowest ids first.
  std::vector<std::int32_t> take(std::int32_t count);
  /// Returns slots to the pool.
  void give_back(std::span<const std::int32_t> slots);
  /// Whether `slot` is free (linear; for checks).
  bool is_free(std::int32_t slot) const;

 private:
  std::int32_t total_;
  std::vector<std::int32_t> free_;  ///< kept sorted descending so take() pops the lowest id
};

}  // namespace troupe
