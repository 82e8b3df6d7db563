#pragma once
// The target of the speculative-sampling statistical tests: a tiny
// vocabulary, fixed random target logits and draft distributions per
// prefix, the request's sampling settings, and the exact joint
// distribution of the first emitted tokens they imply.

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "kernels/sampling.hpp"

namespace troupe::test::speculative_statistics {

inline constexpr int vocab = 6;
inline constexpr int emitted_tokens = 3;
inline constexpr int trials = 30000;

using prefix = std::vector<std::int32_t>;

// Fixed random rows per prefix (of up to emitted_tokens tokens): the
// target's logits and the draft's probabilities.
struct prefix_tables {
  std::map<prefix, std::vector<float>> target_logits;
  std::map<prefix, std::vector<float>> draft_probs;

  prefix_tables() {
    std::mt19937_64 engine(20260515);
    std::uniform_real_distribution<float> logit(-2.0f, 2.0f), weight(0.05f, 1.0f);
    std::vector<prefix> level = {{}};
    for (int length = 0; length <= emitted_tokens; ++length) {
      std::vector<prefix> next;
      for (const prefix& p : level) {
        auto& logits = target_logits[p];
        for (int i = 0; i < vocab; ++i) logits.push_back(logit(engine));
        auto& q = draft_probs[p];
        float total = 0.0f;
        for (int i = 0; i < vocab; ++i) total += q.emplace_back(weight(engine));
        for (float& x : q) x /= total;
        for (std::int32_t id = 0; id < vocab; ++id) {
          next.push_back(p);
          next.back().push_back(id);
        }
      }
      level = std::move(next);
    }
  }
};

// The request's settings: the presence penalty makes p depend on the
// emitted tokens (drafts included), top_k leaves one id out of each row.
inline sampling_params target_params() {
  sampling_params p;
  p.temperature = 0.9f;
  p.top_k = 5;
  p.presence_penalty = 0.7f;
  return p;
}

// The exact target distribution of the next token after `context`, in double.
inline std::vector<double> exact_next(const prefix_tables& tables, const prefix& context) {
  const sampling_params p = target_params();
  std::vector<double> z(vocab);
  for (int i = 0; i < vocab; ++i) {
    float logit = tables.target_logits.at(context)[static_cast<std::size_t>(i)];
    if (std::find(context.begin(), context.end(), i) != context.end()) logit -= p.presence_penalty;
    z[static_cast<std::size_t>(i)] = static_cast<double>(logit / p.temperature);
  }
  const auto smallest = std::min_element(z.begin(), z.end()) - z.begin();
  const double max = *std::max_element(z.begin(), z.end());
  std::vector<double> probs(vocab);
  double total = 0.0;
  for (int i = 0; i < vocab; ++i) {
    if (i != smallest) total += probs[static_cast<std::size_t>(i)] = std::exp(z[static_cast<std::size_t>(i)] - max);
  }
  for (double& x : probs) x /= total;
  return probs;
}

// Cell index of three tokens.
inline int cell_of(const prefix& tokens) { return (tokens[0] * vocab + tokens[1]) * vocab + tokens[2]; }

inline std::vector<double> exact_joint(const prefix_tables& tables) {
  std::vector<double> joint(vocab * vocab * vocab);
  const std::vector<double> first = exact_next(tables, {});
  for (std::int32_t a = 0; a < vocab; ++a) {
    const std::vector<double> second = exact_next(tables, {a});
    for (std::int32_t b = 0; b < vocab; ++b) {
      const std::vector<double> third = exact_next(tables, {a, b});
      for (std::int32_t c = 0; c < vocab; ++c)
        joint[static_cast<std::size_t>(cell_of({a, b, c}))] = first[a] * second[b] * third[c];
    }
  }
  return joint;
}

}  // namespace troupe::test::speculative_statistics
