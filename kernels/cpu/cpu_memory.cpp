#include "kernels/cpu/cpu_memory.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <new>

namespace troupe::cpu {

namespace {

constexpr std::size_t page_bytes = 4096;

std::size_t round_up(std::size_t value, std::size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

}  // namespace

void* allocate_host(std::size_t bytes) {
  if (bytes < huge_allocation_bytes) {
    void* data = std::aligned_alloc(64, round_up(bytes, 64));
    if (data == nullptr) throw std::bad_alloc();
    return data;
  }
  // Over-map by one huge page, then trim so the buffer starts on a 2 MiB
  // boundary: only aligned 2 MiB ranges can become huge pages.
  const std::size_t length = round_up(bytes, page_bytes);
  const std::size_t mapped = length + huge_allocation_bytes;
  void* raw = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = round_up(start, huge_allocation_bytes);
  if (aligned > start) munmap(raw, aligned - start);
  const std::uintptr_t end = start + mapped, used_end = aligned + length;
  if (end > used_end) munmap(reinterpret_cast<void*>(used_end), end - used_end);
  madvise(reinterpret_cast<void*>(aligned), length, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

void free_host(void* data, std::size_t bytes) {
  if (data == nullptr) return;
  if (bytes < huge_allocation_bytes) {
    std::free(data);
    return;
  }
  munmap(data, round_up(bytes, page_bytes));
}

}  // namespace troupe::cpu
