#pragma once
// A stand-in for the executor: it keeps a token id per KV slot (device and
// host), runs a step's block copies, writes the step's tokens through
// slot_mapping, and "samples" each logits row as a hash of the seed, the
// token index and the context read back through the row's paged-KV table.
// Wrong block tables, copies, forks or RNG counters change the tokens, so
// comparing with reference_outputs() checks the whole path. It verifies the
// step's drafts greedily against the same function (the draft after row i
// is accepted while it equals row i's token) and then poisons the slots of
// rejected drafts, as their K/V is garbage: a table that reads them back, or
// a prefix-cache block holding them, shows. A row with an allowed-token
// mask draws constrained_token() of the hash instead (fake_constraint.hpp).
// Draft trees are read through the tree key map and verified greedily from
// the root; only an accepted path's slots already in place stay unpoisoned.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "actors/core/scheduler_types.hpp"
#include "kernels/step_batch.hpp"
#include "kernels/tree_attention.hpp"
#include "tests/scheduler/fake_constraint.hpp"

namespace troupe::testing {

inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// The fake model's next token for a context: independent of batching.
inline std::int32_t fake_next_token(std::uint64_t seed, std::uint64_t token_index,
                                    const std::vector<std::int32_t>& context, std::int32_t vocab) {
  std::uint64_t h = mix64(seed) ^ mix64(token_index + 0x51ull);
  for (std::int32_t t : context) h = mix64(h ^ static_cast<std::uint32_t>(t));
  return static_cast<std::int32_t>(h % static_cast<std::uint64_t>(vocab));
}

/// One choice of a request run alone by the fake model.
struct solo_run {
  std::vector<std::int32_t> prompt;
  std::uint64_t request_seed = 0;
  int choice = 0;
  int max_tokens = 0;
  std::vector<std::int32_t> stop_ids = {};  ///< any of them stops the choice once min_tokens are out
  int min_tokens = 0;
  std::int32_t vocab = 1;
};

/// What `run` produces: stop on any id in `stop_ids` (once min_tokens are
/// out) or after max_tokens.
inline std::vector<std::int32_t> reference_outputs(const solo_run& run) {
  std::vector<std::int32_t> context = run.prompt, outputs;
  const std::uint64_t seed = choice_seed(run.request_seed, run.choice);
  while (static_cast<int>(outputs.size()) < run.max_tokens) {
    const std::int32_t token = fake_next_token(seed, outputs.size(), context, run.vocab);
    outputs.push_back(token);
    context.push_back(token);
    const bool stops = std::find(run.stop_ids.begin(), run.stop_ids.end(), token) != run.stop_ids.end();
    if (stops && static_cast<int>(outputs.size()) >= run.min_tokens) break;
  }
  return outputs;
}

class fake_model {
 public:
  fake_model(std::int32_t device_blocks, std::int32_t host_blocks, std::int32_t block_size, std::int32_t vocab)
      : block_size_(block_size),
        vocab_(vocab),
        device_(static_cast<std::size_t>(device_blocks * block_size), -1),
        host_(static_cast<std::size_t>(host_blocks * block_size), -1) {}

