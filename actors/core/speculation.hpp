#pragma once
// What the scheduler actor does with a planned step's draft slots, as pure
// functions: which proposer fills them, the prompt-lookup drafts (computed
// in place: microseconds, no message), the jobs a draft model is sent, and
// which layers a layer-skipping drafter keeps.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actors/core/draft_proposer.hpp"
#include "actors/core/draft_tree.hpp"
#include "actors/core/ngram_proposer.hpp"
#include "actors/core/scheduler_types.hpp"

namespace troupe {

/// Who proposes drafts (the `speculative` knob).
enum class speculative_method : std::uint8_t { off, ngram, draft, layerskip };

/// Parses "off", "ngram", "draft", "layerskip".
std::optional<speculative_method> parse_speculative_method(std::string_view name);

/// Prompt-lookup drafts for every sequence of `step` with draft slots:
/// (sequence index, drafts), only where the lookup found something. A chain
/// is the tokens after the match the scheduler core planned its slots from
/// (lookup_from; none without one). A sequence with tree_width w > 1 gets a
/// tree of up to w continuations of up to ceil(draft_slots / w) tokens each
/// (different match positions, found by `settings`).
std::vector<std::pair<std::size_t, draft_tree>> lookup_drafts(const scheduled_step& step,
                                                              const ngram_settings& settings);

/// The draft-model jobs of `step`: one per sequence with draft slots and no
/// drafts yet, with copies of its tokens, block table and sampling settings
/// (the message must not point into the scheduler's state), and the device
/// blocks the step's copies read or write (draft_request::busy_blocks).
draft_request draft_jobs(const scheduled_step& step);

/// Appends the device blocks `copies` read or write to `blocks`.
void append_device_blocks(std::span<const block_copy> copies, std::vector<std::int32_t>& blocks);

/// The jobs of the round drafted ahead for `step` as dispatched, its drafts
/// set (draft_ahead.hpp): one per sequence with drafts whose table's blocks
/// (of `block_size` tokens) cover at least two positions after its first
/// chain (all of a chain; a tree's leading nodes that each follow the one
/// before, a draft model's chain): the bonus token's guess and one next
/// draft. Its context runs through that chain, its slots as far as those
/// blocks reach, at most the depth of the step's draft slots
/// (ceil(draft_slots / tree_width)) + 1.
draft_request ahead_draft_jobs(const scheduled_step& step, std::int32_t block_size);

/// Whether a drafter has compute the target does not use: off the CPU (its
/// own stream), or on it with `target_threads` + `draft_threads` within
/// `cores` (0 threads means all cores; 0 draft threads, as many as the target's).
bool drafter_has_own_compute(bool drafter_on_cpu, int target_threads, int draft_threads, int cores);

/// Whether the scheduler drafts ahead in `mode` (automatic: where the
/// drafter has `own_compute`); never for a drafter that `shares_target_kv`
/// (an ahead round would write while the target writes the same sequences).
bool drafts_ahead(draft_ahead_mode mode, bool own_compute, bool shares_target_kv = false);

/// Whether a layer-skipping drafter running the target's layers `kept`
/// works in the target's KV pool instead of one of its own: when they are
/// the first layers (which compute the K/V the target wrote, exactly) and
/// `draft_ahead` (knob speculative_draft_ahead) is not "on" (an ahead round
/// would write while the target writes the same sequences). It then has no
/// context to catch up on and holds no KV memory.
bool shares_target_kv(std::span<const int> kept, std::string_view draft_ahead);

/// The layers a layer-skipping drafter of a `num_layers`-layer model runs,
/// given the `speculative_skip_layers` knob ("4-7", "1,3,5", "0,6-7"; empty:
/// skip the upper half). Throws std::runtime_error naming the knob when the
/// text is malformed, names a layer out of range, or skips every layer.
std::vector<int> kept_layers(std::string_view skip, int num_layers);

}  // namespace troupe
