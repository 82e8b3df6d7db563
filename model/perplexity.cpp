#include "model/perplexity.hpp"

#include <algorithm>
#include <cmath>

namespace troupe {

double next_token_nll_sum(std::span<const float> logits, std::span<const std::int32_t> ids, std::size_t vocab) {
  double total = 0.0;
  for (std::size_t t = 0; t + 1 < ids.size(); ++t) {
    const float* row = logits.data() + t * vocab;
    double max_logit = row[0];
    for (std::size_t v = 1; v < vocab; ++v) max_logit = std::max(max_logit, static_cast<double>(row[v]));
    double sum = 0.0;
    for (std::size_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - max_logit);
    total += max_logit + std::log(sum) - row[static_cast<std::size_t>(ids[t + 1])];
  }
  return total;
}

perplexity_result perplexity_from(double nll_sum, std::int64_t predicted) {
  perplexity_result result;
  result.predicted = predicted;
  if (predicted > 0) result.mean_nll = nll_sum / static_cast<double>(predicted);
  result.perplexity = std::exp(result.mean_nll);
  return result;
}

perplexity_result windowed_perplexity(batch_runner& runner, std::span<const std::int32_t> ids, std::size_t vocab,
                                      std::size_t window, int chunk_tokens) {
  if (window == 0) window = ids.size();
  double nll_sum = 0.0;
  std::int64_t predicted = 0;
  for (std::size_t start = 0; start + 1 < ids.size(); start += window) {
    const auto part = ids.subspan(start, std::min(window, ids.size() - start));
    const std::vector<float> logits =
        runner.prompt_logits({std::vector<std::int32_t>(part.begin(), part.end())}, chunk_tokens)[0];
    nll_sum += next_token_nll_sum(logits, part, vocab);
    predicted += static_cast<std::int64_t>(part.size()) - 1;
  }
  return perplexity_from(nll_sum, predicted);
}

}  // namespace troupe
