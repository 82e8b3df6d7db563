#include "actors/core/workload.hpp"

#include <algorithm>
#include <cmath>
#include <random>

namespace troupe {

std::string validate_workload(const workload_config& c) {
  if (c.num_requests < 1) return "requests must be at least 1";
  if (c.arrival != "poisson" && c.arrival != "bursty") return "arrival must be poisson or bursty";
  if (!(c.rate > 0)) return "rate must be positive";
  if (!(c.burstiness > 0)) return "burstiness must be positive";
  if (!(c.prompt_median >= 1) || !(c.output_median >= 1)) return "median lengths must be at least 1";
  if (c.prompt_sigma < 0 || c.output_sigma < 0) return "length sigmas must not be negative";
  if (c.prompt_max < 1 || c.output_max < 1) return "maximum lengths must be at least 1";
  if (c.priorities < 1) return "priorities must be at least 1";
  if (c.deadline_fraction < 0 || c.deadline_fraction > 1) return "deadline fraction must be in [0, 1]";
  if (!(c.deadline_slack > 0) || !(c.reference_step_s > 0)) return "deadline slack and reference step must be positive";
  if (c.tenants < 1) return "tenants must be at least 1";
  if (!(c.tenant_skew >= 1)) return "tenant skew must be at least 1";
  return {};
}

namespace {

int lognormal_length(std::mt19937_64& rng, double median, double sigma, int max) {
  std::lognormal_distribution<double> dist(std::log(median), sigma);
  return std::clamp(static_cast<int>(std::lround(dist(rng))), 1, max);
}

double next_gap(std::mt19937_64& rng, const workload_config& c) {
  if (c.arrival == "poisson") return std::exponential_distribution<double>(c.rate)(rng);
  const double shape = 1.0 / c.burstiness;  // gamma gaps with mean 1/rate and squared CV = burstiness
  return std::gamma_distribution<double>(shape, 1.0 / (c.rate * shape))(rng);
}

}  // namespace

std::vector<generated_request> generate_workload(const workload_config& c) {
  std::mt19937_64 rng(c.seed);
  std::vector<double> tenant_weights;
  for (int t = 0; t < c.tenants; ++t) tenant_weights.push_back(std::pow(c.tenant_skew, -t));
  std::discrete_distribution<int> pick_tenant(tenant_weights.begin(), tenant_weights.end());
  std::uniform_int_distribution<int> pick_priority(0, c.priorities - 1);
  std::uniform_int_distribution<std::int32_t> pick_token(10, 31999);
  std::bernoulli_distribution has_deadline(c.deadline_fraction);
  std::vector<generated_request> out;
  double t = 0;
  for (int i = 0; i < c.num_requests; ++i) {
    generated_request r;
    t += next_gap(rng, c);
    r.arrival_s = t;
    r.tenant = pick_tenant(rng);
    const int prompt = lognormal_length(rng, c.prompt_median, c.prompt_sigma, c.prompt_max);
    const int output = lognormal_length(rng, c.output_median, c.output_sigma, c.output_max);
    r.spec.request_id = "sim-" + std::to_string(i);
    r.spec.prompt.resize(static_cast<std::size_t>(prompt));
    for (auto& token : r.spec.prompt) token = pick_token(rng);
    r.spec.max_tokens = output;
    r.spec.ignore_eos = true;
    r.spec.priority = pick_priority(rng);
    r.spec.user = "t" + std::to_string(r.tenant);
    r.spec.seed = rng();
    // Deadlines are a multiple of what the request needs alone: one step per
    // output token plus its prompt at 512 tokens per step.
    if (has_deadline(rng))
      r.spec.deadline_s = c.deadline_slack * c.reference_step_s * (std::ceil(prompt / 512.0) + output);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace troupe
