#pragma once
// Open-addressing hash tables for the tokenizer's hot lookups: byte strings
// to ids (vocabulary, piece cache) and id pairs to merges. Keys live in one
// arena, so a lookup touches one slot array and one key.

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::text {

/// 64-bit hash of a byte string (multiply-xorshift over 8-byte words).
inline std::uint64_t hash_bytes(std::string_view bytes) {
  std::uint64_t h = 0x9E3779B97F4A7C15ULL ^ (bytes.size() * 0xFF51AFD7ED558CCDULL);
  const char* data = bytes.data();
  std::size_t size = bytes.size();
  while (size >= 8) {
    std::uint64_t word;
    std::memcpy(&word, data, 8);
    h = (h ^ word) * 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 31;
    data += 8;
    size -= 8;
  }
  std::uint64_t tail = 0;
  std::memcpy(&tail, data, size);
  h = (h ^ tail) * 0x94D049BB133111EBULL;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ULL;
  return h ^ (h >> 32);
}

/// Byte string -> int32 value. Insert-only between clear() calls.
class string_map {
 public:
  /// Value returned by find() for a missing key.
  static constexpr std::int32_t missing = -1;

  /// Reserves room for `count` keys of `key_bytes` total bytes.
  void reserve(std::size_t count, std::size_t key_bytes);
  /// Sets `key` to `value` (overwrites an existing entry).
  void insert(std::string_view key, std::int32_t value);
  /// The value of `key`, or `missing`.
  std::int32_t find(std::string_view key) const { return find_hashed(key, hash_bytes(key)); }
  /// find() with a precomputed hash_bytes(key).
  std::int32_t find_hashed(std::string_view key, std::uint64_t hash) const;
  /// Number of keys.
  std::size_t size() const { return count_; }
  /// Removes every key, keeping capacity.
  void clear();

 private:
  struct slot {
    std::uint64_t hash = 0;
    std::uint32_t key_offset = 0;
    std::uint32_t key_length = 0;
    std::int32_t value = missing;  ///< missing marks an empty slot
  };
  void grow();

  std::vector<slot> slots_;
  std::string keys_;
  std::size_t count_ = 0;
};

/// Merge rule found for an adjacent pair of ids.
struct merge_rule {
  std::uint32_t rank;   ///< position in the merges list (lower merges first)
  std::int32_t merged;  ///< id of the concatenated token
};

/// (left id, right id) -> merge_rule.
class pair_map {
 public:
  /// Reserves room for `count` pairs.
  void reserve(std::size_t count);
  /// Sets the rule for (left, right) (overwrites, as HF's map does).
  void insert(std::int32_t left, std::int32_t right, merge_rule rule);
  /// The rule for (left, right), or nullptr.
  const merge_rule* find(std::int32_t left, std::int32_t right) const;
  /// Number of pairs.
  std::size_t size() const { return count_; }

 private:
  static constexpr std::uint64_t empty_key = ~0ULL;
  struct slot {
    std::uint64_t key = empty_key;
    merge_rule rule{};
  };
  static std::uint64_t key_of(std::int32_t left, std::int32_t right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
  }
  static std::uint64_t mix(std::uint64_t key) {
    key ^= key >> 33;
    key *= 0xFF51AFD7ED558CCDULL;
    return key ^ (key >> 33);
  }
  void grow();

  std::vector<slot> slots_;
  std::size_t count_ = 0;
};

}  // namespace troupe::text
