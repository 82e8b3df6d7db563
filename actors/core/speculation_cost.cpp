#include "actors/core/speculation_cost.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <vector>

namespace troupe {

namespace {

/// Weight of the newest measurement in a bucket: the last few dozen steps count.
constexpr double cost_smoothing = 0.1;
/// Sizes up to this are buckets of their own.
constexpr int exact_sizes = 16;
/// Buckets per doubling above exact_sizes.
constexpr int buckets_per_doubling = 8;

int bucket_of(std::int32_t size) {
  if (size <= exact_sizes) return size;
  return exact_sizes + static_cast<int>(std::floor(buckets_per_doubling * std::log2(double(size) / exact_sizes)));
}

}  // namespace

void cost_curve::observe(std::int32_t size, double seconds) {
  if (size < 1 || !(seconds >= 0)) return;
  const auto [it, inserted] = buckets_.try_emplace(bucket_of(size), point{double(size), seconds});
  if (inserted) return;
  point& p = it->second;
  p.size += cost_smoothing * (size - p.size);
  p.seconds += cost_smoothing * (seconds - p.seconds);
}

std::optional<double> cost_curve::estimate(std::int32_t size) const {
  if (buckets_.empty()) return std::nullopt;
  // Each point at least as costly as every smaller one (noise aside, a step never gets cheaper with size).
  std::vector<point> points;
  points.reserve(buckets_.size());
  for (const auto& [index, p] : buckets_)
    points.push_back({p.size, points.empty() ? p.seconds : std::max(p.seconds, points.back().seconds)});
  if (points.size() == 1) return points.front().seconds;
  // The two points around `size`, or the two nearest on its side.
  auto upper = std::find_if(points.begin(), points.end(), [size](const point& p) { return p.size > size; });
  if (upper == points.begin()) ++upper;
  if (upper == points.end()) --upper;
  const point& hi = *upper;
  const point& lo = *std::prev(upper);
  const double slope = hi.size > lo.size ? (hi.seconds - lo.seconds) / (hi.size - lo.size) : 0.0;
  return std::max(0.0, lo.seconds + slope * (size - lo.size));
}

void speculation_cost_model::observe_target_step(std::int32_t tokens, double seconds) {
  target_.observe(tokens, seconds);
}

void speculation_cost_model::observe_draft_round(std::int32_t sequences, std::int32_t steps, double seconds) {
  if (steps >= 1) draft_step_.observe(sequences, seconds / steps);
}

double speculation_cost_model::draft_round_s(std::int32_t sequences, std::int32_t steps) const {
  if (sequences < 1 || steps < 1) return 0;
  return steps * draft_step_.estimate(sequences).value_or(0.0);
}

speculation_candidate tree_candidate(double acceptance, std::int32_t slots, std::int32_t width, double fed_fraction) {
  const std::int32_t depth = width <= 1 ? slots : (slots + width - 1) / width;
  const auto fed = static_cast<std::int32_t>(std::lround(std::clamp(fed_fraction, 0.0, 1.0) * slots));
  return {acceptance, std::clamp(fed, std::min<std::int32_t>(1, slots), slots), depth};
}

std::size_t speculation_cost_model::worth_speculating(std::span<const speculation_candidate> candidates,
                                                      std::int32_t plain_tokens, std::int32_t plain_decodes) const {
  const std::optional<double> plain_s = target_.estimate(plain_tokens);
  if (!plain_s || overhead_s_ + *plain_s <= 0) return candidates.size();
  double best_rate = plain_decodes / (overhead_s_ + *plain_s);
  std::size_t best = 0;
  std::int32_t tokens = plain_tokens, max_depth = 0;
  double expected = plain_decodes;
  for (std::size_t m = 1; m <= candidates.size(); ++m) {
    const speculation_candidate& c = candidates[m - 1];
    const std::int32_t depth = c.depth > 0 ? c.depth : c.slots;
    tokens += c.slots;
    max_depth = std::max(max_depth, depth);
    // Acceptance is measured against depth: a tree's siblings add to what
    // is verified, not to how many drafts one round can have accepted.
    expected += std::clamp(c.acceptance, 0.0, 1.0) * depth;
    const double seconds = overhead_s_ + target_.estimate(tokens).value_or(*plain_s) +
                           draft_round_s(static_cast<std::int32_t>(m), max_depth);
    if (seconds > 0 && expected / seconds > best_rate) {
      best_rate = expected / seconds;
      best = m;
    }
  }
  return best;
}

}  // namespace troupe
