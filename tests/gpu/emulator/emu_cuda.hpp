#pragma once
// A small CPU emulator for the CUDA kernels (force-included before each
// transformed .cu, see transform.py). Every CUDA thread of a block is a
// fiber (ucontext) on the calling OS thread; blocks run one after another,
// and launches from several OS threads take turns, a whole grid at a time.
// __syncthreads and warp-synchronous operations switch fibers, and the order
// in which runnable fibers resume is shuffled at every barrier, so a missing
// barrier tends to change results. A barrier no fiber can pass aborts with
// "deadlock". WMMA fragments hold the whole 16x16 tile in every lane and
// check the alignment rules of the real API.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <ucontext.h>
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <vector>

#undef __shared__
#define __shared__ static
#define __launch_bounds__(...)

using std::isnan;
using std::max;
using std::min;

namespace emu {

enum class fiber_state { runnable, waiting_block, waiting_warp, done };

struct fiber {
  ucontext_t context;
  fiber_state state = fiber_state::runnable;
  uint3 thread_idx, block_idx;
  dim3 block_dim, grid_dim;
  int lane = 0, warp = 0;
  std::uint64_t warp_generation_seen = 0;
};

struct block_run {
  std::vector<fiber> fibers;
  std::vector<std::uint64_t> warp_slots;  // 32 per warp
  ucontext_t scheduler;
  std::function<void()> body;
};

inline fiber* current = nullptr;
inline block_run* running = nullptr;
inline unsigned char* shared_base = nullptr;
inline unsigned char* dynamic_shared() { return shared_base; }
inline std::mt19937& order_rng() {
  static std::mt19937 rng(12345);
  return rng;
}

inline void wait(fiber_state state) {
  current->state = state;
  swapcontext(&current->context, &running->scheduler);
}
inline void syncthreads() { wait(fiber_state::waiting_block); }
inline void syncwarp() { wait(fiber_state::waiting_warp); }

template <class T>
T shfl_from(T v, int source) {
  static_assert(sizeof(T) <= 8);
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  std::uint64_t* slots = running->warp_slots.data() + current->warp * 32;
  slots[current->lane] = bits;
  syncwarp();
  const std::uint64_t got = slots[source & 31];
  syncwarp();
  T r;
  std::memcpy(&r, &got, sizeof(T));
  return r;
}

inline cudaError_t func_set_attribute(...) { return cudaSuccess; }

// Explicitly rounded float operations (volatile keeps them from fusing).
inline float fadd_rn(float a, float b) {
  volatile float r = a + b;
  return r;
}
inline float fmul_rn(float a, float b) {
  volatile float r = a * b;
  return r;
}
inline float fsub_rn(float a, float b) {
  volatile float r = a - b;
  return r;
}

inline void fiber_entry() {
  running->body();
  current->state = fiber_state::done;
  swapcontext(&current->context, &running->scheduler);
}

// Releases fibers whose barrier every live participant has reached.
inline bool release(block_run& run) {
  const int n = static_cast<int>(run.fibers.size());
  bool any = false;
  for (int w = 0; w < n / 32; ++w) {
    bool all = true, some = false;
    for (int l = 0; l < 32; ++l) {
      const fiber_state s = run.fibers[w * 32 + l].state;
      if (s == fiber_state::done) continue;
      some = true;
      if (s != fiber_state::waiting_warp) all = false;
    }
    if (some && all) {
      for (int l = 0; l < 32; ++l)
        if (run.fibers[w * 32 + l].state == fiber_state::waiting_warp)
          run.fibers[w * 32 + l].state = fiber_state::runnable;
      any = true;
    }
  }
  if (any) return true;
  bool all = true, some = false;
  for (const fiber& f : run.fibers) {
    if (f.state == fiber_state::done) continue;
    some = true;
    if (f.state != fiber_state::waiting_block) all = false;
  }
  if (some && all) {
    for (fiber& f : run.fibers)
      if (f.state == fiber_state::waiting_block) f.state = fiber_state::runnable;
    return true;
  }
  return false;
}

/// Held for a whole launch: the fiber scheduler and the kernels' shared
/// memory (function statics) are one per process, and an engine launches
/// from more than one OS thread (a drafter on its own stream).
inline std::mutex& launch_mutex() {
  static std::mutex mutex;
  return mutex;
}

template <class Kernel, class Params>
void launch(Kernel kernel, dim3 grid, dim3 block, std::size_t shared_bytes, cudaStream_t, Params params) {
  const std::lock_guard<std::mutex> one_launch_at_a_time(launch_mutex());
  const int n = static_cast<int>(block.x * block.y * block.z);
  if (n % 32 != 0) {
    std::fprintf(stderr, "emu: block size not a multiple of 32\n");
    std::abort();
  }
  static std::vector<unsigned char> storage;
  storage.assign(shared_bytes + 256, 0xAB);
  shared_base =
      reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(storage.data()) + 255) & ~std::uintptr_t{255});
  constexpr std::size_t stack_bytes = 256 * 1024;
  static std::vector<std::vector<char>> stacks;
  if (stacks.size() < static_cast<std::size_t>(n))
    stacks.resize(static_cast<std::size_t>(n), std::vector<char>(stack_bytes));
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        block_run run;
        run.fibers.resize(static_cast<std::size_t>(n));
        run.warp_slots.assign(static_cast<std::size_t>(n), 0);
        run.body = [&] { kernel(params); };
        std::memset(shared_base, 0xAB, shared_bytes);
        for (int t = 0; t < n; ++t) {
          fiber& f = run.fibers[static_cast<std::size_t>(t)];
          f.thread_idx = make_uint3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
          f.block_idx = make_uint3(bx, by, bz);
          f.block_dim = block;
          f.grid_dim = grid;
          f.lane = t % 32;
          f.warp = t / 32;
          getcontext(&f.context);
          f.context.uc_stack.ss_sp = stacks[static_cast<std::size_t>(t)].data();
          f.context.uc_stack.ss_size = stack_bytes;
          f.context.uc_link = nullptr;
          makecontext(&f.context, fiber_entry, 0);
        }
        running = &run;
        std::vector<int> order(static_cast<std::size_t>(n));
        for (int t = 0; t < n; ++t) order[static_cast<std::size_t>(t)] = t;
        for (;;) {
          std::shuffle(order.begin(), order.end(), order_rng());
          bool ran = false;
          for (int t : order) {
            fiber& f = run.fibers[static_cast<std::size_t>(t)];
            if (f.state != fiber_state::runnable) continue;
            current = &f;
            swapcontext(&run.scheduler, &f.context);
            ran = true;
          }
          bool finished = true;
          for (const fiber& f : run.fibers) finished = finished && f.state == fiber_state::done;
          if (finished) break;
          if (!release(run) && !ran) {
            std::fprintf(stderr, "emu: deadlock in block (%u,%u,%u)\n", bx, by, bz);
            std::abort();
          }
        }
        running = nullptr;
        current = nullptr;
      }
}

}  // namespace emu

