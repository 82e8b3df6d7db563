// The CPU backend's thread pool: every task runs exactly once, exceptions
// reach the caller, nested calls run inline, and back-to-back jobs stay correct.

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/thread_pool.hpp"

namespace troupe::cpu {
namespace {

TEST(ThreadPool, RunsEveryTaskExactlyOnceWithValidThreadIndices) {
  for (int threads : {1, 2, 3, 5}) {
    thread_pool pool(threads);
    ASSERT_EQ(pool.size(), threads);
    for (std::int64_t tasks : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(tasks));
      std::atomic<bool> bad_thread{false};
      pool.parallel_for(tasks, [&](std::int64_t task, int thread) {
        hits[static_cast<std::size_t>(task)].fetch_add(1);
        if (thread < 0 || thread >= pool.size()) bad_thread = true;
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1);
      EXPECT_FALSE(bad_thread.load());
    }
  }
}

TEST(ThreadPool, ManyBackToBackJobsLoseNothing) {
  thread_pool pool(3);
  std::atomic<std::int64_t> sum{0};
  for (int job = 0; job < 20000; ++job) pool.parallel_for(3, [&](std::int64_t task, int) { sum += task + 1; });
  EXPECT_EQ(sum.load(), 20000 * 6);
}

TEST(ThreadPool, RethrowsATaskExceptionAndStaysUsable) {
  thread_pool pool(2);
  EXPECT_THROW(pool.parallel_for(50,
                                 [](std::int64_t task, int) {
                                   if (task == 17) throw std::runtime_error("task 17 failed");
                                 }),
               std::runtime_error);
  std::atomic<int> count{0};
  pool.parallel_for(10, [&](std::int64_t, int) { ++count; });
  EXPECT_EQ(count.load(), 10);
}

TEST(ThreadPool, NestedCallsRunInline) {
  thread_pool pool(2);
  std::atomic<int> inner{0};
  pool.parallel_for(4, [&](std::int64_t, int) { pool.parallel_for(3, [&](std::int64_t, int) { ++inner; }); });
  EXPECT_EQ(inner.load(), 12);
}

TEST(ThreadPool, ZeroThreadsMeansEveryAvailableCore) {
  thread_pool pool(0);
  EXPECT_EQ(pool.size(), available_cores());
}

}  // namespace
}  // namespace troupe::cpu
