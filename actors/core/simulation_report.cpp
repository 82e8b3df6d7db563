#include "actors/core/simulation_report.hpp"

#include <cstdio>
#include <sstream>

namespace troupe {

namespace {

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string shares_text(const std::vector<double>& shares, char separator) {
  std::string out;
  for (std::size_t i = 0; i < shares.size(); ++i) {
    if (i > 0) out += separator;
    out += fixed(shares[i], 3);
  }
  return out;
}

std::string summary_ms(const latency_summary& s) {
  return fixed(s.p50 * 1e3, 0) + "/" + fixed(s.p90 * 1e3, 0) + "/" + fixed(s.p99 * 1e3, 0);
}

void json_summary(std::ostringstream& os, const char* name, const latency_summary& s) {
  os << "\"" << name << "\": {\"p50\": " << s.p50 << ", \"p90\": " << s.p90 << ", \"p99\": " << s.p99
     << ", \"mean\": " << s.mean << ", \"count\": " << s.count << "}";
}

void json_shares(std::ostringstream& os, const char* name, const std::vector<double>& shares) {
  os << "\"" << name << "\": [";
  for (std::size_t i = 0; i < shares.size(); ++i) os << (i ? ", " : "") << shares[i];
  os << "]";
}

void json_request(std::ostringstream& os, const request_outcome& r) {
  os << "{\"tenant\": " << r.tenant << ", \"priority\": " << r.priority << ", \"prompt\": " << r.prompt_tokens
     << ", \"output\": " << r.output_tokens << ", \"arrival\": " << r.arrival_s
     << ", \"first_token\": " << r.first_token_s << ", \"finish\": " << r.finish_s << ", \"deadline\": ";
  if (r.deadline_s)
    os << *r.deadline_s;
  else
    os << "null";
  os << ", \"rejected\": " << (r.rejected ? "true" : "false") << "}";
}

}  // namespace

std::string format_simulation_table(const std::vector<simulation_result>& results) {
  std::ostringstream os;
  char line[512];
  std::snprintf(line, sizeof line, "%-9s %-9s %5s %4s %17s %14s %19s %11s %11s  %s\n", "policy", "preempt", "done",
                "rej", "TTFT p50/p90/p99", "TPOT p50/90/99", "JCT p50/p90/p99", "deadline", "preempt s/r",
                "tenant share (contended)");
  os << line;
  std::snprintf(line, sizeof line, "%-9s %-9s %5s %4s %17s %14s %19s %11s %11s  %s\n", "", "", "", "", "(ms)", "(ms)",
                "(ms)", "miss+rej/n", "", "");
  os << line;
  for (const simulation_result& r : results) {
    const std::string deadline = std::to_string(r.deadline_missed) + "+" + std::to_string(r.deadline_rejected) + "/" +
                                 std::to_string(r.deadline_requests);
    const std::string preempt = std::to_string(r.preemptions_swap) + "/" + std::to_string(r.preemptions_recompute);
    std::snprintf(line, sizeof line, "%-9s %-9s %5d %4d %17s %14s %19s %11s %11s  %s\n", r.policy.c_str(),
                  r.preemption.c_str(), r.completed, r.rejected, summary_ms(r.ttft_s).c_str(),
                  summary_ms(r.tpot_s).c_str(), summary_ms(r.jct_s).c_str(), deadline.c_str(), preempt.c_str(),
                  shares_text(r.tenant_share, ' ').c_str());
    os << line;
  }
  return os.str();
}

std::string simulation_csv(const std::vector<simulation_result>& results) {
  std::ostringstream os;
  os << "policy,preemption,completed,rejected,ttft_p50_s,ttft_p90_s,ttft_p99_s,tpot_p50_s,tpot_p90_s,tpot_p99_s,"
        "jct_p50_s,jct_p90_s,jct_p99_s,deadline_requests,deadline_missed,deadline_rejected,preemptions_swap,"
        "preemptions_recompute,steps,makespan_s,mean_step_tokens,tenant_share_contended,tenant_share_overall\n";
  for (const simulation_result& r : results) {
    os << r.policy << ',' << r.preemption << ',' << r.completed << ',' << r.rejected << ',' << r.ttft_s.p50 << ','
       << r.ttft_s.p90 << ',' << r.ttft_s.p99 << ',' << r.tpot_s.p50 << ',' << r.tpot_s.p90 << ',' << r.tpot_s.p99
       << ',' << r.jct_s.p50 << ',' << r.jct_s.p90 << ',' << r.jct_s.p99 << ',' << r.deadline_requests << ','
       << r.deadline_missed << ',' << r.deadline_rejected << ',' << r.preemptions_swap << ',' << r.preemptions_recompute
       << ',' << r.steps << ',' << r.makespan_s << ',' << r.mean_step_tokens << ',' << shares_text(r.tenant_share, ';')
       << ',' << shares_text(r.tenant_share_overall, ';') << '\n';
  }
  return os.str();
}

std::string simulation_json(const std::vector<simulation_result>& results) {
  std::ostringstream os;
  os.precision(9);
  os << "{\"runs\": [";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const simulation_result& r = results[i];
    os << (i ? ",\n" : "\n") << "{\"policy\": \"" << r.policy << "\", \"preemption\": \"" << r.preemption
       << "\", \"completed\": " << r.completed << ", \"rejected\": " << r.rejected << ", ";
    json_summary(os, "ttft_s", r.ttft_s);
    os << ", ";
    json_summary(os, "tpot_s", r.tpot_s);
    os << ", ";
    json_summary(os, "jct_s", r.jct_s);
    os << ", \"deadline_requests\": " << r.deadline_requests << ", \"deadline_missed\": " << r.deadline_missed
       << ", \"deadline_rejected\": " << r.deadline_rejected << ", \"preemptions_swap\": " << r.preemptions_swap
       << ", \"preemptions_recompute\": " << r.preemptions_recompute << ", \"steps\": " << r.steps
       << ", \"makespan_s\": " << r.makespan_s << ", \"mean_step_tokens\": " << r.mean_step_tokens << ", ";
    json_shares(os, "tenant_share", r.tenant_share);
    os << ", ";
    json_shares(os, "tenant_share_overall", r.tenant_share_overall);
    os << ", \"requests\": [";
    for (std::size_t k = 0; k < r.requests.size(); ++k) {
      os << (k ? ", " : "");
      json_request(os, r.requests[k]);
    }
    os << "]}";
  }
  os << "\n]}\n";
  return os.str();
}

}  // namespace troupe