  /// Runs one step; one sample per logits row.
  step_result run(const scheduled_step& step, const step_batch& batch) {
    for (const block_copy& c : batch.block_copies) {
      const auto& from = c.from == block_location::device ? device_ : host_;
      auto& to = c.to == block_location::device ? device_ : host_;
      std::copy_n(from.begin() + c.src * block_size_, block_size_, to.begin() + c.dst * block_size_);
    }
    for (std::size_t t = 0; t < batch.token_ids.size(); ++t)
      device_[static_cast<std::size_t>(batch.slot_mapping[t])] = batch.token_ids[t];
    const tree_key_map tree = map_tree_keys(batch);
    step_result result;
    result.step = step.id;
    result.execute_s = execute_s;
    for (std::size_t r = 0; r < batch.logits_indices.size(); ++r) {
      const logits_row_hook& hook = step.rows[r];
      const std::size_t s = hook.sequence_index;
      // The row's context: its sequence up to and including the row's token
      // (a draft tree's token: up to its root, then its path, as tree attention reads it).
      const auto token = static_cast<std::size_t>(batch.logits_indices[r]);
      const std::int32_t length = batch.positions[token] + 1;
      std::vector<std::int32_t> context;
      for (std::int32_t p = 0; p < length; ++p) {
        const bool remapped = !tree.start.empty() && p >= tree.start[token];
        const std::int32_t at =
            remapped ? tree.keys[static_cast<std::size_t>(tree.offset[token] + p - tree.start[token])] : p;
        const std::int32_t block = batch.kv_indices[static_cast<std::size_t>(batch.kv_indptr[s] + at / block_size_)];
        context.push_back(device_[static_cast<std::size_t>(block * block_size_ + at % block_size_)]);
      }
      sample_output out;
      out.token = fake_next_token(hook.seed, hook.token_index, context, vocab_);
      if (r < batch.sampling.size() && !batch.sampling[r].allowed_mask.empty())
        out.token = constrained_token(out.token, mask_ids(batch.sampling[r].allowed_mask));
      result.samples.push_back(out);
    }
    for (const verify_group& group : batch.verify) verify(group, batch, result);
    return result;
  }

  /// The token id a device slot holds (-1: never written, or a rejected draft's).
  std::int32_t device_slot(std::int64_t slot) const { return device_[static_cast<std::size_t>(slot)]; }

  double execute_s = 0.001;  ///< reported as each step's executor time

 private:
  /// Greedy verification: accept drafts while each equals the previous row's
  /// token; the rows after the first mismatch emit nothing (-1).
  void verify(const verify_group& group, const step_batch& batch, step_result& result) {
    if (!group.parents.empty()) return verify_tree(group, batch, result);
    const auto first = static_cast<std::size_t>(group.first_row);
    std::size_t accepted = 0;
    while (accepted < group.drafts.size() && group.drafts[accepted] == result.samples[first + accepted].token)
      ++accepted;
    for (std::size_t i = accepted + 1; i <= group.drafts.size(); ++i) {
      result.samples[first + i].token = -1;
      const auto token = static_cast<std::size_t>(batch.logits_indices[first + i]);  // draft i was fed here
      device_[static_cast<std::size_t>(batch.slot_mapping[token])] = -1;
    }
    result.accepted.push_back(static_cast<std::int32_t>(accepted));
  }

  /// Greedy tree verification: from the root, the child carrying the row's
  /// token is accepted; the emitted tokens fill the group's first rows (the
  /// rest -1), and every node's slot but those of an accepted path's leading
  /// nodes 1..m (the K/V already in place) is poisoned.
  void verify_tree(const verify_group& group, const step_batch& batch, step_result& result) {
    const auto first = static_cast<std::size_t>(group.first_row);
    const std::size_t nodes = group.drafts.size() + 1;
    std::vector<std::int32_t> emitted;
    std::size_t node = 0, in_place = 0;
    bool still_in_place = true;
    for (;;) {
      const std::int32_t token = result.samples[first + node].token;
      emitted.push_back(token);
      std::size_t next = 0;
      for (std::size_t child = node + 1; child < nodes && next == 0; ++child) {
        if (static_cast<std::size_t>(group.parents[child - 1]) == node && group.drafts[child - 1] == token)
          next = child;
      }
      if (next == 0) break;
      still_in_place = still_in_place && next == node + 1;
      in_place += still_in_place ? 1 : 0;
      node = next;
    }
    for (std::size_t r = 0; r < nodes; ++r) result.samples[first + r].token = r < emitted.size() ? emitted[r] : -1;
    for (std::size_t i = in_place + 1; i < nodes; ++i) {
      const auto token = static_cast<std::size_t>(batch.logits_indices[first + i]);
      device_[static_cast<std::size_t>(batch.slot_mapping[token])] = -1;
    }
    result.accepted.push_back(static_cast<std::int32_t>(emitted.size()) - 1);
  }

  std::int32_t block_size_, vocab_;
  std::vector<std::int32_t> device_, host_;
};

}  // namespace troupe::testing
