// The CUDA backend: device selection, memory, weight upload, KV pools and
// block copies. Ops live in cuda_ops.cpp, planning in cuda_plan_step.cpp,
// sampling in cuda_sampling.cpp.

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cuda/convert.hpp"
#include "kernels/cuda/cuda_backend_impl.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/upload_layout.hpp"
#include "kernels/stored_code_source.hpp"

namespace troupe::cuda {

namespace {

// Host data up to this size is staged through pinned memory (the caller may
// reuse its buffer at once); larger copies wait for the device instead.
constexpr std::size_t staged_copy_limit = std::size_t{4} << 20;
// Elements converted per chunk when a checkpoint's type differs from the device's.
constexpr std::int64_t conversion_chunk = std::int64_t{16} << 20;
// Rows of a matrix expanded on demand held in floats at once before upload.
constexpr std::int64_t expanded_rows_per_upload = 256;

void require(bool condition, const std::string& what) {
  if (!condition) throw std::invalid_argument(what);
}

bool is_cache_type(dtype type) { return type == dtype::bf16 || type == dtype::f16; }

}  // namespace

bool device_present() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the error so it does not surface in a later check
    return false;
  }
  return count > 0;
}

device_context::device_context(int device_index) : device(device_index) {
  if (!device_present()) throw std::runtime_error("cuda backend: no usable CUDA device (no driver or no GPU)");
  int count = 0;
  TROUPE_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (device_index < 0 || device_index >= count)
    throw std::runtime_error("cuda backend: device " + std::to_string(device_index) + " does not exist (" +
                             std::to_string(count) + " present)");
  TROUPE_CUDA_CHECK(cudaSetDevice(device_index));
  cudaDeviceProp properties{};
  TROUPE_CUDA_CHECK(cudaGetDeviceProperties(&properties, device_index));
  if (properties.major < 8)
    throw std::runtime_error("cuda backend: " + std::string(properties.name) + " has compute capability " +
                             std::to_string(properties.major) + "." + std::to_string(properties.minor) +
                             "; the kernels are built for sm_80 and newer");
  multiprocessors = properties.multiProcessorCount;
  shared_memory_limit = properties.sharedMemPerBlockOptin;
  name = properties.name;
}

cuda_kv_cache::cuda_kv_cache(const kv_cache_spec& spec) : spec_(spec) {
  require(is_cache_type(spec.type),
          "cuda kv cache: element type must be bf16 or f16, not " + std::string(dtype_name(spec.type)));
  require(
      spec.num_layers > 0 && spec.num_kv_heads > 0 && spec.head_dim > 0 && spec.block_size > 0 && spec.num_blocks > 0,
      "cuda kv cache: layers, kv heads, head_dim, block_size and num_blocks must be positive");
  pool_ = device_allocation(static_cast<std::size_t>(spec.num_blocks) * spec.block_bytes());
}

cuda_host_pool::cuda_host_pool(const kv_cache_spec& spec, std::int64_t num_blocks)
    : num_blocks_(num_blocks), block_bytes_(spec.block_bytes()) {
  require(num_blocks >= 0, "cuda host pool: num_blocks must not be negative");
  memory_ = pinned_allocation(static_cast<std::size_t>(num_blocks) * block_bytes_);
}

void* cuda_host_pool::block_data(std::int64_t index) {
  if (index < 0 || index >= num_blocks_)
    throw std::out_of_range("cuda host pool: block " + std::to_string(index) + " outside [0, " +
                            std::to_string(num_blocks_) + ")");
  return static_cast<char*>(memory_.data()) + static_cast<std::size_t>(index) * block_bytes_;
}

cuda_backend::cuda_backend(const cuda_backend_options& options)
    : options_(options),
      device_(options.device),
      gemm_(std::make_unique<cublaslt_gemm>(options.gemm_workspace_bytes)) {}

