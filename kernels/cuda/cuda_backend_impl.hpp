#pragma once
// The CUDA backend's classes. Internal to kernels/cuda (and its tests):
// includes CUDA runtime headers, unlike cuda_backend.hpp.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/cuda/cuda_backend.hpp"
#include "kernels/cuda/device_memory.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/quantized_linear.hpp"

namespace troupe::cuda {

class cuda_step_plan;
class upload_layout;

/// A linear layer on the device: bf16 weights [N, K] (f16 and f32
/// checkpoints are converted, because cuBLASLt multiplies like types and
/// activations are bf16) and the bias, if any, in both output types.
class cuda_linear_weight final : public linear_weight {
 public:
  cuda_linear_weight(std::int64_t out_features, std::int64_t in_features)
      : out_features_(out_features), in_features_(in_features) {}
  std::int64_t out_features() const override { return out_features_; }
  std::int64_t in_features() const override { return in_features_; }
  std::size_t weight_bytes() const override { return weights.bytes(); }

  device_allocation weights;    ///< bf16 [out_features, in_features]
  device_allocation bias_bf16;  ///< bf16 [out_features], empty without bias
  device_allocation bias_f32;   ///< f32 [out_features], empty without bias

 private:
  std::int64_t out_features_;
  std::int64_t in_features_;
};

/// A weight-only quantised linear layer: codes, scales and offsets in one
/// allocation laid out by `layout` (see quantized_linear.hpp), the bias as in
/// cuda_linear_weight.
class cuda_quantized_weight final : public linear_weight {
 public:
  explicit cuda_quantized_weight(const quantized_device_layout& layout) : layout(layout) {}
  std::int64_t out_features() const override { return layout.rows; }
  std::int64_t in_features() const override { return layout.cols; }
  std::size_t weight_bytes() const override { return storage.bytes(); }

  quantized_device_layout layout;
  device_allocation storage;    ///< layout.total_bytes
  device_allocation bias_bf16;  ///< bf16 [out_features], empty without bias
  device_allocation bias_f32;   ///< f32 [out_features], empty without bias
  /// int32 [in_features], or empty: the codes' input j is x's column
  /// input_order[j] (GPTQ act-order kept as stored); linear gathers x by it.
  device_allocation input_order;
};

/// The paged KV pool: num_blocks blocks laid out as kv_cache_spec says, in
/// bf16 or f16.
class cuda_kv_cache final : public kv_cache {
 public:
  /// Allocates the pool (uninitialised); throws std::invalid_argument for an
  /// element type other than bf16 / f16.
  explicit cuda_kv_cache(const kv_cache_spec& spec);
  const kv_cache_spec& spec() const override { return spec_; }
  /// Device address of the pool's first block.
  void* data() const { return pool_.data(); }

 private:
  kv_cache_spec spec_;
  device_allocation pool_;
};

/// Pinned host blocks for swapped-out KV, laid out like the device pool.
/// Contents written by copy_blocks are readable after synchronize().
class cuda_host_pool final : public host_block_pool {
 public:
  cuda_host_pool(const kv_cache_spec& spec, std::int64_t num_blocks);
  std::int64_t num_blocks() const override { return num_blocks_; }
  void* block_data(std::int64_t index) override;
  /// Bytes of one block.
  std::size_t block_bytes() const { return block_bytes_; }

 private:
  std::int64_t num_blocks_;
  std::size_t block_bytes_;
  pinned_allocation memory_;
};

/// Marks over the vocabulary that find each distinct id of a row's history
/// without clearing between rows (a new mark value per row).
struct penalty_marks {
  std::vector<std::uint32_t> stamp;  ///< [V] mark of the row that last saw the id
  std::vector<std::int32_t> count;   ///< [V] output occurrences under that mark
  std::uint32_t mark = 0;
};

/// Selects the device for the constructing thread and reads its limits;
/// constructed first so that every later member lives on that device.
struct device_context {
  explicit device_context(int device_index);
  int device = 0;
  int multiprocessors = 0;
  std::size_t shared_memory_limit = 0;  ///< opt-in dynamic shared memory per block, bytes
  std::string name;
};

/// The CUDA backend (see kernels/cuda/README.md).
class cuda_backend final : public backend {
 public:
  explicit cuda_backend(const cuda_backend_options& options);
  ~cuda_backend() override;

  std::string name() const override { return "cuda"; }
  dtype activation_type() const override { return dtype::bf16; }

  device_buffer allocate(std::size_t bytes) override;
  void release(void* data, std::size_t bytes) override;
  void copy_to_device(void* dst, const void* src, std::size_t bytes) override;
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override;
  void synchronize() override;

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
  /// Not yet timed on a GPU against the int4 head's saving (tools/gpu-check.sh
  /// qbench runs both heads), so `auto` keeps an int8 head here.
  bool logit_refinement_pays() const override { return false; }
  sample_result sample(const step_plan& plan, tensor_view logits) override;

  /// The compute stream every op is enqueued on.
  cudaStream_t compute_stream() const { return compute_.get(); }

 private:
  device_buffer allocate_direct(std::size_t bytes);
  void upload_as(const host_tensor& tensor, void* dst, dtype to);
  /// Checks that `parts` share their columns and `biases` match them;
  /// returns the stacked row count. Parts hold floats, stored codes or a row source.
  static std::int64_t stacked_rows(std::span<const host_tensor> parts, std::span<const host_tensor> biases,
                                   const char* op);
  /// Uploads the stacked biases (if any) in f32 and bf16.
  void upload_biases(std::span<const host_tensor> biases, std::int64_t out_features, device_allocation& f32,
                     device_allocation& bf16);
  /// linear() on a quantised weight: `problem` carries x, out and the shape (not w or bias).
  void quantized_linear(const gemm_problem& problem, const cuda_quantized_weight& weight);
  void wait_for_block_copies();
  const cuda_step_plan& plan_of(const step_plan& plan) const;
  /// A workspace buffer holding `layout`'s arrays, copied through a staging slot on the compute stream.
  device_buffer upload_packed(const upload_layout& layout);
  /// Copies `bytes` from `src` through a staging slot into `dst`, on the compute stream.
  void stage_to_device(void* dst, const void* src, std::size_t bytes);
  /// Replaces the rows of batch.verify's groups in `result` by the host
  /// reference's verification of their logits (copied back from the device).
  void verify_on_host(const step_batch& batch, tensor_view logits, sample_result& result);

  cuda_backend_options options_;
  device_context device_;
  stream_handle compute_;
  stream_handle copy_;
  event_handle compute_ready_;  ///< recorded on compute before block copies start
  event_handle copies_done_;    ///< recorded on copy after the last block copy
  bool copies_pending_ = false;
  workspace_cache workspace_;
  std::mutex direct_mutex_;
  std::unordered_set<void*> direct_allocations_;  ///< cudaMalloc'd buffers behind device_buffers (uploads)
  staging_ring staging_{4};
  std::unique_ptr<cublaslt_gemm> gemm_;
  pinned_allocation readback_;  ///< sample results
  penalty_marks penalty_marks_;
};

}  // namespace troupe::cuda
