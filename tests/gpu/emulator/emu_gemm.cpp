// The linear layer on the host (stands in for cuBLASLt): bf16 inputs, fp32
// accumulation, bias in the output type, then rounding to the output type.
#include <cuda_bf16.h>
#include "kernels/cuda/gemm.hpp"
#include "kernels/dtype.hpp"
namespace troupe::cuda {
struct cublaslt_gemm::plan {};
cublaslt_gemm::cublaslt_gemm(std::size_t bytes) : workspace_(bytes) {}
cublaslt_gemm::~cublaslt_gemm() = default;
std::int64_t cublaslt_gemm::m_bucket(std::int64_t m) { return m; }
void cublaslt_gemm::run(const gemm_problem& p, cudaStream_t) {
  const auto* x = static_cast<const std::uint16_t*>(p.x);
  const auto* w = static_cast<const std::uint16_t*>(p.w);
  for (std::int64_t r = 0; r < p.m; ++r)
    for (std::int64_t o = 0; o < p.n; ++o) {
      float sum = 0.0f;
      for (std::int64_t k = 0; k < p.k; ++k)
        sum += bf16_to_float(x[r * p.x_stride + k]) * bf16_to_float(w[o * p.k + k]);
      if (p.out_type == dtype::f32) {
        if (p.bias) sum += static_cast<const float*>(p.bias)[o];
        static_cast<float*>(p.out)[r * p.out_stride + o] = sum;
      } else {
        if (p.bias) sum += bf16_to_float(static_cast<const std::uint16_t*>(p.bias)[o]);
        static_cast<std::uint16_t*>(p.out)[r * p.out_stride + o] = float_to_bf16(sum);
      }
    }
}
}  // namespace troupe::cuda
