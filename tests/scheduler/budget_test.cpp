// Batch forming under the token budget: chunked prefill, decodes first,
// Dynamic SplitFuse packing, the per-chunk cap. Every step is also checked
// by the harness (budget, sequence limit, valid step batch).

#include <gtest/gtest.h>

#include <random>

#include "tests/scheduler/harness.hpp"

namespace troupe::testing {
namespace {

struct segment {
  std::int32_t start, count, samples;
  friend bool operator==(const segment&, const segment&) = default;
};

std::ostream& operator<<(std::ostream& os, const segment& s) {
  return os << "{" << s.start << "," << s.count << "," << s.samples << "}";
}

std::vector<segment> segments_of(const harness& h, request_handle request) {
  std::vector<segment> out;
  for (const auto& step : h.steps) {
    for (const auto* s : harness::entries(step, request))
      out.push_back({s->start, static_cast<std::int32_t>(s->tokens.size()), s->num_samples});
  }
  return out;
}

TEST(SchedulerBudget, ALongPromptIsSplitIntoChunksAcrossSteps) {
  harness h(small_config({.budget = 32, .chunk = 24}));
  const request_handle r = h.submit(make_spec({.prompt_len = 100, .max_tokens = 3}));
  h.run();
  const std::vector<segment> expected{{0, 24, 0}, {24, 24, 0}, {48, 24, 0}, {72, 24, 0},
                                      {96, 4, 1}, {100, 1, 1}, {101, 1, 1}};
  EXPECT_EQ(segments_of(h, r), expected);
  const auto& fed = h.steps[1].sequences.at(0).tokens;
  EXPECT_EQ(fed.front(), 25) << "chunk two feeds prompt positions 24.. (ids start at 1)";
  EXPECT_EQ(h.output(r), reference_outputs({.prompt = make_spec({.prompt_len = 100, .max_tokens = 3}).prompt,
                                            .request_seed = 7,
                                            .max_tokens = 3,
                                            .vocab = harness::kVocab}));
  EXPECT_EQ(h.reason(r), finish_reason::length);
}

TEST(SchedulerBudget, TheChunkCapAppliesEvenWhenTheBudgetIsLarger) {
  harness h(small_config({.budget = 64, .chunk = 10}));
  const request_handle a = h.submit(make_spec({.prompt_len = 25, .max_tokens = 1, .first_token = 1}));
  const request_handle b = h.submit(make_spec({.prompt_len = 25, .max_tokens = 1, .first_token = 100}));
  h.run();
  const std::vector<segment> expected{{0, 10, 0}, {10, 10, 0}, {20, 5, 1}};
  EXPECT_EQ(segments_of(h, a), expected);
  EXPECT_EQ(segments_of(h, b), expected);
  EXPECT_EQ(h.steps[0].num_tokens(), 20);
}

TEST(SchedulerBudget, DecodesGoFirstAndPrefillChunksFillTheRest) {
  harness h(small_config({.budget = 16, .chunk = 64}));
  std::vector<request_handle> decoders;
  for (int i = 0; i < 3; ++i)
    decoders.push_back(h.submit(make_spec({.prompt_len = 4, .max_tokens = 20, .first_token = 10 * i + 1})));
  h.step();  // the three prompts (12 tokens)
  const request_handle longer = h.submit(make_spec({.prompt_len = 40, .max_tokens = 2, .first_token = 500}));
  const scheduled_step& mixed = h.step();
  ASSERT_EQ(mixed.sequences.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(mixed.sequences[static_cast<std::size_t>(i)].request, decoders[static_cast<std::size_t>(i)]);
    EXPECT_EQ(mixed.sequences[static_cast<std::size_t>(i)].tokens.size(), 1u);
  }
  EXPECT_EQ(mixed.sequences[3].request, longer);
  EXPECT_EQ(mixed.sequences[3].tokens.size(), 13u) << "16 - 3 decode tokens";
  EXPECT_EQ(mixed.num_tokens(), 16);
}

TEST(SchedulerBudget, DecodesAreNeverStarvedByLongPrefills) {
  harness h(small_config({.budget = 16, .chunk = 16, .blocks = 256}));
  std::vector<request_handle> decoders;
  for (int i = 0; i < 4; ++i)
    decoders.push_back(h.submit(make_spec({.prompt_len = 4, .max_tokens = 30, .first_token = 10 * i + 1})));
  h.step();
  for (int i = 0; i < 3; ++i) h.submit(make_spec({.prompt_len = 200, .max_tokens = 2, .first_token = 1000 + 300 * i}));
  for (int i = 0; i < 25; ++i) {
    const scheduled_step& s = h.step();
    for (request_handle d : decoders) {
      const auto found = harness::entries(s, d);
      ASSERT_EQ(found.size(), 1u) << "decoder " << d << " missing from step " << s.id;
      EXPECT_EQ(found[0]->tokens.size(), 1u);
    }
    EXPECT_EQ(s.num_tokens(), 16) << "prefill chunks fill what the decodes leave";
  }
  h.run();
}

TEST(SchedulerBudget, RandomLoadsRespectTheBudgetAndMatchTheReference) {
  std::mt19937 rng(12345);
  scheduler_config config = small_config({.budget = 48, .max_seqs = 6, .chunk = 20, .blocks = 96});
  harness h(config, {.real_kv = true});
  std::map<request_handle, request_spec> specs;
  for (int i = 0; i < 60; ++i) {
    // Drawn last field first, the order GCC evaluated these as positional
    // arguments in, so the load stays the one this test has always run.
    const int first_token = std::uniform_int_distribution<int>(1, 900)(rng);
    const int max_tokens = std::uniform_int_distribution<int>(1, 24)(rng);
    const int prompt_len = std::uniform_int_distribution<int>(1, 70)(rng);
    request_spec spec = make_spec({.prompt_len = prompt_len,
                                   .max_tokens = max_tokens,
                                   .first_token = first_token,
                                   .seed = 1000 + static_cast<std::uint64_t>(i)});
    const request_handle handle = h.submit(spec);
    specs[handle] = spec;
    if (i % 3 == 0) h.step();
  }
  h.run();
  for (const auto& [handle, spec] : specs) {
    EXPECT_EQ(h.output(handle), reference_outputs({.prompt = spec.prompt,
                                                   .request_seed = *spec.seed,
                                                   .max_tokens = spec.max_tokens,
                                                   .vocab = harness::kVocab}))
        << "request " << handle;
  }
  EXPECT_EQ(h.real()->usage().device_free_blocks, config.num_device_blocks);
}

}  // namespace
}  // namespace troupe::testing
