// Speculative decoding on the real troupe (chains, and trees for the
// proposers that make them): for every proposer on every
// fixture architecture (CPU backend, batch-invariant numerics), greedy
// requests of mixed lengths (some repetitive, so prompt lookup finds
// matches) with chunked prefill and a KV pool small enough to force swap or
// recompute preemption give exactly the tokens each request gives run alone
// without speculation; drafts were made (and all accepted where the target
// drafts for itself in its own format); cancellations end; and the pool is
// whole again at the end.

#include <gtest/gtest.h>

#include <thread>

#include "engine_fixture.hpp"
#include "kernels/quantization.hpp"
#include "model/checkpoint.hpp"
#include "solo_reference.hpp"
#include "speculation_workload.hpp"
#include "tests/model/model_test_util.hpp"

namespace troupe {
namespace {

using testing::planned_request;
using testing::servable_fixture;

constexpr int num_requests = 48;
/// Tokens per KV block, the engine's and the reference's: small, so that
/// the pool runs short (preemption) and the block tables are long.
constexpr int block_size = 4;

std::vector<planned_request> make_workload(const std::filesystem::path& dir,
                                           weight_quantization quantization = weight_quantization::none) {
  const checkpoint ckpt = checkpoint::open(dir, {.show_progress = false});
  std::vector<planned_request> plan = testing::speculation_workload(ckpt, num_requests);
  testing::solo_reference reference(ckpt, quantization, block_size);
  for (auto& planned : plan) {
    runner_request alone;
    alone.prompt = planned.request.prompt_token_ids;
    alone.params = planned.request.sampling;
    alone.max_tokens = planned.request.max_tokens;
    planned.expected = reference.generate(alone);
  }
  return plan;
}

using speculative_case = std::tuple<std::string, std::string, std::string, int>;  // fixture, proposer, preemption,
                                                                                  // tree width

/// The target's and the draft's weight formats (engine knobs quantization,
/// draft_quantization and draft_vocab_size) and whether the drafter drafts
/// ahead (speculative_draft_ahead).
struct speculation_variant {
  weight_quantization target = weight_quantization::none;
  std::string draft = "auto";
  std::int64_t draft_vocab_size = 0;  ///< the draft head's rows (0: all)
  std::string draft_ahead = "off";
  bool turn_down = true;  ///< speculative_turn_down (false: every eligible decode speculates)
};

// Runs the workload with `proposer` (draft trees of `tree_width` branches)
// and checks every request's tokens, the pool and the metrics.
void expect_lossless(const std::string& fixture, const std::string& proposer, const std::string& preemption,
                     int tree_width, const speculation_variant& formats = {}) {
  const auto dir = servable_fixture(fixture);
  const std::vector<planned_request> plan = make_workload(dir, formats.target);
  engine_config config =
      testing::speculation_engine_config(dir, proposer, preemption, block_size, fixture.ends_with("f32") ? 4 : 2);
  config.quantization = std::string(quantization_name(formats.target));
  config.draft_quantization = formats.draft;
  config.draft_vocab_size = formats.draft_vocab_size;
  config.speculative_draft_ahead = formats.draft_ahead;
  config.speculative_turn_down = formats.turn_down;
  config.batch_invariant = true;
  config.speculative_tree_width = tree_width;
  auto engine = engine::start(config);
  const engine_stats idle = engine->stats();
  const auto sinks = testing::submit_workload(*engine, plan);
  for (std::size_t i = 0; i < plan.size(); ++i) {
    ASSERT_TRUE(sinks[i]->wait(std::chrono::seconds(120))) << "request " << i << " never ended";
    ASSERT_FALSE(sinks[i]->error) << sinks[i]->error->message;
    ASSERT_EQ(sinks[i]->choices.size(), 1u);
    const auto& got = sinks[i]->choices[0].tokens;
    const auto& want = plan[i].expected;
    if (plan[i].cancel) {
      ASSERT_LE(got.size(), want.size());
      EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin())) << "cancelled request " << i;
    } else {
      EXPECT_EQ(got, want) << "request " << i;
    }
  }
  const engine_stats end = testing::stats_once_idle(*engine, idle);
  EXPECT_EQ(end.kv_blocks_free, idle.kv_blocks_free) << "leaked blocks";
  EXPECT_EQ(end.host_kv_cache_usage, 0.0);
  EXPECT_GT(end.spec_decode_num_drafts, 0u) << "no round had drafts";
  // Random weights make lookup and layer-skip acceptance luck; a model
  // drafting for itself in the same format must be accepted every time.
  // (In a tree its chain always is, and the runners-up beside it never are.)
  const bool same_format =
      (formats.draft == "auto" || formats.draft == quantization_name(formats.target)) && formats.draft_vocab_size == 0;
  if (proposer == "draft" && tree_width == 1 && same_format) {
    EXPECT_EQ(end.spec_decode_num_accepted_tokens, end.spec_decode_num_draft_tokens)
        << "a model drafting for itself is always right";
  }
  // In another format its random-weight logits disagree with the target's now and then.
  if (proposer == "draft" && !same_format) {
    EXPECT_LT(end.spec_decode_num_accepted_tokens, end.spec_decode_num_draft_tokens)
        << "a draft in another format (or with a narrower head) agreed on every token: is it applied?";
  }
  if (proposer == "draft") {
    EXPECT_GT(end.spec_decode_num_accepted_tokens, 0u);
  }
  if (formats.draft_ahead == "off") {
    EXPECT_EQ(end.spec_decode_num_ahead_drafts, 0u);
  }
  if (formats.draft_ahead == "on" && proposer != "ngram") {
    EXPECT_GT(end.spec_decode_num_ahead_drafts, 0u) << "no round was drafted ahead";
    EXPECT_LE(end.spec_decode_num_ahead_used, end.spec_decode_num_ahead_drafts);
    // Drafting for itself, the draft guesses every bonus token right; a
    // guess is lost only to a sequence that ends, is preempted or cancelled.
    if (proposer == "draft" && same_format) {
      EXPECT_GT(end.spec_decode_num_ahead_used, 0u) << "no guess was used";
    }
  }
  std::uint64_t preemptions = 0;
  for (const auto& [kind, count] : end.preemptions) preemptions += count;
  EXPECT_GT(preemptions, 0u) << "the pool was meant to force preemption";
  EXPECT_TRUE(end.healthy);
}

