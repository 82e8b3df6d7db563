#pragma once
// Load-time work spread over the machine's cores without a pool: the model
// loader's expansions of quantised checkpoints run once per projection, so
// threads started per call cost nothing next to them.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

namespace troupe {

/// Logical CPUs this process may run on (its affinity mask, so a container's
/// CPU limit counts), at least 1.
int available_cores();

/// Runs fn(begin, end) for the blocks [b · block, min((b + 1) · block,
/// count)) of [0, count) on up to `threads` threads (0: available_cores(); the
/// caller is one of them), blocks claimed in order. Once a block throws, no
/// block above it starts, every block below it still runs, and the
/// exception of the lowest block that threw is rethrown: the one a
/// sequential loop would have stopped at.
template <class F>
void parallel_blocks(std::int64_t count, std::int64_t block, F&& fn, int threads = 0) {
  if (count <= 0) return;
  const std::int64_t blocks = (count + block - 1) / block;
  const std::int64_t workers = std::min<std::int64_t>(blocks, threads > 0 ? threads : available_cores());
  std::atomic<std::int64_t> next{0}, lowest_failure{blocks};
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(blocks));
  auto work = [&] {
    for (std::int64_t b = next++; b < blocks; b = next++) {
      if (b > lowest_failure) continue;  // a lower block failed; blocks below it still run
      try {
        fn(b * block, std::min(count, (b + 1) * block));
      } catch (...) {
        errors[static_cast<std::size_t>(b)] = std::current_exception();
        std::int64_t lowest = lowest_failure;
        while (b < lowest && !lowest_failure.compare_exchange_weak(lowest, b)) {
        }
      }
    }
  };
  std::vector<std::jthread> helpers;
  helpers.reserve(static_cast<std::size_t>(workers - 1));
  for (std::int64_t t = 1; t < workers; ++t) helpers.emplace_back(work);
  work();
  helpers.clear();  // joins
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
}

}  // namespace troupe
