#pragma once
// A fixed pool of worker threads owned by the CPU backend. The calling thread
// takes part in every job; idle workers spin briefly (so back-to-back ops in
// a decode step dispatch in well under a microsecond) and then sleep on a
// futex, so an idle engine costs no CPU.

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "base/parallel_blocks.hpp"

namespace troupe::cpu {

using ::troupe::available_cores;  // base/parallel_blocks.hpp

class thread_pool {
 public:
  /// `threads` counts the caller too: 1 runs everything inline; 0 = available_cores().
  explicit thread_pool(int threads);
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  /// Threads that execute a job (workers + the caller).
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  /// Runs fn(task, thread) for every task in [0, tasks), tasks claimed
  /// dynamically; `thread` is in [0, size()) and unique among concurrent
  /// calls, so it can index per-thread scratch. Returns when all are done;
  /// rethrows the first exception a task threw. Nested calls run inline.
  template <class F>
  void parallel_for(std::int64_t tasks, F&& fn) {
    using fn_type = std::remove_reference_t<F>;
    run(
        tasks, [](void* context, std::int64_t task, int thread) { (*static_cast<fn_type*>(context))(task, thread); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

  /// Type-erased form of parallel_for.
  void run(std::int64_t tasks, void (*fn)(void*, std::int64_t, int), void* context);

 private:
  // A job's description, in one of two slots chosen by the job id's parity:
  // the caller fills the next job's slot while a late worker may still be
  // reading the previous one.
  struct job_slot {
    std::atomic<void (*)(void*, std::int64_t, int)> fn{nullptr};
    std::atomic<void*> context{nullptr};
    std::atomic<std::int64_t> tasks{0};
  };

  void worker_loop(int thread);
  void execute_tasks(int thread);
  void wait_for_job(std::uint64_t seen);

  std::vector<std::thread> workers_;
  job_slot slots_[2];
  // (job id << 32) | next unclaimed task. Claiming by compare-exchange on the
  // whole word means a worker that wakes late can never claim a task of a
  // newer job, so the caller waits only for claimed tasks, not for workers.
  std::atomic<std::uint64_t> claim_{0};
  std::atomic<std::int64_t> done_{0};
  std::uint32_t job_id_ = 0;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stopping_{false};
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace troupe::cpu
