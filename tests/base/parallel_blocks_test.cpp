// parallel_blocks: every index once, in blocks of the asked size, and the
// error a sequential loop would have met first, however the threads race.

#include "base/parallel_blocks.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace troupe {
namespace {

TEST(ParallelBlocks, EveryIndexRunsOnceInBlocksOfTheAskedSize) {
  for (int threads : {1, 2, 5}) {
    for (std::int64_t count : {1, 63, 64, 65, 1000}) {
      std::vector<std::atomic<int>> seen(static_cast<std::size_t>(count));
      std::mutex mutex;
      std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
      parallel_blocks(
          count, 64,
          [&](std::int64_t begin, std::int64_t end) {
            for (std::int64_t i = begin; i < end; ++i) ++seen[static_cast<std::size_t>(i)];
            const std::lock_guard lock(mutex);
            ranges.emplace_back(begin, end);
          },
          threads);
      for (std::int64_t i = 0; i < count; ++i) EXPECT_EQ(seen[static_cast<std::size_t>(i)], 1) << i;
      for (const auto& [begin, end] : ranges) {
        EXPECT_EQ(begin % 64, 0);
        EXPECT_EQ(end, std::min(count, begin + 64));
      }
    }
  }
}

TEST(ParallelBlocks, TheLowestFailingBlocksErrorIsTheOneRethrown) {
  // Blocks 3 and 7 of 40 throw; block 7 throws at once while block 3 works
  // first, so the higher failure comes first in time.
  for (int threads : {1, 2, 4, 8}) {
    for (int round = 0; round < 20; ++round) {
      std::atomic<int> ran_below_three{0};
      try {
        parallel_blocks(
            40, 1,
            [&](std::int64_t begin, std::int64_t) {
              if (begin < 3) ++ran_below_three;
              if (begin == 3) {
                std::this_thread::sleep_for(std::chrono::microseconds(200));
                throw std::runtime_error("block 3");
              }
              if (begin == 7) throw std::runtime_error("block 7");
            },
            threads);
        FAIL() << "no exception";
      } catch (const std::runtime_error& error) {
        EXPECT_EQ(std::string(error.what()), "block 3") << threads << " threads";
      }
      EXPECT_EQ(ran_below_three, 3);
    }
  }
}

TEST(ParallelBlocks, NothingToDoRunsNothing) {
  bool ran = false;
  parallel_blocks(0, 8, [&](std::int64_t, std::int64_t) { ran = true; });
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace troupe
