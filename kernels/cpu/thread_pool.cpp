#include "kernels/cpu/thread_pool.hpp"

#include <chrono>
#include <utility>

namespace troupe::cpu {

namespace {

// True inside a pool task: a nested parallel_for then runs inline instead of
// deadlocking on the pool it is part of.
thread_local bool inside_task = false;

// How long an idle worker polls before sleeping. Long enough to bridge the
// gaps between the ops of one forward pass, short enough not to burn a core
// shared with other work between steps.
constexpr auto spin_budget = std::chrono::microseconds(100);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

thread_pool::thread_pool(int threads) {
  const int total = threads <= 0 ? available_cores() : threads;
  workers_.reserve(static_cast<std::size_t>(total - 1));
  for (int t = 1; t < total; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

thread_pool::~thread_pool() {
  stopping_.store(true, std::memory_order_seq_cst);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  generation_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void thread_pool::run(std::int64_t tasks, void (*fn)(void*, std::int64_t, int), void* context) {
  if (tasks <= 0) return;
  if (workers_.empty() || tasks == 1 || inside_task) {
    const bool was_inside = inside_task;
    inside_task = true;
    try {
      for (std::int64_t task = 0; task < tasks; ++task) fn(context, task, 0);
    } catch (...) {
      inside_task = was_inside;
      throw;
    }
    inside_task = was_inside;
    return;
  }
  ++job_id_;
  job_slot& slot = slots_[job_id_ & 1u];
  slot.fn.store(fn, std::memory_order_relaxed);
  slot.context.store(context, std::memory_order_relaxed);
  slot.tasks.store(tasks, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  claim_.store(static_cast<std::uint64_t>(job_id_) << 32, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
  execute_tasks(0);
  const auto start = std::chrono::steady_clock::now();
  for (int spins = 0; done_.load(std::memory_order_acquire) != tasks; ++spins) {
    if (spins < 4096 || std::chrono::steady_clock::now() - start < spin_budget) {
      cpu_relax();
    } else {
      std::this_thread::yield();  // a claimed task's thread was descheduled
    }
  }
  std::lock_guard lock(error_mutex_);
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void thread_pool::execute_tasks(int thread) {
  inside_task = true;
  std::uint64_t word = claim_.load(std::memory_order_acquire);
  for (;;) {
    const auto job = static_cast<std::uint32_t>(word >> 32);
    const std::int64_t task = static_cast<std::int64_t>(word & 0xffffffffu);
    const job_slot& slot = slots_[job & 1u];
    // Read before claiming: if the claim below succeeds the job was still
    // current, so its slot had not been reused and these values are its own.
    const std::int64_t tasks = slot.tasks.load(std::memory_order_relaxed);
    const auto fn = slot.fn.load(std::memory_order_relaxed);
    void* const context = slot.context.load(std::memory_order_relaxed);
    if (task >= tasks) break;
    if (!claim_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    try {
      fn(context, task, thread);
    } catch (...) {
      std::lock_guard lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
    done_.fetch_add(1, std::memory_order_acq_rel);
    word = claim_.load(std::memory_order_acquire);
  }
  inside_task = false;
}

void thread_pool::wait_for_job(std::uint64_t seen) {
  auto deadline = std::chrono::steady_clock::now() + spin_budget;
  for (int spins = 0;; ++spins) {
    if (generation_.load(std::memory_order_acquire) != seen) return;
    if ((spins & 255) != 255 || std::chrono::steady_clock::now() < deadline) {
      cpu_relax();
      continue;
    }
    // Dekker-style handshake with run(): either run() sees sleepers_ > 0 and
    // notifies, or this load sees the new generation.
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    if (generation_.load(std::memory_order_seq_cst) == seen) generation_.wait(seen, std::memory_order_seq_cst);
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
    deadline = std::chrono::steady_clock::now() + spin_budget;
  }
}

void thread_pool::worker_loop(int thread) {
  std::uint64_t seen = 0;
  for (;;) {
    wait_for_job(seen);
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_.load(std::memory_order_acquire)) return;
    execute_tasks(thread);
  }
}

}  // namespace troupe::cpu
