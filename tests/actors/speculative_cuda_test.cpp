// Speculative decoding on the CUDA backend, for every proposer, the drafter
// on its own stream (a layer-skipping one in the target's own KV pool, or
// in one of its own when drafting ahead), with swap and recompute
// preemption. tools/gpu-check.sh runs it; without a GPU it has no cases.
//
// CUDA has no batch-invariant mode: a verify step of k + 1 rows may round
// differently from a one-row decode, so greedy outputs with speculation
// equal those without it token for token up to a near-tie, which the CPU
// backend's logits of the context must show (the two tokens within the
// bf16 tolerance of each other), as tests/gpu/model_test.cpp allows
// against transformers' continuations.

#if defined(TROUPE_HAVE_CUDA)

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <span>
#include <tuple>
#include <vector>

#include "kernels/cuda/cuda_backend.hpp"
#include "speculation_workload.hpp"

namespace troupe {
namespace {

using testing::fixture_model;
using testing::planned_request;

constexpr int num_requests = 32;
constexpr int block_size = 16;
/// As tests/gpu/model_test.cpp's bf16 checkpoint tolerance: two bf16 runs
/// may pick different tokens where the two logits lie this close (relative
/// to the largest logit).
constexpr double near_tie_tolerance = 2e-2;

struct cuda_run {
  std::vector<std::vector<std::int32_t>> tokens;  ///< per request, in plan order
  engine_stats idle, end;
};

/// Runs `plan` on a CUDA engine with `proposer` ("off": none).
cuda_run run_on_cuda(const std::filesystem::path& dir, const std::vector<planned_request>& plan,
                     const std::string& proposer, const std::string& draft_ahead, const std::string& preemption) {
  engine_config config = testing::speculation_engine_config(dir, proposer, preemption, block_size, 2);
  config.device = "cuda";
  config.speculative_draft_ahead = draft_ahead;
  if (proposer == "off") config.num_speculative_tokens = 0;
  auto running = engine::start(config);
  cuda_run out;
  out.idle = running->stats();
  const auto sinks = testing::submit_workload(*running, plan);
  for (std::size_t i = 0; i < sinks.size(); ++i) {
    const bool ended = sinks[i]->wait(std::chrono::seconds(120));
    EXPECT_TRUE(ended) << "request " << i << " never ended";
    EXPECT_FALSE(ended && sinks[i]->error) << sinks[i]->error->message;
    const bool answered = ended && !sinks[i]->error && !sinks[i]->choices.empty();
    out.tokens.push_back(answered ? sinks[i]->choices[0].tokens : std::vector<std::int32_t>{});
  }
  out.end = testing::stats_once_idle(*running, out.idle);
  return out;
}

/// `got` equals `want`, or first differs from it where the CPU backend's
/// logits of the context rank the two tokens within the tolerance (an
/// output that ends there ended on one of `eos`, the likeliest of them).
void expect_equal_up_to_a_near_tie(fixture_model& cpu, const std::vector<std::int32_t>& prompt,
                                   const std::vector<std::int32_t>& want, const std::vector<std::int32_t>& got) {
  if (got == want) return;
  const auto first =
      static_cast<std::size_t>(std::mismatch(got.begin(), got.end(), want.begin(), want.end()).first - got.begin());
  std::vector<std::int32_t> context = prompt;
  context.insert(context.end(), want.begin(), want.begin() + static_cast<std::ptrdiff_t>(first));
  batch_runner runner(*cpu.model, runner_options{});
  const std::vector<float> logits = runner.prompt_logits({context}, 1 << 20)[0];
  const auto vocab = static_cast<std::size_t>(cpu.model->vocab_size());
  const std::span<const float> last(logits.data() + (context.size() - 1) * vocab, vocab);
  const auto [low, high] = std::minmax_element(last.begin(), last.end());
  const double scale = std::max(std::abs(*low), std::abs(*high));
  const auto logit_of = [&](const std::vector<std::int32_t>& tokens) -> double {
    if (first < tokens.size()) return last[static_cast<std::size_t>(tokens[first])];
    double best = -INFINITY;
    for (const std::int64_t id : cpu.ckpt.generation().eos_token_ids)
      if (id >= 0 && static_cast<std::size_t>(id) < vocab)
        best = std::max(best, static_cast<double>(last[static_cast<std::size_t>(id)]));
    return best;
  };
  const double margin = std::abs(logit_of(want) - logit_of(got));
  EXPECT_LE(margin, near_tie_tolerance * scale)
      << "token " << first << ": " << (first < got.size() ? std::to_string(got[first]) : "the end") << " with, "
      << (first < want.size() ? std::to_string(want[first]) : "the end") << " without speculation; a margin of "
      << margin << " (logit scale " << scale << ") is no near-tie";
}

using cuda_case = std::tuple<std::string, std::string, std::string, std::string>;  // fixture, proposer, draft ahead,
                                                                                   // preemption

class SpeculativeEngineCuda : public ::testing::TestWithParam<cuda_case> {};

TEST_P(SpeculativeEngineCuda, GreedyOutputsAreThoseWithoutSpeculationUpToNearTies) {
  const auto& [fixture, proposer, draft_ahead, preemption] = GetParam();
  const auto dir = testing::servable_fixture(fixture);
  std::vector<planned_request> plan =
      testing::speculation_workload(checkpoint::open(dir, {.show_progress = false}), num_requests);
  for (planned_request& planned : plan) planned.cancel = false;  // a cancel lands at another token in each run

  // One run without speculation per fixture and preemption serves every proposer.
  static std::map<std::string, cuda_run> plain_runs;
  const std::string plain_key = fixture + "/" + preemption;
  if (!plain_runs.contains(plain_key)) plain_runs[plain_key] = run_on_cuda(dir, plan, "off", "off", preemption);
  const cuda_run& plain = plain_runs[plain_key];
  const cuda_run speculating = run_on_cuda(dir, plan, proposer, draft_ahead, preemption);
  fixture_model cpu = fixture_model::load(fixture);
  for (std::size_t i = 0; i < plan.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    expect_equal_up_to_a_near_tie(cpu, plan[i].request.prompt_token_ids, plain.tokens[i], speculating.tokens[i]);
  }

  const engine_stats& end = speculating.end;
  EXPECT_TRUE(end.healthy) << end.health_detail;
  EXPECT_EQ(end.kv_blocks_free, speculating.idle.kv_blocks_free) << "leaked blocks";
  EXPECT_EQ(end.host_kv_cache_usage, 0.0);
  EXPECT_GT(end.spec_decode_num_drafts, 0u) << "no round had drafts";
  if (proposer == "draft") {
    // The target drafting for itself differs from its verification by rounding only.
    EXPECT_GT(2 * end.spec_decode_num_accepted_tokens, end.spec_decode_num_draft_tokens);
  }
  if (draft_ahead == "on") {
    EXPECT_GT(end.spec_decode_num_ahead_drafts, 0u) << "no round was drafted ahead";
  }
  std::uint64_t preemptions = 0;
  for (const auto& [kind, count] : end.preemptions) preemptions += count;
  EXPECT_GT(preemptions, 0u) << "the pool was meant to force preemption";
}

std::string case_name(const ::testing::TestParamInfo<cuda_case>& info) {
  const auto& [fixture, proposer, draft_ahead, preemption] = info.param;
  return fixture + "_" + proposer + (draft_ahead == "on" ? "_ahead" : "") + "_" + preemption;
}

// Every proposer under both preemptions; the drafters also drafting ahead
// (layerskip then leaves the target's KV pool for one of its own). None
// where no GPU is present: the suite is then empty, not skipped.
std::vector<cuda_case> cuda_cases() {
  std::vector<cuda_case> cases;
  if (!cuda::device_present()) return cases;
  for (const char* fixture : {"llama_bf16", "qwen3_bf16"})
    for (const char* preemption : {"swap", "recompute"}) {
      cases.emplace_back(fixture, "ngram", "off", preemption);
      for (const char* drafter : {"draft", "layerskip"})
        for (const char* ahead : {"off", "on"}) cases.emplace_back(fixture, drafter, ahead, preemption);
    }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(FixturesAndProposers, SpeculativeEngineCuda, ::testing::ValuesIn(cuda_cases()), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SpeculativeEngineCuda);

}  // namespace
}  // namespace troupe

#endif  // TROUPE_HAVE_CUDA
