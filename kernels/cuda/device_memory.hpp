#pragma once
// Owning handles for CUDA resources (device memory, pinned host memory,
// streams, events), the caching allocator behind backend::allocate, and the
// pinned staging ring that carries per-step metadata to the device.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

namespace troupe::cuda {

/// Device memory from cudaMalloc, freed on destruction. Move-only.
class device_allocation {
 public:
  device_allocation() = default;
  /// Allocates `bytes` bytes (at least 256-byte aligned); throws on failure.
  explicit device_allocation(std::size_t bytes);
  device_allocation(device_allocation&& other) noexcept;
  device_allocation& operator=(device_allocation&& other) noexcept;
  device_allocation(const device_allocation&) = delete;
  device_allocation& operator=(const device_allocation&) = delete;
  ~device_allocation();

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Page-locked host memory from cudaHostAlloc, freed on destruction.
class pinned_allocation {
 public:
  pinned_allocation() = default;
  /// Allocates `bytes` bytes of pinned memory; throws on failure.
  explicit pinned_allocation(std::size_t bytes);
  pinned_allocation(pinned_allocation&& other) noexcept;
  pinned_allocation& operator=(pinned_allocation&& other) noexcept;
  pinned_allocation(const pinned_allocation&) = delete;
  pinned_allocation& operator=(const pinned_allocation&) = delete;
  ~pinned_allocation();

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// A non-blocking CUDA stream (it does not synchronise with the legacy
/// default stream).
class stream_handle {
 public:
  stream_handle();
  stream_handle(const stream_handle&) = delete;
  stream_handle& operator=(const stream_handle&) = delete;
  ~stream_handle();
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

/// A CUDA event without timing, for ordering streams and host waits.
class event_handle {
 public:
  event_handle();
  event_handle(const event_handle&) = delete;
  event_handle& operator=(const event_handle&) = delete;
  ~event_handle();
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

/// Caching allocator for activations and step workspaces. Blocks come in
/// size classes (four per power of two, at least 256 bytes) kept in free
/// lists. It is stream-ordered by construction: every user of its blocks
/// runs on the one compute stream of the owning backend, so a block given
/// back while kernels still read it can be handed out again at once — the
/// next owner's kernels queue behind the previous owner's. Thread-safe.
class workspace_cache {
 public:
  workspace_cache() = default;
  workspace_cache(const workspace_cache&) = delete;
  workspace_cache& operator=(const workspace_cache&) = delete;
  ~workspace_cache();

  /// A block of at least `bytes` bytes (256-byte aligned). When cudaMalloc
  /// fails, waits for the device, frees every cached block and retries once.
  void* acquire(std::size_t bytes);
  /// Returns a block from acquire(`bytes`) (the same byte count).
  void give_back(void* data, std::size_t bytes);
  /// Frees every cached block; the caller has synchronised the device.
  void trim();
  /// Bytes held in free lists.
  std::size_t cached_bytes() const;

  /// The size class (bytes actually reserved) for a request of `bytes`.
  static std::size_t size_class(std::size_t bytes);

 private:
  mutable std::mutex mutex_;
  std::map<std::size_t, std::vector<void*>> free_;
  std::size_t cached_bytes_ = 0;
};

/// Pinned host buffers that stage small uploads (step metadata, sampling
/// parameters). Slots are reused round-robin; before a slot is rewritten the
/// host waits for the event recorded after the copies that read it, so an
/// asynchronous copy never sees its source change.
class staging_ring {
 public:
  /// `slots` buffers, each grown on demand.
  explicit staging_ring(int slots);

  /// A pinned buffer of at least `bytes` bytes, free to write now. Returns
  /// the slot index for `finish`.
  int begin(std::size_t bytes, void** data);
  /// Marks slot `slot` as read by every copy enqueued so far on `stream`.
  void finish(int slot, cudaStream_t stream);

 private:
  struct slot_state {
    pinned_allocation memory;
    event_handle read_done;
    bool in_use = false;
  };
  std::vector<slot_state> slots_;
  int next_ = 0;
};

}  // namespace troupe::cuda
