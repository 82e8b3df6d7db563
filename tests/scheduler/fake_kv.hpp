#pragma once
// A small KV manager for scheduler tests, written apart from
// memory/block_manager: a block pool with reference counts, forks,
// copy-on-write, swap to a bounded host pool, no prefix caching. Every item
// is all-or-nothing. It logs the requests it got.

#include <algorithm>
#include <map>
#include <vector>

#include "memory/kv_protocol.hpp"

namespace troupe::testing {

class fake_kv final : public kv_planner {
 public:
  fake_kv(std::int32_t device_blocks, std::int32_t host_blocks, std::int32_t block_size)
      : block_size_(block_size),
        refs_(static_cast<std::size_t>(device_blocks), 0),
        host_used_(static_cast<std::size_t>(host_blocks), false) {}

  kv_reply plan(const kv_request& r) override {
    requests.push_back(r);
    kv_reply reply;
    reply.step = r.step;
    for (const auto& op : r.forks) fork(op, reply);
    for (const auto& op : r.frees) release(op.seq, reply);
    for (const auto& op : r.swap_outs) swap_out(op.seq, reply);
    for (const auto& op : r.appends) append(op.seq, static_cast<std::int32_t>(op.tokens.size()), kv_op::append, reply);
    for (const auto& op : r.swap_ins) swap_in(op, reply);
    for (const auto& op : r.allocations) allocate(op, reply);
    reply.usage.device_blocks = static_cast<std::int32_t>(refs_.size());
    reply.usage.device_free_blocks = free_blocks() + overstate_free;
    reply.usage.host_blocks = static_cast<std::int32_t>(host_used_.size());
    reply.usage.host_free_blocks = free_host_blocks();
    return reply;
  }

  std::int32_t free_blocks() const { return static_cast<std::int32_t>(std::count(refs_.begin(), refs_.end(), 0)); }
  std::int32_t free_host_blocks() const {
    return static_cast<std::int32_t>(std::count(host_used_.begin(), host_used_.end(), false));
  }
  std::size_t num_sequences() const { return seqs_.size(); }
  bool has(sequence_id id) const { return seqs_.count(id) != 0; }

  std::vector<kv_request> requests;
  /// Added to the free count it reports, to make the scheduler's estimates wrong.
  std::int32_t overstate_free = 0;

 private:
  struct entry {
    std::vector<std::int32_t> blocks;
    std::int32_t tokens = 0;
    std::vector<std::int32_t> host;  // host slots while swapped
  };

  std::int32_t take() {
    const auto it = std::find(refs_.begin(), refs_.end(), 0);
    *it = 1;
    return static_cast<std::int32_t>(it - refs_.begin());
  }
  std::int32_t needed(std::int32_t tokens) const { return (tokens + block_size_ - 1) / block_size_; }

  void fork(const kv_fork& op, kv_reply& reply) {
    entry e = seqs_.at(op.parent);
    for (auto b : e.blocks) ++refs_[static_cast<std::size_t>(b)];
    reply.deltas.push_back({op.child, 0, e.blocks});
    seqs_[op.child] = e;
  }
  void release(sequence_id id, kv_reply& reply) {
    const auto it = seqs_.find(id);
    if (it == seqs_.end()) return reply.refused.push_back({kv_op::free, id, kv_refusal::unknown_sequence});
    for (auto b : it->second.blocks) --refs_[static_cast<std::size_t>(b)];
    for (auto slot : it->second.host) host_used_[static_cast<std::size_t>(slot)] = false;
    seqs_.erase(it);
  }
  void swap_out(sequence_id id, kv_reply& reply) {
    entry& e = seqs_.at(id);
    const auto count = static_cast<std::int32_t>(e.blocks.size());
    if (count > free_host_blocks()) return reply.refused.push_back({kv_op::swap_out, id, kv_refusal::no_host_blocks});
    for (std::int32_t i = 0; i < count; ++i) {
      const auto slot =
          static_cast<std::int32_t>(std::find(host_used_.begin(), host_used_.end(), false) - host_used_.begin());
      host_used_[static_cast<std::size_t>(slot)] = true;
      e.host.push_back(slot);
      reply.copies.push_back(
          {block_location::device, e.blocks[static_cast<std::size_t>(i)], block_location::host, slot});
    }
    for (auto b : e.blocks) --refs_[static_cast<std::size_t>(b)];
    e.blocks.clear();
    reply.deltas.push_back({id, 0, {}});
  }
  void append(sequence_id id, std::int32_t count, kv_op op, kv_reply& reply) {
    entry& e = seqs_.at(id);
    const bool copy = e.tokens % block_size_ != 0 && refs_[static_cast<std::size_t>(e.blocks.back())] > 1;
    const std::int32_t need = needed(e.tokens + count) - static_cast<std::int32_t>(e.blocks.size()) + (copy ? 1 : 0);
    if (need > free_blocks()) return reply.refused.push_back({op, id, kv_refusal::no_device_blocks});
    auto keep = static_cast<std::int32_t>(e.blocks.size());
    if (copy) {
      const std::int32_t fresh = take();
      reply.copies.push_back({block_location::device, e.blocks.back(), block_location::device, fresh});
      --refs_[static_cast<std::size_t>(e.blocks.back())];
      e.blocks.back() = fresh;
      --keep;
    }
    while (static_cast<std::int32_t>(e.blocks.size()) < needed(e.tokens + count)) e.blocks.push_back(take());
    e.tokens += count;
    if (keep < static_cast<std::int32_t>(e.blocks.size()))
      reply.deltas.push_back({id, keep, std::vector<std::int32_t>(e.blocks.begin() + keep, e.blocks.end())});
  }
  void swap_in(const kv_swap_in& op, kv_reply& reply) {
    entry& e = seqs_.at(op.seq);
    const auto count = static_cast<std::int32_t>(op.tokens.size());
    if (e.host.empty()) return reply.refused.push_back({kv_op::swap_in, op.seq, kv_refusal::invalid});
    if (needed(e.tokens + count) > free_blocks())
      return reply.refused.push_back({kv_op::swap_in, op.seq, kv_refusal::no_device_blocks});
    for (auto slot : e.host) {
      e.blocks.push_back(take());
      reply.copies.push_back({block_location::host, slot, block_location::device, e.blocks.back()});
      host_used_[static_cast<std::size_t>(slot)] = false;
    }
    e.host.clear();
    reply.deltas.push_back({op.seq, 0, e.blocks});
    append(op.seq, count, kv_op::swap_in, reply);
  }
  void allocate(const kv_allocate& op, kv_reply& reply) {
    const std::int32_t count = std::min<std::int32_t>(op.num_new_tokens, static_cast<std::int32_t>(op.tokens.size()));
    if (needed(count) > free_blocks())
      return reply.refused.push_back({kv_op::allocate, op.seq, kv_refusal::no_device_blocks});
    entry& e = seqs_[op.seq];
    while (static_cast<std::int32_t>(e.blocks.size()) < needed(count)) e.blocks.push_back(take());
    e.tokens = count;
    reply.deltas.push_back({op.seq, 0, e.blocks});
    reply.allocated.push_back({op.seq, 0, count});
  }

  std::int32_t block_size_;
  std::vector<std::int32_t> refs_;
  std::vector<bool> host_used_;
  std::map<sequence_id, entry> seqs_;
};

}  // namespace troupe::testing
