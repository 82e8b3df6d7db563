// One path per knob: the registry's values reach engine_config, each core's
// config is built from engine_config, and values are held to the registry's
// ranges wherever they are checked.

#include <gtest/gtest.h>

#include <sstream>

#include "actors/core/admission.hpp"
#include "actors/core/scheduler.hpp"
#include "config/config_store.hpp"
#include "kernels/quantization.hpp"

namespace troupe {
namespace {

// A valid value of `knob` other than its default.
std::string another_value(const knob_spec& knob) {
  if (!knob.choices.empty()) return knob.choices[0] == knob.default_value ? knob.choices[1] : knob.choices[0];
  switch (knob.kind) {
    case knob_kind::boolean:
      return knob.default_value == "true" ? "false" : "true";
    case knob_kind::text:
      return knob.default_value + "x";
    case knob_kind::integer:
    case knob_kind::real:
      break;
  }
  std::ostringstream bound;
  bound.precision(17);
  bound << (std::stod(knob.default_value) == knob.min.value() ? knob.max.value() : knob.min.value());
  return bound.str();
}

TEST(KnobConfig, EveryEngineKnobReachesAnEngineConfigField) {
  const engine_config defaults;
  EXPECT_EQ(defaults.problem(), "");
  for (const knob_spec& knob : engine_knobs()) {
    config_store knobs(engine_knobs());
    knobs.set(knob.name, another_value(knob), config_source::command_line);
    const engine_config changed(knobs);
    EXPECT_NE(changed, defaults) << knob.name << " changed nothing";
    EXPECT_EQ(changed.problem(), "") << knob.name;
  }
}

TEST(KnobConfig, ADefaultEngineConfigHoldsTheRegistryDefaults) {
  const engine_config config;
  const config_store& knobs = knob_defaults();
  EXPECT_EQ(config.max_n, knobs.get_int("max_n"));
  EXPECT_EQ(config.mlfq_quantum, knobs.get_int("mlfq_quantum"));
  EXPECT_EQ(config.swap_space_bytes, knobs.get_int("swap_space_bytes"));
  EXPECT_EQ(config.policy, knobs.get_text("policy"));
  EXPECT_DOUBLE_EQ(config.request_timeout_s, knobs.get_real("request_timeout"));
}

TEST(KnobConfig, AnEngineConfigOutsideTheRegistryNamesTheKnob) {
  engine_config config;
  config.max_top_logprobs = 5000;
  EXPECT_EQ(config.problem(), "knob 'max_top_logprobs': 5000 is outside [0, 1024]");
  config = engine_config{};
  config.preemption_mode = "sometimes";
  EXPECT_EQ(config.problem(), "knob 'preemption_mode': 'sometimes' is not one of auto, swap, recompute");
  config = engine_config{};
  config.request_timeout_s = 0.25;
  EXPECT_EQ(config.problem(), "");
  // An embedder's engine is refused a prompt bound that one full completions request would pass.
  config.max_pending_prompts_per_connection = 8;
  EXPECT_EQ(config.problem(), "knob 'max_pending_prompts_per_connection': 8 is outside [64, 16777216]");
}

TEST(KnobConfig, EachCoreConfigIsBuiltFromTheEngineConfig) {
  config_store knobs(engine_knobs());
  for (const auto& [name, value] : {std::pair{"max_num_batched_tokens", "100"},
                                    {"max_waiting_requests", "9"},
                                    {"block_size", "8"},
                                    {"mlfq_quantum", "3"},
                                    {"preemption_mode", "recompute"},
                                    {"enable_prefix_caching", "false"},
                                    {"max_n", "4"}})
    knobs.set(name, value, config_source::file);
  const engine_config engine(knobs);
  const scheduler_config scheduler(engine);
  EXPECT_EQ(scheduler.max_num_batched_tokens, 100);
  EXPECT_EQ(scheduler.max_waiting_requests, 9);
  EXPECT_EQ(scheduler.policies.mlfq_base_quantum, 3);
  EXPECT_EQ(scheduler.preemption, preemption_mode::recompute);
  const block_manager_config kv = kv_manager_config(scheduler);
  EXPECT_EQ(kv.block_size, 8);
  EXPECT_FALSE(kv.enable_prefix_caching);
  EXPECT_EQ(admission_limits(engine).max_n, 4);
}

TEST(KnobConfig, DefaultCoreConfigsMatchADefaultEngineConfig) {
  const engine_config engine;
  const scheduler_config scheduler;
  EXPECT_EQ(scheduler.max_num_seqs, engine.max_num_seqs);
  EXPECT_EQ(scheduler.block_size, engine.block_size);
  EXPECT_EQ(scheduler.policies.mlfq_base_quantum, engine.mlfq_quantum);
  EXPECT_EQ(block_manager_config().block_size, engine.block_size);
  EXPECT_EQ(admission_limits().max_top_logprobs, engine.max_top_logprobs);
}

TEST(KnobConfig, TheSchedulerRefusesValuesOutsideTheRegistryRangeNamingTheKnob) {
  scheduler_config config;
  config.num_device_blocks = 16;
  EXPECT_EQ(scheduler::validate_config(config), "");
  config.policies.mlfq_base_quantum = 0;
  EXPECT_EQ(scheduler::validate_config(config), "knob 'mlfq_quantum': 0 is outside [1, 65536]");
  config.policies.mlfq_base_quantum = 1;
  config.max_num_seqs = 70000;
  EXPECT_EQ(scheduler::validate_config(config), knob_defaults().problem("max_num_seqs", "70000"));
}

// The registry lists the quantisation formats itself (config/ may use
// nothing else in the project): every one the kernels name, in their order.
TEST(KnobConfig, QuantizationKnobsOfferEveryFormat) {
  int found = 0;
  for (const knob_spec& knob : engine_knobs()) {
    if (!knob.name.ends_with("quantization")) continue;
    EXPECT_EQ(knob.choices, quantization_choices()) << knob.name;
    ++found;
  }
  EXPECT_EQ(found, 3) << "quantization, lm_head_quantization, draft_quantization";
}

}  // namespace
}  // namespace troupe
