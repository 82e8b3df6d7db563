// The knob registry: parsing, ranges, layering of sources, live-only changes.

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "config/config_store.hpp"

namespace troupe {
namespace {

config_store engine_store() { return config_store(engine_knobs()); }

TEST(ConfigStore, DefaultsParse) {
  auto store = engine_store();
  EXPECT_EQ(store.get_int("max_num_batched_tokens"), 2048);
  EXPECT_EQ(store.get_text("policy"), "fcfs");
  EXPECT_TRUE(store.get_bool("enable_prefix_caching"));
  EXPECT_DOUBLE_EQ(store.get_real("request_timeout"), 600.0);
  EXPECT_EQ(store.source_of("policy"), config_source::defaults);
  config_store server(server_knobs());
  EXPECT_EQ(server.get_int("port"), 8000);
}

TEST(ConfigStore, RejectsBadValuesNamingTheKnob) {
  auto store = engine_store();
  EXPECT_THROW(
      {
        try {
          store.set("max_num_seqs", "0", config_source::command_line);
        } catch (const config_error& e) {
          EXPECT_STREQ(e.what(), "knob 'max_num_seqs' (from command_line): 0 is outside [1, 65536]");
          throw;
        }
      },
      config_error);
  EXPECT_THROW(store.set("max_num_seqs", "12x", config_source::command_line), config_error);
  EXPECT_THROW(store.set("policy", "lifo", config_source::command_line), config_error);
  EXPECT_THROW(store.set("no_such_knob", "1", config_source::command_line), config_error);
  EXPECT_THROW(store.set("enable_prefix_caching", "maybe", config_source::command_line), config_error);
}

TEST(ConfigStore, ByteSuffixes) {
  auto store = engine_store();
  store.set("swap_space_bytes", "2G", config_source::command_line);
  EXPECT_EQ(store.get_int("swap_space_bytes"), std::int64_t{2} << 30);
  store.set("kv_cache_bytes", "512M", config_source::command_line);
  EXPECT_EQ(store.get_int("kv_cache_bytes"), std::int64_t{512} << 20);
}

TEST(ConfigStore, HigherSourcesWinRegardlessOfOrder) {
  auto store = engine_store();
  store.set("max_num_seqs", "64", config_source::command_line);
  store.set("max_num_seqs", "32", config_source::file);
  EXPECT_EQ(store.get_int("max_num_seqs"), 64);
  EXPECT_EQ(store.source_of("max_num_seqs"), config_source::command_line);
  store.set("max_num_seqs", "16", config_source::runtime);
  EXPECT_EQ(store.get_int("max_num_seqs"), 16);
}

TEST(ConfigStore, RuntimeChangesOnlyLiveKnobs) {
  auto store = engine_store();
  store.set("policy", "mlfq", config_source::runtime);
  EXPECT_EQ(store.get_text("policy"), "mlfq");
  EXPECT_THROW(store.set("block_size", "32", config_source::runtime), config_error);
}

TEST(ConfigStore, FileAndEnvironmentLayers) {
  const auto path = std::filesystem::temp_directory_path() / "troupe_config_test.json";
  std::ofstream(path) << R"({"max_num_seqs": 8, "policy": "fair", "enable_prefix_caching": false})";
  auto store = engine_store();
  store.load_file(path);
  EXPECT_EQ(store.get_int("max_num_seqs"), 8);
  EXPECT_FALSE(store.get_bool("enable_prefix_caching"));
  ::setenv("TROUPE_POLICY", "priority", 1);
  store.load_environment();
  ::unsetenv("TROUPE_POLICY");
  EXPECT_EQ(store.get_text("policy"), "priority");
  EXPECT_EQ(store.source_of("policy"), config_source::environment);

  std::ofstream(path) << R"({"max_num_seqs": [1]})";
  EXPECT_THROW(store.load_file(path), config_error);
  std::ofstream(path) << R"({"max_num_seqs": )";
  EXPECT_THROW(store.load_file(path), config_error);
  std::filesystem::remove(path);
}

TEST(ConfigStore, ProblemsNameTheKnobAndChangeNothing) {
  auto store = engine_store();
  EXPECT_EQ(store.problem("max_num_seqs", "64"), "");
  EXPECT_EQ(store.problem("max_num_seqs", "0"), "knob 'max_num_seqs': 0 is outside [1, 65536]");
  EXPECT_EQ(store.problem("policy", "lifo"),
            "knob 'policy': 'lifo' is not one of fcfs, priority, mlfq, deadline, fair");
  EXPECT_EQ(store.problem("enable_prefix_caching", "maybe"),
            "knob 'enable_prefix_caching': 'maybe' is not a boolean (true/false)");
  EXPECT_EQ(store.problem("no_such_knob", "1"), "unknown knob 'no_such_knob'");
  EXPECT_EQ(store.get_int("max_num_seqs"), 256) << "nothing changed";
  EXPECT_EQ(knob_defaults().problem("port", "70000"), "knob 'port': 70000 is outside [0, 65535]");
}

// A bound on prompts awaiting preparation below one completions request's
// prompts would refuse every full request, however idle the engine: the
// command line refuses such a value, naming the knob and its range.
TEST(ConfigStore, ThePromptBoundsHoldOneFullRequest) {
  EXPECT_EQ(max_prompts_per_request, 64);
  for (const char* name : {"max_pending_prompts", "max_pending_prompts_per_connection"}) {
    auto store = engine_store();
    try {
      store.set(name, "63", config_source::command_line);
      ADD_FAILURE() << name << ": 63 was accepted";
    } catch (const config_error& e) {
      EXPECT_EQ(std::string(e.what()),
                "knob '" + std::string(name) + "' (from command_line): 63 is outside [64, 16777216]");
    }
    store.set(name, "64", config_source::command_line);
    EXPECT_EQ(store.get_int(name), 64) << name;
  }
}

TEST(ConfigStore, KnobDefaultsHoldEveryKnobOnce) {
  const config_store& defaults = knob_defaults();
  EXPECT_EQ(defaults.specs().size(), engine_knobs().size() + server_knobs().size());
  for (const knob_spec& knob : all_knobs()) EXPECT_EQ(defaults.source_of(knob.name), config_source::defaults);
  EXPECT_EQ(defaults.get_int("port"), 8000);
  EXPECT_EQ(&defaults, &knob_defaults()) << "built once";
}

TEST(ConfigStore, TheMlfqQuantumIsALiveEngineKnob) {
  auto store = engine_store();
  const knob_spec& quantum = store.spec("mlfq_quantum");
  EXPECT_TRUE(quantum.live);
  EXPECT_EQ(quantum.group, "engine");
  EXPECT_EQ(quantum.unit, "steps");
  EXPECT_EQ(store.get_int("mlfq_quantum"), 16);
  store.set("mlfq_quantum", "4", config_source::runtime);
  EXPECT_EQ(store.get_int("mlfq_quantum"), 4);
  EXPECT_THROW(store.set("mlfq_quantum", "0", config_source::runtime), config_error);
}

TEST(ConfigStore, RequestLimitsAndSamplingDefaultsAreLive) {
  config_store store(all_knobs());
  for (const char* name : {"max_n", "max_stop_strings", "max_request_output_tokens", "min_request_priority",
                           "default_temperature", "default_top_p", "default_top_k", "default_max_tokens"}) {
    EXPECT_TRUE(store.spec(name).live) << name;
  }
  EXPECT_EQ(store.spec("default_temperature").group, "server");
  EXPECT_DOUBLE_EQ(store.get_real("default_temperature"), -1.0) << "unset by default";
  EXPECT_THROW(store.set("default_temperature", "2.5", config_source::runtime), config_error);
  EXPECT_FALSE(store.spec("admin_port").live);
  EXPECT_EQ(store.get_int("admin_port"), -1) << "admin on the main port by default";
}

TEST(ConfigStore, FlagAndEnvironmentNames) {
  EXPECT_EQ(knob_flag("max_num_batched_tokens"), "--max-num-batched-tokens");
  EXPECT_EQ(knob_env_var("max_num_seqs"), "TROUPE_MAX_NUM_SEQS");
}

}  // namespace
}  // namespace troupe
