// Device sampling against a literal host implementation of sampling.hpp:
// processed logits are formed with the same float operations (so orderings
// agree exactly), logprobs and draws are computed in double. A drawn token
// must be one the reference yields for u, top_p or min_p nudged by 1e-5
// (rounding at a boundary may pick a neighbour, nothing else may).

// Built only with the CUDA backend (TROUPE_HAVE_CUDA comes with troupe_kernels).
#if defined(TROUPE_HAVE_CUDA)

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "kernels/philox.hpp"
#include "tests/gpu/gpu_test_support.hpp"

namespace troupe::gpu_test {
namespace {

using Sampling = cuda_fixture;
constexpr float neg_inf = -std::numeric_limits<float>::infinity();

// Steps 1-2 in float, in the order sampling.hpp gives.
std::vector<float> processed(const std::vector<float>& logits, const sampling_row& row) {
  const sampling_params& s = *row.params;
  std::vector<float> l = logits;
  for (const auto& [id, bias] : s.logit_bias) l[static_cast<std::size_t>(id)] += bias;
  for (std::int32_t id : row.suppressed_tokens) l[static_cast<std::size_t>(id)] = neg_inf;
  for (std::size_t id = 0; id < l.size(); ++id) {
    if (!mask_allows(row.allowed_mask, static_cast<std::int32_t>(id))) l[id] = neg_inf;
  }
  std::set<std::int32_t> seen(row.prompt_tokens.begin(), row.prompt_tokens.end());
  seen.insert(row.output_tokens.begin(), row.output_tokens.end());
  for (std::int32_t id : seen) {
    float& x = l[static_cast<std::size_t>(id)];
    x = x > 0.0f ? x / s.repetition_penalty : x * s.repetition_penalty;
    const auto count = static_cast<float>(std::count(row.output_tokens.begin(), row.output_tokens.end(), id));
    const float penalty = s.frequency_penalty * count + s.presence_penalty * (count > 0.0f ? 1.0f : 0.0f);
    x -= penalty;
  }
  return l;
}

// Ids ordered larger value first, ties to the lower id.
std::vector<std::int32_t> ranked(const std::vector<float>& v) {
  std::vector<std::int32_t> ids(v.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](std::int32_t a, std::int32_t b) { return v[a] > v[b]; });
  return ids;
}

// Steps 5-6 for one (top_p, min_p, u).
std::int32_t draw(const std::vector<float>& z, const std::vector<std::int32_t>& order, const sampling_params& s,
                  double top_p, double min_p, double u) {
  const double z_max = z[static_cast<std::size_t>(order[0])];
  std::int64_t finite = 0;
  for (float v : z) finite += v > neg_inf ? 1 : 0;
  std::int64_t kept = s.top_k > 0 ? std::min<std::int64_t>(s.top_k, finite) : finite;
  const auto w = [&](std::int64_t rank) { return std::exp(double(z[static_cast<std::size_t>(order[rank])]) - z_max); };
  if (top_p < 1.0) {
    double mass = 0.0;
    for (std::int64_t i = 0; i < kept; ++i) mass += w(i);
    double cumulative = 0.0;
    for (std::int64_t i = 0; i < kept; ++i) {
      cumulative += w(i);
      if (cumulative >= top_p * mass) {
        kept = i + 1;
        break;
      }
    }
  }
  std::int64_t above = 0;
  while (above < kept && w(above) >= min_p) ++above;
  kept = above;
  std::vector<std::int32_t> ids(order.begin(), order.begin() + kept);
  std::sort(ids.begin(), ids.end());
  double total = 0.0;
  for (std::int32_t id : ids) total += std::exp(double(z[static_cast<std::size_t>(id)]) - z_max);
  double cumulative = 0.0;
  for (std::int32_t id : ids) {
    cumulative += std::exp(double(z[static_cast<std::size_t>(id)]) - z_max);
    if (cumulative / total > u) return id;
  }
  return ids.back();
}

struct expected_row {
  std::set<std::int32_t> tokens;  // acceptable draws
  std::vector<float> values;      // processed logits
  double log_normalizer = 0.0;
  std::vector<std::int32_t> order;
};

expected_row reference(const std::vector<float>& logits, const sampling_row& row) {
  const sampling_params& s = *row.params;
  expected_row e;
  e.values = processed(logits, row);
  e.order = ranked(e.values);
  const double max = e.values[static_cast<std::size_t>(e.order[0])];
  double sum = 0.0;
  for (float v : e.values) sum += std::exp(double(v) - max);
  e.log_normalizer = max + std::log(sum);
  if (s.temperature == 0.0f || s.top_k == 1) {
    e.tokens.insert(e.order[0]);
    return e;
  }
  std::vector<float> z(e.values.size());
  for (std::size_t i = 0; i < z.size(); ++i) z[i] = e.values[i] / s.temperature + 0.0f;
  const std::vector<std::int32_t> order = ranked(z);
  const double u = philox_uniform(row.seed, row.token_index);
  for (double dp : {-1e-5, 0.0, 1e-5})
    for (double dm : {-1e-5, 0.0, 1e-5})
      for (double du : {-1e-5, 0.0, 1e-5})
        e.tokens.insert(
            draw(z, order, s, s.top_p < 1.0f ? s.top_p + dp : 1.0, s.min_p == 0.0f ? 0.0 : s.min_p + dm, u + du));
  return e;
}

// A decode-only step whose L tokens are the logits rows.
struct sampling_step {
  step_batch batch;
  kv_cache_spec spec;
  attention_geometry geometry{1, 1, 64, 0.125f, {}};
};

sampling_step make_step(const std::vector<sampling_row>& rows) {
  sampling_step s;
  const auto n = static_cast<std::int32_t>(rows.size());
  s.spec = kv_cache_spec{1, 1, 64, 16, n, dtype::bf16};
  s.batch.query_start.push_back(0);
  s.batch.kv_indptr.push_back(0);
  for (std::int32_t i = 0; i < n; ++i) {
    s.batch.token_ids.push_back(0);
    s.batch.positions.push_back(0);
    s.batch.slot_mapping.push_back(std::int64_t{i} * 16);
    s.batch.query_start.push_back(i + 1);
    s.batch.seq_lens.push_back(1);
    s.batch.kv_indices.push_back(i);
    s.batch.kv_indptr.push_back(i + 1);
    s.batch.kv_last_page_len.push_back(1);
    s.batch.logits_indices.push_back(i);
  }
  s.batch.sampling = rows;
  return s;
}

std::vector<sample_output> sample_on_device(backend& b, const std::vector<sampling_row>& rows,
                                            const std::vector<float>& logits, std::int64_t vocab) {
  const sampling_step step = make_step(rows);
  const auto plan = b.plan_step(step.batch, step.spec, step.geometry);
  const device_matrix device_logits = upload_matrix(
      b, {.type = dtype::f32, .rows = static_cast<std::int64_t>(rows.size()), .cols = vocab, .stride = vocab + 32},
      logits.data());
  return b.sample(*plan, device_logits.view).rows;
}

TEST_F(Sampling, MatchesReferenceForEverySetting) {
  auto rng = fresh_rng();
  const std::int64_t vocab = quick_mode() ? 4096 : 32000;
  std::uniform_int_distribution<std::int32_t> any_id(0, static_cast<std::int32_t>(vocab - 1));
  std::vector<sampling_params> settings;
  const auto add = [&](float temperature, int top_k, float top_p, float min_p) {
    sampling_params p;
    p.temperature = temperature;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.logprobs = true;
    settings.push_back(p);
  };
  add(0.0f, 0, 1.0f, 0.0f);
  add(0.8f, 1, 1.0f, 0.0f);
  add(1.0f, 0, 1.0f, 0.0f);
  add(0.7f, 50, 1.0f, 0.0f);
  add(1.0f, 0, 0.9f, 0.0f);
  add(1.3f, 0, 1.0f, 0.05f);
  add(0.9f, 100, 0.8f, 0.02f);
  add(1.0f, static_cast<int>(vocab) + 5, 0.5f, 0.0f);
  for (int i = 0; i < 16; ++i)
    add(std::uniform_real_distribution<float>(0.2f, 1.5f)(rng), any_id(rng) % 200,
        std::uniform_real_distribution<float>(0.3f, 1.0f)(rng), i % 3 == 0 ? 0.01f : 0.0f);
  settings[0].top_logprobs = 5;
  settings[4].top_logprobs = 20;
  settings[3].logit_bias = {{123, 8.0f}, {456, 1.0f}, {456, 1.0f}};
  settings[5].repetition_penalty = 1.3f;
  settings[5].frequency_penalty = 0.5f;
  settings[5].presence_penalty = 0.3f;
  settings[0].repetition_penalty = 0.7f;

  const std::vector<std::int32_t> prompt = {5, 9, 9, 77, 1000};
  const std::vector<std::int32_t> output = {9, 1000, 1000, 3, 3, 3};
  std::vector<float> logits = random_floats(rng, settings.size() * static_cast<std::size_t>(vocab), 3.0f);
  // Row 0 has a tie at its maximum (ids 7 and vocab - 1): greedy takes 7.
  logits[7] = logits[static_cast<std::size_t>(vocab - 1)] = 40.0f;
  // Rows 1 (greedy) and 2 lose their own argmax.
  const auto argmax_of = [&](std::size_t r) {
    const auto begin = logits.begin() + static_cast<std::ptrdiff_t>(r * vocab);
    return static_cast<std::int32_t>(std::max_element(begin, begin + vocab) - begin);
  };
  const std::vector<std::vector<std::int32_t>> suppressed = {{argmax_of(1)}, {argmax_of(2)}};
  std::vector<sampling_row> rows(settings.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    rows[i].params = &settings[i];
    rows[i].seed = rng();
    rows[i].token_index = rng() % 5000;
    if (i == 0 || i == 5) {
      rows[i].prompt_tokens = prompt;
      rows[i].output_tokens = output;
    }
    if (i == 1 || i == 2) rows[i].suppressed_tokens = suppressed[i - 1];
  }
  const std::vector<sample_output> got = sample_on_device(gpu(), rows, logits, vocab);
  ASSERT_EQ(got.size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE("row " + std::to_string(i));
    const std::vector<float> row_logits(logits.begin() + static_cast<std::ptrdiff_t>(i * vocab),
                                        logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * vocab));
    const expected_row want = reference(row_logits, rows[i]);
    EXPECT_TRUE(want.tokens.count(got[i].token)) << "drew " << got[i].token << ", reference " << *want.tokens.begin();
    const double logprob = want.values[static_cast<std::size_t>(got[i].token)] - want.log_normalizer;
    EXPECT_NEAR(got[i].logprob, logprob, f32_rtol * (1.0 + std::fabs(logprob)));
    ASSERT_EQ(got[i].top.size(), static_cast<std::size_t>(settings[i].top_logprobs));
    for (std::size_t n = 0; n < got[i].top.size(); ++n) {
      EXPECT_EQ(got[i].top[n].token, want.order[n]) << "top entry " << n;
      const double top = want.values[static_cast<std::size_t>(want.order[n])] - want.log_normalizer;
      EXPECT_NEAR(got[i].top[n].logprob, top, f32_rtol * (1.0 + std::fabs(top)));
    }
  }
  EXPECT_EQ(got[0].token, 7);
  EXPECT_EQ(got[0].top[0].token, 7);
  EXPECT_EQ(got[0].top[1].token, vocab - 1);
  EXPECT_NE(got[1].token, suppressed[0][0]);
}