cuda_backend::~cuda_backend() {
  // A destructor cannot report a failed wait; the memory goes back either way.
  cudaStreamSynchronize(compute_.get());
  cudaStreamSynchronize(copy_.get());
  gemm_.reset();
  for (void* data : direct_allocations_) cudaFree(data);
  workspace_.trim();
}

device_buffer cuda_backend::allocate(std::size_t bytes) {
  return device_buffer(this, workspace_.acquire(bytes), bytes);
}

device_buffer cuda_backend::allocate_direct(std::size_t bytes) {
  void* data = nullptr;
  TROUPE_CUDA_CHECK(cudaMalloc(&data, bytes == 0 ? 1 : bytes));
  std::lock_guard lock(direct_mutex_);
  direct_allocations_.insert(data);
  return device_buffer(this, data, bytes);
}

void cuda_backend::release(void* data, std::size_t bytes) {
  {
    std::lock_guard lock(direct_mutex_);
    if (direct_allocations_.erase(data) > 0) {
      // Uploaded weights go only at teardown: wait until no kernel reads them.
      cudaStreamSynchronize(compute_.get());
      cudaFree(data);
      return;
    }
  }
  workspace_.give_back(data, bytes);
}

void cuda_backend::stage_to_device(void* dst, const void* src, std::size_t bytes) {
  void* staging = nullptr;
  const int slot = staging_.begin(bytes, &staging);
  std::memcpy(staging, src, bytes);
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(dst, staging, bytes, cudaMemcpyHostToDevice, compute_.get()));
  staging_.finish(slot, compute_.get());
}

device_buffer cuda_backend::upload_packed(const upload_layout& layout) {
  device_buffer buffer = allocate(layout.bytes());
  void* staging = nullptr;
  const int slot = staging_.begin(layout.bytes(), &staging);
  layout.write_to(staging);
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(buffer.data(), staging, layout.bytes(), cudaMemcpyHostToDevice, compute_.get()));
  staging_.finish(slot, compute_.get());
  return buffer;
}

void cuda_backend::copy_to_device(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  if (bytes <= staged_copy_limit) {
    stage_to_device(dst, src, bytes);
    return;
  }
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, compute_.get()));
  TROUPE_CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
}

void cuda_backend::copy_to_host(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, compute_.get()));
  TROUPE_CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
}

void cuda_backend::synchronize() {
  TROUPE_CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
  TROUPE_CUDA_CHECK(cudaStreamSynchronize(copy_.get()));
}

void cuda_backend::upload_as(const host_tensor& tensor, void* dst, dtype to) {
  require(tensor.data != nullptr, "upload: tensor '" + tensor.name + "' has no data");
  const std::int64_t count = tensor.numel();
  if (tensor.type == to) {
    TROUPE_CUDA_CHECK(cudaMemcpyAsync(dst, tensor.data, tensor.byte_size(), cudaMemcpyHostToDevice, compute_.get()));
  } else {
    // Convert on the device, chunk by chunk through one scratch buffer; the
    // stream orders each chunk's copy after the previous chunk's conversion.
    const std::size_t from_size = dtype_size(tensor.type);
    device_allocation scratch(static_cast<std::size_t>(std::min(count, conversion_chunk)) * from_size);
    for (std::int64_t first = 0; first < count; first += conversion_chunk) {
      const std::int64_t n = std::min(conversion_chunk, count - first);
      TROUPE_CUDA_CHECK(cudaMemcpyAsync(scratch.data(), static_cast<const char*>(tensor.data) + first * from_size,
                                        static_cast<std::size_t>(n) * from_size, cudaMemcpyHostToDevice,
                                        compute_.get()));
      convert_params convert;
      convert.src = scratch.data();
      convert.from = tensor.type;
      convert.dst = static_cast<char*>(dst) + first * static_cast<std::int64_t>(dtype_size(to));
      convert.to = to;
      convert.count = n;
      launch_convert(convert, compute_.get());
    }
    // The scratch buffer is freed on leaving this scope: wait for the conversions that read it.
    TROUPE_CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
    return;
  }
  // The source may be a mapping the caller unmaps next.
  TROUPE_CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
}

