#pragma once
// Row gathers: the embedding lookup (rows picked by token id) and the logits
// rows (rows picked by logits_indices) are the same copy.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace troupe::cuda {

/// dst[r, :] = src[indices[r], :] for r < rows; raw bytes, any element type.
struct row_gather_params {
  const std::int32_t* indices = nullptr;  ///< [rows] device; each a valid source row (checked on the host)
  const void* src = nullptr;              ///< source matrix, row r at src + r * src_stride_bytes
  std::int64_t src_stride_bytes = 0;
  void* dst = nullptr;  ///< [rows] destination rows, row r at dst + r * dst_stride_bytes
  std::int64_t dst_stride_bytes = 0;
  std::int64_t rows = 0;
  std::int64_t row_bytes = 0;  ///< bytes copied per row (a multiple of 2)
};

/// Enqueues the gather on `stream`; 16-, 4- or 2-byte moves by alignment.
void launch_row_gather(const row_gather_params& params, cudaStream_t stream);

}  // namespace troupe::cuda
