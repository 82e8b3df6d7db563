#pragma once
// Checks for CUDA runtime calls and kernel launches. A failure throws
// std::runtime_error naming the file, the line, the expression and CUDA's
// error string. Host code only (also host functions inside .cu files).

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace troupe::cuda {

/// Throws the std::runtime_error that TROUPE_CUDA_CHECK reports.
[[noreturn]] inline void throw_cuda_error(cudaError_t error, const char* expression, const char* file, int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + expression +
                           " failed: " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
}

}  // namespace troupe::cuda

/// Evaluates a CUDA runtime call and throws on any status but cudaSuccess.
#define TROUPE_CUDA_CHECK(expression)                                                         \
  do {                                                                                        \
    const cudaError_t troupe_cuda_status_ = (expression);                                     \
    if (troupe_cuda_status_ != cudaSuccess)                                                   \
      ::troupe::cuda::throw_cuda_error(troupe_cuda_status_, #expression, __FILE__, __LINE__); \
  } while (0)

/// Checks the launch just made (configuration errors, e.g. too much shared
/// memory); faults inside the kernel surface at the next synchronising call.
#define TROUPE_CUDA_CHECK_LAUNCH() TROUPE_CUDA_CHECK(cudaGetLastError())
