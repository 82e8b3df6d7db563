#pragma once
// The kv_manager protocol: once per step the scheduler sends one kv_request
// with everything the step needs from KV memory, and gets one kv_reply with
// the block-table changes, the block copies to run before the forward pass,
// and the items that did not fit. Every item is all-or-nothing: an item that
// does not fit changes nothing, so the scheduler can pick victims and send a
// second request for the same step. Plain values only (they become CAF
// messages in the actor layer).
//
// The manager applies the request's lists in this order, each in the order
// given: settles, forks, frees, swap_outs, appends, swap_ins, allocations.
// Settles come first so a sequence's speculative slots are resolved before
// anything else touches it; frees and swap-outs release blocks before
// anything needs them; forks come before frees so a child keeps its parent's
// blocks even when the parent is freed in the same request.
//
// Speculative slots: an append may add `num_speculative` slots after its
// tokens for draft tokens whose fate is unknown when it is planned. They
// hold K/V but no token ids: a block is hashed into the prefix cache only
// once every slot in it holds a settled token, so a block with an unsettled
// or rejected draft is never published. The sequence's next request settles
// them (kv_settle: the accepted ones become ordinary, the rest are released)
// before it may append again. A free drops them with everything else; a
// swap-out drops them first (only settled slots go to the host); a fork
// gives the child the settled slots only.

#include <cstdint>
#include <vector>

#include "kernels/step_batch.hpp"

namespace troupe {

/// Names one sequence (one choice of one request) to the KV manager.
using sequence_id = std::uint64_t;

/// Make `child` share every block of the device-resident `parent` (n > 1
/// choices after the prompt). The first write into a shared, partially
/// filled last block copies it (copy-on-write). Never needs a free block.
struct kv_fork {
  sequence_id parent = 0;
  sequence_id child = 0;
};

/// Drop a sequence, on device or on host. `forget_prefix` also removes its
/// blocks from the prefix cache (for a step that was planned but never run,
/// whose blocks hold no valid K/V).
struct kv_free {
  sequence_id seq = 0;
  bool forget_prefix = false;
};

/// Move a device-resident sequence's blocks to the host pool.
struct kv_swap_out {
  sequence_id seq = 0;
};

/// Slots for the tokens a device-resident sequence writes this step.
struct kv_append {
  sequence_id seq = 0;
  std::vector<std::int32_t> tokens;  ///< [k] ids written at positions num_tokens .. num_tokens+k-1
  std::int32_t num_speculative = 0;  ///< unsettled slots after `tokens` for draft tokens (needs tokens, no
                                     ///< unsettled slots before)
};

/// Resolves a sequence's speculative slots: the first `accepted` become
/// ordinary slots holding `tokens` (hashed into the prefix cache once their
/// blocks are full), the rest are released; trailing blocks left empty go
/// back to the pool (reported as a kv_table_delta that keeps fewer blocks).
struct kv_settle {
  sequence_id seq = 0;
  std::int32_t accepted = 0;         ///< 0 .. the sequence's speculative slots
  std::vector<std::int32_t> tokens;  ///< [accepted] the accepted draft ids, in position order
};

/// Bring a swapped sequence back to the device, then append `tokens` as kv_append does.
struct kv_swap_in {
  sequence_id seq = 0;
  std::vector<std::int32_t> tokens;  ///< [k] ids this step writes after the swap-in (may be empty)
};

/// Create a sequence: reuse the longest cached prefix of `tokens` (whole
/// blocks, at most tokens.size() - 1 tokens, so at least one token is
/// computed), then add slots for up to `num_new_tokens` tokens after it.
struct kv_allocate {
  sequence_id seq = 0;
  std::vector<std::int32_t> tokens;  ///< every known token: the prompt, or prompt + outputs after a recompute
  std::int32_t num_new_tokens = 0;   ///< tokens to compute this step after the cached prefix, >= 1
  std::int32_t adapter_id = 0;       ///< LoRA adapter (0: none); part of every block's cache key
  bool use_prefix_cache = true;      ///< false: no lookup and no caching of this sequence's blocks
  std::uint64_t cache_salt = 0;      ///< prefix-cache partition: blocks are shared only between equal salts
                                     ///< (mixed into the first block's chain, so whole chains diverge)
};

/// Everything one step needs from KV memory.
struct kv_request {
  std::uint64_t step = 0;  ///< the scheduler's step number, echoed in the reply
  std::vector<kv_settle> settles;
  std::vector<kv_fork> forks;
  std::vector<kv_free> frees;
  std::vector<kv_swap_out> swap_outs;
  std::vector<kv_append> appends;
  std::vector<kv_swap_in> swap_ins;
  std::vector<kv_allocate> allocations;

  bool empty() const {
    return settles.empty() && forks.empty() && frees.empty() && swap_outs.empty() && appends.empty() &&
           swap_ins.empty() && allocations.empty();
  }
};

/// Which kind of item a refusal is about.
enum class kv_op : std::uint8_t { settle, fork, free, swap_out, append, swap_in, allocate };

/// Why an item was not applied.
enum class kv_refusal : std::uint8_t {
  no_device_blocks,  ///< the device pool cannot hold it now (an ordinary answer)
  no_host_blocks,    ///< the host swap pool cannot hold it now (an ordinary answer)
  unknown_sequence,  ///< the sequence does not exist (a scheduler bug)
  invalid,           ///< wrong state or arguments (a scheduler bug)
};

/// Lower-case name of a refusal reason.
const char* kv_refusal_name(kv_refusal why);

/// A change to one sequence's device block table: keep its first `keep`
/// entries, then append `appended`. A swap-out leaves the table empty.
struct kv_table_delta {
  sequence_id seq = 0;
  std::int32_t keep = 0;
  std::vector<std::int32_t> appended;
};

/// A sequence created by kv_allocate and how much of it came from the prefix cache.
struct kv_allocated {
  sequence_id seq = 0;
  std::int32_t cached_tokens = 0;  ///< leading tokens whose K/V is already there (multiple of block_size)
  std::int32_t num_tokens = 0;     ///< slots the sequence now has: cached + tokens to compute this step
};

/// An item that was not applied (and changed nothing).
struct kv_refused {
  kv_op op = kv_op::append;
  sequence_id seq = 0;
  kv_refusal why = kv_refusal::no_device_blocks;
};

/// Pool occupancy and cumulative prefix-cache counters, after the request.
struct kv_usage {
  std::int32_t device_blocks = 0;              ///< pool size
  std::int32_t device_free_blocks = 0;         ///< allocatable now: never used plus cached-but-free
  std::int32_t device_cached_free_blocks = 0;  ///< free blocks still holding a cached prefix
  std::int32_t host_blocks = 0;
  std::int32_t host_free_blocks = 0;
  std::uint64_t prefix_query_tokens = 0;  ///< tokens looked up by kv_allocate, cumulative
  std::uint64_t prefix_hit_tokens = 0;    ///< of those, found in the cache
};

/// The answer to one kv_request.
struct kv_reply {
  std::uint64_t step = 0;
  std::vector<kv_table_delta> deltas;  ///< in the order the items were applied
  std::vector<block_copy> copies;      ///< run in this order before the step's forward pass
  std::vector<kv_allocated> allocated;
  std::vector<kv_refused> refused;
  kv_usage usage;
};

/// The KV manager as the scheduler sees it: one request, one reply.
class kv_planner {
 public:
  virtual ~kv_planner() = default;
  /// Applies what fits of `request` and says what changed.
  virtual kv_reply plan(const kv_request& request) = 0;
};

}  // namespace troupe