TEST_F(Sampling, SeededRowsDrawTheSameTokenAloneOrInAnyBatch) {
  auto rng = fresh_rng();
  const std::int64_t vocab = 5000;
  sampling_params p;
  p.temperature = 1.1f;
  p.top_p = 0.95f;
  std::vector<sampling_row> rows(24);
  for (auto& r : rows) {
    r.params = &p;
    r.seed = rng();
    r.token_index = rng() % 100;
  }
  const std::vector<float> logits = random_floats(rng, rows.size() * vocab, 2.0f);
  const std::vector<sample_output> together = sample_on_device(gpu(), rows, logits, vocab);
  for (std::size_t i = 0; i < rows.size(); i += 5) {
    const std::vector<float> one(logits.begin() + static_cast<std::ptrdiff_t>(i * vocab),
                                 logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * vocab));
    const std::vector<sample_output> alone = sample_on_device(gpu(), {rows[i]}, one, vocab);
    EXPECT_EQ(alone[0].token, together[i].token) << "row " << i;
  }
}

TEST_F(Sampling, DrawFrequenciesFollowTheKeptDistribution) {
  const std::int64_t vocab = 6;
  const std::vector<float> row = {1.0f, 2.0f, 0.5f, 2.0f, -1.0f, 0.0f};
  sampling_params full;
  sampling_params top3;
  top3.top_k = 3;
  const int draws = quick_mode() ? 2000 : 6000;
  for (const sampling_params* p : {&full, &top3}) {
    std::vector<sampling_row> rows(static_cast<std::size_t>(draws));
    std::vector<float> logits;
    for (int i = 0; i < draws; ++i) {
      rows[static_cast<std::size_t>(i)].params = p;
      rows[static_cast<std::size_t>(i)].seed = 42;
      rows[static_cast<std::size_t>(i)].token_index = static_cast<std::uint64_t>(i);
      logits.insert(logits.end(), row.begin(), row.end());
    }
    const auto got = sample_on_device(gpu(), rows, logits, vocab);
    std::vector<double> weights(row.size());
    for (std::size_t i = 0; i < row.size(); ++i) weights[i] = std::exp(double(row[i]));
    if (p->top_k == 3) weights[2] = weights[4] = weights[5] = 0.0;  // kept: ids 1 and 3 (tied at 2.0), then 0
    const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
    std::vector<int> counts(row.size(), 0);
    for (const auto& g : got) ++counts[static_cast<std::size_t>(g.token)];
    for (std::size_t i = 0; i < row.size(); ++i) {
      const double expected = draws * weights[i] / total;
      const double sigma = std::sqrt(draws * (weights[i] / total) * (1.0 - weights[i] / total));
      EXPECT_LE(std::fabs(counts[i] - expected), 5.0 * sigma + 1.0) << "id " << i << " top_k " << p->top_k;
    }
  }
}

