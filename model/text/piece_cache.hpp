#pragma once
// A bounded, thread-safe cache from a pre-tokenized piece to its token ids.
// Shards are guarded by mutexes taken with try_lock only: a busy shard is a
// cache miss, never a wait, so concurrent encoders do not serialize.

#include <array>
#include <cstdint>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "model/text/flat_maps.hpp"

namespace troupe::text {

/// A per-thread, direct-mapped cache of short pieces in front of the shared
/// one: no locking, one cache line per entry. Entries are tagged with the
/// owning model's unique id, so models never see each other's entries.
class thread_piece_cache {
 public:
  static constexpr std::size_t max_piece_bytes = 22;  ///< longer pieces are not kept
  static constexpr std::size_t max_ids = 4;           ///< pieces with more ids are not kept

  /// Appends the cached ids of `piece` for `owner` to `out`; false on a miss.
  static bool find(std::uint64_t owner, std::string_view piece, std::uint64_t hash, std::vector<std::int32_t>& out);
  /// Remembers `ids` for `piece` of `owner` (evicting what was in its slot).
  static void insert(std::uint64_t owner, std::string_view piece, std::uint64_t hash,
                     std::span<const std::int32_t> ids);
  /// A process-unique owner id for a new model.
  static std::uint64_t new_owner();
};

/// Piece bytes -> ids, at most `entries_per_shard` * 16 entries.
class piece_cache {
 public:
  /// A shard that reaches `entries_per_shard` is emptied and refilled.
  explicit piece_cache(std::size_t entries_per_shard = 4096) : entries_per_shard_(entries_per_shard) {}
  piece_cache(const piece_cache&) = delete;
  piece_cache& operator=(const piece_cache&) = delete;

  /// Appends the cached ids of `piece` (whose hash_bytes is `hash`) to `out`;
  /// false on a miss or a busy shard.
  bool find(std::string_view piece, std::uint64_t hash, std::vector<std::int32_t>& out) const;

  /// Remembers `ids` for `piece`; silently skipped when the shard is busy.
  void insert(std::string_view piece, std::uint64_t hash, std::span<const std::int32_t> ids) const;

 private:
  struct shard {
    std::mutex mutex;
    string_map index;                          ///< piece -> entry number
    std::vector<std::uint32_t> entry_offsets;  ///< entry -> first id in `ids`, plus one end marker
    std::vector<std::int32_t> ids;
  };
  shard& shard_for(std::uint64_t hash) const { return shards_[hash >> 60]; }

  std::size_t entries_per_shard_;
  mutable std::array<shard, 16> shards_;
};

}  // namespace troupe::text
