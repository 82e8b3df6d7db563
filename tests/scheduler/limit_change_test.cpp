// Request limits changed while the engine runs (apply_limit_change): all or
// nothing, checked against the knob registry.

#include <gtest/gtest.h>

#include "actors/core/admission.hpp"

namespace troupe::testing {
namespace {

TEST(LimitChange, AppliesTheLimitFieldsAndReportsThem) {
  admission_limits limits;
  settings_change change;
  change.max_n = 2;
  change.max_request_output_tokens = 1000;
  change.min_request_deadline_ms = 5.0;
  change.max_num_seqs = 3;  // not a limit: ignored here
  EXPECT_EQ(apply_limit_change(change, limits), "");
  EXPECT_EQ(limits.max_n, 2);
  EXPECT_EQ(limits.max_request_output_tokens, 1000);
  EXPECT_DOUBLE_EQ(limits.min_deadline_ms, 5.0);
  live_settings reported;
  report_limits(limits, reported);
  EXPECT_EQ(reported.max_n, 2);
  EXPECT_EQ(reported.max_request_output_tokens, 1000);
  EXPECT_EQ(reported.max_stop_strings, limits.max_stop_strings);
}

TEST(LimitChange, AValueOutsideItsRangeChangesNothing) {
  admission_limits limits;
  const admission_limits before = limits;
  settings_change change;
  change.max_stop_strings = 3;
  change.max_n = 0;
  const std::string problem = apply_limit_change(change, limits);
  EXPECT_NE(problem.find("max_n"), std::string::npos) << problem;
  EXPECT_EQ(limits.max_n, before.max_n);
  EXPECT_EQ(limits.max_stop_strings, before.max_stop_strings);
}

TEST(LimitChange, ALoweredMaxNRefusesALargerRequest) {
  admission_limits limits;
  settings_change change;
  change.max_n = 2;
  ASSERT_EQ(apply_limit_change(change, limits), "");
  generation_request request;
  request.prompt_text = "hello";
  request.n = 3;
  const auto error = check_request(request, limits);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->param, "n");
}

}  // namespace
}  // namespace troupe::testing
