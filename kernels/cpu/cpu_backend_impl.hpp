#pragma once
// The CPU backend class, shared by the files that implement its parts
// (cpu_backend.cpp: memory, weights, caches; cpu_ops.cpp: row ops and
// attention; cpu_linear_weights.cpp: linear weights at load; cpu_linear.cpp:
// GEMM/GEMV; sampler.cpp: sampling).

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cpu/isa_kernels.hpp"
#include "kernels/cpu/thread_pool.hpp"

namespace troupe::cpu {

class onednn_matmuls;
class cpu_step_plan;
struct sampler_scratch;

/// A prepared weight: [out_features][in_features] row-major in `type`, or
/// quantised (`packed`, in `storage`) when `quantized`.
class cpu_linear_weight final : public linear_weight {
 public:
  std::int64_t out_features() const override { return rows; }
  std::int64_t in_features() const override { return cols; }
  /// The storage, or where the weight is the checkpoint's mapping, its rows.
  std::size_t weight_bytes() const override {
    return storage.data() != nullptr ? storage.bytes() : static_cast<std::size_t>(rows * cols) * dtype_size(type);
  }

  dtype type = dtype::f32;
  std::int64_t rows = 0, cols = 0;
  const void* data = nullptr;  ///< into `storage`, or the checkpoint mapping
  device_buffer storage;
  std::vector<float> bias;  ///< [rows] or empty
  bool quantized = false;
  /// bf16 in output panels (isa_kernels.hpp, bf16_panel_rows) instead of row-major.
  bool panels = false;
  quantized_matrix packed;  ///< the quantised layout when `quantized`
  /// [cols] or empty: weight input j is x's column input_permutation[j]
  /// (GPTQ act-order, stored_code_source::input_permutation); linear gathers x by it.
  std::vector<std::int32_t> input_permutation;
};

/// The paged KV pool in host memory.
class cpu_kv_cache final : public kv_cache {
 public:
  cpu_kv_cache(const kv_cache_spec& spec, device_buffer storage) : spec_(spec), storage_(std::move(storage)) {}
  const kv_cache_spec& spec() const override { return spec_; }
  void* data() const { return storage_.data(); }

 private:
  kv_cache_spec spec_;
  device_buffer storage_;
};

/// Host swap pool, same block layout as the cache.
class cpu_host_pool final : public host_block_pool {
 public:
  cpu_host_pool(std::size_t block_bytes, std::int64_t blocks, device_buffer storage)
      : block_bytes_(block_bytes), blocks_(blocks), storage_(std::move(storage)) {}
  std::int64_t num_blocks() const override { return blocks_; }
  void* block_data(std::int64_t index) override;
  std::size_t block_bytes() const { return block_bytes_; }

 private:
  std::size_t block_bytes_;
  std::int64_t blocks_;
  device_buffer storage_;
};

/// Growable float scratch, one buffer per pool thread.
class per_thread_scratch {
 public:
  explicit per_thread_scratch(int threads) : buffers_(static_cast<std::size_t>(threads)) {}
  /// Makes every thread's buffer hold at least `count` floats (call before a parallel region).
  void reserve(std::size_t count);
  float* get(int thread) { return buffers_[static_cast<std::size_t>(thread)].data(); }

 private:
  std::vector<std::vector<float>> buffers_;
};

class cpu_backend final : public backend {
 public:
  explicit cpu_backend(const cpu_backend_options& options);
  ~cpu_backend() override;

  std::string name() const override { return "cpu"; }
  dtype activation_type() const override { return dtype::f32; }

  device_buffer allocate(std::size_t bytes) override;
  /// `bytes` (> 0) with every page faulted in (the KV pools).
  device_buffer allocate_resident(std::size_t bytes);
  void release(void* data, std::size_t bytes) override;
  void copy_to_device(void* dst, const void* src, std::size_t bytes) override;
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override;
  void synchronize() override {}

  device_tensor upload(const host_tensor& tensor) override;
  std::unique_ptr<linear_weight> prepare_linear(std::span<const host_tensor> parts,
                                                std::span<const host_tensor> biases) override;
  std::unique_ptr<linear_weight> prepare_quantized_linear(std::span<const host_tensor> parts,
                                                          std::span<const host_tensor> biases,
                                                          weight_quantization format) override;
  std::unique_ptr<kv_cache> create_kv_cache(const kv_cache_spec& spec) override;
  std::unique_ptr<host_block_pool> create_host_pool(const kv_cache_spec& spec, std::int64_t num_blocks) override;

  std::unique_ptr<step_plan> plan_step(const step_batch& batch, const kv_cache_spec& cache,
                                       const attention_geometry& geometry) override;
  void copy_blocks(kv_cache& cache, host_block_pool* host, std::span<const block_copy> copies) override;