#define threadIdx (::emu::current->thread_idx)
#define blockIdx (::emu::current->block_idx)
#define blockDim (::emu::current->block_dim)
#define gridDim (::emu::current->grid_dim)
inline void __syncthreads() { emu::syncthreads(); }
template <class T>
T __shfl_xor_sync(unsigned, T v, int offset, int = 32) {
  return emu::shfl_from(v, emu::current->lane ^ offset);
}
template <class T>
T __shfl_sync(unsigned, T v, int source, int = 32) {
  return emu::shfl_from(v, source);
}
inline unsigned __float_as_uint(float v) {
  unsigned bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

namespace nvcuda::wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  T x[256];
};
template <class Use, class T, class Layout, class V>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f, V v) {
  for (auto& e : f.x) e = static_cast<T>(v);
}
inline void check_pointer(const void* p, unsigned ldm, std::size_t element) {
  if (reinterpret_cast<std::uintptr_t>(p) % 32 != 0) {
    std::fprintf(stderr, "wmma pointer not 32-byte aligned\n");
    std::abort();
  }
  if ((ldm * element) % 16 != 0) {
    std::fprintf(stderr, "wmma ldm not a multiple of 16 bytes\n");
    std::abort();
  }
}
template <class T>
void load_matrix_sync(fragment<matrix_a, 16, 16, 16, T, row_major>& f, const T* p, unsigned ldm) {
  check_pointer(p, ldm, sizeof(T));
  emu::syncwarp();
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) f.x[r * 16 + c] = p[r * ldm + c];
  emu::syncwarp();
}
template <class T>
void load_matrix_sync(fragment<matrix_b, 16, 16, 16, T, col_major>& f, const T* p, unsigned ldm) {
  check_pointer(p, ldm, sizeof(T));
  emu::syncwarp();
  for (int k = 0; k < 16; ++k)
    for (int n = 0; n < 16; ++n) f.x[k * 16 + n] = p[n * ldm + k];
  emu::syncwarp();
}
template <class T>
void load_matrix_sync(fragment<matrix_b, 16, 16, 16, T, row_major>& f, const T* p, unsigned ldm) {
  check_pointer(p, ldm, sizeof(T));
  emu::syncwarp();
  for (int k = 0; k < 16; ++k)
    for (int n = 0; n < 16; ++n) f.x[k * 16 + n] = p[k * ldm + n];
  emu::syncwarp();
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p, unsigned ldm, layout_t l) {
  check_pointer(p, ldm, 4);
  assert(l == mem_row_major);
  emu::syncwarp();
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) f.x[r * 16 + c] = p[r * ldm + c];
  emu::syncwarp();
}
inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm, layout_t l) {
  check_pointer(p, ldm, 4);
  assert(l == mem_row_major);
  emu::syncwarp();
  if (emu::current->lane == 0)
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < 16; ++c) p[r * ldm + c] = f.x[r * 16 + c];
  emu::syncwarp();
}
template <class T, class LA, class LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, T, LA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LB>& b, const fragment<accumulator, 16, 16, 16, float>& c) {
  float out[256];
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 16; ++n) {
      float s = c.x[r * 16 + n];
      for (int k = 0; k < 16; ++k) s += static_cast<float>(a.x[r * 16 + k]) * static_cast<float>(b.x[k * 16 + n]);
      out[r * 16 + n] = s;
    }
  std::memcpy(d.x, out, sizeof out);
}
}  // namespace nvcuda::wmma
