// A sequence's tokens and the transitions of its place in KV memory.

#include "actors/core/request_state.hpp"

namespace troupe {

namespace {

/// Drops every block the sequence holds on the device or the host.
void drop_kv(sequence& seq) {
  seq.kv_known = false;
  seq.num_computed = 0;
  seq.block_table.clear();
  seq.host_blocks = 0;
  seq.shared_prefix_blocks = 0;
  seq.may_share_last_block = false;
  seq.unsettled_slots = 0;
}

}  // namespace

std::int32_t sequence::total_tokens() const {
  return static_cast<std::int32_t>(request->spec.prompt.size() + outputs.size());
}

std::int32_t sequence::token_at(std::int32_t pos) const {
  const auto prompt = static_cast<std::int32_t>(request->spec.prompt.size());
  return pos < prompt ? request->spec.prompt[static_cast<std::size_t>(pos)]
                      : outputs[static_cast<std::size_t>(pos - prompt)];
}

void sequence::to_recompute() {
  status = sequence_status::waiting;
  drop_kv(*this);
}

void sequence::to_swapped(std::int32_t blocks) {
  status = sequence_status::swapped;
  host_blocks = blocks;
  block_table.clear();
  shared_prefix_blocks = 0;
  may_share_last_block = false;
  unsettled_slots = 0;
}

void sequence::to_swapped_in() {
  status = sequence_status::running;
  host_blocks = 0;
}

void sequence::to_allocated(std::int32_t shared_blocks) {
  status = sequence_status::running;
  kv_known = true;
  shared_prefix_blocks = shared_blocks;
  may_share_last_block = false;
}

void sequence::to_forked_from(sequence& parent) {
  status = sequence_status::running;
  kv_known = true;
  num_computed = parent.num_computed;
  block_table = parent.block_table;
  shared_prefix_blocks = static_cast<std::int32_t>(parent.block_table.size());
  may_share_last_block = true;
  parent.shared_prefix_blocks = shared_prefix_blocks;
  parent.may_share_last_block = true;
}

void sequence::to_finished() {
  status = sequence_status::finished;
  drop_kv(*this);
}

std::string sequence::invariant_problem(std::int32_t block_size) const {
  const auto blocks = static_cast<std::int64_t>(block_table.size());
  const bool shares = shared_prefix_blocks != 0 || may_share_last_block;
  switch (status) {
    case sequence_status::running:
      if (!kv_known) return "a running sequence the KV manager does not hold";
      if (host_blocks != 0) return "a running sequence with host blocks";
      if (blocks * block_size < num_computed) return "a running sequence's blocks do not cover its computed tokens";
      if (blocks * block_size < num_computed + unsettled_slots)
        return "a running sequence's blocks do not cover its unsettled slots";
      return {};
    case sequence_status::swapped:
      if (!kv_known) return "a swapped sequence the KV manager does not hold";
      if (blocks != 0 || shares || unsettled_slots != 0) return "a swapped sequence with device blocks";
      return {};
    case sequence_status::waiting:
    case sequence_status::finished:
      if (kv_known || num_computed != 0 || blocks != 0 || host_blocks != 0 || shares || unsettled_slots != 0)
        return "a waiting or finished sequence with KV state left";
      return {};
  }
  return "an unknown status";
}

bool request_state::queued() const { return !forked && !choices.empty() && !choices.front()->started; }

}  // namespace troupe
