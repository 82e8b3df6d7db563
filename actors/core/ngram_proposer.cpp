#include "actors/core/ngram_proposer.hpp"

#include <algorithm>

namespace troupe {

ngram_match find_ngram(std::span<const std::int32_t> tokens, int k, const ngram_settings& settings) {
  const auto size = static_cast<std::ptrdiff_t>(tokens.size());
  if (k <= 0 || size < 2) return {};
  for (int n = std::min<std::ptrdiff_t>(settings.max_ngram, size - 1); n >= std::max(1, settings.min_ngram); --n) {
    const std::span<const std::int32_t> suffix = tokens.last(static_cast<std::size_t>(n));
    // The most recent occurrence with k tokens after it wins: it is the
    // likeliest to continue the same way (a loop, a quoted passage being
    // copied). One too close to the end has fewer; the longest such is kept.
    ngram_match best;
    for (std::ptrdiff_t start = size - n - 1; start >= 0 && best.count < k; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const std::ptrdiff_t from = start + n;
      const auto count = static_cast<std::int32_t>(std::min<std::ptrdiff_t>(k, size - from));
      if (count > best.count) best = {n, from, count};
    }
    if (best.count > 0) return best;
  }
  return {};
}

std::vector<std::int32_t> propose_ngram(std::span<const std::int32_t> tokens, int k, const ngram_settings& settings) {
  const ngram_match match = find_ngram(tokens, k, settings);
  return {tokens.begin() + match.from, tokens.begin() + match.from + match.count};
}

std::vector<std::vector<std::int32_t>> propose_ngram_branches(std::span<const std::int32_t> tokens, int k, int width,
                                                              const ngram_settings& settings) {
  std::vector<std::vector<std::int32_t>> branches;
  std::vector<std::int32_t> first = propose_ngram(tokens, k, settings);
  if (first.empty()) return branches;
  branches.push_back(std::move(first));
  const auto size = static_cast<std::ptrdiff_t>(tokens.size());
  // Adds the continuation at `from` unless an earlier branch starts with it.
  const auto take = [&](std::ptrdiff_t from) {
    const std::ptrdiff_t count = std::min<std::ptrdiff_t>(k, size - from);
    const auto begin = tokens.begin() + from;
    for (const auto& branch : branches) {
      if (static_cast<std::ptrdiff_t>(branch.size()) >= count && std::equal(begin, begin + count, branch.begin()))
        return;
    }
    branches.emplace_back(begin, begin + count);
  };
  for (int n = std::min<std::ptrdiff_t>(settings.max_ngram, size - 1); n >= std::max(1, settings.min_ngram); --n) {
    const std::span<const std::int32_t> suffix = tokens.last(static_cast<std::size_t>(n));
    for (std::ptrdiff_t start = size - n - 1; start >= 0; --start) {
      if (static_cast<int>(branches.size()) >= width) return branches;
      if (std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) take(start + n);
    }
  }
  return branches;
}

}  // namespace troupe