class SpeculativeEngine : public ::testing::TestWithParam<speculative_case> {};

TEST_P(SpeculativeEngine, GreedyOutputsEqualTheirRunsAloneWithoutSpeculation) {
  const auto& [fixture, proposer, preemption, tree_width] = GetParam();
  expect_lossless(fixture, proposer, preemption, tree_width);
}

std::string case_name(const ::testing::TestParamInfo<speculative_case>& info) {
  const auto& [fixture, proposer, preemption, tree_width] = info.param;
  return fixture + "_" + proposer + "_" + preemption + (tree_width > 1 ? "_tree" : "");
}

const auto fixture_models = ::testing::Values("llama_f32", "llama_bf16", "mistral_f32", "mistral_bf16", "qwen2_f32",
                                              "qwen2_bf16", "qwen3_f32", "qwen3_bf16");

INSTANTIATE_TEST_SUITE_P(FixturesProposersAndPreemption, SpeculativeEngine,
                         ::testing::Combine(fixture_models, ::testing::Values("ngram", "draft", "layerskip"),
                                            ::testing::Values("swap", "recompute"), ::testing::Values(1)),
                         case_name);

// An int4 target with itself as the draft: by default (draft_quantization
// auto) the draft runs int4 too, so every draft is accepted; in bf16 (none)
// it drafts other tokens now and then, and the outputs are the target's either way.
TEST(SpeculativeEngineQuantised, TheDraftRunsInTheTargetsFormatUnlessToldOtherwise) {
  for (const char* fixture : {"llama_bf16", "qwen3_f32"}) {
    SCOPED_TRACE(fixture);
    expect_lossless(fixture, "draft", "swap", 1, {weight_quantization::int4, "auto"});
    // Every decode speculates, so that the disagreements show whatever the turn-down would decide here.
    expect_lossless(fixture, "draft", "recompute", 1, {weight_quantization::int4, "none", 0, "off", false});
  }
}

// The target drafting for itself with its head cut to the lower half of the
// vocabulary: it proposes the target's own tokens except where the target's
// choice lies above the cut, so it is accepted often but not always, and
// the outputs stay the target's.
TEST(SpeculativeEngineNarrowHead, ADraftHeadOfTheFirstIdsOnlyIsLossless) {
  for (const char* fixture : {"llama_bf16", "qwen2_f32"}) {
    SCOPED_TRACE(fixture);
    const std::int64_t vocab =
        checkpoint::open(servable_fixture(fixture), {.show_progress = false}).config().vocab_size;
    // Every decode speculates, so that the drafts the cut rules out show whatever the turn-down would decide.
    expect_lossless(fixture, "draft", "swap", 1, {weight_quantization::none, "auto", vocab / 2, "off", false});
    expect_lossless(fixture, "draft", "recompute", 3, {weight_quantization::none, "auto", vocab / 2, "off", false});
  }
}

// The next round drafted while the target verifies, on the guess that
// every draft and the bonus token are right: a model drafting for itself
// guesses right, so later steps take drafts that were made ahead; the
// layer-skipping drafter guesses wrong now and then. Outputs stay the
// target's, under swap and recompute, with trees too (drafted ahead as chains).
TEST(SpeculativeEngineAhead, DraftsMadeDuringVerificationAreLossless) {
  for (const char* fixture : {"llama_bf16", "qwen3_f32", "mistral_f32"}) {
    SCOPED_TRACE(fixture);
    // Every decode speculates (no cost turn-down), so that the steps after
    // an ahead round have draft slots whatever this machine's timings.
    const speculation_variant ahead{.draft_ahead = "on", .turn_down = false};
    expect_lossless(fixture, "draft", "swap", 1, ahead);
    expect_lossless(fixture, "layerskip", "recompute", 1, ahead);
    expect_lossless(fixture, "draft", "recompute", 3, ahead);
  }
}

// Draft trees (tree attention on the CPU backend): three branches per
// round, ngram's from other matches, draft's the runners-up of d1.
INSTANTIATE_TEST_SUITE_P(Trees, SpeculativeEngine,
                         ::testing::Combine(fixture_models, ::testing::Values("ngram", "draft"),
                                            ::testing::Values("swap", "recompute"), ::testing::Values(3)),
                         case_name);

}  // namespace
}  // namespace troupe
