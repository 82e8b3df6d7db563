#include "kernels/cpu/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/philox.hpp"

namespace troupe::cpu {

namespace {

constexpr float negative_infinity = -std::numeric_limits<float>::infinity();

// When top_p alone filters, the nucleus is usually among the largest few
// hundred ids: select those first and sort everything only if they fall short.
constexpr std::int64_t nucleus_candidates = 1024;

std::int32_t key_id(std::uint64_t key) {
  return static_cast<std::int32_t>(0xffffffffu - static_cast<std::uint32_t>(key));
}

void check_id(std::int32_t id, std::int64_t vocab, const char* what) {
  if (id < 0 || id >= vocab)
    throw std::invalid_argument(std::string("sample: ") + what + " token " + std::to_string(id) +
                                " is outside the vocabulary of " + std::to_string(vocab));
}

// Step 1's constraint mask: ids whose bit is clear become -inf.
void apply_mask(std::span<const std::uint32_t> mask, std::int64_t vocab, std::vector<float>& logits) {
  if (mask.empty()) return;
  const auto words = static_cast<std::size_t>((vocab + 31) / 32);
  for (std::size_t w = 0; w < words; ++w) {
    const std::uint32_t bits = w < mask.size() ? mask[w] : 0u;
    if (bits == 0xffffffffu) continue;
    const std::size_t end = std::min<std::size_t>(32, static_cast<std::size_t>(vocab) - w * 32);
    for (std::size_t b = 0; b < end; ++b) {
      if (((bits >> b) & 1u) == 0) logits[w * 32 + b] = negative_infinity;
    }
  }
}

// Steps 1 and 2 of sampling.hpp, in place on `logits`.
void apply_adjustments(const sampling_params& params, const sampling_row& row, std::int64_t vocab,
                       std::vector<float>& logits, std::vector<std::int32_t>& ids) {
  for (const auto& [id, bias] : params.logit_bias) {
    check_id(id, vocab, "logit_bias");
    logits[static_cast<std::size_t>(id)] += bias;
  }
  for (std::int32_t id : row.suppressed_tokens) {
    check_id(id, vocab, "suppressed");
    logits[static_cast<std::size_t>(id)] = negative_infinity;
  }
  apply_mask(row.allowed_mask, vocab, logits);
  if (params.repetition_penalty != 1.0f) {
    ids.assign(row.prompt_tokens.begin(), row.prompt_tokens.end());
    ids.insert(ids.end(), row.output_tokens.begin(), row.output_tokens.end());
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (std::int32_t id : ids) {
      check_id(id, vocab, "prompt or output");
      float& logit = logits[static_cast<std::size_t>(id)];
      logit = logit > 0.0f ? logit / params.repetition_penalty : logit * params.repetition_penalty;
    }
  }
  if (params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f) {
    ids.assign(row.output_tokens.begin(), row.output_tokens.end());
    std::sort(ids.begin(), ids.end());
    for (std::size_t i = 0; i < ids.size();) {
      std::size_t j = i;
      while (j < ids.size() && ids[j] == ids[i]) ++j;
      check_id(ids[i], vocab, "output");
      const float count = static_cast<float>(j - i);
      logits[static_cast<std::size_t>(ids[i])] -= params.frequency_penalty * count + params.presence_penalty;
      i = j;
    }
  }
}

std::int32_t argmax_lowest(const isa_kernels& kernels, const float* x, std::int64_t n) {
  const float best = kernels.row_max(x, n);
  for (std::int64_t i = 0; i < n; ++i) {
    if (x[i] == best) return static_cast<std::int32_t>(i);
  }
  return 0;  // every entry is NaN
}

// The `count` most likely ids, most likely first (ties: lower id).
std::vector<token_logprob> top_entries(const float* x, std::int64_t n, int count, float log_normaliser) {
  std::vector<std::uint64_t> best;  // ascending, so best.front() is the weakest kept
  best.reserve(static_cast<std::size_t>(count) + 1);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint64_t key = order_key(x[i], static_cast<std::int32_t>(i));
    if (static_cast<int>(best.size()) == count && key <= best.front()) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), key), key);
    if (static_cast<int>(best.size()) > count) best.erase(best.begin());
  }
  std::vector<token_logprob> result;
  for (auto it = best.rbegin(); it != best.rend(); ++it) {
    const std::int32_t id = key_id(*it);
    result.push_back({id, x[id] - log_normaliser});
  }
  return result;
}