TEST_F(Sampling, MaskedRowsDrawOnlyAllowedIdsAsTheReference) {
  auto rng = fresh_rng();
  const std::int64_t vocab = 5000;
  std::vector<sampling_params> settings(5);
  settings[0].temperature = 0.0f;
  settings[1].temperature = 1.0f;
  settings[2].top_k = 50;  // more than some rows allow
  settings[3].top_p = 0.9f;
  settings[4].temperature = 0.8f, settings[4].min_p = 0.05f;
  for (auto& s : settings) {
    s.logit_bias = {{0, 50.0f}};  // id 0 is never allowed: the bias cannot lift it
    s.logprobs = true;
  }
  std::uniform_int_distribution<std::int32_t> any_id(1, static_cast<std::int32_t>(vocab - 1));
  std::vector<std::vector<std::uint32_t>> masks;
  std::vector<sampling_row> rows;
  for (std::size_t i = 0; i < 40; ++i) {
    // Row i % 8 == 7 has a short mask: ids past it are forbidden.
    const std::size_t words = i % 8 == 7 ? 60 : static_cast<std::size_t>((vocab + 31) / 32);
    std::vector<std::uint32_t> mask(words, 0u);
    for (int k = 0; k < 1 + static_cast<int>(i % 30); ++k) {
      const std::int32_t id = any_id(rng) % static_cast<std::int32_t>(words * 32);
      if (id != 0) mask[static_cast<std::size_t>(id / 32)] |= 1u << (id % 32);
    }
    mask[0] |= 2u;  // id 1: at least one allowed id
    masks.push_back(std::move(mask));
  }
  for (std::size_t i = 0; i < masks.size(); ++i) {
    sampling_row row;
    row.params = &settings[i % settings.size()];
    row.seed = rng();
    row.token_index = rng() % 1000;
    row.allowed_mask = masks[i];
    rows.push_back(row);
  }
  const std::vector<float> logits = random_floats(rng, rows.size() * static_cast<std::size_t>(vocab), 3.0f);
  const std::vector<sample_output> got = sample_on_device(gpu(), rows, logits, vocab);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE("row " + std::to_string(i));
    EXPECT_TRUE(mask_allows(masks[i], got[i].token)) << "drew masked id " << got[i].token;
    const std::vector<float> row_logits(logits.begin() + static_cast<std::ptrdiff_t>(i * vocab),
                                        logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * vocab));
    const expected_row want = reference(row_logits, rows[i]);
    EXPECT_TRUE(want.tokens.count(got[i].token)) << "drew " << got[i].token << ", reference " << *want.tokens.begin();
    const double logprob = want.values[static_cast<std::size_t>(got[i].token)] - want.log_normalizer;
    EXPECT_NEAR(got[i].logprob, logprob, f32_rtol * (1.0 + std::fabs(logprob)));
  }
}

TEST_F(Sampling, RejectsOutOfRangeIdsAndSettings) {
  const std::vector<float> logits(100, 0.0f);
  sampling_params p;
  p.logit_bias = {{100, 1.0f}};
  sampling_row row;
  row.params = &p;
  EXPECT_THROW(sample_on_device(gpu(), {row}, logits, 100), std::invalid_argument);
  sampling_params bad_top_p;
  bad_top_p.top_p = 0.0f;
  row.params = &bad_top_p;
  EXPECT_THROW(sample_on_device(gpu(), {row}, logits, 100), std::invalid_argument);
}

}  // namespace
}  // namespace troupe::gpu_test

#endif  // TROUPE_HAVE_CUDA
