#pragma once
// Synthetic request streams for the scheduler simulator: Poisson or bursty
// arrivals, log-normal prompt and output lengths, priorities, deadlines and
// tenants, all from one seed.

#include <cstdint>
#include <string>
#include <vector>

#include "actors/core/scheduler_types.hpp"

namespace troupe {

/// How to generate a workload.
struct workload_config {
  int num_requests = 500;
  std::string arrival = "poisson";  ///< "poisson" or "bursty" (gamma gaps, squared CV = burstiness)
  double rate = 8.0;                ///< mean arrivals per second
  double burstiness = 8.0;          ///< bursty: squared coefficient of variation of the gaps
  double prompt_median = 256;       ///< tokens; log-normal
  double prompt_sigma = 1.0;        ///< sigma of log(prompt length)
  int prompt_max = 2048;
  double output_median = 128;  ///< tokens; log-normal
  double output_sigma = 1.0;
  int output_max = 1024;
  int priorities = 3;              ///< priorities drawn uniformly from 0 .. priorities-1
  double deadline_fraction = 0.5;  ///< share of requests with a deadline
  double deadline_slack = 4.0;     ///< deadline = slack × the request's service time alone
  double reference_step_s = 0.02;  ///< step time used to size deadlines
  int tenants = 2;                 ///< users "t0", "t1", ...
  double tenant_skew = 3.0;        ///< tenant i sends skew^-i as many requests as tenant 0
  std::uint64_t seed = 1;
};

/// One generated request and when it arrives.
struct generated_request {
  double arrival_s = 0;
  int tenant = 0;
  request_spec spec;  ///< prompt ids, max_tokens (= its output length), priority, deadline, user, seed
};

/// Empty when `config` is usable, else what is wrong (naming the field).
std::string validate_workload(const workload_config& config);

/// The requests in arrival order. Outputs never stop early (ignore_eos), so
/// each request produces exactly max_tokens tokens.
std::vector<generated_request> generate_workload(const workload_config& config);

}  // namespace troupe
