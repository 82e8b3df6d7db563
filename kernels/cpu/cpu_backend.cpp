#include "kernels/cpu/cpu_backend.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/cpu_backend_impl.hpp"
#include "kernels/cpu/cpu_memory.hpp"
#include "kernels/cpu/cpu_plan.hpp"
#include "kernels/cpu/onednn_matmuls.hpp"
#include "kernels/cpu/sampler.hpp"

namespace troupe::cpu {

namespace {

isa_level choose_isa(const cpu_backend_options& options) {
  if (!options.max_isa) return detected_isa();
  if (!isa_supported(*options.max_isa))
    throw std::invalid_argument("cpu backend: this CPU does not support " + std::string(isa_name(*options.max_isa)));
  return *options.max_isa;
}

// Parallel copies pay off only for large blocks; below this one thread is faster.
constexpr std::size_t parallel_copy_bytes = std::size_t{1} << 20;

}  // namespace

void require(bool ok, const char* op, const char* what) {
  if (!ok) throw std::invalid_argument(std::string(op) + ": " + what);
}

std::int64_t rows_per_task(std::int64_t rows, std::int64_t cols, int threads) {
  // About 16k elements per task at least, and up to 4 tasks per thread.
  const std::int64_t min_rows = std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, cols));
  const std::int64_t balanced = (rows + 4 * threads - 1) / (4 * threads);
  return std::max(min_rows, balanced);
}

void per_thread_scratch::reserve(std::size_t count) {
  for (auto& buffer : buffers_) {
    if (buffer.size() < count) buffer.resize(count);
  }
}

void* cpu_host_pool::block_data(std::int64_t index) {
  if (index < 0 || index >= blocks_)
    throw std::out_of_range("host block " + std::to_string(index) + " outside the pool of " + std::to_string(blocks_));
  return static_cast<char*>(storage_.data()) + static_cast<std::size_t>(index) * block_bytes_;
}

cpu_backend::cpu_backend(const cpu_backend_options& options)
    : isa_(choose_isa(options)),
      kernels_(kernels_for(isa_)),
      placement_(options.weights),
      gemv_max_rows_(options.gemv_max_rows),
      quantized_gemv_max_rows_(options.quantized_gemv_max_rows >= 0 ? options.quantized_gemv_max_rows
                                                                    : default_quantized_gemv_max_rows(isa_)),
      batch_invariant_(options.batch_invariant),
      bf16_panels_(options.bf16_panels),
      pool_(options.threads),
      scratch_(pool_.size()),
      matmuls_(std::make_unique<onednn_matmuls>(pool_.size(), isa_ >= isa_level::avx512_bf16)) {
  for (int t = 0; t < pool_.size(); ++t) sampler_scratch_.push_back(std::make_unique<sampler_scratch>());
}

cpu_backend::~cpu_backend() = default;

device_buffer cpu_backend::allocate(std::size_t bytes) {
  if (bytes == 0) return device_buffer(this, nullptr, 0);
  return device_buffer(this, allocate_host(bytes), bytes);
}

device_buffer cpu_backend::allocate_resident(std::size_t bytes) {
  return device_buffer(this, allocate_host_resident(bytes), bytes);
}

void cpu_backend::release(void* data, std::size_t bytes) { free_host(data, bytes); }

void cpu_backend::copy_parallel(void* dst, const void* src, std::size_t bytes) {
  if (bytes < parallel_copy_bytes || pool_.size() == 1) {
    std::memcpy(dst, src, bytes);
    return;
  }
  constexpr std::size_t chunk = std::size_t{4} << 20;
  const auto tasks = static_cast<std::int64_t>((bytes + chunk - 1) / chunk);
  pool_.parallel_for(tasks, [&](std::int64_t task, int) {
    const std::size_t begin = static_cast<std::size_t>(task) * chunk;
    std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin, std::min(chunk, bytes - begin));
  });
}

void cpu_backend::copy_to_device(void* dst, const void* src, std::size_t bytes) { copy_parallel(dst, src, bytes); }

void cpu_backend::copy_to_host(void* dst, const void* src, std::size_t bytes) { copy_parallel(dst, src, bytes); }

device_tensor cpu_backend::upload(const host_tensor& tensor) {
  if (tensor.shape.size() > 2)
    throw std::invalid_argument("upload: tensor " + tensor.name + " has more than two dimensions");
  if (tensor.data == nullptr && tensor.numel() > 0)
    throw std::invalid_argument("upload: tensor " + tensor.name + " has no data");
  const std::int64_t rows = tensor.matrix_rows(), cols = tensor.matrix_cols();
  device_tensor result;
  if (tensor.shape.size() <= 1) {
    // Vectors (norm weights, biases) are read as f32 by every row kernel.
    result.storage = allocate(static_cast<std::size_t>(tensor.numel()) * sizeof(float));
    convert_elements(tensor.data, tensor.type, result.storage.data(), dtype::f32,
                     static_cast<std::size_t>(tensor.numel()));
    result.view = make_view(result.storage.data(), dtype::f32, 1, cols);
    return result;
  }
  // Tables (embeddings) stay where they are, in their type: a step gathers
  // only a few rows, so a copy would cost memory (a second copy of a tied
  // embedding, which prepare_linear also copies) and gain nothing.
  result.view = make_view(const_cast<void*>(tensor.data), tensor.type, rows, cols);
  return result;
}

std::unique_ptr<kv_cache> cpu_backend::create_kv_cache(const kv_cache_spec& spec) {
  if (spec.num_layers <= 0 || spec.num_kv_heads <= 0 || spec.head_dim <= 0 || spec.block_size <= 0 ||
      spec.num_blocks <= 0)
    throw std::invalid_argument("create_kv_cache: every dimension of the spec must be positive");
  return std::make_unique<cpu_kv_cache>(
      spec, allocate_resident(spec.block_bytes() * static_cast<std::size_t>(spec.num_blocks)));
}

std::unique_ptr<host_block_pool> cpu_backend::create_host_pool(const kv_cache_spec& spec, std::int64_t num_blocks) {
  if (num_blocks <= 0 || spec.block_bytes() == 0)
    throw std::invalid_argument("create_host_pool: the pool needs a positive number of non-empty blocks");
  return std::make_unique<cpu_host_pool>(spec.block_bytes(), num_blocks,
                                         allocate_resident(spec.block_bytes() * static_cast<std::size_t>(num_blocks)));
}

std::unique_ptr<step_plan> cpu_backend::plan_step(const step_batch& batch, const kv_cache_spec& cache,
                                                  const attention_geometry& geometry) {
  return build_step_plan(batch, cache, geometry);
}

std::unique_ptr<backend> make_cpu_backend(const cpu_backend_options& options) {
  return std::make_unique<cpu_backend>(options);
}

}  // namespace troupe::cpu
