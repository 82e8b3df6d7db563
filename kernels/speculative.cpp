#include "kernels/speculative.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/sampler.hpp"

namespace troupe {

namespace {

void require(bool condition, const std::string& what) {
  if (!condition) throw std::invalid_argument("verify: " + what);
}

void check_input(const verify_input& in) {
  const std::size_t drafts = in.drafts.size();
  require(in.parents.empty() || in.draft_probs.empty(), "a tree's drafts must be point masses");
  require(in.logits != nullptr && in.vocab > 0, "no logits");
  require(drafts == 0 || in.row_stride >= in.vocab, "rows overlap");
  require(in.draft_probs.empty() || in.draft_probs.size() == drafts * static_cast<std::size_t>(in.vocab),
          "draft_probs must hold one row of the vocabulary per draft");
  for (std::int32_t id : in.drafts) require(id >= 0 && id < in.vocab, "a draft is outside the vocabulary");
  if (auto problem = verify_rows_problem(in.rows, in.drafts, in.parents); !problem.empty()) require(false, problem);
}

// The weight of `id` in p (0 when not kept).
float weight_of(const cpu::draw_distribution& p, std::int32_t id) {
  if (p.ids == nullptr) return p.weights[id];
  const std::int32_t* end = p.ids + p.size;
  const std::int32_t* at = std::lower_bound(p.ids, end, id);
  return at != end && *at == id ? p.weights[at - p.ids] : 0.0f;
}

// Rules 7 and 8: whether draft `d` survives p; q is its q row or null (a point mass).
bool accepts(const cpu::draw_distribution& p, std::int32_t d, const float* q, float ua) {
  if (p.point >= 0) return d == p.point;
  const double p_d = static_cast<double>(weight_of(p, d)) / p.total;
  const double q_d = q != nullptr ? static_cast<double>(q[d]) : 1.0;
  return static_cast<double>(ua) * q_d < p_d;
}

// A draw over p's kept ids with probabilities proportional to `weight(i)`
// (the i-th kept id's), ascending ids; p's own draw when every weight is 0.
template <class Weight>
std::int32_t draw_weighted(const cpu::draw_distribution& p, const Weight& weight, float u) {
  const auto id_at = [&](std::int64_t i) { return p.ids != nullptr ? p.ids[i] : static_cast<std::int32_t>(i); };
  double total = 0.0;
  for (std::int64_t i = 0; i < p.size; ++i) total += weight(i, id_at(i));
  if (!(total > 0.0)) return cpu::draw_token(p, u);
  const double threshold = static_cast<double>(u) * total;
  double cumulative = 0.0;
  std::int32_t last = id_at(0);
  for (std::int64_t i = 0; i < p.size; ++i) {
    const double w = weight(i, id_at(i));
    if (w <= 0.0) continue;
    cumulative += w;
    last = id_at(i);
    if (cumulative > threshold) return last;
  }
  return last;
}

// Rule 8's correction: a draw from norm(max(0, p - q)) over p's kept ids.
std::int32_t residual_token(const cpu::draw_distribution& p, std::int32_t d, const float* q, float u) {
  if (p.point >= 0) return p.point;
  return draw_weighted(
      p,
      [&](std::int64_t i, std::int32_t id) {
        const double q_id = q != nullptr ? static_cast<double>(q[id]) : (id == d ? 1.0 : 0.0);
        return std::max(0.0, static_cast<double>(p.weights[i]) / p.total - q_id);
      },
      u);
}

// Draws from p with the ids in `removed` taken out (renormalised); p itself when nothing is left.
std::int32_t draw_without(const cpu::draw_distribution& p, const std::vector<std::int32_t>& removed, float u) {
  return draw_weighted(
      p,
      [&](std::int64_t i, std::int32_t id) {
        return std::find(removed.begin(), removed.end(), id) == removed.end() ? static_cast<double>(p.weights[i]) : 0.0;
      },
      u);
}

// One node of a tree: the child accepted (its node index) or -1, with the
// emitted token; siblings tried in order against p minus the ones rejected.
std::pair<std::int32_t, std::int32_t> decide_node(const verify_input& in, const cpu::draw_distribution& p,
                                                  std::size_t node, const sampling_row& row) {
  std::vector<std::int32_t> rejected;
  double rejected_mass = 0.0;
  std::uint64_t rank = 0;
  for (std::size_t child = node + 1; child <= in.drafts.size(); ++child) {
    if (static_cast<std::size_t>(in.parents[child - 1]) != node) continue;
    const std::int32_t d = in.drafts[child - 1];
    if (p.point >= 0) {
      if (d == p.point) return {static_cast<std::int32_t>(child), d};
      continue;
    }
    const double p_d = static_cast<double>(weight_of(p, d)) / p.total;
    const double left = 1.0 - rejected_mass;
    const float ua = sibling_accept_uniform(row.seed, row.token_index, rank++);
    if (left > 0.0 && static_cast<double>(ua) * left < p_d) return {static_cast<std::int32_t>(child), d};
    rejected.push_back(d);
    rejected_mass += p_d;
  }
  const float u = philox_uniform(row.seed, row.token_index);
  if (p.point >= 0) return {-1, p.point};
  return {-1, rejected.empty() ? cpu::draw_token(p, u) : draw_without(p, rejected, u)};
}

verify_outcome verify_tree(const verify_input& in, const cpu::isa_kernels& kernels, cpu::sampler_scratch& scratch) {
  verify_outcome outcome;
  std::size_t node = 0;
  for (;;) {
    const sampling_row& row = in.rows[node];
    const float* logits = in.logits + static_cast<std::int64_t>(node) * in.row_stride;
    const cpu::draw_distribution p = cpu::prepare_distribution(kernels, logits, in.vocab, row, scratch);
    const auto [child, token] = decide_node(in, p, node, row);
    sample_output emitted;
    emitted.token = token;
    cpu::fill_logprobs(kernels, *row.params, scratch.logits.data(), in.vocab, emitted);
    outcome.emitted.push_back(std::move(emitted));
    if (child < 0) return outcome;
    ++outcome.accepted;
    node = static_cast<std::size_t>(child);
  }
}

}  // namespace

verify_outcome verify_drafts(const verify_input& in, const cpu::isa_kernels& kernels, cpu::sampler_scratch& scratch) {
  check_input(in);
  if (!in.parents.empty()) return verify_tree(in, kernels, scratch);
  const std::size_t drafts = in.drafts.size();
  verify_outcome outcome;
  for (std::size_t r = 0; r <= drafts; ++r) {
    const sampling_row& row = in.rows[r];
    const float* logits = in.logits + static_cast<std::int64_t>(r) * in.row_stride;
    const cpu::draw_distribution p = cpu::prepare_distribution(kernels, logits, in.vocab, row, scratch);
    const float u = philox_uniform(row.seed, row.token_index);
    sample_output emitted;
    bool accepted = false;
    if (r == drafts) {
      emitted.token = cpu::draw_token(p, u);  // rule 9: the bonus token
    } else {
      const std::int32_t d = in.drafts[r];
      const float* q =
          in.draft_probs.empty() ? nullptr : in.draft_probs.data() + r * static_cast<std::size_t>(in.vocab);
      accepted = accepts(p, d, q, accept_uniform(row.seed, row.token_index));
      emitted.token = accepted ? d : residual_token(p, d, q, u);
    }
    cpu::fill_logprobs(kernels, *row.params, scratch.logits.data(), in.vocab, emitted);
    outcome.emitted.push_back(std::move(emitted));
    if (!accepted) break;
    ++outcome.accepted;
  }
  return outcome;
}

verify_outcome verify_drafts(const verify_input& input) {
  cpu::sampler_scratch scratch;
  return verify_drafts(input, cpu::kernels_for(cpu::detected_isa()), scratch);
}

std::vector<std::int32_t> rows_outside_groups(const step_batch& batch) {
  std::vector<std::int32_t> rows;
  std::int32_t next = 0;
  const auto take_until = [&](std::int32_t end) {
    for (; next < end; ++next) rows.push_back(next);
  };
  for (const verify_group& group : batch.verify) {
    take_until(group.first_row);
    next = group.first_row + static_cast<std::int32_t>(group.drafts.size()) + 1;
  }
  take_until(static_cast<std::int32_t>(batch.num_logits_rows()));
  return rows;
}

void store_outcome(const step_batch& batch, std::size_t group, verify_outcome outcome, sample_result& result) {
  const verify_group& g = batch.verify[group];
  for (std::size_t r = 0; r <= g.drafts.size(); ++r) {
    sample_output& out = result.rows[static_cast<std::size_t>(g.first_row) + r];
    if (r < outcome.emitted.size()) {
      out = std::move(outcome.emitted[r]);
    } else {
      out = sample_output{};
      out.token = -1;
    }
  }
  result.accepted[group] = outcome.accepted;
}

std::vector<float> processed_distribution(std::span<const float> logits, const sampling_row& row) {
  cpu::sampler_scratch scratch;
  const auto vocab = static_cast<std::int64_t>(logits.size());
  const cpu::draw_distribution p =
      cpu::prepare_distribution(cpu::kernels_for(cpu::detected_isa()), logits.data(), vocab, row, scratch);
  std::vector<float> probabilities(logits.size(), 0.0f);
  if (p.point >= 0) {
    probabilities[static_cast<std::size_t>(p.point)] = 1.0f;
    return probabilities;
  }
  for (std::int64_t i = 0; i < p.size; ++i) {
    const std::int32_t id = p.ids != nullptr ? p.ids[i] : static_cast<std::int32_t>(i);
    probabilities[static_cast<std::size_t>(id)] = static_cast<float>(static_cast<double>(p.weights[i]) / p.total);
  }
  return probabilities;
}

std::int32_t draw_from_distribution(std::span<const float> probabilities, float u) {
  double total = 0.0;
  for (float x : probabilities) total += x;
  const double threshold = static_cast<double>(u) * total;
  double cumulative = 0.0;
  std::int32_t last = 0;
  for (std::size_t i = 0; i < probabilities.size(); ++i) {
    if (probabilities[i] <= 0.0f) continue;
    cumulative += probabilities[i];
    last = static_cast<std::int32_t>(i);
    if (cumulative > threshold) return last;
  }
  return last;
}

}  // namespace troupe
