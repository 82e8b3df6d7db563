#pragma once
// The machine's memory copy bandwidth, the yardstick for decode speed
// (decode streams every weight once per step).

#include <cstddef>

namespace troupe::cpu {

/// Copy bandwidth in GB/s (1e9 bytes/s), bytes read plus bytes written.
struct copy_bandwidth {
  double one_thread_gbps = 0.0;
  double all_threads_gbps = 0.0;
  int threads = 0;  ///< threads used for all_threads_gbps
};

/// Times memcpy of `bytes` between two pre-faulted buffers, best of
/// `repeats`, on one thread and on `threads` threads (0 = all cores).
copy_bandwidth measure_copy_bandwidth(int threads = 0, std::size_t bytes = std::size_t{1} << 30, int repeats = 3);

}  // namespace troupe::cpu
