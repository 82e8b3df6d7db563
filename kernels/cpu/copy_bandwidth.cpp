#include "kernels/cpu/copy_bandwidth.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "kernels/cpu/cpu_memory.hpp"
#include "kernels/cpu/thread_pool.hpp"

namespace troupe::cpu {

namespace {

double best_seconds(thread_pool& pool, char* dst, const char* src, std::size_t bytes, int repeats) {
  const auto tasks = static_cast<std::int64_t>(pool.size());
  const std::size_t share = (bytes / static_cast<std::size_t>(tasks) + 4095) / 4096 * 4096;
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    pool.parallel_for(tasks, [&](std::int64_t task, int) {
      const std::size_t begin = std::min(bytes, static_cast<std::size_t>(task) * share);
      std::memcpy(dst + begin, src + begin, std::min(share, bytes - begin));
    });
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace

copy_bandwidth measure_copy_bandwidth(int threads, std::size_t bytes, int repeats) {
  auto* src = static_cast<char*>(allocate_host(bytes));
  auto* dst = static_cast<char*>(allocate_host(bytes));
  copy_bandwidth result;
  {
    thread_pool pool(threads);
    result.threads = pool.size();
    // Fault every page in first, in parallel, so the timing sees only copying.
    pool.parallel_for(pool.size(), [&](std::int64_t task, int) {
      const std::size_t share = bytes / static_cast<std::size_t>(pool.size()) + 1;
      const std::size_t begin = std::min(bytes, static_cast<std::size_t>(task) * share);
      std::memset(src + begin, 1, std::min(share, bytes - begin));
      std::memset(dst + begin, 0, std::min(share, bytes - begin));
    });
    thread_pool single(1);
    const double moved = 2.0 * static_cast<double>(bytes);
    result.one_thread_gbps = moved / best_seconds(single, dst, src, bytes, repeats) / 1e9;
    result.all_threads_gbps = moved / best_seconds(pool, dst, src, bytes, repeats) / 1e9;
  }
  free_host(src, bytes);
  free_host(dst, bytes);
  return result;
}

}  // namespace troupe::cpu
