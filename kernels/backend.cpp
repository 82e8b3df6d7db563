#include "kernels/backend.hpp"

#include <stdexcept>

#include "kernels/cpu/cpu_backend.hpp"

#if defined(TROUPE_HAVE_CUDA)
#include "kernels/cuda/cuda_backend.hpp"
#endif

namespace troupe {

std::unique_ptr<backend> make_backend(const std::string& name, int threads) {
  backend_options options;
  options.threads = threads;
  return make_backend(name, options);
}

std::unique_ptr<backend> make_backend(const std::string& name, const backend_options& options) {
  if (name == "cpu") {
    cpu::cpu_backend_options cpu_options;
    cpu_options.threads = options.threads;
    cpu_options.batch_invariant = options.batch_invariant;
    return cpu::make_cpu_backend(cpu_options);
  }
  if (name == "cuda") {
#if defined(TROUPE_HAVE_CUDA)
    if (!cuda::device_present()) throw std::runtime_error("backend \"cuda\": no usable CUDA device in this process");
    // cuda_backend_options has no batch-invariant mode (yet): the flag is
    // ignored there, as is the cpu-only thread count.
    return cuda::make_cuda_backend();
#else
    throw std::runtime_error("backend \"cuda\": this build of troupe has no CUDA support");
#endif
  }
  throw std::runtime_error("unknown backend \"" + name + "\" (expected \"cpu\" or \"cuda\")");
}

bool cuda_available() {
#if defined(TROUPE_HAVE_CUDA)
  return cuda::device_present();
#else
  return false;
#endif
}

double measure_cuda_copy_bandwidth_gbps() {
#if defined(TROUPE_HAVE_CUDA)
  if (!cuda::device_present()) throw std::runtime_error("copy bandwidth: no usable CUDA device in this process");
  return cuda::measure_copy_bandwidth_gbps();
#else
  throw std::runtime_error("copy bandwidth: this build of troupe has no CUDA support");
#endif
}

}  // namespace troupe
