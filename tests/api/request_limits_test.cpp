// Sampling defaults: request > default_* knob > generation_config.json > built-in.

#include <gtest/gtest.h>

#include "api/http/request_limits.hpp"
#include "config/config_store.hpp"

namespace troupe::testing {
namespace {

TEST(SamplingDefaults, KnobsOverTheModelOverTheBuiltIns) {
  model_sampling_defaults model;
  model.temperature = 0.7;
  model.top_p = 0.9;
  model.max_tokens = 100;
  model_sampling_defaults knobs;
  knobs.temperature = 0.2;
  knobs.top_k = 5;
  const api::sampling_defaults resolved = api::sampling_defaults::resolve(knobs, model);
  EXPECT_DOUBLE_EQ(resolved.temperature, 0.2);
  EXPECT_DOUBLE_EQ(resolved.top_p, 0.9);
  EXPECT_EQ(resolved.top_k, 5);
  EXPECT_DOUBLE_EQ(resolved.min_p, 0.0);
  EXPECT_DOUBLE_EQ(resolved.repetition_penalty, 1.0);
  EXPECT_EQ(resolved.max_tokens, std::optional<int>(100));
  const api::sampling_defaults built_in = api::sampling_defaults::resolve({}, {});
  EXPECT_DOUBLE_EQ(built_in.temperature, 1.0);
  EXPECT_FALSE(built_in.max_tokens.has_value());
}

TEST(SamplingDefaults, KnobsAtTheirDefaultsAreUnset) {
  config_store knobs(server_knobs());
  const model_sampling_defaults unset = api::sampling_default_knobs(knobs);
  EXPECT_FALSE(unset.temperature || unset.top_p || unset.top_k || unset.min_p || unset.repetition_penalty ||
               unset.max_tokens);
  knobs.set("default_temperature", "0", config_source::command_line);
  knobs.set("default_top_k", "0", config_source::command_line);
  knobs.set("default_max_tokens", "12", config_source::command_line);
  const model_sampling_defaults set = api::sampling_default_knobs(knobs);
  EXPECT_EQ(set.temperature, std::optional<double>(0.0)) << "0 is greedy, not unset";
  EXPECT_EQ(set.top_k, std::optional<int>(0)) << "0 turns top_k off, not unset";
  EXPECT_EQ(set.max_tokens, std::optional<int>(12));
}

TEST(LiveRequestLimits, ASnapshotSurvivesAChange) {
  api::live_request_limits live(api::request_limits{});
  const auto before = live.get();
  api::request_limits lowered;
  lowered.engine.max_n = 2;
  live.set(lowered);
  EXPECT_EQ(live.get()->engine.max_n, 2);
  EXPECT_EQ(before->engine.max_n, api::request_limits{}.engine.max_n);
}

}  // namespace
}  // namespace troupe::testing
