#pragma once
// How many KV blocks the device pool and the host swap pool get, decided
// once at start from the knobs (bytes, or a fraction of memory) and checked
// against the memory the process can actually use, so an impossible size
// fails at start with a message naming the knob, not later under load.
// Pure apart from host_memory(), which reads /proc and the cgroup.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace troupe {

/// Memory the process may use, in bytes.
struct memory_capacity {
  std::int64_t total = 0;      ///< physical memory, or the cgroup limit when lower
  std::int64_t available = 0;  ///< what can still be allocated without swapping or the OOM killer
};

/// What the knobs ask for and what one block costs.
struct kv_pool_request {
  std::int64_t device_bytes = 0;       ///< kv_cache_bytes (0: unset)
  double device_fraction = 0;          ///< kv_cache_memory_fraction (0: unset; wins over bytes)
  std::int64_t host_bytes = 0;         ///< swap_space_bytes
  double host_fraction = 0;            ///< swap_space_memory_fraction (0: unset; wins over bytes)
  std::int64_t block_bytes = 0;        ///< one KV block, all layers, keys and values
  std::int64_t auto_device_bytes = 0;  ///< the size used when neither device knob is set
  bool device_is_host = true;          ///< the device pool lives in host memory (cpu backend)
};

/// The pools' sizes in blocks and bytes.
struct kv_pool_sizes {
  std::int64_t device_blocks = 0;
  std::int64_t host_blocks = 0;
  std::int64_t device_bytes = 0;  ///< device_blocks × block_bytes
  std::int64_t host_bytes = 0;    ///< host_blocks × block_bytes
};

/// Resolves the knobs into pool sizes. `host` bounds every pool in host
/// memory (the host pool, and the device pool when device_is_host);
/// `device` (the accelerator's memory, when known) resolves the device
/// fraction otherwise. Throws std::runtime_error naming the knob when a
/// pool would hold no block or does not fit in the memory available.
kv_pool_sizes size_kv_pools(const kv_pool_request& request, const memory_capacity& host,
                            const std::optional<memory_capacity>& device = std::nullopt);

/// MemTotal and MemAvailable of a /proc/meminfo text, in bytes; nullopt when either is missing.
std::optional<memory_capacity> parse_meminfo(std::string_view meminfo);

/// A cgroup v2 memory.max text in bytes; nullopt for "max" or garbage.
std::optional<std::int64_t> parse_cgroup_limit(std::string_view text);

/// This process's host memory: /proc/meminfo, lowered by the cgroup v2 limit
/// (memory.max minus memory.current) when one is set.
memory_capacity host_memory();

/// `bytes` as "1.50 GiB" / "12.0 MiB" for messages and logs.
std::string format_bytes(std::int64_t bytes);

}  // namespace troupe
