// The operator's bounds on client-set urgency (knobs min_request_priority
// and min_request_deadline_ms): by default every value is admitted as before.

#include <gtest/gtest.h>

#include <limits>

#include "actors/core/admission.hpp"

namespace troupe::testing {
namespace {

generation_request text_request() {
  generation_request r;
  r.prompt_text = "hello";
  return r;
}

TEST(UrgencyLimits, TheDefaultsAdmitAnyPriorityAndDeadline) {
  const admission_limits limits;
  generation_request r = text_request();
  r.priority = std::numeric_limits<int>::min();
  r.deadline_ms = 0.001;
  EXPECT_FALSE(check_request(r, limits).has_value());
}

TEST(UrgencyLimits, AMoreUrgentPriorityThanAllowedIsRefusedNamingTheField) {
  engine_config engine;
  engine.min_request_priority = 0;
  const admission_limits limits(engine);
  generation_request r = text_request();
  r.priority = 0;
  EXPECT_FALSE(check_request(r, limits).has_value());
  r.priority = -1;
  const auto error = check_request(r, limits);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->kind, error_kind::invalid_request);
  EXPECT_EQ(error->param, "priority");
  EXPECT_NE(error->message.find("at least 0"), std::string::npos) << error->message;
}

TEST(UrgencyLimits, AShorterDeadlineThanAllowedIsRefusedNamingTheField) {
  engine_config engine;
  engine.min_request_deadline_ms = 500;
  const admission_limits limits(engine);
  generation_request r = text_request();
  r.deadline_ms = 500;
  EXPECT_FALSE(check_request(r, limits).has_value());
  r.deadline_ms = 499;
  const auto error = check_request(r, limits);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->param, "deadline_ms");
  r.deadline_ms.reset();
  EXPECT_FALSE(check_request(r, limits).has_value()) << "a request without a deadline is not bound";
}

}  // namespace
}  // namespace troupe::testing