// Keys of the `count` largest entries, sorted largest first.
void select_sorted(const float* x, std::int64_t n, std::int64_t count, std::vector<std::uint64_t>& keys) {
  keys.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    keys[static_cast<std::size_t>(i)] = order_key(x[i], static_cast<std::int32_t>(i));
  if (count < n) {
    std::nth_element(keys.begin(), keys.begin() + count, keys.end(), std::greater<>());
    keys.resize(static_cast<std::size_t>(count));
  }
  std::sort(keys.begin(), keys.end(), std::greater<>());
}

// Kept ids (any order) and their weights exp(z - max) after top-k, top-p, min-p.
std::int64_t filter_candidates(const isa_kernels& kernels, const sampling_params& params, const float* z,
                               std::int64_t vocab, float z_max, sampler_scratch& s) {
  const bool top_k = params.top_k > 0 && params.top_k < vocab;
  const bool top_p = params.top_p < 1.0f;
  std::int64_t kept = vocab;
  s.ids.clear();
  if (top_k || top_p) {
    const std::int64_t first = top_k ? params.top_k : std::min(vocab, nucleus_candidates);
    select_sorted(z, vocab, first, s.keys);
    kept = static_cast<std::int64_t>(s.keys.size());
    if (top_p) {
      const double total = top_k ? 0.0 : kernels.sum_exp(z, vocab, z_max);
      double set_total = total;
      if (top_k) {
        set_total = 0.0;
        for (std::uint64_t key : s.keys) set_total += std::exp(z[key_id(key)] - z_max);
      }
      const double target = static_cast<double>(params.top_p) * set_total;
      double cumulative = 0.0;
      std::int64_t i = 0;
      for (; i < kept && cumulative < target; ++i)
        cumulative += std::exp(z[key_id(s.keys[static_cast<std::size_t>(i)])] - z_max);
      if (cumulative < target && !top_k && kept < vocab) {
        select_sorted(z, vocab, vocab, s.keys);  // the nucleus is wider than the candidates
        kept = vocab;
        cumulative = 0.0;
        for (i = 0; i < kept && cumulative < target; ++i)
          cumulative += std::exp(z[key_id(s.keys[static_cast<std::size_t>(i)])] - z_max);
      }
      kept = std::max<std::int64_t>(i, 1);
    }
    s.ids.resize(static_cast<std::size_t>(kept));
    for (std::int64_t i = 0; i < kept; ++i)
      s.ids[static_cast<std::size_t>(i)] = key_id(s.keys[static_cast<std::size_t>(i)]);
  }
  if (params.min_p > 0.0f) {
    // p / p_max = exp(z - z_max); z_max is always kept.
    if (s.ids.empty()) {
      for (std::int64_t i = 0; i < vocab; ++i) s.ids.push_back(static_cast<std::int32_t>(i));
    }
    std::erase_if(s.ids, [&](std::int32_t id) { return std::exp(z[id] - z_max) < params.min_p; });
    kept = static_cast<std::int64_t>(s.ids.size());
  }
  return kept;
}

// The kept ids' weights: the whole vocabulary in id order when nothing was
// filtered, else the kept ids in ascending order.
draw_distribution weigh_candidates(const isa_kernels& kernels, const float* z, std::int64_t vocab, float z_max,
                                   sampler_scratch& s) {
  draw_distribution d;
  if (s.ids.empty()) {
    s.weights.resize(static_cast<std::size_t>(vocab));
    kernels.exp_scaled(z, vocab, 1.0f, z_max, s.weights.data());
    d.size = vocab;
  } else {
    std::sort(s.ids.begin(), s.ids.end());
    s.weights.resize(s.ids.size());
    for (std::size_t i = 0; i < s.ids.size(); ++i) s.weights[i] = std::exp(z[s.ids[i]] - z_max);
    d.ids = s.ids.data();
    d.size = static_cast<std::int64_t>(s.ids.size());
  }
  d.weights = s.weights.data();
  for (std::int64_t i = 0; i < d.size; ++i) d.total += d.weights[i];
  return d;
}

}  // namespace

