#include "memory/block_pool.hpp"

#include <algorithm>
#include <functional>

namespace troupe {

device_block_pool::device_block_pool(std::int32_t num_blocks, std::int32_t block_size)
    : block_size_(block_size),
      meta_(static_cast<std::size_t>(std::max(num_blocks, 0))),
      tokens_(static_cast<std::size_t>(std::max(num_blocks, 0)) * static_cast<std::size_t>(std::max(block_size, 0))) {
  for (std::int32_t b = 0; b < num_blocks; ++b) push_back(list_id::plain, b);
}

void device_block_pool::push_back(list_id id, std::int32_t block) {
  block_list& list = list_of(id);
  block_meta& m = meta_[static_cast<std::size_t>(block)];
  m.list = id;
  m.prev = list.tail;
  m.next = -1;
  if (list.tail >= 0)
    meta_[static_cast<std::size_t>(list.tail)].next = block;
  else
    list.head = block;
  list.tail = block;
  ++list.size;
}

void device_block_pool::unlink(std::int32_t block) {
  block_meta& m = meta_[static_cast<std::size_t>(block)];
  if (m.list == list_id::none) return;
  block_list& list = list_of(m.list);
  if (m.prev >= 0)
    meta_[static_cast<std::size_t>(m.prev)].next = m.next;
  else
    list.head = m.next;
  if (m.next >= 0)
    meta_[static_cast<std::size_t>(m.next)].prev = m.prev;
  else
    list.tail = m.prev;
  --list.size;
  m.list = list_id::none;
  m.prev = m.next = -1;
}

std::span<const std::int32_t> device_block_pool::tokens_of(std::int32_t block) const {
  return {tokens_.data() + static_cast<std::size_t>(block) * static_cast<std::size_t>(block_size_),
          static_cast<std::size_t>(block_size_)};
}

std::int32_t device_block_pool::allocate() {
  std::int32_t block = plain_.head;
  if (block < 0) {
    block = cached_.head;  // evict the least recently released cached block
    unregister(block);
  }
  unlink(block);
  meta_[static_cast<std::size_t>(block)].ref = 1;
  return block;
}

void device_block_pool::retain(std::int32_t block) {
  block_meta& m = meta_[static_cast<std::size_t>(block)];
  if (m.ref == 0) unlink(block);
  ++m.ref;
}

void device_block_pool::release(std::int32_t block) {
  block_meta& m = meta_[static_cast<std::size_t>(block)];
  if (--m.ref == 0) push_back(m.cached ? list_id::cached : list_id::plain, block);
}

std::optional<std::int32_t> device_block_pool::lookup(const cached_block_key& key, std::uint64_t current_plan) const {
  const auto it = index_.find(key.digest);
  if (it == index_.end()) return std::nullopt;
  const block_meta& m = meta_[static_cast<std::size_t>(it->second)];
  if (m.registered_plan == current_plan || !(m.parent == key.parent) || m.adapter_id != key.adapter_id)
    return std::nullopt;
  const auto tokens = tokens_of(it->second);
  if (key.tokens.size() != tokens.size() || !std::equal(tokens.begin(), tokens.end(), key.tokens.begin()))
    return std::nullopt;
  return it->second;
}

bool device_block_pool::register_block(std::int32_t block, const cached_block_key& key, std::uint64_t plan) {
  block_meta& m = meta_[static_cast<std::size_t>(block)];
  if (m.cached || key.tokens.size() != static_cast<std::size_t>(block_size_)) return false;
  if (!index_.emplace(key.digest, block).second) return false;
  m.cached = true;
  m.digest = key.digest;
  m.parent = key.parent;
  m.adapter_id = key.adapter_id;
  m.registered_plan = plan;
  std::copy(key.tokens.begin(), key.tokens.end(), tokens_.begin() + static_cast<std::ptrdiff_t>(block) * block_size_);
  return true;
}

void device_block_pool::unregister(std::int32_t block) {
  block_meta& m = meta_[static_cast<std::size_t>(block)];
  if (!m.cached) return;
  index_.erase(m.digest);
  m.cached = false;
  if (m.list == list_id::cached) {
    unlink(block);
    push_back(list_id::plain, block);
  }
}

void device_block_pool::clear_cached_free() {
  while (cached_.head >= 0) unregister(cached_.head);
}

std::vector<std::int32_t> device_block_pool::free_list_in_eviction_order() const {
  std::vector<std::int32_t> order;
  order.reserve(static_cast<std::size_t>(num_free()));
  for (std::int32_t b = plain_.head; b >= 0; b = meta_[static_cast<std::size_t>(b)].next) order.push_back(b);
  for (std::int32_t b = cached_.head; b >= 0; b = meta_[static_cast<std::size_t>(b)].next) order.push_back(b);
  return order;
}

std::string device_block_pool::check_invariants() const {
  std::int32_t in_plain = 0, in_cached = 0;
  for (std::size_t b = 0; b < meta_.size(); ++b) {
    const block_meta& m = meta_[b];
    if (m.ref < 0) return "block " + std::to_string(b) + " has a negative reference count";
    if ((m.ref == 0) != (m.list != list_id::none))
      return "block " + std::to_string(b) + " free state disagrees with its list";
    if (m.list == list_id::cached && !m.cached) return "uncached block " + std::to_string(b) + " on the cached list";
    if (m.list == list_id::plain && m.cached) return "cached block " + std::to_string(b) + " on the plain list";
    if (m.cached) {
      const auto it = index_.find(m.digest);
      if (it == index_.end() || it->second != static_cast<std::int32_t>(b))
        return "cached block " + std::to_string(b) + " is missing from the index";
    }
    in_plain += m.list == list_id::plain;
    in_cached += m.list == list_id::cached;
  }
  if (in_plain != plain_.size || in_cached != cached_.size) return "free list sizes disagree with the blocks";
  for (const auto& [digest, block] : index_) {
    if (!meta_[static_cast<std::size_t>(block)].cached) return "the index names an uncached block";
  }
  std::int32_t walked = 0;
  for (std::int32_t b = plain_.head; b >= 0; b = meta_[static_cast<std::size_t>(b)].next) ++walked;
  for (std::int32_t b = cached_.head; b >= 0; b = meta_[static_cast<std::size_t>(b)].next) ++walked;
  if (walked != num_free()) return "free lists are not properly linked";
  return {};
}

host_slot_pool::host_slot_pool(std::int32_t num_blocks) : total_(std::max(num_blocks, 0)) {
  free_.reserve(static_cast<std::size_t>(total_));
  for (std::int32_t s = total_ - 1; s >= 0; --s) free_.push_back(s);
}

std::vector<std::int32_t> host_slot_pool::take(std::int32_t count) {
  std::vector<std::int32_t> slots;
  slots.reserve(static_cast<std::size_t>(count));
  for (std::int32_t i = 0; i < count; ++i) {
    slots.push_back(free_.back());
    free_.pop_back();
  }
  return slots;
}

void host_slot_pool::give_back(std::span<const std::int32_t> slots) {
  free_.insert(free_.end(), slots.begin(), slots.end());
  std::sort(free_.begin(), free_.end(), std::greater<>());
}

bool host_slot_pool::is_free(std::int32_t slot) const {
  return std::find(free_.begin(), free_.end(), slot) != free_.end();
}

}  // namespace troupe
