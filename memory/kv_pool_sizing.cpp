#include "memory/kv_pool_sizing.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace troupe {

namespace {

/// The number after `key` in a meminfo text, in bytes (meminfo counts kB).
std::optional<std::int64_t> meminfo_field(std::string_view text, std::string_view key) {
  std::size_t at = 0;
  while ((at = text.find(key, at)) != std::string_view::npos) {
    const bool line_start = at == 0 || text[at - 1] == '\n';
    at += key.size();
    if (!line_start || at >= text.size() || text[at] != ':') continue;
    std::size_t begin = text.find_first_not_of(" \t", at + 1);
    if (begin == std::string_view::npos) return std::nullopt;
    std::int64_t kib = 0;
    const auto [end, error] = std::from_chars(text.data() + begin, text.data() + text.size(), kib);
    if (error != std::errc{} || kib < 0 || kib > (std::int64_t{1} << 52)) return std::nullopt;
    return kib * 1024;
  }
  return std::nullopt;
}

std::string read_text(const char* path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Blocks of a pool of `bytes`, or an error naming `knob` when it holds none.
std::int64_t blocks_of(std::int64_t bytes, std::int64_t block_bytes, const std::string& knob) {
  const std::int64_t blocks = bytes / block_bytes;
  if (blocks <= 0) {
    throw std::runtime_error(knob + ": " + format_bytes(bytes) + " holds no KV block (one block is " +
                             format_bytes(block_bytes) + ")");
  }
  return blocks;
}

std::string fraction_text(const char* knob, double fraction, std::int64_t total) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", fraction);
  return std::string(knob) + " " + text + " of " + format_bytes(total);
}

std::int64_t fraction_of(double fraction, std::int64_t total) {
  return static_cast<std::int64_t>(std::floor(fraction * static_cast<double>(total)));
}

}  // namespace

kv_pool_sizes size_kv_pools(const kv_pool_request& request, const memory_capacity& host,
                            const std::optional<memory_capacity>& device) {
  if (request.block_bytes <= 0) throw std::invalid_argument("size_kv_pools: block_bytes must be positive");
  kv_pool_sizes sizes;
  std::string device_knob = "kv_cache_bytes";
  std::int64_t device_bytes = request.device_bytes > 0 ? request.device_bytes : request.auto_device_bytes;
  if (request.device_fraction > 0) {
    if (!request.device_is_host && !device) {
      throw std::runtime_error(
          "kv_cache_memory_fraction: this device does not report its memory size; set kv_cache_bytes instead");
    }
    const memory_capacity& memory = request.device_is_host ? host : *device;
    device_knob = fraction_text("kv_cache_memory_fraction", request.device_fraction, memory.total);
    device_bytes = fraction_of(request.device_fraction, memory.total);
  } else if (request.device_bytes <= 0) {
    device_knob = "the automatic KV pool size";
  }
  sizes.device_blocks = blocks_of(device_bytes, request.block_bytes, device_knob);
  sizes.device_bytes = sizes.device_blocks * request.block_bytes;

  std::string host_knob = "swap_space_bytes";
  std::int64_t host_bytes = request.host_bytes;
  if (request.host_fraction > 0) {
    host_knob = fraction_text("swap_space_memory_fraction", request.host_fraction, host.total);
    host_bytes = fraction_of(request.host_fraction, host.total);
  }
  if (host_bytes > 0 || request.host_fraction > 0) {
    sizes.host_blocks = blocks_of(host_bytes, request.block_bytes, host_knob);
    sizes.host_bytes = sizes.host_blocks * request.block_bytes;
  }

  const std::int64_t in_host = sizes.host_bytes + (request.device_is_host ? sizes.device_bytes : 0);
  if (in_host > host.available) {
    throw std::runtime_error(
        "KV pools do not fit in memory: " +
        (request.device_is_host ? "device pool " + format_bytes(sizes.device_bytes) + " (" + device_knob + ") + "
                                : std::string()) +
        "host swap pool " + format_bytes(sizes.host_bytes) + " (" + host_knob + ") = " + format_bytes(in_host) +
        ", but only " + format_bytes(host.available) + " is available; lower the knobs");
  }
  if (!request.device_is_host && device && sizes.device_bytes > device->available) {
    throw std::runtime_error("KV pool does not fit in device memory: " + format_bytes(sizes.device_bytes) + " (" +
                             device_knob + "), but only " + format_bytes(device->available) + " is free");
  }
  return sizes;
}

std::optional<memory_capacity> parse_meminfo(std::string_view meminfo) {
  const auto total = meminfo_field(meminfo, "MemTotal");
  const auto available = meminfo_field(meminfo, "MemAvailable");
  if (!total || !available) return std::nullopt;
  return memory_capacity{*total, *available};
}

std::optional<std::int64_t> parse_cgroup_limit(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  std::int64_t bytes = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), bytes);
  if (error != std::errc{} || end != text.data() + text.size() || bytes < 0) return std::nullopt;
  return bytes;
}

memory_capacity host_memory() {
  memory_capacity memory = parse_meminfo(read_text("/proc/meminfo")).value_or(memory_capacity{});
  const auto limit = parse_cgroup_limit(read_text("/sys/fs/cgroup/memory.max"));
  if (limit) {
    const std::int64_t used = parse_cgroup_limit(read_text("/sys/fs/cgroup/memory.current")).value_or(0);
    memory.total = std::min(memory.total, *limit);
    memory.available = std::min(memory.available, std::max<std::int64_t>(0, *limit - used));
  }
  return memory;
}

std::string format_bytes(std::int64_t bytes) {
  char text[32];
  const double value = static_cast<double>(bytes);
  if (bytes >= (std::int64_t{1} << 30)) {
    std::snprintf(text, sizeof text, "%.2f GiB", value / (1 << 30));
  } else if (bytes >= (std::int64_t{1} << 20)) {
    std::snprintf(text, sizeof text, "%.1f MiB", value / (1 << 20));
  } else {
    std::snprintf(text, sizeof text, "%lld bytes", static_cast<long long>(bytes));
  }
  return text;
}

}  // namespace troupe