std::uint64_t order_key(float value, std::int32_t id) {
  if (value == 0.0f) value = 0.0f;  // -0 and +0 are equal: let the id break the tie
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  bits = (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;  // order-preserving for all non-NaN floats
  return (static_cast<std::uint64_t>(bits) << 32) | (0xffffffffu - static_cast<std::uint32_t>(id));
}

draw_distribution prepare_distribution(const isa_kernels& kernels, const float* input, std::int64_t vocab,
                                       const sampling_row& row, sampler_scratch& s) {
  if (row.params == nullptr) throw std::invalid_argument("sample: a sampling row has no params");
  const sampling_params& params = *row.params;
  s.logits.assign(input, input + vocab);
  apply_adjustments(params, row, vocab, s.logits, s.ids);
  const float* logits = s.logits.data();
  draw_distribution d;
  if (params.temperature <= 0.0f || params.top_k == 1) {
    d.point = argmax_lowest(kernels, logits, vocab);
    return d;
  }
  const float* z = logits;
  if (params.temperature != 1.0f) {
    s.scaled.resize(static_cast<std::size_t>(vocab));
    for (std::int64_t i = 0; i < vocab; ++i) s.scaled[static_cast<std::size_t>(i)] = logits[i] / params.temperature;
    z = s.scaled.data();
  }
  const float z_max = kernels.row_max(z, vocab);
  if (z_max == negative_infinity) {
    d.point = argmax_lowest(kernels, logits, vocab);  // every id suppressed: nothing to draw from
    return d;
  }
  filter_candidates(kernels, params, z, vocab, z_max, s);
  return weigh_candidates(kernels, z, vocab, z_max, s);
}

std::int32_t draw_token(const draw_distribution& d, float u) {
  if (d.point >= 0) return d.point;
  const double threshold = static_cast<double>(u) * d.total;
  double cumulative = 0.0;
  if (d.ids == nullptr) {
    std::int32_t last = 0;
    for (std::int64_t i = 0; i < d.size; ++i) {
      if (d.weights[i] <= 0.0f) continue;
      cumulative += d.weights[i];
      last = static_cast<std::int32_t>(i);
      if (cumulative > threshold) return last;
    }
    return last;
  }
  std::int32_t last = d.ids[0];
  for (std::int64_t i = 0; i < d.size; ++i) {
    if (d.weights[i] <= 0.0f) continue;  // a masked or suppressed id top-k kept
    cumulative += d.weights[i];
    last = d.ids[i];
    if (cumulative > threshold) return last;
  }
  return last;
}

void fill_logprobs(const isa_kernels& kernels, const sampling_params& params, const float* logits, std::int64_t vocab,
                   sample_output& out) {
  if (!params.logprobs && params.top_logprobs <= 0) return;
  const float max = kernels.row_max(logits, vocab);
  const float log_normaliser =
      max == negative_infinity ? max : max + static_cast<float>(std::log(kernels.sum_exp(logits, vocab, max)));
  out.logprob = logits[out.token] - log_normaliser;
  if (params.top_logprobs > 0)
    out.top = top_entries(logits, vocab, static_cast<int>(std::min<std::int64_t>(params.top_logprobs, vocab)),
                          log_normaliser);
}

sample_output sample_row(const isa_kernels& kernels, const float* input, std::int64_t vocab, const sampling_row& row,
                         sampler_scratch& s) {
  const draw_distribution distribution = prepare_distribution(kernels, input, vocab, row, s);
  sample_output result;
  result.token = draw_token(distribution, philox_uniform(row.seed, row.token_index));
  fill_logprobs(kernels, *row.params, s.logits.data(), vocab, result);
  return result;
}

}  // namespace troupe::cpu
