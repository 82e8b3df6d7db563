// Device memory copy bandwidth, the yardstick for GPU decode speed (decode
// reads every weight once per step): device-to-device copies of one large
// buffer, timed with events on a stream of their own.

#include <cuda_runtime_api.h>

#include <algorithm>

#include "kernels/cuda/cuda_backend.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_memory.hpp"

namespace troupe::cuda {
namespace {

/// A CUDA event that records time (event_handle's events do not).
class timing_event {
 public:
  timing_event() { TROUPE_CUDA_CHECK(cudaEventCreate(&event_)); }
  timing_event(const timing_event&) = delete;
  timing_event& operator=(const timing_event&) = delete;
  ~timing_event() { cudaEventDestroy(event_); }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace

double measure_copy_bandwidth_gbps(int device, std::size_t bytes, int repeats) {
  TROUPE_CUDA_CHECK(cudaSetDevice(device));
  device_allocation source(bytes), destination(bytes);
  TROUPE_CUDA_CHECK(cudaMemset(source.data(), 1, bytes));
  stream_handle stream;
  timing_event start, stop;
  // One untimed copy first: the first touch of fresh pages costs extra.
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(destination.data(), source.data(), bytes, cudaMemcpyDeviceToDevice, stream.get()));
  float best_ms = 0.0f;
  for (int i = 0; i < std::max(repeats, 1); ++i) {
    TROUPE_CUDA_CHECK(cudaEventRecord(start.get(), stream.get()));
    TROUPE_CUDA_CHECK(
        cudaMemcpyAsync(destination.data(), source.data(), bytes, cudaMemcpyDeviceToDevice, stream.get()));
    TROUPE_CUDA_CHECK(cudaEventRecord(stop.get(), stream.get()));
    TROUPE_CUDA_CHECK(cudaEventSynchronize(stop.get()));
    float ms = 0.0f;
    TROUPE_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    if (i == 0 || ms < best_ms) best_ms = ms;
  }
  return 2.0 * static_cast<double>(bytes) / (static_cast<double>(best_ms) * 1e-3) / 1e9;
}

}  // namespace troupe::cuda
