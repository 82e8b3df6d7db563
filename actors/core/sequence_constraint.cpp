#include "actors/core/sequence_constraint.hpp"

#include <algorithm>

namespace troupe {

namespace {

std::size_t mask_words(const sequence& seq) {
  return (static_cast<std::size_t>(seq.request->spec.constraint_vocab) + 31) / 32;
}

}  // namespace

void start_matcher(sequence& seq) {
  const auto& constraint = seq.request->spec.constraint;
  seq.matcher = constraint ? constraint->start() : nullptr;
}

std::span<const std::uint32_t> next_row_mask(sequence& seq) {
  if (!seq.matcher) return {};
  seq.allowed_mask.assign(mask_words(seq), 0u);
  seq.matcher->fill_allowed(seq.allowed_mask);
  return seq.allowed_mask;
}

std::vector<std::span<const std::uint32_t>> draft_row_masks(sequence& seq, std::span<const std::int32_t> drafts) {
  if (!seq.matcher) return {};
  const std::size_t words = mask_words(seq);
  // Sized once: the hooks' spans must not move.
  seq.draft_masks.assign(drafts.size() * words, 0u);
  std::size_t advanced = 0;
  std::vector<std::span<const std::uint32_t>> masks;
  for (std::size_t i = 0; i < drafts.size(); ++i) {
    const std::span<std::uint32_t> mask = std::span(seq.draft_masks).subspan(i * words, words);
    if (advanced == i && seq.matcher->accept_token(drafts[i])) {
      ++advanced;
      seq.matcher->fill_allowed(mask);
    } else {
      const std::span<const std::uint32_t> last =
          i == 0 ? std::span<const std::uint32_t>(seq.allowed_mask) : masks.back();
      std::copy(last.begin(), last.end(), mask.begin());
    }
    masks.push_back(mask);
  }
  seq.matcher->rollback(advanced);
  return masks;
}

bool advance_matcher(sequence& seq, std::int32_t token) {
  if (!seq.matcher) return false;
  if (!seq.matcher->accept_token(token)) return true;
  return seq.matcher->is_terminated();
}

}  // namespace troupe