device_tensor cuda_backend::upload(const host_tensor& tensor) {
  require(tensor.shape.size() <= 2, "upload: tensor '" + tensor.name + "' has " + std::to_string(tensor.shape.size()) +
                                        " dimensions; at most 2 are supported");
  // Vectors (norm weights) are read as f32 at full precision; tables
  // (embeddings) feed bf16 activations, so bf16 loses nothing there.
  const dtype target = tensor.shape.size() <= 1 ? dtype::f32 : dtype::bf16;
  device_tensor result;
  result.storage = allocate_direct(static_cast<std::size_t>(tensor.numel()) * dtype_size(target));
  upload_as(tensor, result.storage.data(), target);
  result.view = make_view(result.storage.data(), target, tensor.matrix_rows(), tensor.matrix_cols());
  return result;
}

std::int64_t cuda_backend::stacked_rows(std::span<const host_tensor> parts, std::span<const host_tensor> biases,
                                        const char* op) {
  const std::string name(op);
  require(!parts.empty(), name + ": no weight parts");
  require(biases.empty() || biases.size() == parts.size(), name + ": give one bias per part or none");
  const std::int64_t in_features = parts.front().matrix_cols();
  std::int64_t out_features = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const host_tensor& part = parts[i];
    require(part.shape.size() == 2 && part.matrix_cols() == in_features,
            name + ": '" + part.name + "' must be 2-D with " + std::to_string(in_features) + " columns");
    require(part.data != nullptr || part.stored_codes != nullptr || part.rows != nullptr,
            name + ": '" + part.name + "' has no data");
    if (!biases.empty())
      require(biases[i].numel() == part.matrix_rows(),
              name + ": bias '" + biases[i].name + "' must have " + std::to_string(part.matrix_rows()) + " elements");
    out_features += part.matrix_rows();
  }
  return out_features;
}

void cuda_backend::upload_biases(std::span<const host_tensor> biases, std::int64_t out_features, device_allocation& f32,
                                 device_allocation& bf16) {
  if (biases.empty()) return;
  f32 = device_allocation(static_cast<std::size_t>(out_features) * 4);
  bf16 = device_allocation(static_cast<std::size_t>(out_features) * 2);
  std::int64_t row = 0;
  for (const host_tensor& bias : biases) {
    upload_as(bias, static_cast<char*>(f32.data()) + row * 4, dtype::f32);
    row += bias.numel();
  }
  launch_convert({f32.data(), dtype::f32, bf16.data(), dtype::bf16, out_features}, compute_.get());
  TROUPE_CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
}

std::unique_ptr<linear_weight> cuda_backend::prepare_linear(std::span<const host_tensor> parts,
                                                            std::span<const host_tensor> biases) {
  const std::int64_t out_features = stacked_rows(parts, biases, "prepare_linear");
  const std::int64_t in_features = parts.front().matrix_cols();
  auto weight = std::make_unique<cuda_linear_weight>(out_features, in_features);
  weight->weights = device_allocation(static_cast<std::size_t>(out_features * in_features) * 2);
  std::int64_t row = 0;
  for (const host_tensor& part : parts) {
    void* destination = static_cast<char*>(weight->weights.data()) + row * in_features * 2;
    if (part.stored_codes != nullptr)
      throw std::invalid_argument("prepare_linear: weight " + part.name + " is stored as " +
                                  std::string(quantization_name(part.stored_codes->format())) +
                                  " codes; prepare it quantised");
    if (part.data != nullptr) {
      upload_as(part, destination, dtype::bf16);
    } else {
      // A matrix its checkpoint expands on demand (a few block-typed
      // matrices in a file that runs unquantised): a block of rows at a
      // time into floats, each uploaded as an f32 part.
      for (std::int64_t first = 0; first < part.matrix_rows(); first += expanded_rows_per_upload) {
        const std::int64_t rows = std::min(expanded_rows_per_upload, part.matrix_rows() - first);
        const std::vector<float> values = matrix_rows_as_f32(part, first, rows);
        host_tensor block{part.name, dtype::f32, {rows, in_features}, values.data()};
        upload_as(block, static_cast<char*>(destination) + first * in_features * 2, dtype::bf16);
      }
    }
    row += part.matrix_rows();
  }
  upload_biases(biases, out_features, weight->bias_f32, weight->bias_bf16);
  return weight;
}

