// The speculation knobs' parsers: the proposer name and the layer-skip list,
// including hostile text (the knobs come from flags, files and environment).

#include <gtest/gtest.h>

#include <stdexcept>

#include "actors/core/speculation.hpp"

namespace troupe {
namespace {

TEST(SpeculationSettings, ProposerNamesParseAndOthersDoNot) {
  EXPECT_EQ(parse_speculative_method("off"), speculative_method::off);
  EXPECT_EQ(parse_speculative_method("ngram"), speculative_method::ngram);
  EXPECT_EQ(parse_speculative_method("draft"), speculative_method::draft);
  EXPECT_EQ(parse_speculative_method("layerskip"), speculative_method::layerskip);
  for (const char* bad : {"", "Off", "medusa", "ngram ", "layer skip"}) EXPECT_FALSE(parse_speculative_method(bad));
}

TEST(SpeculationSettings, AnEmptySkipListSkipsTheUpperHalf) {
  EXPECT_EQ(kept_layers("", 8), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(kept_layers("", 5), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(kept_layers("", 1), (std::vector<int>{0}));
}

TEST(SpeculationSettings, SkipListsTakeLayersAndRanges) {
  EXPECT_EQ(kept_layers("4-7", 8), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(kept_layers("1,3,5", 6), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(kept_layers("0,6-7", 8), (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(kept_layers("2,2-3,3", 5), (std::vector<int>{0, 1, 4})) << "overlaps are fine";
}

TEST(SpeculationSettings, BadSkipListsNameTheKnob) {
  for (const char* bad : {"8", "-1", "3-1", "a", "1,,2", ",1", "1-", "99999999999999999999", "0-7", " 1"}) {
    try {
      kept_layers(bad, 8);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("speculative_skip_layers"), std::string::npos) << e.what();
    }
  }
}

TEST(SpeculationSettings, ALayerSkippingDrafterOfTheFirstLayersSharesTheTargetsKvUnlessDraftingAhead) {
  EXPECT_TRUE(shares_target_kv(kept_layers("", 8), "auto")) << "the upper half skipped";
  EXPECT_TRUE(shares_target_kv(kept_layers("1-7", 8), "off"));
  EXPECT_FALSE(shares_target_kv(kept_layers("", 8), "on")) << "an ahead round writes while the target does";
  EXPECT_FALSE(shares_target_kv(kept_layers("2", 8), "auto")) << "layers after a skipped one see other inputs";
  EXPECT_FALSE(shares_target_kv(kept_layers("0", 8), "off"));
}

TEST(SpeculationSettings, DraftingAheadAutoNeedsCoresOfItsOwn) {
  EXPECT_TRUE(drafter_has_own_compute(false, 0, 0, 2)) << "off the cpu the drafter has its own stream";
  EXPECT_FALSE(drafter_has_own_compute(true, 0, 0, 16)) << "both on every core";
  EXPECT_TRUE(drafter_has_own_compute(true, 8, 0, 16)) << "the draft takes as many as the target: 16 of 16";
  EXPECT_FALSE(drafter_has_own_compute(true, 2, 0, 2));
  EXPECT_TRUE(drafter_has_own_compute(true, 1, 1, 2));
  EXPECT_FALSE(drafter_has_own_compute(true, 0, 1, 2)) << "threads 0 is every core";
  EXPECT_TRUE(drafter_has_own_compute(true, 12, 4, 16));
  EXPECT_FALSE(drafter_has_own_compute(true, 12, 5, 16));
  for (const bool own : {false, true}) {
    EXPECT_TRUE(drafts_ahead(draft_ahead_mode::on, own));
    EXPECT_FALSE(drafts_ahead(draft_ahead_mode::off, own));
    EXPECT_EQ(drafts_ahead(draft_ahead_mode::automatic, own), own);
  }
  for (const draft_ahead_mode mode : {draft_ahead_mode::automatic, draft_ahead_mode::on, draft_ahead_mode::off})
    EXPECT_EQ(parse_draft_ahead_mode(draft_ahead_mode_name(mode)), mode);
  EXPECT_FALSE(parse_draft_ahead_mode("yes"));
}

}  // namespace
}  // namespace troupe
