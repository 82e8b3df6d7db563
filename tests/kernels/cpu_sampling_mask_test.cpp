// The allowed-token mask of a structured-output constraint (rule 1 of
// kernels/sampling.hpp): masked ids are never drawn, and a masked row
// samples exactly as the same row with those logits set to -inf, so the
// mask composes with bias, penalties, top-k/p/min-p, seeds and logprobs.

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "tests/kernels/cpu_test_support.hpp"
#include "tests/kernels/sampling_step_support.hpp"
#include "tests/kernels/verify_step_support.hpp"

namespace troupe {
namespace {

using test::group_rows;
using test::random_source;
using test::sampling_step;
using test::step_part;
using test::verify_step;

std::vector<std::uint32_t> mask_of(int vocab, const std::set<int>& allowed) {
  std::vector<std::uint32_t> mask(static_cast<std::size_t>((vocab + 31) / 32), 0u);
  for (int id : allowed) mask[static_cast<std::size_t>(id / 32)] |= 1u << (id % 32);
  return mask;
}

std::set<int> random_allowed(random_source& rng, int vocab, int count) {
  std::set<int> allowed;
  while (static_cast<int>(allowed.size()) < count) allowed.insert(rng.integer(0, vocab - 1));
  return allowed;
}

std::vector<sampling_params> varied_settings() {
  std::vector<sampling_params> settings(6);
  settings[0].temperature = 0.0f;
  settings[1].temperature = 1.0f;
  settings[2].temperature = 0.8f, settings[2].top_k = 50;  // more than the allowed ids
  settings[3].temperature = 1.2f, settings[3].top_p = 0.9f;
  settings[4].temperature = 0.7f, settings[4].min_p = 0.1f, settings[4].top_k = 3;
  settings[5].temperature = 1.0f, settings[5].repetition_penalty = 1.4f, settings[5].frequency_penalty = 0.5f;
  for (auto& p : settings) {
    p.logit_bias = {{0, 30.0f}, {5, 2.0f}};  // id 0 is never allowed below: bias cannot unmask it
    p.logprobs = true;
    p.top_logprobs = 3;
  }
  return settings;
}

TEST(SamplingMask, MaskedIdsAreNeverDrawnUnderAnySettings) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = test::make_backend_at(cpu::detected_isa());
  const int vocab = 301;  // not a multiple of 32: the last word is partial
  const std::vector<sampling_params> settings = varied_settings();
  const std::vector<int> output = {5, 5, 17};
  std::vector<std::set<int>> allowed;
  std::vector<std::vector<std::uint32_t>> masks;
  std::vector<std::vector<float>> rows;
  std::vector<sampling_row> sampling;
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    allowed.push_back(random_allowed(rng, vocab, 1 + static_cast<int>(seed % 7)));
    allowed.back().erase(0);
    if (allowed.back().empty()) allowed.back().insert(300);
    masks.push_back(mask_of(vocab, allowed.back()));
  }
  for (std::size_t i = 0; i < settings.size() * masks.size(); ++i) {
    rows.push_back(rng.floats(vocab, -3.0f, 3.0f));
    sampling.push_back({.params = &settings[i % settings.size()],
                        .seed = i * 31 + 7,
                        .token_index = i,
                        .output_tokens = output,
                        .allowed_mask = masks[i / settings.size()]});
  }
  sampling_step step(*b, rows, sampling);
  const auto results = b->sample(*step.plan, step.view).rows;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const std::set<int>& ok = allowed[i / settings.size()];
    EXPECT_TRUE(ok.contains(results[i].token)) << "row " << i << " drew masked id " << results[i].token;
    EXPECT_TRUE(std::isfinite(results[i].logprob)) << "row " << i;
  }
}

TEST(SamplingMask, MaskedRowSamplesAsTheRowWithMaskedLogitsAtMinusInfinity) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto b = test::make_backend_at(cpu::detected_isa());
  const int vocab = 200;
  const std::vector<sampling_params> settings = varied_settings();
  const std::vector<int> prompt = {3, 9}, output = {5, 17, 17};
  for (std::uint64_t seed = 0; seed < 30; ++seed) {
    const std::set<int> allowed = random_allowed(rng, vocab, 20);
    const std::vector<std::uint32_t> mask = mask_of(vocab, allowed);
    const std::vector<float> row = rng.floats(vocab, -2.0f, 2.0f);
    std::vector<float> minus_infinity = row;
    for (int id = 0; id < vocab; ++id) {
      if (!allowed.contains(id)) minus_infinity[static_cast<std::size_t>(id)] = -INFINITY;
    }
    for (const sampling_params& p : settings) {
      const sampling_row base{
          .params = &p, .seed = seed, .token_index = seed, .prompt_tokens = prompt, .output_tokens = output};
      sampling_row masked = base;
      masked.allowed_mask = mask;
      sampling_step step(*b, {row, minus_infinity}, {masked, base});
      const auto results = b->sample(*step.plan, step.view).rows;
      EXPECT_EQ(results[0].token, results[1].token);
      EXPECT_EQ(results[0].logprob, results[1].logprob);
      ASSERT_EQ(results[0].top.size(), results[1].top.size());
      for (std::size_t k = 0; k < results[0].top.size(); ++k)
        EXPECT_EQ(results[0].top[k].token, results[1].top[k].token);
    }
  }
}

