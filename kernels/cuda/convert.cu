#include "kernels/cuda/convert.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_utils.cuh"

namespace troupe::cuda {

namespace {

constexpr int convert_threads = 256;
constexpr unsigned max_grid_blocks = 65535u * 8u;

__global__ void __launch_bounds__(convert_threads) convert_kernel(convert_params p) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.count; i += stride) {
    store_from_float(p.dst, p.to, i, load_as_float(p.src, p.from, i));
  }
}

__global__ void __launch_bounds__(convert_threads) add_bias_kernel(add_bias_params p) {
  const std::int64_t row = blockIdx.x;
  for (std::int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) {
    const std::int64_t index = row * p.out_stride + c;
    store_from_float(p.out, p.type, index, load_as_float(p.out, p.type, index) + load_as_float(p.bias, p.type, c));
  }
}

}  // namespace

void launch_convert(const convert_params& params, cudaStream_t stream) {
  if (params.count == 0) return;
  const unsigned wanted = blocks_for(params.count, convert_threads);
  const unsigned blocks = wanted < max_grid_blocks ? wanted : max_grid_blocks;
  convert_kernel<<<blocks, convert_threads, 0, stream>>>(params);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void launch_add_bias(const add_bias_params& params, cudaStream_t stream) {
  if (params.rows == 0 || params.cols == 0) return;
  add_bias_kernel<<<static_cast<unsigned>(params.rows), convert_threads, 0, stream>>>(params);
  TROUPE_CUDA_CHECK_LAUNCH();
}

}  // namespace troupe::cuda
