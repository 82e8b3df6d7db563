#include "actors/core/ngram_proposer.hpp"

#include <algorithm>

namespace troupe {

std::vector<std::int32_t> propose_ngram(std::span<const std::int32_t> tokens, int k, const ngram_settings& settings) {
  const auto size = static_cast<std::ptrdiff_t>(tokens.size());
  if (k <= 0 || size < 2) return {};
  for (int n = std::min<std::ptrdiff_t>(settings.max_ngram, size - 1); n >= std::max(1, settings.min_ngram); --n) {
    const std::span<const std::int32_t> suffix = tokens.last(static_cast<std::size_t>(n));
    // The most recent occurrence wins: it is the likeliest to continue the
    // same way (a loop, a quoted passage being copied).
    for (std::ptrdiff_t start = size - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const std::ptrdiff_t from = start + n;
      const std::ptrdiff_t count = std::min<std::ptrdiff_t>(k, size - from);
      return {tokens.begin() + from, tokens.begin() + from + count};
    }
  }
  return {};
}

}  // namespace troupe
