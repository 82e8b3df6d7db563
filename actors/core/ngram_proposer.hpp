#pragma once
// Prompt lookup (n-gram) speculation: the last n tokens of a sequence are
// looked up earlier in its prompt and outputs, and the tokens that followed
// the match are proposed as drafts. Free to compute and strong where the
// output repeats the input (editing, summarising, code, quoting).

#include <cstdint>
#include <span>
#include <vector>

namespace troupe {

/// How the n-gram proposer matches.
struct ngram_settings {
  int max_ngram = 4;  ///< longest suffix tried first
  int min_ngram = 1;  ///< shortest suffix accepted
};

/// Where a chain of prompt-lookup drafts comes from.
struct ngram_match {
  int length = 0;           ///< tokens of the suffix matched (0: no match)
  std::ptrdiff_t from = 0;  ///< index in `tokens` of the first token proposed
  std::int32_t count = 0;   ///< tokens proposed (0: no match)
};

/// The match propose_ngram drafts from, for a sequence whose tokens so far
/// (prompt then outputs, the last one not yet fed to the model) are
/// `tokens`: the most recent earlier occurrence of the longest suffix of
/// length max_ngram .. min_ngram that has k tokens after it (else the one
/// with the most). O(|tokens| * max_ngram) time.
ngram_match find_ngram(std::span<const std::int32_t> tokens, int k, const ngram_settings& settings);

/// Up to `k` draft tokens: those after find_ngram's match. Empty when nothing matches.
std::vector<std::int32_t> propose_ngram(std::span<const std::int32_t> tokens, int k, const ngram_settings& settings);

/// Up to `width` continuations of up to `k` tokens each, for a draft tree:
/// propose_ngram's first, then those after other matches (longer suffixes
/// first, later occurrences first) that are not a prefix of one already
/// taken. Empty when nothing matches.
std::vector<std::vector<std::int32_t>> propose_ngram_branches(std::span<const std::int32_t> tokens, int k, int width,
                                                              const ngram_settings& settings);

}  // namespace troupe
