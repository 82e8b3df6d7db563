#include "model/text/piece_cache.hpp"

#include <atomic>
#include <cstring>
#include <memory>

namespace troupe::text {

namespace {

struct alignas(64) front_entry {
  std::uint64_t hash = 0;
  std::uint64_t owner = 0;  ///< 0: empty
  char key[thread_piece_cache::max_piece_bytes];
  std::uint8_t key_length = 0;
  std::uint8_t id_count = 0;
  std::int32_t ids[thread_piece_cache::max_ids];
};
static_assert(sizeof(front_entry) == 64);

constexpr std::size_t front_entries = 4096;

front_entry& front_slot(std::uint64_t hash) {
  thread_local const std::unique_ptr<front_entry[]> table(new front_entry[front_entries]);
  return table[hash & (front_entries - 1)];
}

}  // namespace

bool thread_piece_cache::find(std::uint64_t owner, std::string_view piece, std::uint64_t hash,
                              std::vector<std::int32_t>& out) {
  if (piece.size() > max_piece_bytes) return false;
  const front_entry& entry = front_slot(hash);
  if (entry.owner != owner || entry.hash != hash || entry.key_length != piece.size() ||
      std::memcmp(entry.key, piece.data(), piece.size()) != 0) {
    return false;
  }
  out.insert(out.end(), entry.ids, entry.ids + entry.id_count);
  return true;
}

void thread_piece_cache::insert(std::uint64_t owner, std::string_view piece, std::uint64_t hash,
                                std::span<const std::int32_t> ids) {
  if (piece.size() > max_piece_bytes || ids.size() > max_ids) return;
  front_entry& entry = front_slot(hash);
  entry.hash = hash;
  entry.owner = owner;
  std::memcpy(entry.key, piece.data(), piece.size());
  entry.key_length = static_cast<std::uint8_t>(piece.size());
  entry.id_count = static_cast<std::uint8_t>(ids.size());
  std::copy(ids.begin(), ids.end(), entry.ids);
}

std::uint64_t thread_piece_cache::new_owner() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1);
}

bool piece_cache::find(std::string_view piece, std::uint64_t hash, std::vector<std::int32_t>& out) const {
  shard& target = shard_for(hash);
  std::unique_lock lock(target.mutex, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  const std::int32_t entry = target.index.find_hashed(piece, hash);
  if (entry == string_map::missing) return false;
  const auto begin = target.ids.begin() + target.entry_offsets[entry];
  const auto end = target.ids.begin() + target.entry_offsets[entry + 1];
  out.insert(out.end(), begin, end);
  return true;
}

void piece_cache::insert(std::string_view piece, std::uint64_t hash, std::span<const std::int32_t> ids) const {
  shard& target = shard_for(hash);
  std::unique_lock lock(target.mutex, std::try_to_lock);
  if (!lock.owns_lock() || target.index.find_hashed(piece, hash) != string_map::missing) return;
  if (target.index.size() >= entries_per_shard_) {
    target.index.clear();
    target.entry_offsets.clear();
    target.ids.clear();
  }
  if (target.entry_offsets.empty()) target.entry_offsets.push_back(0);
  const auto entry = static_cast<std::int32_t>(target.entry_offsets.size() - 1);
  target.ids.insert(target.ids.end(), ids.begin(), ids.end());
  target.entry_offsets.push_back(static_cast<std::uint32_t>(target.ids.size()));
  target.index.insert(piece, entry);
}

}  // namespace troupe::text
