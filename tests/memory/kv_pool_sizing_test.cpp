// KV pool sizing at start: bytes or a fraction of memory, refused with the
// knob named when a pool holds no block or does not fit in what is available.

#include "memory/kv_pool_sizing.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace troupe {
namespace {

constexpr std::int64_t mib = std::int64_t{1} << 20;
constexpr std::int64_t gib = std::int64_t{1} << 30;

kv_pool_request request_of(std::int64_t device_bytes, std::int64_t host_bytes) {
  kv_pool_request request;
  request.device_bytes = device_bytes;
  request.host_bytes = host_bytes;
  request.block_bytes = mib;
  request.auto_device_bytes = 64 * mib;
  return request;
}

std::string error_of(const kv_pool_request& request, const memory_capacity& host) {
  try {
    size_kv_pools(request, host);
  } catch (const std::runtime_error& error) {
    return error.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(KvPoolSizing, BytesBecomeWholeBlocks) {
  const kv_pool_sizes sizes = size_kv_pools(request_of(10 * mib + 5, 3 * mib), {16 * gib, 8 * gib});
  EXPECT_EQ(sizes.device_blocks, 10);
  EXPECT_EQ(sizes.device_bytes, 10 * mib);
  EXPECT_EQ(sizes.host_blocks, 3);
  EXPECT_EQ(sizes.host_bytes, 3 * mib);
}

TEST(KvPoolSizing, UnsetDeviceBytesUseTheAutomaticSize) {
  const kv_pool_sizes sizes = size_kv_pools(request_of(0, 0), {16 * gib, 8 * gib});
  EXPECT_EQ(sizes.device_blocks, 64);
  EXPECT_EQ(sizes.host_blocks, 0);
  EXPECT_EQ(sizes.host_bytes, 0);
}

TEST(KvPoolSizing, FractionsOfMemoryWinOverBytes) {
  kv_pool_request request = request_of(10 * mib, 3 * mib);
  request.device_fraction = 0.25;
  request.host_fraction = 0.125;
  const kv_pool_sizes sizes = size_kv_pools(request, {1 * gib, 1 * gib});
  EXPECT_EQ(sizes.device_bytes, 256 * mib);
  EXPECT_EQ(sizes.host_bytes, 128 * mib);
}

TEST(KvPoolSizing, DeviceFractionUsesTheDevicesMemoryWhenTheDeviceIsNotHost) {
  kv_pool_request request = request_of(0, 0);
  request.device_is_host = false;
  request.device_fraction = 0.5;
  const kv_pool_sizes sizes = size_kv_pools(request, {1 * gib, 1 * gib}, memory_capacity{8 * gib, 8 * gib});
  EXPECT_EQ(sizes.device_bytes, 4 * gib);
  // Without the device's size the fraction cannot be resolved: refused, naming the alternative.
  EXPECT_NE(error_of(request, {1 * gib, 1 * gib}).find("set kv_cache_bytes"), std::string::npos);
}

TEST(KvPoolSizing, PoolsInHostMemoryMustFitWhatIsAvailable) {
  const std::string message = error_of(request_of(600 * mib, 500 * mib), {4 * gib, 1 * gib});
  EXPECT_NE(message.find("do not fit in memory"), std::string::npos) << message;
  EXPECT_NE(message.find("kv_cache_bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("swap_space_bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("1.00 GiB is available"), std::string::npos) << message;
  // The same pools fit when there is room, and a device pool on an accelerator does not count against host memory.
  EXPECT_NO_THROW(size_kv_pools(request_of(600 * mib, 500 * mib), {4 * gib, 2 * gib}));
  kv_pool_request accelerator = request_of(600 * mib, 500 * mib);
  accelerator.device_is_host = false;
  EXPECT_NO_THROW(size_kv_pools(accelerator, {4 * gib, 1 * gib}));
}

TEST(KvPoolSizing, DevicePoolMustFitTheDevicesFreeMemory) {
  kv_pool_request request = request_of(6 * gib, 0);
  request.device_is_host = false;
  EXPECT_THROW(size_kv_pools(request, {64 * gib, 64 * gib}, memory_capacity{8 * gib, 4 * gib}), std::runtime_error);
}

TEST(KvPoolSizing, APoolSmallerThanOneBlockIsRefusedNamingTheKnob) {
  const std::string device = error_of(request_of(mib - 1, 0), {4 * gib, 4 * gib});
  EXPECT_NE(device.find("kv_cache_bytes"), std::string::npos) << device;
  EXPECT_NE(device.find("holds no KV block"), std::string::npos) << device;
  kv_pool_request host = request_of(mib, 0);
  host.host_fraction = 1e-12;
  EXPECT_NE(error_of(host, {4 * gib, 4 * gib}).find("swap_space_memory_fraction"), std::string::npos);
}

TEST(KvPoolSizing, ParsesMeminfoAndCgroupLimits) {
  const auto memory = parse_meminfo("MemTotal:       16384 kB\nMemFree:  100 kB\nMemAvailable:    8192 kB\n");
  ASSERT_TRUE(memory.has_value());
  EXPECT_EQ(memory->total, 16384 * 1024);
  EXPECT_EQ(memory->available, 8192 * 1024);
  EXPECT_FALSE(parse_meminfo("MemTotal: 5 kB\n").has_value());
  EXPECT_FALSE(parse_meminfo("XMemTotal: 5 kB\nMemAvailable: 1 kB\n").has_value());
  EXPECT_EQ(parse_cgroup_limit("1073741824\n"), gib);
  EXPECT_FALSE(parse_cgroup_limit("max\n").has_value());
  EXPECT_FALSE(parse_cgroup_limit("").has_value());
  EXPECT_FALSE(parse_cgroup_limit("12abc").has_value());
}

TEST(KvPoolSizing, ThisMachinesMemoryIsReadable) {
  const memory_capacity memory = host_memory();
  EXPECT_GT(memory.total, 0);
  EXPECT_GT(memory.available, 0);
  EXPECT_LE(memory.available, memory.total);
}

TEST(KvPoolSizing, FormatsBytesForMessages) {
  EXPECT_EQ(format_bytes(512), "512 bytes");
  EXPECT_EQ(format_bytes(3 * mib / 2), "1.5 MiB");
  EXPECT_EQ(format_bytes(3 * gib / 2), "1.50 GiB");
}

}  // namespace
}  // namespace troupe
