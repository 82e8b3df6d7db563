#pragma once
// The one interface between the model's forward pass and the hardware.
// `model/` writes the Llama-family forward pass once against it; `cpu/` and
// `cuda/` implement it. Ops are enqueued on the backend's stream in call
// order; only `copy_to_host`, `sample` and `synchronize` wait for results.
// A backend instance is used by one thread at a time (its executor).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/quantization.hpp"
#include "kernels/rope_spec.hpp"
#include "kernels/sampling.hpp"
#include "kernels/step_batch.hpp"
#include "kernels/tensor.hpp"

namespace troupe {

/// Attention shape of one model, fixed for its lifetime.
struct attention_geometry {
  int num_q_heads = 0;
  int num_kv_heads = 0;  ///< divides num_q_heads (GQA group = q / kv)
  int head_dim = 0;
  float scale = 0.0f;  ///< softmax scale, usually 1 / sqrt(head_dim)
  rope_spec rope;
};

/// A weight matrix prepared for `backend::linear`: out_features × in_features
/// (HF layout), in whatever layout and type the backend computes fastest.
class linear_weight {
 public:
  virtual ~linear_weight() = default;
  virtual std::int64_t out_features() const = 0;
  virtual std::int64_t in_features() const = 0;
  /// Bytes of weights (codes and scales, not the bias) that one use of the
  /// linear reads: what a decode step streams for it.
  virtual std::size_t weight_bytes() const = 0;
};

/// A tensor uploaded to the backend (norm weights, embedding tables). `view`
/// may point into the checkpoint mapping when no copy was needed, in which
/// case `storage` is empty and the checkpoint must outlive it.
struct device_tensor {
  device_buffer storage;
  tensor_view view;
};

/// The paged KV pool of one model on one device (see kv_cache_spec).
class kv_cache {
 public:
  virtual ~kv_cache() = default;
  virtual const kv_cache_spec& spec() const = 0;
};

/// Host memory holding swapped-out KV blocks (pinned on cuda), same block
/// layout as the device pool.
class host_block_pool {
 public:
  virtual ~host_block_pool() = default;
  virtual std::int64_t num_blocks() const = 0;
  /// Host pointer to block `index` (spec.block_bytes() bytes).
  virtual void* block_data(std::int64_t index) = 0;
};

/// Per-step state a backend derives once from a step_batch (device copies of
/// the CSR arrays, rotary tables, attention work partition) and reuses in
/// every layer. Valid until the next plan_step on the same backend.
class step_plan {
 public:
  virtual ~step_plan() = default;
  virtual std::int64_t num_tokens() const = 0;
  virtual std::int64_t num_logits_rows() const = 0;
};

class backend {
 public:
  virtual ~backend() = default;

  /// "cpu" or "cuda".
  virtual std::string name() const = 0;
  /// Type activations flow in between ops (cpu: f32, cuda: bf16). Logits are always f32.
  virtual dtype activation_type() const = 0;

  // ---- memory -------------------------------------------------------------
  /// Uninitialised backend memory of `bytes` bytes, 64-byte aligned.
  virtual device_buffer allocate(std::size_t bytes) = 0;
  /// Returns memory from allocate(); called by device_buffer.
  virtual void release(void* data, std::size_t bytes) = 0;
  /// Host → backend memory, ordered before later ops.
  virtual void copy_to_device(void* dst, const void* src, std::size_t bytes) = 0;
  /// Backend → host memory; waits for earlier ops.
  virtual void copy_to_host(void* dst, const void* src, std::size_t bytes) = 0;
  /// Waits until every enqueued op has finished.
  virtual void synchronize() = 0;

  // ---- weights and caches -------------------------------------------------
  /// Uploads a checkpoint tensor (norm weights, embedding table) in the type
  /// the backend reads it fastest; the view has the tensor's matrix shape.
  virtual device_tensor upload(const host_tensor& tensor) = 0;
  /// Prepares a linear layer from `parts` stacked along the output dimension
  /// (e.g. q, k, v projections fused into one GEMM), each [out_i, in], with
  /// optional `biases` ([out_i] each; empty or one per part).
  virtual std::unique_ptr<linear_weight> prepare_linear(std::span<const host_tensor> parts,
                                                        std::span<const host_tensor> biases) = 0;
  /// prepare_linear with the weights converted to `format` at load (round to
  /// nearest; weight_quantization::none: prepare_linear itself). Throws
  /// std::runtime_error when the backend has no kernels for `format`.
  virtual std::unique_ptr<linear_weight> prepare_quantized_linear(std::span<const host_tensor> parts,
                                                                  std::span<const host_tensor> biases,
                                                                  weight_quantization format);
  /// Allocates the paged KV pool described by `spec`.
  virtual std::unique_ptr<kv_cache> create_kv_cache(const kv_cache_spec& spec) = 0;
  /// Allocates a host swap pool of `num_blocks` blocks shaped like `spec`'s.
  virtual std::unique_ptr<host_block_pool> create_host_pool(const kv_cache_spec& spec, std::int64_t num_blocks) = 0;