TEST(SamplingMask, GreedyTakesTheBestAllowedIdAndSeededDrawsRepeat) {
  auto b = test::make_backend_at(cpu::detected_isa());
  std::vector<float> row(64, 0.0f);
  row[3] = 9.0f;
  row[40] = 2.0f;
  row[41] = 1.0f;
  const std::vector<std::uint32_t> mask = mask_of(64, {40, 41, 63});
  sampling_params greedy;
  greedy.temperature = 0.0f;
  sampling_params sampled;
  sampled.top_k = 2;
  std::vector<sampling_row> sampling = {{.params = &greedy, .seed = 1, .allowed_mask = mask}};
  for (std::uint64_t seed = 0; seed < 300; ++seed)
    sampling.push_back({.params = &sampled, .seed = seed, .token_index = seed, .allowed_mask = mask});
  sampling_step step(*b, std::vector<std::vector<float>>(sampling.size(), row), sampling);
  const auto first = b->sample(*step.plan, step.view).rows;
  const auto again = b->sample(*step.plan, step.view).rows;
  EXPECT_EQ(first[0].token, 40);
  std::set<int> seen;
  for (std::size_t i = 0; i < first.size(); ++i) {
    seen.insert(first[i].token);
    EXPECT_EQ(first[i].token, again[i].token) << "row " << i;
  }
  EXPECT_EQ(seen, (std::set<int>{40, 41})) << "top-k 2 over the allowed ids keeps 40 and 41";
}

TEST(SamplingMask, IdsPastAShortMaskAreNotAllowed) {
  auto b = test::make_backend_at(cpu::detected_isa());
  std::vector<float> row(100, 0.0f);
  row[99] = 50.0f;  // a padded id of the model the tokenizer's mask does not cover
  sampling_params greedy;
  greedy.temperature = 0.0f;
  sampling_params sampled;
  const std::vector<std::uint32_t> short_mask = mask_of(70, {5, 66});  // 100 ids would need 4 words
  std::vector<sampling_row> sampling = {{.params = &greedy, .seed = 1, .allowed_mask = short_mask}};
  for (std::uint64_t seed = 0; seed < 100; ++seed)
    sampling.push_back({.params = &sampled, .seed = seed, .allowed_mask = short_mask});
  sampling_step step(*b, std::vector<std::vector<float>>(sampling.size(), row), sampling);
  for (const auto& r : b->sample(*step.plan, step.view).rows) EXPECT_TRUE(r.token == 5 || r.token == 66) << r.token;
}

TEST(SamplingMask, VerifyRejectsTheFirstDraftItsRowMaskForbids) {
  auto b = test::make_backend_at(cpu::detected_isa());
  std::vector<float> row(40, 0.0f);
  row[7] = 5.0f;  // every row's unconstrained favourite
  row[8] = 4.0f;
  const std::vector<std::uint32_t> any = mask_of(40, {7, 8, 9});
  const std::vector<std::uint32_t> not_seven = mask_of(40, {8, 9});
  for (const float temperature : {0.0f, 1.0f}) {
    sampling_params p;
    p.temperature = temperature;
    for (std::uint64_t seed = 0; seed < 50; ++seed) {
      group_rows g(p, seed, 0, {}, {7, 7, 7});
      g.rows[0].allowed_mask = any;
      g.rows[1].allowed_mask = any;
      g.rows[2].allowed_mask = not_seven;  // after two 7s the constraint forbids a third
      g.rows[3].allowed_mask = any;
      verify_step step(*b, {step_part{{row, row, row, row}, g.rows, {7, 7, 7}, {}}});
      const sample_result result = step.sample(*b);
      ASSERT_LE(result.accepted[0], 2);
      if (temperature == 0.0f) {
        EXPECT_EQ(result.accepted[0], 2);
        EXPECT_EQ(result.rows[2].token, 8);
      }
      const auto emitted = static_cast<std::size_t>(result.accepted[0]);
      EXPECT_NE(result.rows[emitted].token, emitted == 2 ? 7 : -1);
      EXPECT_TRUE(result.rows[emitted].token >= 7 && result.rows[emitted].token <= 9);
    }
  }
}

}  // namespace
}  // namespace troupe
