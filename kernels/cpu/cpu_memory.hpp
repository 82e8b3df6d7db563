#pragma once
// Host memory for the CPU backend: 64-byte aligned, and large buffers as
// anonymous mappings aligned to 2 MiB with MADV_HUGEPAGE, so streaming
// weights and KV blocks walks few TLB entries.

#include <cstddef>

namespace troupe::cpu {

/// Buffers at least this large are mmap'ed and advised for huge pages.
inline constexpr std::size_t huge_allocation_bytes = std::size_t{2} << 20;

/// Uninitialised memory of `bytes` (> 0) bytes, 64-byte aligned (2 MiB when
/// large). Throws std::bad_alloc.
void* allocate_host(std::size_t bytes);

/// Like allocate_host, but every page is faulted in before it returns (the
/// KV pools: resident from start, so memory the machine cannot back fails
/// here). Throws std::bad_alloc when the pages cannot be populated.
void* allocate_host_resident(std::size_t bytes);

/// Frees memory from allocate_host; `bytes` must be the size allocated.
void free_host(void* data, std::size_t bytes);

}  // namespace troupe::cpu
