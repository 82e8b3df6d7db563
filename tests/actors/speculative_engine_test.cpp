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

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "engine_fixture.hpp"
#include "kernels/quantization.hpp"
#include "model/checkpoint.hpp"
#include "solo_reference.hpp"
#include "tests/model/model_test_util.hpp"

namespace troupe {
namespace {

constexpr int num_requests = 48;
/// Tokens per KV block, the engine's and the reference's: small, so that
/// the pool runs short (preemption) and the block tables are long.
constexpr int block_size = 4;

// The tiny test model's tokenizer cut to the fixtures' vocabulary of 320:
// the byte tokens and the first merges up to id 299, the special tokens
// renumbered after them (as HF numbers added tokens missing from the vocab).
std::string tokenizer_within_fixture_vocab() {
  constexpr std::int64_t kept = 300;
  std::ifstream in(testing::tiny_model_dir() / "tokenizer.json");
  std::stringstream text;
  text << in.rdbuf();
  boost::json::value json = boost::json::parse(text.str());
  boost::json::object& model = json.at("model").as_object();
  boost::json::object vocab;
  for (const auto& [token, id] : model.at("vocab").as_object())
    if (id.as_int64() < kept) vocab[token] = id;
  boost::json::array merges;
  for (const auto& merge : model.at("merges").as_array()) {
    std::string pair(merge.as_string());
    const auto space = pair.find(' ');
    if (vocab.contains(pair.substr(0, space) + pair.substr(space + 1))) merges.push_back(merge);
  }
  model["vocab"] = std::move(vocab);
  model["merges"] = std::move(merges);
  for (auto& processor : json.at("post_processor").at("processors").as_array()) {
    if (auto* special = processor.as_object().if_contains("special_tokens"))
      for (auto& [name, token] : special->as_object())
        token.as_object()["ids"] = boost::json::array{kept};  // <|begin_of_text|>, the first added token
  }
  return boost::json::serialize(json);
}

// A fixture checkpoint (tests/fixtures/models, made by transformers) with a
// tokenizer beside it that fits its vocabulary, which the engine needs to run.
std::filesystem::path servable_fixture(const std::string& name) {
  const auto source = std::filesystem::path(TROUPE_FIXTURES_DIR) / "models" / name;
  const auto dir = testing::process_scratch_dir() / ("spec-" + name);
  if (std::filesystem::exists(dir / "tokenizer.json")) return dir;
  std::filesystem::create_directories(dir);
  for (const char* file : {"config.json", "generation_config.json", "model.safetensors"})
    std::filesystem::copy_file(source / file, dir / file, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(testing::tiny_model_dir() / "tokenizer_config.json", dir / "tokenizer_config.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir / "tokenizer.json", std::ios::trunc) << tokenizer_within_fixture_vocab();
  return dir;
}

struct planned_request {
  generation_request request;
  bool cancel = false;
  std::vector<std::int32_t> expected;  ///< greedy, run alone without speculation
};

std::vector<planned_request> make_workload(const std::filesystem::path& dir,
                                           weight_quantization quantization = weight_quantization::none) {
  const checkpoint ckpt = checkpoint::open(dir, {.show_progress = false});
  const auto vocab = static_cast<int>(ckpt.config().vocab_size);
  const auto context = static_cast<int>(ckpt.config().max_position_embeddings);  // qwen2's fixtures: 40
  std::mt19937 rng(11);
  const auto uniform = [&](int low, int high) { return std::uniform_int_distribution<int>(low, high)(rng); };
  std::vector<planned_request> plan(num_requests);
  for (int i = 0; i < num_requests; ++i) {
    generation_request& r = plan[static_cast<std::size_t>(i)].request;
    r.kind = prompt_kind::token_ids;
    std::vector<std::int32_t> piece(static_cast<std::size_t>(uniform(3, std::min(40, context / 4))));
    for (auto& id : piece) id = uniform(0, vocab - 1);
    // Half the prompts repeat themselves: material for prompt lookup.
    r.prompt_token_ids = piece;
    if (i % 2 == 0) r.prompt_token_ids.insert(r.prompt_token_ids.end(), piece.begin(), piece.end());
    r.max_tokens = uniform(1, std::min(40, context - static_cast<int>(r.prompt_token_ids.size())));
    r.sampling.temperature = 0.0f;
    r.speculative = i % 7 != 3;  // a few opt out
    plan[static_cast<std::size_t>(i)].cancel = i % 11 == 5;
  }
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
  engine_config config = testing::tiny_engine_config();
  config.model_dir = dir.string();
  config.quantization = std::string(quantization_name(formats.target));
  config.draft_quantization = formats.draft;
  config.draft_vocab_size = formats.draft_vocab_size;
  config.speculative_draft_ahead = formats.draft_ahead;
  config.speculative_turn_down = formats.turn_down;
  config.batch_invariant = true;
  config.speculative = proposer;
  config.num_speculative_tokens = 4;
  config.speculative_tree_width = tree_width;
  if (proposer == "draft") config.draft_model = dir.string();  // the target as its own draft: the best case
  config.preemption_mode = preemption;
  config.block_size = block_size;
  const checkpoint ckpt = checkpoint::open(dir, {.show_progress = false});
  const std::int64_t block_bytes = 2 * ckpt.config().num_hidden_layers * ckpt.config().num_key_value_heads *
                                   ckpt.config().head_dim * block_size * (fixture.ends_with("f32") ? 4 : 2);
  // Far less than the load needs (preemption), yet room for the longest request.
  const std::int64_t pool_blocks = std::min<std::int64_t>(48, ckpt.config().max_position_embeddings / 2 + 4);
  config.kv_cache_bytes = pool_blocks * block_bytes;
  config.swap_space_bytes = 400 * block_bytes;
  config.max_num_seqs = 12;
  config.max_num_batched_tokens = 96;
  config.max_prefill_chunk = 16;
  config.speculative_max_batch = 16;
  auto engine = engine::start(config);
  const engine_stats idle = engine->stats();

  std::vector<std::shared_ptr<testing::recording_sink>> sinks;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    sinks.push_back(std::make_shared<testing::recording_sink>());
    const std::string id = engine->submit(plan[i].request, sinks.back());
    if (plan[i].cancel) engine->cancel(id);
    if (i % 12 == 11) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
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
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  engine_stats end = engine->stats();
  while ((end.kv_blocks_free != idle.kv_blocks_free || end.host_kv_cache_usage > 0) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    end = engine->stats();
  }
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
