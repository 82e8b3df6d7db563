#pragma once
// Structured output in the scheduler core: a sequence's token_matcher gives
// each of its sampled rows the allowed-token mask (computed when the step
// is dispatched) and advances with every emitted token; speculative drafts
// get one mask per verify row by advancing through the drafts and rolling back.

#include <cstdint>
#include <span>
#include <vector>

#include "actors/core/request_state.hpp"

namespace troupe {

/// Gives `seq` a matcher at the start of its request's constraint (none
/// when the request is unconstrained).
void start_matcher(sequence& seq);

/// The mask of `seq`'s next row, written to seq.allowed_mask; empty when
/// the sequence is unconstrained.
std::span<const std::uint32_t> next_row_mask(sequence& seq);

/// The masks of the verify rows after `drafts` (row i follows drafts 1..i,
/// i = 1..j), written to seq.draft_masks; the matcher ends where it began.
/// Rows after the first draft the constraint forbids repeat the last valid
/// mask: verification rejects that draft, so they never emit. Empty when
/// the sequence is unconstrained.
std::vector<std::span<const std::uint32_t>> draft_row_masks(sequence& seq, std::span<const std::int32_t> drafts);

/// Advances `seq`'s matcher by an emitted token. True when the constrained
/// document is over: nothing but eos may follow, or the token left the
/// constraint (so no valid continuation exists). False when unconstrained.
bool advance_matcher(sequence& seq, std::int32_t token);

}  // namespace troupe
