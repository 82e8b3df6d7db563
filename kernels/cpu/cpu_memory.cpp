#include "kernels/cpu/cpu_memory.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <system_error>

#include "base/parallel_blocks.hpp"

namespace troupe::cpu {

namespace {

constexpr std::size_t page_bytes = 4096;
/// Populated per task: whole huge pages, and few enough tasks to start cheaply.
constexpr std::int64_t populate_chunk_bytes = std::int64_t{64} << 20;

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

void* allocate_host_resident(std::size_t bytes) {
  void* data = allocate_host(bytes);
  if (bytes < huge_allocation_bytes) {
    std::memset(data, 0, bytes);
    return data;
  }
#if defined(MADV_POPULATE_WRITE)
  // Fails with ENOMEM instead of a later SIGBUS or OOM kill; kernels before
  // 5.14 answer EINVAL, and then writing one byte per page does the same.
  // Populating is the kernel zeroing every page on the calling thread,
  // seconds for a pool of gigabytes, so the range is split over the cores.
  try {
    parallel_blocks(static_cast<std::int64_t>(round_up(bytes, page_bytes)), populate_chunk_bytes,
                    [data](std::int64_t begin, std::int64_t end) {
                      if (madvise(static_cast<char*>(data) + begin, static_cast<std::size_t>(end - begin),
                                  MADV_POPULATE_WRITE) != 0)
                        throw std::system_error(errno, std::generic_category());
                    });
    return data;
  } catch (const std::system_error& error) {
    if (error.code().value() != EINVAL) {
      free_host(data, bytes);
      throw std::bad_alloc();
    }
  }
#endif
  auto* bytes_view = static_cast<volatile char*>(data);
  for (std::size_t offset = 0; offset < bytes; offset += page_bytes) bytes_view[offset] = 0;
  return data;
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
