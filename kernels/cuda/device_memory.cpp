#include "kernels/cuda/device_memory.hpp"

#include <bit>
#include <utility>

#include "kernels/cuda/cuda_check.hpp"

namespace troupe::cuda {

device_allocation::device_allocation(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) TROUPE_CUDA_CHECK(cudaMalloc(&data_, bytes));
}

device_allocation::device_allocation(device_allocation&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

device_allocation& device_allocation::operator=(device_allocation&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

device_allocation::~device_allocation() {
  if (data_ != nullptr) cudaFree(data_);  // a destructor cannot report; cudaFree fails only on a dead context
}

pinned_allocation::pinned_allocation(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) TROUPE_CUDA_CHECK(cudaHostAlloc(&data_, bytes, cudaHostAllocDefault));
}

pinned_allocation::pinned_allocation(pinned_allocation&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

pinned_allocation& pinned_allocation::operator=(pinned_allocation&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

pinned_allocation::~pinned_allocation() {
  if (data_ != nullptr) cudaFreeHost(data_);
}

stream_handle::stream_handle() { TROUPE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }

stream_handle::~stream_handle() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

event_handle::event_handle() { TROUPE_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }

event_handle::~event_handle() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

workspace_cache::~workspace_cache() { trim(); }

std::size_t workspace_cache::size_class(std::size_t bytes) {
  constexpr std::size_t minimum = 256;
  if (bytes <= minimum) return minimum;
  // Four classes per power of two bound the waste to 25%.
  const std::size_t octave = std::bit_floor(bytes);
  const std::size_t step = octave / 4 < minimum ? minimum : octave / 4;
  return (bytes + step - 1) / step * step;
}

void* workspace_cache::acquire(std::size_t bytes) {
  const std::size_t reserved = size_class(bytes);
  {
    std::lock_guard lock(mutex_);
    auto it = free_.find(reserved);
    if (it != free_.end() && !it->second.empty()) {
      void* block = it->second.back();
      it->second.pop_back();
      cached_bytes_ -= reserved;
      return block;
    }
  }
  void* block = nullptr;
  cudaError_t status = cudaMalloc(&block, reserved);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear it, or the next launch check would report it
    TROUPE_CUDA_CHECK(cudaDeviceSynchronize());
    trim();
    status = cudaMalloc(&block, reserved);
  }
  TROUPE_CUDA_CHECK(status);
  return block;
}

void workspace_cache::give_back(void* data, std::size_t bytes) {
  const std::size_t reserved = size_class(bytes);
  std::lock_guard lock(mutex_);
  free_[reserved].push_back(data);
  cached_bytes_ += reserved;
}

void workspace_cache::trim() {
  std::lock_guard lock(mutex_);
  for (auto& [size, blocks] : free_) {
    for (void* block : blocks) cudaFree(block);
  }
  free_.clear();
  cached_bytes_ = 0;
}

std::size_t workspace_cache::cached_bytes() const {
  std::lock_guard lock(mutex_);
  return cached_bytes_;
}

staging_ring::staging_ring(int slots) : slots_(static_cast<std::size_t>(slots)) {}

int staging_ring::begin(std::size_t bytes, void** data) {
  const int index = next_;
  next_ = (next_ + 1) % static_cast<int>(slots_.size());
  slot_state& slot = slots_[static_cast<std::size_t>(index)];
  if (slot.in_use) TROUPE_CUDA_CHECK(cudaEventSynchronize(slot.read_done.get()));
  slot.in_use = false;
  if (slot.memory.bytes() < bytes) {
    // Grow geometrically so a slowly growing batch does not reallocate each step.
    std::size_t grown = slot.memory.bytes() < 4096 ? 4096 : slot.memory.bytes();
    while (grown < bytes) grown *= 2;
    slot.memory = pinned_allocation(grown);
  }
  *data = slot.memory.data();
  return index;
}

void staging_ring::finish(int slot, cudaStream_t stream) {
  slot_state& state = slots_[static_cast<std::size_t>(slot)];
  TROUPE_CUDA_CHECK(cudaEventRecord(state.read_done.get(), stream));
  state.in_use = true;
}

}  // namespace troupe::cuda
