#pragma once
// Linear layers through cuBLASLt: bf16 inputs, fp32 accumulation and scale,
// bf16 or f32 output, bias through the epilogue when cuBLASLt offers one.
// The algorithm comes from cuBLASLt's heuristic and is cached per
// (M bucket, N, K, output type, strides, alignments, bias), so the
// heuristic runs once per shape class rather than once per call.

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>

#include "kernels/cuda/device_memory.hpp"
#include "kernels/dtype.hpp"

namespace troupe::cuda {

/// out[M, N] = x[M, K] · w[N, K]ᵀ (+ bias[N]), all row-major.
struct gemm_problem {
  const void* x = nullptr;  ///< bf16 [M, K], row stride x_stride elements
  std::int64_t x_stride = 0;
  const void* w = nullptr;     ///< bf16 [N, K], packed
  const void* bias = nullptr;  ///< [N] of out_type, or nullptr
  void* out = nullptr;         ///< [M, N] of out_type, row stride out_stride elements
  std::int64_t out_stride = 0;
  dtype out_type = dtype::bf16;  ///< bf16 or f32
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
};

/// One cuBLASLt handle, its workspace and the algorithm cache. Used by one
/// thread at a time (the backend's).
class cublaslt_gemm {
 public:
  /// Creates the handle and a workspace of `workspace_bytes` bytes.
  explicit cublaslt_gemm(std::size_t workspace_bytes);
  cublaslt_gemm(const cublaslt_gemm&) = delete;
  cublaslt_gemm& operator=(const cublaslt_gemm&) = delete;
  ~cublaslt_gemm();

  /// Enqueues the product on `stream`; throws std::runtime_error when
  /// cuBLASLt has no algorithm for it.
  void run(const gemm_problem& problem, cudaStream_t stream);

  /// The M value whose algorithm serves `m` (powers of two up to 8192, then
  /// multiples of 4096).
  static std::int64_t m_bucket(std::int64_t m);

 private:
  using shape_key = std::tuple<std::int64_t, std::int64_t, std::int64_t, int, std::int64_t, std::int64_t, int, bool>;
  struct plan;

  plan& plan_for(const gemm_problem& problem);
  const cublasLtMatmulAlgo_t& algo_for(plan& plan, const gemm_problem& problem);

  cublasLtHandle_t handle_ = nullptr;
  device_allocation workspace_;
  std::map<shape_key, std::unique_ptr<plan>> plans_;
};

}  // namespace troupe::cuda
