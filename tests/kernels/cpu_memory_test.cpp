// Host memory for the CPU backend: a resident allocation has every page in
// memory when it returns, including the pages of its last, partial chunk
// (populating is split over the cores in 64 MiB chunks).

#include "kernels/cpu/cpu_memory.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

namespace troupe::cpu {
namespace {

// Pages of [data, data + bytes) the kernel reports resident (mincore).
std::size_t resident_pages(void* data, std::size_t bytes) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in_core((bytes + page - 1) / page);
  EXPECT_EQ(mincore(data, bytes, in_core.data()), 0);
  std::size_t resident = 0;
  for (const unsigned char flags : in_core) resident += flags & 1u;
  return resident;
}

TEST(CpuMemory, AResidentAllocationHasEveryPageInMemory) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  // Two whole chunks, a partial one, and a size that is no multiple of a page.
  for (const std::size_t bytes : {std::size_t{3} << 20, (std::size_t{130} << 20) + 3 * page + 100}) {
    void* data = allocate_host_resident(bytes);
    ASSERT_NE(data, nullptr);
    EXPECT_EQ(resident_pages(data, bytes), (bytes + page - 1) / page) << bytes << " bytes";
    // Populated pages are zero-filled anonymous memory.
    const auto* first = static_cast<const unsigned char*>(data);
    EXPECT_EQ(first[0], 0);
    EXPECT_EQ(first[bytes - 1], 0);
    free_host(data, bytes);
  }
}

TEST(CpuMemory, AnOrdinaryAllocationIsNotPopulated) {
  const std::size_t bytes = std::size_t{64} << 20;
  void* data = allocate_host(bytes);
  EXPECT_LT(resident_pages(data, bytes), bytes / static_cast<std::size_t>(sysconf(_SC_PAGESIZE)) / 2)
      << "the control: mincore tells resident pages from mapped ones";
  free_host(data, bytes);
}

}  // namespace
}  // namespace troupe::cpu