std::unique_ptr<kv_cache> cuda_backend::create_kv_cache(const kv_cache_spec& spec) {
  return std::make_unique<cuda_kv_cache>(spec);
}

std::unique_ptr<host_block_pool> cuda_backend::create_host_pool(const kv_cache_spec& spec, std::int64_t num_blocks) {
  return std::make_unique<cuda_host_pool>(spec, num_blocks);
}

void cuda_backend::copy_blocks(kv_cache& cache, host_block_pool* host, std::span<const block_copy> copies) {
  if (copies.empty()) return;
  auto* device_cache = dynamic_cast<cuda_kv_cache*>(&cache);
  require(device_cache != nullptr, "copy_blocks: the cache was not created by the cuda backend");
  auto* host_pool = host == nullptr ? nullptr : dynamic_cast<cuda_host_pool*>(host);
  require(host == nullptr || host_pool != nullptr, "copy_blocks: the host pool was not created by the cuda backend");
  const std::size_t block_bytes = device_cache->spec().block_bytes();
  require(host_pool == nullptr || host_pool->block_bytes() == block_bytes,
          "copy_blocks: host pool blocks differ in size from the cache's");
  const auto address = [&](block_location where, std::int32_t index, std::size_t i) -> void* {
    const std::int64_t limit =
        where == block_location::device ? device_cache->spec().num_blocks : (host_pool ? host_pool->num_blocks() : 0);
    require(index >= 0 && index < limit, "copy_blocks: copy " + std::to_string(i) + " names block " +
                                             std::to_string(index) + " outside its pool of " + std::to_string(limit));
    if (where == block_location::host) return host_pool->block_data(index);
    return static_cast<char*>(device_cache->data()) + static_cast<std::size_t>(index) * block_bytes;
  };
  std::vector<std::pair<void*, const void*>> moves;
  moves.reserve(copies.size());
  for (std::size_t i = 0; i < copies.size(); ++i) {
    const block_copy& copy = copies[i];
    require(copy.from == block_location::device || copy.to == block_location::device,
            "copy_blocks: copy " + std::to_string(i) + " is host to host");
    moves.emplace_back(address(copy.to, copy.dst, i), address(copy.from, copy.src, i));
  }
  // The copy stream starts after everything enqueued so far (earlier steps
  // may still read or write these blocks); compute waits for the copies only
  // at its next KV-cache op (wait_for_block_copies).
  TROUPE_CUDA_CHECK(cudaEventRecord(compute_ready_.get(), compute_.get()));
  TROUPE_CUDA_CHECK(cudaStreamWaitEvent(copy_.get(), compute_ready_.get(), 0));
  for (const auto& [dst, src] : moves) {
    if (dst != src) TROUPE_CUDA_CHECK(cudaMemcpyAsync(dst, src, block_bytes, cudaMemcpyDefault, copy_.get()));
  }
  TROUPE_CUDA_CHECK(cudaEventRecord(copies_done_.get(), copy_.get()));
  copies_pending_ = true;
}

void cuda_backend::wait_for_block_copies() {
  if (!copies_pending_) return;
  TROUPE_CUDA_CHECK(cudaStreamWaitEvent(compute_.get(), copies_done_.get(), 0));
  copies_pending_ = false;
}

std::unique_ptr<troupe::backend> make_cuda_backend(const cuda_backend_options& options) {
  return std::make_unique<cuda_backend>(options);
}

std::unique_ptr<troupe::backend> make_cuda_backend() { return make_cuda_backend(cuda_backend_options{}); }

}  // namespace troupe::cuda
