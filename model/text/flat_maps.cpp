#include "model/text/flat_maps.hpp"

#include <stdexcept>

namespace troupe::text {

namespace {

std::size_t capacity_for(std::size_t count) {
  std::size_t capacity = 16;
  while (capacity < count * 2) capacity *= 2;
  return capacity;
}

}  // namespace

void string_map::reserve(std::size_t count, std::size_t key_bytes) {
  keys_.reserve(key_bytes);
  if (capacity_for(count) <= slots_.size()) return;
  std::vector<slot> old = std::move(slots_);
  slots_.assign(capacity_for(count), slot{});
  const std::size_t mask = slots_.size() - 1;
  for (const slot& entry : old) {
    if (entry.value == missing) continue;
    std::size_t index = entry.hash & mask;
    while (slots_[index].value != missing) index = (index + 1) & mask;
    slots_[index] = entry;
  }
}

void string_map::grow() { reserve(slots_.empty() ? 8 : slots_.size(), keys_.size()); }

void string_map::insert(std::string_view key, std::int32_t value) {
  if (value == missing) throw std::invalid_argument("string_map: -1 is reserved");
  if ((count_ + 1) * 2 > slots_.size()) grow();
  if (keys_.size() + key.size() > UINT32_MAX) throw std::length_error("string_map: key arena full");
  const std::uint64_t hash = hash_bytes(key);
  const std::size_t mask = slots_.size() - 1;
  std::size_t index = hash & mask;
  while (slots_[index].value != missing) {
    const slot& entry = slots_[index];
    if (entry.hash == hash && std::string_view(keys_).substr(entry.key_offset, entry.key_length) == key) {
      slots_[index].value = value;
      return;
    }
    index = (index + 1) & mask;
  }
  slots_[index] = {hash, static_cast<std::uint32_t>(keys_.size()), static_cast<std::uint32_t>(key.size()), value};
  keys_.append(key);
  ++count_;
}

std::int32_t string_map::find_hashed(std::string_view key, std::uint64_t hash) const {
  if (slots_.empty()) return missing;
  const std::size_t mask = slots_.size() - 1;
  std::size_t index = hash & mask;
  while (true) {
    const slot& entry = slots_[index];
    if (entry.value == missing) return missing;
    if (entry.hash == hash && entry.key_length == key.size() &&
        std::memcmp(keys_.data() + entry.key_offset, key.data(), key.size()) == 0) {
      return entry.value;
    }
    index = (index + 1) & mask;
  }
}

void string_map::clear() {
  std::fill(slots_.begin(), slots_.end(), slot{});
  keys_.clear();
  count_ = 0;
}

void pair_map::reserve(std::size_t count) {
  if (capacity_for(count) <= slots_.size()) return;
  std::vector<slot> old = std::move(slots_);
  slots_.assign(capacity_for(count), slot{});
  const std::size_t mask = slots_.size() - 1;
  for (const slot& entry : old) {
    if (entry.key == empty_key) continue;
    std::size_t index = mix(entry.key) & mask;
    while (slots_[index].key != empty_key) index = (index + 1) & mask;
    slots_[index] = entry;
  }
}

void pair_map::grow() { reserve(slots_.empty() ? 8 : slots_.size()); }

void pair_map::insert(std::int32_t left, std::int32_t right, merge_rule rule) {
  if ((count_ + 1) * 2 > slots_.size()) grow();
  const std::uint64_t key = key_of(left, right);
  const std::size_t mask = slots_.size() - 1;
  std::size_t index = mix(key) & mask;
  while (slots_[index].key != empty_key && slots_[index].key != key) index = (index + 1) & mask;
  if (slots_[index].key == empty_key) ++count_;
  slots_[index] = {key, rule};
}

const merge_rule* pair_map::find(std::int32_t left, std::int32_t right) const {
  if (slots_.empty()) return nullptr;
  const std::uint64_t key = key_of(left, right);
  const std::size_t mask = slots_.size() - 1;
  std::size_t index = mix(key) & mask;
  while (true) {
    const slot& entry = slots_[index];
    if (entry.key == key) return &entry.rule;
    if (entry.key == empty_key) return nullptr;
    index = (index + 1) & mask;
  }
}

}  // namespace troupe::text
