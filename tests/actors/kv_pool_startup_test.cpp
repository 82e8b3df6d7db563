// The KV pools are sized, allocated and made resident when the engine
// starts: an impossible size is refused by engine::start naming the knob,
// and a possible one is in resident memory before the first request.

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "engine_fixture.hpp"
#include "memory/kv_pool_sizing.hpp"

namespace troupe::testing {
namespace {

/// This process's resident set, in bytes (VmRSS of /proc/self/status).
std::int64_t resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      std::int64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
  }
  return -1;
}

std::string start_error(const engine_config& config) {
  try {
    engine::start(config);
  } catch (const std::runtime_error& error) {
    return error.what();
  }
  return "";
}

TEST(KvPoolStartup, AnImpossibleDevicePoolFailsAtStartNamingTheKnob) {
  engine_config config = tiny_engine_config();
  config.kv_cache_bytes = host_memory().total + (std::int64_t{1} << 30);
  const std::string message = start_error(config);
  EXPECT_NE(message.find("do not fit in memory"), std::string::npos) << message;
  EXPECT_NE(message.find("kv_cache_bytes"), std::string::npos) << message;
}

TEST(KvPoolStartup, AnImpossibleSwapFractionFailsAtStart) {
  engine_config config = tiny_engine_config();
  config.swap_space_memory_fraction = 0.95;
  config.kv_cache_memory_fraction = 0.5;
  const std::string message = start_error(config);
  EXPECT_NE(message.find("swap_space_memory_fraction"), std::string::npos) << message;
  EXPECT_NE(message.find("kv_cache_memory_fraction"), std::string::npos) << message;
}

TEST(KvPoolStartup, PoolsAreResidentAndReportedFromTheStart) {
  constexpr std::int64_t pool_bytes = std::int64_t{192} << 20;
  engine_config config = tiny_engine_config();
  config.kv_cache_bytes = pool_bytes;
  config.swap_space_bytes = pool_bytes;
  const std::int64_t before = resident_bytes();
  auto engine = engine::start(config);
  const std::int64_t grown = resident_bytes() - before;
  // Both pools are in memory before any request (the model itself is tiny).
  EXPECT_GE(grown, 2 * pool_bytes * 9 / 10) << "resident memory grew by " << grown << " bytes";
  const engine_stats stats = engine->stats();
  EXPECT_EQ(stats.kv_pool_device_bytes, engine->info().kv_pool_device_bytes);
  EXPECT_GT(stats.kv_pool_device_bytes, pool_bytes * 9 / 10);
  EXPECT_LE(stats.kv_pool_device_bytes, pool_bytes);
  EXPECT_GT(stats.kv_pool_host_bytes, pool_bytes * 9 / 10);
  EXPECT_EQ(stats.kv_pool_device_bytes / stats.kv_blocks_total * stats.kv_blocks_total, stats.kv_pool_device_bytes);
}

}  // namespace
}  // namespace troupe::testing
