#include "memory/block_manager.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "config/config_store.hpp"

namespace troupe {

namespace {

/// Digest of one full block: the chain so far, the adapter, the block's tokens.
digest128 block_digest(const siphash_key& key, const digest128& parent, std::int32_t adapter_id,
                       std::span<const std::int32_t> tokens) {
  std::vector<std::uint8_t> bytes;
  bytes.reserve(20 + 4 * tokens.size());
  const auto put = [&bytes](std::uint64_t value, int width) {
    for (int i = 0; i < width; ++i) bytes.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
  };
  put(parent.lo, 8);
  put(parent.hi, 8);
  put(static_cast<std::uint32_t>(adapter_id), 4);
  for (std::int32_t token : tokens) put(static_cast<std::uint32_t>(token), 4);
  return siphash24_128(bytes, key);
}

/// The parent of a chain's first block: the partition's salt, so equal
/// tokens under different salts give different digests all along the chain.
digest128 chain_root(std::uint64_t cache_salt) { return {cache_salt, 0}; }

}  // namespace

block_manager_config::block_manager_config()
    : block_size(static_cast<std::int32_t>(knob_defaults().get_int("block_size"))),
      enable_prefix_caching(knob_defaults().get_bool("enable_prefix_caching")) {}

block_manager::block_manager(const block_manager_config& config)
    : config_(config),
      hash_key_(config.hash_key ? *config.hash_key : random_siphash_key()),
      pool_(config.num_device_blocks, config.block_size),
      host_(config.num_host_blocks) {
  if (config.block_size <= 0) throw std::invalid_argument("block_manager: block_size must be positive");
  if (config.num_device_blocks <= 0) throw std::invalid_argument("block_manager: num_device_blocks must be positive");
  if (config.num_host_blocks < 0) throw std::invalid_argument("block_manager: num_host_blocks must not be negative");
}

kv_reply block_manager::plan(const kv_request& request) {
  ++plan_counter_;
  kv_reply reply;
  reply.step = request.step;
  for (const kv_settle& op : request.settles) do_settle(op, reply);
  for (const kv_fork& op : request.forks) do_fork(op, reply);
  for (const kv_free& op : request.frees) do_free(op, reply);
  for (const kv_swap_out& op : request.swap_outs) do_swap_out(op, reply);
  for (const kv_append& op : request.appends) do_append(op, reply);
  for (const kv_swap_in& op : request.swap_ins) do_swap_in(op, reply);
  for (const kv_allocate& op : request.allocations) do_allocate(op, reply);
  reply.usage = usage();
  return reply;
}

kv_usage block_manager::usage() const {
  kv_usage u;
  u.device_blocks = pool_.num_blocks();
  u.device_free_blocks = pool_.num_free();
  u.device_cached_free_blocks = pool_.num_cached_free();
  u.host_blocks = host_.num_blocks();
  u.host_free_blocks = host_.num_free();
  u.prefix_query_tokens = prefix_query_tokens_;
  u.prefix_hit_tokens = prefix_hit_tokens_;
  return u;
}

std::int32_t block_manager::blocks_for(std::int64_t tokens) const {
  return static_cast<std::int32_t>((tokens + config_.block_size - 1) / config_.block_size);
}

cached_block_key block_manager::block_key(const sequence_kv& seq, std::size_t index,
                                          std::span<const std::int32_t> tokens) const {
  cached_block_key key;
  key.parent = index == 0 ? chain_root(seq.cache_salt) : seq.digests[index - 1];
  key.adapter_id = seq.adapter_id;
  key.tokens = tokens;
  key.digest = block_digest(hash_key_, key.parent, key.adapter_id, tokens);
  return key;
}

std::vector<std::int32_t> block_manager::find_cached_prefix(const kv_allocate& op, std::int32_t max_blocks,
                                                            std::vector<digest128>& digests) const {
  std::vector<std::int32_t> hits;
  const auto bs = static_cast<std::size_t>(config_.block_size);
  digest128 parent = chain_root(op.cache_salt);
  for (std::int32_t i = 0; i < max_blocks; ++i) {
    cached_block_key key;
    key.parent = parent;
    key.adapter_id = op.adapter_id;
    key.tokens = std::span(op.tokens).subspan(static_cast<std::size_t>(i) * bs, bs);
    key.digest = block_digest(hash_key_, parent, op.adapter_id, key.tokens);
    const auto block = pool_.lookup(key, plan_counter_);
    if (!block) break;
    hits.push_back(*block);
    digests.push_back(key.digest);
    parent = key.digest;
  }
  return hits;
}

bool block_manager::needs_copy_on_write(const sequence_kv& seq) const {
  // Shared, or cached: a forked child's partially filled last block is full
  // and cached once its parent settles drafts it had written there before the fork.
  return !seq.blocks.empty() && seq.tokens.size() % static_cast<std::size_t>(config_.block_size) != 0 &&
         (pool_.ref_count(seq.blocks.back()) > 1 || pool_.is_cached(seq.blocks.back()));
}

void block_manager::cache_full_blocks(sequence_kv& seq) {
  if (!config_.enable_prefix_caching || !seq.cache_blocks) return;
  const auto bs = static_cast<std::size_t>(config_.block_size);
  while (seq.digests.size() < seq.tokens.size() / bs) {
    const std::size_t index = seq.digests.size();
    const cached_block_key key = block_key(seq, index, std::span(seq.tokens).subspan(index * bs, bs));
    seq.digests.push_back(key.digest);
    pool_.register_block(seq.blocks[index], key, plan_counter_);
  }
}

void block_manager::grow(sequence_id id, sequence_kv& seq, std::span<const std::int32_t> tokens,
                         std::int32_t speculative, std::int32_t keep_from, kv_reply& reply) {
  const auto old_size = static_cast<std::int32_t>(seq.blocks.size());
  std::int32_t keep = std::min(old_size, keep_from);
  if (needs_copy_on_write(seq)) {
    const std::int32_t shared = seq.blocks.back();
    const std::int32_t copy = pool_.allocate();
    reply.copies.push_back({block_location::device, shared, block_location::device, copy});
    pool_.release(shared);
    seq.blocks.back() = copy;
    keep = std::min(keep, old_size - 1);
  }
  const std::int32_t needed = blocks_for(static_cast<std::int64_t>(seq.tokens.size() + tokens.size()) + speculative);
  while (static_cast<std::int32_t>(seq.blocks.size()) < needed) seq.blocks.push_back(pool_.allocate());
  seq.tokens.insert(seq.tokens.end(), tokens.begin(), tokens.end());
  seq.speculative = speculative;
  cache_full_blocks(seq);
  if (keep < old_size || static_cast<std::int32_t>(seq.blocks.size()) > keep) {
    reply.deltas.push_back({id, keep, std::vector<std::int32_t>(seq.blocks.begin() + keep, seq.blocks.end())});
  }
}

std::int32_t block_manager::trim_to_tokens(sequence_kv& seq) {
  seq.speculative = 0;
  // Blocks past the settled tokens hold only speculative slots: never
  // hashed and never shared (a fork takes the settled blocks only).
  const auto keep = static_cast<std::size_t>(blocks_for(static_cast<std::int64_t>(seq.tokens.size())));
  const auto released = static_cast<std::int32_t>(seq.blocks.size() - std::min(keep, seq.blocks.size()));
  while (seq.blocks.size() > keep) {
    pool_.release(seq.blocks.back());
    seq.blocks.pop_back();
  }
  return released;
}

void block_manager::release_device_blocks(sequence_kv& seq, bool forget_prefix) {
  // Last block first, so a sequence's tail is evicted before its (more
  // shareable) head when both sit on the cached list.
  for (auto it = seq.blocks.rbegin(); it != seq.blocks.rend(); ++it) {
    pool_.release(*it);
    if (forget_prefix && pool_.ref_count(*it) == 0) pool_.unregister(*it);
  }
  seq.blocks.clear();
}

void block_manager::do_settle(const kv_settle& op, kv_reply& reply) {
  const auto it = seqs_.find(op.seq);
  if (it == seqs_.end()) return reply.refused.push_back({kv_op::settle, op.seq, kv_refusal::unknown_sequence});
  sequence_kv& seq = it->second;
  if (seq.swapped || op.accepted < 0 || op.accepted > seq.speculative ||
      op.tokens.size() != static_cast<std::size_t>(op.accepted))
    return reply.refused.push_back({kv_op::settle, op.seq, kv_refusal::invalid});
  seq.tokens.insert(seq.tokens.end(), op.tokens.begin(), op.tokens.end());
  if (trim_to_tokens(seq) > 0) reply.deltas.push_back({op.seq, static_cast<std::int32_t>(seq.blocks.size()), {}});
  cache_full_blocks(seq);
}

void block_manager::do_fork(const kv_fork& op, kv_reply& reply) {
  const auto parent = seqs_.find(op.parent);
  if (parent == seqs_.end()) return reply.refused.push_back({kv_op::fork, op.child, kv_refusal::unknown_sequence});
  if (parent->second.swapped || seqs_.count(op.child) != 0 || op.child == op.parent)
    return reply.refused.push_back({kv_op::fork, op.child, kv_refusal::invalid});
  sequence_kv child = parent->second;
  child.speculative = 0;  // the parent's unsettled slots stay its own
  child.blocks.resize(static_cast<std::size_t>(blocks_for(static_cast<std::int64_t>(child.tokens.size()))));
  for (std::int32_t block : child.blocks) pool_.retain(block);
  reply.deltas.push_back({op.child, 0, child.blocks});
  seqs_.emplace(op.child, std::move(child));
}

void block_manager::do_free(const kv_free& op, kv_reply& reply) {
  const auto it = seqs_.find(op.seq);
  if (it == seqs_.end()) return reply.refused.push_back({kv_op::free, op.seq, kv_refusal::unknown_sequence});
  if (it->second.swapped)
    host_.give_back(it->second.host_blocks);
  else
    release_device_blocks(it->second, op.forget_prefix);
  seqs_.erase(it);
}

void block_manager::do_swap_out(const kv_swap_out& op, kv_reply& reply) {
  const auto it = seqs_.find(op.seq);
  if (it == seqs_.end()) return reply.refused.push_back({kv_op::swap_out, op.seq, kv_refusal::unknown_sequence});
  sequence_kv& seq = it->second;
  if (seq.swapped) return reply.refused.push_back({kv_op::swap_out, op.seq, kv_refusal::invalid});
  // Unsettled speculative slots are dropped, not swapped.
  const std::int32_t count = blocks_for(static_cast<std::int64_t>(seq.tokens.size()));
  if (count > host_.num_free()) return reply.refused.push_back({kv_op::swap_out, op.seq, kv_refusal::no_host_blocks});
  trim_to_tokens(seq);
  seq.host_blocks = host_.take(count);
  for (std::int32_t i = 0; i < count; ++i) {
    reply.copies.push_back({block_location::device, seq.blocks[static_cast<std::size_t>(i)], block_location::host,
                            seq.host_blocks[static_cast<std::size_t>(i)]});
  }
  release_device_blocks(seq, false);
  seq.swapped = true;
  reply.deltas.push_back({op.seq, 0, {}});
}

void block_manager::do_append(const kv_append& op, kv_reply& reply) {
  const auto it = seqs_.find(op.seq);
  if (it == seqs_.end()) return reply.refused.push_back({kv_op::append, op.seq, kv_refusal::unknown_sequence});
  sequence_kv& seq = it->second;
  if (seq.swapped || seq.speculative > 0 || op.num_speculative < 0 || (op.num_speculative > 0 && op.tokens.empty()))
    return reply.refused.push_back({kv_op::append, op.seq, kv_refusal::invalid});
  if (op.tokens.empty()) return;
  const std::int32_t needed =
      blocks_for(static_cast<std::int64_t>(seq.tokens.size() + op.tokens.size()) + op.num_speculative) -
      static_cast<std::int32_t>(seq.blocks.size()) + (needs_copy_on_write(seq) ? 1 : 0);
  if (needed > pool_.num_free()) return reply.refused.push_back({kv_op::append, op.seq, kv_refusal::no_device_blocks});
  grow(op.seq, seq, op.tokens, op.num_speculative, std::numeric_limits<std::int32_t>::max(), reply);
}

void block_manager::do_swap_in(const kv_swap_in& op, kv_reply& reply) {
  const auto it = seqs_.find(op.seq);
  if (it == seqs_.end()) return reply.refused.push_back({kv_op::swap_in, op.seq, kv_refusal::unknown_sequence});
  sequence_kv& seq = it->second;
  if (!seq.swapped) return reply.refused.push_back({kv_op::swap_in, op.seq, kv_refusal::invalid});
  // Full blocks still cached on the device are reused instead of copied back.
  const auto bs = static_cast<std::size_t>(config_.block_size);
  std::vector<std::int32_t> reused(seq.host_blocks.size(), -1);
  std::int32_t reused_count = 0, reused_free = 0;
  for (std::size_t i = 0; i < seq.digests.size() && i < seq.host_blocks.size(); ++i) {
    cached_block_key key = block_key(seq, i, std::span(seq.tokens).subspan(i * bs, bs));
    if (const auto block = pool_.lookup(key, plan_counter_)) {
      reused[i] = *block;
      ++reused_count;
      reused_free += pool_.ref_count(*block) == 0;
    }
  }
  const auto table = static_cast<std::int32_t>(seq.host_blocks.size());
  const std::int32_t needed =
      blocks_for(static_cast<std::int64_t>(seq.tokens.size() + op.tokens.size())) - reused_count;
  if (needed > pool_.num_free() - reused_free)
    return reply.refused.push_back({kv_op::swap_in, op.seq, kv_refusal::no_device_blocks});
  for (std::int32_t block : reused) {
    if (block >= 0) pool_.retain(block);
  }
  seq.blocks.assign(static_cast<std::size_t>(table), -1);
  for (std::int32_t i = 0; i < table; ++i) {
    const auto slot = static_cast<std::size_t>(i);
    if (reused[slot] >= 0) {
      seq.blocks[slot] = reused[slot];
      continue;
    }
    seq.blocks[slot] = pool_.allocate();
    reply.copies.push_back({block_location::host, seq.host_blocks[slot], block_location::device, seq.blocks[slot]});
  }
  host_.give_back(seq.host_blocks);
  seq.host_blocks.clear();
  seq.swapped = false;
  grow(op.seq, seq, op.tokens, 0, 0, reply);
}

void block_manager::do_allocate(const kv_allocate& op, kv_reply& reply) {
  if (seqs_.count(op.seq) != 0 || op.tokens.empty() || op.num_new_tokens < 1)
    return reply.refused.push_back({kv_op::allocate, op.seq, kv_refusal::invalid});
  const bool use_cache = config_.enable_prefix_caching && op.use_prefix_cache;
  const auto length = static_cast<std::int64_t>(op.tokens.size());
  const std::int32_t max_blocks = use_cache ? static_cast<std::int32_t>((length - 1) / config_.block_size) : 0;
  std::vector<digest128> digests;
  const std::vector<std::int32_t> hits = find_cached_prefix(op, max_blocks, digests);
  const std::int64_t cached = static_cast<std::int64_t>(hits.size()) * config_.block_size;
  const std::int64_t end = std::min(cached + op.num_new_tokens, length);
  const std::int32_t hits_free = static_cast<std::int32_t>(
      std::count_if(hits.begin(), hits.end(), [this](std::int32_t b) { return pool_.ref_count(b) == 0; }));
  const std::int32_t fresh = blocks_for(end) - static_cast<std::int32_t>(hits.size());
  if (fresh > pool_.num_free() - hits_free)
    return reply.refused.push_back({kv_op::allocate, op.seq, kv_refusal::no_device_blocks});
  sequence_kv& seq = seqs_[op.seq];
  for (std::int32_t block : hits) pool_.retain(block);
  seq.blocks = hits;
  seq.tokens.assign(op.tokens.begin(), op.tokens.begin() + cached);
  seq.digests = std::move(digests);
  seq.adapter_id = op.adapter_id;
  seq.cache_salt = op.cache_salt;
  seq.cache_blocks = use_cache;
  grow(op.seq, seq,
       std::span(op.tokens).subspan(static_cast<std::size_t>(cached), static_cast<std::size_t>(end - cached)), 0, 0,
       reply);
  if (use_cache) {
    prefix_query_tokens_ += static_cast<std::uint64_t>(length);
    prefix_hit_tokens_ += static_cast<std::uint64_t>(cached);
  }
  reply.allocated.push_back({op.seq, static_cast<std::int32_t>(cached), static_cast<std::int32_t>(end)});
}

std::span<const std::int32_t> block_manager::block_table(sequence_id seq) const {
  const auto it = seqs_.find(seq);
  return it == seqs_.end() ? std::span<const std::int32_t>{} : std::span<const std::int32_t>(it->second.blocks);
}

std::span<const std::int32_t> block_manager::host_table(sequence_id seq) const {
  const auto it = seqs_.find(seq);
  return it == seqs_.end() ? std::span<const std::int32_t>{} : std::span<const std::int32_t>(it->second.host_blocks);
}

std::int32_t block_manager::num_tokens(sequence_id seq) const {
  const auto it = seqs_.find(seq);
  return it == seqs_.end() ? 0 : static_cast<std::int32_t>(it->second.tokens.size());
}

std::int32_t block_manager::num_speculative(sequence_id seq) const {
  const auto it = seqs_.find(seq);
  return it == seqs_.end() ? 0 : it->second.speculative;
}

bool block_manager::is_swapped(sequence_id seq) const {
  const auto it = seqs_.find(seq);
  return it != seqs_.end() && it->second.swapped;
}

std::string block_manager::check_invariants() const {
  if (auto problem = pool_.check_invariants(); !problem.empty()) return problem;
  std::vector<std::int32_t> refs(static_cast<std::size_t>(pool_.num_blocks()), 0);
  std::vector<std::int32_t> host_owner(static_cast<std::size_t>(host_.num_blocks()), 0);
  for (const auto& [id, seq] : seqs_) {
    const std::string name = "sequence " + std::to_string(id);
    const std::int32_t expected = blocks_for(static_cast<std::int64_t>(seq.tokens.size()) + seq.speculative);
    const auto& table = seq.swapped ? seq.host_blocks : seq.blocks;
    if (static_cast<std::int32_t>(table.size()) != expected) return name + " has a table of the wrong length";
    if (seq.speculative < 0 || (seq.swapped && seq.speculative != 0))
      return name + " has speculative slots it cannot have";
    if (seq.swapped && !seq.blocks.empty()) return name + " is swapped but holds device blocks";
    if (seq.digests.size() > seq.tokens.size() / static_cast<std::size_t>(config_.block_size))
      return name + " has digests for blocks that are not full";
    for (std::int32_t block : seq.blocks) ++refs[static_cast<std::size_t>(block)];
    for (std::int32_t slot : seq.host_blocks) {
      if (host_.is_free(slot) || host_owner[static_cast<std::size_t>(slot)]++ != 0)
        return name + " holds host slot " + std::to_string(slot) + " that is free or owned twice";
    }
  }
  for (std::int32_t b = 0; b < pool_.num_blocks(); ++b) {
    if (refs[static_cast<std::size_t>(b)] != pool_.ref_count(b))
      return "block " + std::to_string(b) + " has reference count " + std::to_string(pool_.ref_count(b)) + " but " +
             std::to_string(refs[static_cast<std::size_t>(b)]) + " tables hold it";
  }
  const auto owned = std::count(host_owner.begin(), host_owner.end(), 1);
  if (owned + host_.num_free() != host_.num_blocks()) return "host slots are lost or double counted";
  return {};
}

}  // namespace troupe
