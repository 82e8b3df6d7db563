// How overlapping steps are planned, from the measured fixed cost of a step
// and the executor's idle time between serial steps.

#include <gtest/gtest.h>

#include "actors/core/step_cost.hpp"

namespace troupe::testing {
namespace {

void observe(step_cost_model& model, double gap_s, int times = 100) {
  for (int i = 0; i < times; ++i) model.observe_serial_gap(gap_s);
}

TEST(StepCostModel, TinyModelsSplitRealOnesStaySerialUnknownOnesAlternate) {
  step_cost_model tiny(0.00005);  // the demo model: a one-token step takes 50 us
  observe(tiny, 0.0004);
  EXPECT_EQ(tiny.mode(), overlap_mode::split);
  step_cost_model large(0.058);  // a 1b model on a CPU: 58 ms of weight reads per step
  observe(large, 0.0004);
  EXPECT_EQ(large.mode(), overlap_mode::serial);
  step_cost_model unknown;
  observe(unknown, 0.0004);
  EXPECT_EQ(unknown.mode(), overlap_mode::alternate);
}

TEST(StepCostModel, JudgesOnEnoughGapsAndThenKeepsTheSplit) {
  step_cost_model model(0.001);
  observe(model, 0.01, 20);
  EXPECT_EQ(model.mode(), overlap_mode::serial) << "twenty gaps are too few to judge";
  observe(model, 0.0015, 100);  // a gap below twice the fixed cost: splitting would not pay
  EXPECT_EQ(model.mode(), overlap_mode::serial);
  observe(model, 0.01, 100);
  EXPECT_EQ(model.mode(), overlap_mode::split);
  observe(model, 0.0001, 100);  // split overlap leaves small gaps: that is no reason to go back
  EXPECT_EQ(model.mode(), overlap_mode::split);
}

}  // namespace
}  // namespace troupe::testing
