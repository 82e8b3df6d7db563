#pragma once
// Entry points of the CUDA backend, visible to plain C++20 code: no CUDA
// header is needed to include this file (kernels/backend.cpp includes it).

#include <cstddef>
#include <memory>

#include "kernels/backend.hpp"

namespace troupe::cuda {

/// Knobs of the CUDA backend; the defaults are what the engine uses.
struct cuda_backend_options {
  /// CUDA device ordinal the backend runs on.
  int device = 0;
  /// Split-KV partitions per decode sequence: 0 plans them from the sequence
  /// lengths and the multiprocessor count; n > 0 forces min(n, context length)
  /// (tests use it to exercise the merge of partial softmax states).
  int decode_splits = 0;
  /// cuBLASLt workspace, bytes.
  std::size_t gemm_workspace_bytes = std::size_t{32} << 20;
  /// Quantised linear layers with at most this many activation rows run the
  /// fused dequantising GEMV (8 rows per launch); more rows expand the
  /// weights to bf16 slab by slab and multiply with cuBLASLt.
  std::int64_t quantized_gemv_max_rows = 16;
  /// Bound of the bf16 scratch those expanded slabs go through, bytes (a
  /// slab is at least 64 weight rows).
  std::size_t quantized_slab_bytes = std::size_t{64} << 20;
};

/// A CUDA backend on `options.device`. Throws std::runtime_error when no
/// device is usable or a CUDA call fails.
std::unique_ptr<troupe::backend> make_cuda_backend(const cuda_backend_options& options);

/// A CUDA backend on device 0 with default options.
std::unique_ptr<troupe::backend> make_cuda_backend();

/// True when at least one CUDA device is usable: any error from
/// cudaGetDeviceCount (no driver, insufficient driver, no device) means false.
bool device_present();

/// Device-to-device copy bandwidth of `device` in GB/s (1e9 bytes/s), bytes
/// read plus bytes written, best of `repeats` copies of `bytes` bytes.
double measure_copy_bandwidth_gbps(int device = 0, std::size_t bytes = std::size_t{1} << 30, int repeats = 5);

}  // namespace troupe::cuda