  void embed(const step_plan& plan, tensor_view table, tensor_view out) override;
  void rms_norm(tensor_view x, tensor_view weight, float eps, tensor_view out) override;
  void add_rms_norm(tensor_view residual, tensor_view x, tensor_view weight, float eps, tensor_view out) override;
  void head_rms_norm(tensor_view x, int head_dim, tensor_view weight, float eps) override;
  void linear(tensor_view x, const linear_weight& w, tensor_view out) override;
  void rope_and_write_kv(const step_plan& plan, tensor_view q, tensor_view k, tensor_view v, kv_cache& cache,
                         int layer) override;
  void attention(const step_plan& plan, tensor_view q, const kv_cache& cache, int layer, tensor_view out) override;
  void silu_mul(tensor_view gate_up, tensor_view out) override;
  void gather_logits_rows(const step_plan& plan, tensor_view x, tensor_view out) override;
  void refine_logits(tensor_view x, tensor_view table, int candidates, tensor_view logits) override;
  bool supports_logit_refinement() const override { return true; }
  sample_result sample(const step_plan& plan, tensor_view logits) override;

  /// The kernel table in use (tests and benchmarks report it).
  const isa_kernels& kernels() const { return kernels_; }
  thread_pool& pool() { return pool_; }

 private:
  void copy_parallel(void* dst, const void* src, std::size_t bytes);
  /// The skinny GEMM, parallel over weight rows; `k_blocked` walks K in
  /// blocks (many rows, batch-invariant mode) with the same per-element order.
  void linear_skinny(tensor_view x, const cpu_linear_weight& w, tensor_view out, bool k_blocked);
  /// Packs bf16 `parts` (stacked) into `weight`'s panels, in parallel.
  void pack_panels(std::span<const host_tensor> parts, cpu_linear_weight& weight);
  /// The panel GEMM, parallel over panels (and row blocks when they are few).
  void linear_panels(tensor_view x, const cpu_linear_weight& w, tensor_view out);
  /// x's columns gathered by `permutation` (into permuted_x_).
  tensor_view permuted_columns(tensor_view x, std::span<const std::int32_t> permutation);
  /// Quantises x's rows to int8 and runs the quantised skinny GEMM.
  void linear_quantized(tensor_view x, const cpu_linear_weight& w, tensor_view out);
  /// bf16 copies of x's rows for the vdpbf16ps paths: the first row, and
  /// the elements between rows (`stride`).
  const std::uint16_t* round_rows_to_bf16(tensor_view x, std::int64_t& stride);
  /// Largest M that `linear` runs on the skinny GEMM for weights of `type`.
  int skinny_row_limit(dtype type) const;
  void merge_attention_partials(const cpu_step_plan& plan, tensor_view out);

  isa_level isa_;
  const isa_kernels& kernels_;
  weight_placement placement_;
  int gemv_max_rows_;  ///< -1: per weight type
  int quantized_gemv_max_rows_;
  bool batch_invariant_;
  bool bf16_panels_;
  thread_pool pool_;
  per_thread_scratch scratch_;
  std::unique_ptr<onednn_matmuls> matmuls_;
  std::vector<std::unique_ptr<sampler_scratch>> sampler_scratch_;
  std::vector<float> attention_partials_;
  std::vector<std::uint16_t> activations_bf16_;
  /// int8 activations of the quantised path, 64 bytes spare so that the codes
  /// can start on a cache line (each kernel load is one 64-byte line).
  std::vector<std::int8_t> activation_codes_;
  std::vector<float> activation_scales_, activation_sums_;
  std::vector<std::int32_t> activation_code_sums_, activation_half_starts_;
  std::vector<float> permuted_x_;  ///< [M][K] activations gathered for a permuted weight
  /// Per pool thread: 4- to 6-bit codes the quantised GEMM tiles expand (qgemv_args::code_scratch).
  std::vector<std::vector<std::uint8_t>> code_scratch_;
};

/// Sizes of the rows a task of a row-parallel op covers: enough rows that
/// dispatch cost is amortised, few enough that every thread gets work.
std::int64_t rows_per_task(std::int64_t rows, std::int64_t cols, int threads);

/// a / b rounded up, for positive a and b.
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// Narrows a kernel call (gemv_args, panel_gemm_args) to its activation rows
/// [first_row, first_row + rows): x, x's bf16 copy when there is one, and out.
template <class RowArgs>
void select_rows(RowArgs& args, std::int64_t first_row, std::int64_t rows) {
  args.x += first_row * args.x_stride;
  if (args.x_bf16 != nullptr) args.x_bf16 += first_row * args.x_bf16_stride;
  args.out += first_row * args.out_stride;
  args.m_rows = rows;
}

/// Throws std::invalid_argument("<op>: <what>") unless `ok`.
void require(bool ok, const char* op, const char* what);

}  // namespace troupe::cpu
