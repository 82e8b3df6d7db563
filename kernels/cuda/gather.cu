#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gather.hpp"

namespace troupe::cuda {

namespace {

constexpr int gather_threads = 128;

// One block per destination row; `Unit` is the widest type every address
// and length is aligned to.
template <class Unit>
__global__ void __launch_bounds__(gather_threads) row_gather_kernel(row_gather_params p) {
  const std::int64_t row = blockIdx.x;
  const std::int64_t source_row = p.indices[row];
  const Unit* src = reinterpret_cast<const Unit*>(static_cast<const char*>(p.src) + source_row * p.src_stride_bytes);
  Unit* dst = reinterpret_cast<Unit*>(static_cast<char*>(p.dst) + row * p.dst_stride_bytes);
  const std::int64_t units = p.row_bytes / static_cast<std::int64_t>(sizeof(Unit));
  for (std::int64_t i = threadIdx.x; i < units; i += blockDim.x) dst[i] = src[i];
}

bool aligned_to(const row_gather_params& p, std::uint64_t unit) {
  const auto src = reinterpret_cast<std::uint64_t>(p.src);
  const auto dst = reinterpret_cast<std::uint64_t>(p.dst);
  return src % unit == 0 && dst % unit == 0 && static_cast<std::uint64_t>(p.src_stride_bytes) % unit == 0 &&
         static_cast<std::uint64_t>(p.dst_stride_bytes) % unit == 0 &&
         static_cast<std::uint64_t>(p.row_bytes) % unit == 0;
}

}  // namespace

void launch_row_gather(const row_gather_params& params, cudaStream_t stream) {
  if (params.rows == 0 || params.row_bytes == 0) return;
  const dim3 grid(static_cast<unsigned>(params.rows));
  if (aligned_to(params, 16)) {
    row_gather_kernel<uint4><<<grid, gather_threads, 0, stream>>>(params);
  } else if (aligned_to(params, 4)) {
    row_gather_kernel<std::uint32_t><<<grid, gather_threads, 0, stream>>>(params);
  } else {
    row_gather_kernel<std::uint16_t><<<grid, gather_threads, 0, stream>>>(params);
  }
  TROUPE_CUDA_CHECK_LAUNCH();
}

}  // namespace troupe::cuda