  // ---- one step -----------------------------------------------------------
  /// Validates `batch` (throws std::invalid_argument naming the problem) and
  /// derives what every layer reuses. The batch must outlive the plan.
  virtual std::unique_ptr<step_plan> plan_step(const step_batch& batch, const kv_cache_spec& cache,
                                               const attention_geometry& geometry) = 0;
  /// Runs whole-block copies between the device pool and the host pool.
  virtual void copy_blocks(kv_cache& cache, host_block_pool* host, std::span<const block_copy> copies) = 0;

  // ---- ops: shapes in rows × cols; T tokens, H hidden, V vocab -------------
  /// out[T, H] = table[token_ids[t], :].
  virtual void embed(const step_plan& plan, tensor_view table, tensor_view out) = 0;
  /// out[R, C] = x / rms(x) * weight[C], rms over each row.
  virtual void rms_norm(tensor_view x, tensor_view weight, float eps, tensor_view out) = 0;
  /// residual[R, C] += x; out = rms_norm(residual). Fuses the block's residual add.
  virtual void add_rms_norm(tensor_view residual, tensor_view x, tensor_view weight, float eps, tensor_view out) = 0;
  /// In place: RMSNorm over each head_dim-long slice of every row of x [T, heads * head_dim] (Qwen3 q/k norm).
  virtual void head_rms_norm(tensor_view x, int head_dim, tensor_view weight, float eps) = 0;
  /// out[M, N] = x[M, K] · wᵀ (+ bias). `out` may be f32 when activations are not (logits).
  virtual void linear(tensor_view x, const linear_weight& w, tensor_view out) = 0;
  /// Rotates q [T, Hq*D] and k [T, Hkv*D] in place at each token's position,
  /// then writes k and v [T, Hkv*D] into layer `layer` of the cache at the
  /// token's slot_mapping entry.
  virtual void rope_and_write_kv(const step_plan& plan, tensor_view q, tensor_view k, tensor_view v, kv_cache& cache,
                                 int layer) = 0;
  /// Paged causal attention: each query token of sequence s attends to the
  /// sequence's cached tokens at positions ≤ its own. q, out: [T, Hq*D].
  virtual void attention(const step_plan& plan, tensor_view q, const kv_cache& cache, int layer, tensor_view out) = 0;
  /// out[T, F] = silu(gate_up[:, :F]) * gate_up[:, F:]; gate_up is [T, 2F].
  virtual void silu_mul(tensor_view gate_up, tensor_view out) = 0;
  /// out[L, H] = x[logits_indices[l], :].
  virtual void gather_logits_rows(const step_plan& plan, tensor_view x, tensor_view out) = 0;
  /// In place, for a lossy LM head tied to `table` (the embeddings, [V, H]):
  /// in each row l of logits [L, V] the `candidates` largest entries become
  /// the exact x[l, :] · table[v, :] (x [L, H]); the rest stay. Throws
  /// std::logic_error unless supports_logit_refinement().
  virtual void refine_logits(tensor_view x, tensor_view table, int candidates, tensor_view logits);
  /// True when refine_logits runs on this backend (llama_model then rescores
  /// a tied head of fewer than 8 bits).
  virtual bool supports_logit_refinement() const { return false; }
  /// True when the rescoring is known to cost less than the bytes a 4-bit
  /// head saves over an int8 one, so that `auto` gives a tied head beside 4-
  /// or 5-bit layers int4 (docs/operations.md).
  virtual bool logit_refinement_pays() const { return supports_logit_refinement(); }
  /// Samples every logits row (f32 [L, V]) per plan's batch.sampling and
  /// verifies its batch.verify groups (see sampling.hpp, speculative.hpp).
  virtual sample_result sample(const step_plan& plan, tensor_view logits) = 0;
};

/// How make_backend builds a backend.
struct backend_options {
  int threads = 0;  ///< cpu: threads per op including the caller; 0 = all cores
  /// Every output row of every op is a pure function of that row's inputs
  /// (and, for attention, of its sequence's K/V and the query's position):
  /// bitwise the same whatever shares the step and however a prompt is
  /// chunked. cpu: supported (prefill GEMMs get slower); cuda: ignored.
  bool batch_invariant = false;
};

/// Creates a backend by name ("cpu", "cuda"); `threads` applies to cpu
/// (0 = all cores). Throws std::runtime_error naming what is unavailable.
std::unique_ptr<backend> make_backend(const std::string& name, int threads);
/// Creates a backend by name ("cpu", "cuda") with `options`. Throws
/// std::runtime_error naming what is unavailable.
std::unique_ptr<backend> make_backend(const std::string& name, const backend_options& options);

/// True when a CUDA device is usable in this process.
bool cuda_available();

/// Device-to-device copy bandwidth of CUDA device 0 in GB/s (bytes read plus
/// bytes written): the yardstick for GPU decode. Throws std::runtime_error in
/// builds without CUDA or without a device.
double measure_cuda_copy_bandwidth_gbps();

}  // namespace troupe
