// Prompt lookup: which earlier occurrence is matched and what it proposes.

#include "actors/core/ngram_proposer.hpp"

#include <gtest/gtest.h>

namespace troupe {
namespace {

using ids = std::vector<std::int32_t>;

TEST(NgramProposer, ProposesWhatFollowedTheEarlierOccurrence) {
  // ... 7 8 9 10 11 ... 7 8 | next: 9 10 11
  const ids tokens = {1, 7, 8, 9, 10, 11, 2, 3, 7, 8};
  EXPECT_EQ(propose_ngram(tokens, 3, {}), (ids{9, 10, 11}));
  EXPECT_EQ(propose_ngram(tokens, 2, {}), (ids{9, 10}));
}

TEST(NgramProposer, PrefersTheLongestSuffix) {
  // "5 8" occurs once followed by 40; "8" alone occurs later followed by 30.
  const ids tokens = {5, 8, 40, 41, 8, 30, 31, 5, 8};
  EXPECT_EQ(propose_ngram(tokens, 2, {.max_ngram = 2, .min_ngram = 1}), (ids{40, 41}));
  EXPECT_EQ(propose_ngram(tokens, 2, {.max_ngram = 1, .min_ngram = 1}), (ids{30, 31}));
}

TEST(NgramProposer, PrefersTheMostRecentOccurrence) {
  const ids tokens = {4, 10, 4, 20, 4};
  EXPECT_EQ(propose_ngram(tokens, 1, {.max_ngram = 1, .min_ngram = 1}), (ids{20}));
}

TEST(NgramProposer, InALoopTheOccurrenceWithKTokensAfterItWins) {
  // The most recent "7" is followed by one token only; three back give three.
  EXPECT_EQ(propose_ngram(ids{7, 7, 7, 7, 7, 7}, 3, {.max_ngram = 1, .min_ngram = 1}), (ids{7, 7, 7}));
  const ids cycle = {1, 2, 3, 1, 2, 3, 1};  // "1" at 3 leaves 2 3 1; at 0, 2 3 1 2
  EXPECT_EQ(propose_ngram(cycle, 3, {.max_ngram = 1, .min_ngram = 1}), (ids{2, 3, 1}));
}

TEST(NgramProposer, StopsAtTheEndOfTheKnownTokens) {
  // The match is right before the suffix: only the suffix itself follows it.
  const ids tokens = {3, 3, 3};
  EXPECT_EQ(propose_ngram(tokens, 4, {.max_ngram = 2, .min_ngram = 1}), (ids{3}));
}

TEST(NgramProposer, ProposesNothingWithoutAMatch) {
  EXPECT_TRUE(propose_ngram(ids{1, 2, 3, 4}, 3, {}).empty());
  EXPECT_TRUE(propose_ngram(ids{1}, 3, {}).empty());
  EXPECT_TRUE(propose_ngram(ids{1, 2, 1}, 0, {}).empty());
  // A suffix shorter than min_ngram is not enough.
  EXPECT_TRUE(propose_ngram(ids{9, 1, 2, 9}, 3, {.max_ngram = 3, .min_ngram = 2}).empty());
}

TEST(NgramProposer, BranchesFollowOtherMatchesLongestSuffixAndLatestFirst) {
  // "7 8" occurs twice (followed by 9 10 and 20 21); "8" also before 30.
  const ids tokens = {7, 8, 9, 10, 8, 30, 31, 7, 8, 20, 21, 5, 7, 8};
  const std::vector<ids> branches = propose_ngram_branches(tokens, 2, 3, {.max_ngram = 2, .min_ngram = 1});
  ASSERT_EQ(branches.size(), 3u);
  EXPECT_EQ(branches[0], propose_ngram(tokens, 2, {.max_ngram = 2, .min_ngram = 1}));
  EXPECT_EQ(branches[0], (ids{20, 21}));
  EXPECT_EQ(branches[1], (ids{9, 10}));
  EXPECT_EQ(branches[2], (ids{30, 31}));
  // One branch is the chain proposer's; none match, none.
  EXPECT_EQ(propose_ngram_branches(tokens, 2, 1, {.max_ngram = 2, .min_ngram = 1}), (std::vector<ids>{{20, 21}}));
  EXPECT_TRUE(propose_ngram_branches(ids{1, 2, 3}, 2, 3, {}).empty());
}

TEST(NgramProposer, BranchesThatRepeatAnEarlierOneAreSkipped) {
  // Every "4" is followed by 5 6: one branch, however wide the tree.
  const ids tokens = {4, 5, 6, 4, 5, 6, 4};
  EXPECT_EQ(propose_ngram_branches(tokens, 2, 3, {.max_ngram = 1, .min_ngram = 1}), (std::vector<ids>{{5, 6}}));
}

}  // namespace
}  // namespace troupe
