// The per-layer ops: argument checks, then one kernel (or cuBLASLt call)
// enqueued on the compute stream.

#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/cuda/activation.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/cuda_backend_impl.hpp"
#include "kernels/cuda/cuda_step_plan.hpp"
#include "kernels/cuda/gather.hpp"
#include "kernels/cuda/logit_refinement.hpp"
#include "kernels/cuda/rms_norm.hpp"
#include "kernels/cuda/rope_kv.hpp"

namespace troupe::cuda {

namespace {

void require(bool condition, const char* op, const std::string& what) {
  if (!condition) throw std::invalid_argument(std::string(op) + ": " + what);
}

void require_bf16(const tensor_view& view, const char* op, const char* name) {
  require(view.type == dtype::bf16, op,
          std::string(name) + " must be bf16 (the cuda activation type), not " + std::string(dtype_name(view.type)));
  require(view.data != nullptr || view.element_count() == 0, op, std::string(name) + " has no data");
}

void require_shape(const tensor_view& view, std::int64_t rows, std::int64_t cols, const char* op, const char* name) {
  require(view.rows == rows && view.cols == cols, op,
          std::string(name) + " is " + std::to_string(view.rows) + "x" + std::to_string(view.cols) + ", expected " +
              std::to_string(rows) + "x" + std::to_string(cols));
}

// Rows are `stride` elements apart; a single row may carry any stride.
std::int64_t row_stride(const tensor_view& view) {
  return view.rows <= 1 && view.row_stride < view.cols ? view.cols : view.row_stride;
}

void require_vector(const tensor_view& weight, std::int64_t length, const char* op) {
  require(static_cast<std::int64_t>(weight.element_count()) == length && weight.contiguous(), op,
          "weight must be a contiguous vector of " + std::to_string(length) + " elements");
}

paged_kv_layer layer_view(const cuda_step_plan& plan, const kv_cache& cache, int layer, const char* op) {
  const auto* device_cache = dynamic_cast<const cuda_kv_cache*>(&cache);
  require(device_cache != nullptr, op, "the cache was not created by the cuda backend");
  const kv_cache_spec& spec = device_cache->spec();
  require(spec.num_layers == plan.cache.num_layers && spec.num_kv_heads == plan.cache.num_kv_heads &&
              spec.head_dim == plan.cache.head_dim && spec.block_size == plan.cache.block_size &&
              spec.num_blocks == plan.cache.num_blocks && spec.type == plan.cache.type,
          op, "the cache differs from the one the step was planned for");
  require(layer >= 0 && layer < spec.num_layers, op, "layer " + std::to_string(layer) + " outside the cache");
  paged_kv_layer view;
  view.pool = device_cache->data();
  view.block_elements = spec.block_elements();
  view.layer_offset = spec.layer_offset(layer);
  view.tile_elements = spec.tile_elements();
  view.block_size = spec.block_size;
  view.num_kv_heads = spec.num_kv_heads;
  view.head_dim = spec.head_dim;
  view.kv_indptr = plan.kv_indptr;
  view.kv_indices = plan.kv_indices;
  return view;
}

row_gather_params gather_rows(const std::int32_t* indices, std::int64_t rows, const tensor_view& src,
                              const tensor_view& dst) {
  const auto element = static_cast<std::int64_t>(dtype_size(src.type));
  return {indices, src.data, row_stride(src) * element, dst.data, row_stride(dst) * element, rows, src.cols * element};
}

}  // namespace

void cuda_backend::embed(const step_plan& plan, tensor_view table, tensor_view out) {
  const cuda_step_plan& p = plan_of(plan);
  require(table.type == out.type, "embed", "table and out differ in element type");
  require_shape(out, p.num_tokens(), table.cols, "embed", "out");
  for (std::size_t t = 0; t < p.batch->token_ids.size(); ++t) {
    const std::int32_t id = p.batch->token_ids[t];
    require(id >= 0 && id < table.rows, "embed",
            "token id " + std::to_string(id) + " at row " + std::to_string(t) + " is outside the vocabulary of " +
                std::to_string(table.rows));
  }
  launch_row_gather(gather_rows(p.token_ids, p.num_tokens(), table, out), compute_.get());
}

void cuda_backend::gather_logits_rows(const step_plan& plan, tensor_view x, tensor_view out) {
  const cuda_step_plan& p = plan_of(plan);
  require(x.type == out.type, "gather_logits_rows", "x and out differ in element type");
  require(x.rows >= p.num_tokens(), "gather_logits_rows", "x has fewer rows than the step has tokens");
  require_shape(out, p.num_logits_rows(), x.cols, "gather_logits_rows", "out");
  launch_row_gather(gather_rows(p.logits_indices, p.num_logits_rows(), x, out), compute_.get());
}

void cuda_backend::refine_logits(tensor_view x, tensor_view table, int candidates, tensor_view logits) {
  require_bf16(x, "refine_logits", "x");
  require_bf16(table, "refine_logits", "table");
  require(logits.type == dtype::f32 && (logits.data != nullptr || logits.element_count() == 0), "refine_logits",
          "logits must be f32");
  require(logits.rows == x.rows && table.rows == logits.cols && table.cols == x.cols, "refine_logits",
          "x must be [L, H], table [V, H] and logits [L, V]");
  require(logits.cols <= std::numeric_limits<std::int32_t>::max(), "refine_logits", "the vocabulary exceeds int32 ids");
  require(candidates >= 1 && candidates <= logits.cols && candidates <= max_refined_candidates, "refine_logits",
          "candidates must be in [1, V] and at most " + std::to_string(max_refined_candidates));
  refine_logits_params params;
  params.x = x.data;
  params.x_stride = row_stride(x);
  params.table = table.data;
  params.table_stride = row_stride(table);
  params.logits = static_cast<float*>(logits.data);
  params.logits_stride = row_stride(logits);
  params.rows = x.rows;
  params.hidden = x.cols;
  params.vocab = logits.cols;
  params.candidates = candidates;
  launch_refine_logits(params, compute_.get());
}

void cuda_backend::rms_norm(tensor_view x, tensor_view weight, float eps, tensor_view out) {
  require_bf16(x, "rms_norm", "x");
  require_bf16(out, "rms_norm", "out");
  require_shape(out, x.rows, x.cols, "rms_norm", "out");
  require_vector(weight, x.cols, "rms_norm");
  rms_norm_params params;
  params.x = x.data;
  params.x_stride = row_stride(x);
  params.weight = weight.data;
  params.weight_type = weight.type;
  params.out = out.data;
  params.out_stride = row_stride(out);
  params.rows = x.rows;
  params.cols = x.cols;
  params.eps = eps;
  launch_rms_norm(params, compute_.get());
}

void cuda_backend::add_rms_norm(tensor_view residual, tensor_view x, tensor_view weight, float eps, tensor_view out) {
  require_bf16(residual, "add_rms_norm", "residual");
  require_bf16(x, "add_rms_norm", "x");
  require_bf16(out, "add_rms_norm", "out");
  require_shape(x, residual.rows, residual.cols, "add_rms_norm", "x");
  require_shape(out, residual.rows, residual.cols, "add_rms_norm", "out");
  require_vector(weight, x.cols, "add_rms_norm");
  rms_norm_params params;
  params.residual = residual.data;
  params.residual_stride = row_stride(residual);
  params.x = x.data;
  params.x_stride = row_stride(x);
  params.weight = weight.data;
  params.weight_type = weight.type;
  params.out = out.data;
  params.out_stride = row_stride(out);
  params.rows = x.rows;
  params.cols = x.cols;
  params.eps = eps;
  launch_rms_norm(params, compute_.get());
}

void cuda_backend::head_rms_norm(tensor_view x, int head_dim, tensor_view weight, float eps) {
  require_bf16(x, "head_rms_norm", "x");
  require(head_dim > 0 && x.cols % head_dim == 0, "head_rms_norm", "x's columns are not whole heads");
  require_vector(weight, head_dim, "head_rms_norm");
  head_rms_norm_params params;
  params.x = x.data;
  params.x_stride = row_stride(x);
  params.rows = x.rows;
  params.heads = static_cast<int>(x.cols / head_dim);
  params.head_dim = head_dim;
  params.weight = weight.data;
  params.weight_type = weight.type;
  params.eps = eps;
  launch_head_rms_norm(params, compute_.get());
}

void cuda_backend::linear(tensor_view x, const linear_weight& w, tensor_view out) {
  require_bf16(x, "linear", "x");
  require(out.type == dtype::bf16 || out.type == dtype::f32, "linear", "out must be bf16 or f32");
  require_shape(x, x.rows, w.in_features(), "linear", "x");
  require_shape(out, x.rows, w.out_features(), "linear", "out");
  gemm_problem problem;
  problem.x = x.data;
  problem.x_stride = row_stride(x);
  problem.out = out.data;
  problem.out_stride = row_stride(out);
  problem.out_type = out.type;
  problem.m = x.rows;
  problem.n = w.out_features();
  problem.k = w.in_features();
  if (const auto* quantized = dynamic_cast<const cuda_quantized_weight*>(&w)) {
    quantized_linear(problem, *quantized);
    return;
  }
  const auto* weight = dynamic_cast<const cuda_linear_weight*>(&w);
  require(weight != nullptr, "linear", "the weight was not prepared by the cuda backend");
  problem.w = weight->weights.data();
  if (weight->bias_f32.data() != nullptr)
    problem.bias = out.type == dtype::f32 ? weight->bias_f32.data() : weight->bias_bf16.data();
  gemm_->run(problem, compute_.get());
}

void cuda_backend::rope_and_write_kv(const step_plan& plan, tensor_view q, tensor_view k, tensor_view v,
                                     kv_cache& cache, int layer) {
  const cuda_step_plan& p = plan_of(plan);
  const attention_geometry& g = p.geometry;
  for (const auto& [view, name] : {std::pair{q, "q"}, std::pair{k, "k"}, std::pair{v, "v"}})
    require_bf16(view, "rope_and_write_kv", name);
  require_shape(q, p.num_tokens(), std::int64_t{g.num_q_heads} * g.head_dim, "rope_and_write_kv", "q");
  require_shape(k, p.num_tokens(), std::int64_t{g.num_kv_heads} * g.head_dim, "rope_and_write_kv", "k");
  require_shape(v, p.num_tokens(), std::int64_t{g.num_kv_heads} * g.head_dim, "rope_and_write_kv", "v");
  rope_kv_params params;
  params.cache = layer_view(p, cache, layer, "rope_and_write_kv");
  params.q = q.data;
  params.q_stride = row_stride(q);
  params.k = k.data;
  params.k_stride = row_stride(k);
  params.v = v.data;
  params.v_stride = row_stride(v);
  params.positions = p.positions;
  params.slot_mapping = p.slot_mapping;
  params.inv_freq = p.inv_freq;
  params.token_table = p.token_table;
  params.cache_type = p.cache.type;
  params.num_tokens = p.num_tokens();
  params.num_q_heads = g.num_q_heads;
  params.rotary_dim = p.rotary_dim;
  wait_for_block_copies();
  launch_rope_kv(params, compute_.get());
}

void cuda_backend::attention(const step_plan& plan, tensor_view q, const kv_cache& cache, int layer, tensor_view out) {
  const cuda_step_plan& p = plan_of(plan);
  const attention_geometry& g = p.geometry;
  require_bf16(q, "attention", "q");
  require_bf16(out, "attention", "out");
  require_shape(q, p.num_tokens(), std::int64_t{g.num_q_heads} * g.head_dim, "attention", "q");
  require_shape(out, p.num_tokens(), std::int64_t{g.num_q_heads} * g.head_dim, "attention", "out");
  const paged_kv_layer kv = layer_view(p, cache, layer, "attention");
  const int group = g.num_q_heads / g.num_kv_heads;
  wait_for_block_copies();

  prefill_attention_params prefill;
  prefill.q = q.data;
  prefill.q_stride = row_stride(q);
  prefill.out = out.data;
  prefill.out_stride = row_stride(out);
  prefill.positions = p.positions;
  prefill.kv = kv;
  prefill.cache_type = p.cache.type;
  prefill.items = p.prefill_items;
  prefill.num_items = p.num_prefill_items;
  prefill.group_size = group;
  prefill.heads_per_tile = p.heads_per_tile;
  prefill.group_parts = p.group_parts;
  prefill.tokens_per_tile = p.tokens_per_tile;
  prefill.scale = g.scale;
  launch_prefill_attention(prefill, device_.shared_memory_limit, compute_.get());

  decode_attention_params decode;
  decode.q = q.data;
  decode.q_stride = row_stride(q);
  decode.out = out.data;
  decode.out_stride = row_stride(out);
  decode.kv = kv;
  decode.cache_type = p.cache.type;
  decode.items = p.decode_items;
  decode.num_items = p.num_decode_items;
  decode.group_size = group;
  decode.scale = g.scale;
  decode.partial_out = p.partial_out;
  decode.partial_lse = p.partial_lse;
  decode.tree_start = p.tree_start;
  decode.tree_key_offset = p.tree_key_offset;
  decode.tree_keys = p.tree_keys;
  launch_decode_attention(decode, device_.shared_memory_limit, compute_.get());

  decode_merge_params merge;
  merge.items = p.merge_items;
  merge.num_items = p.num_merge_items;
  merge.num_q_heads = g.num_q_heads;
  merge.head_dim = g.head_dim;
  merge.partial_out = p.partial_out;
  merge.partial_lse = p.partial_lse;
  merge.out = out.data;
  merge.out_stride = row_stride(out);
  launch_decode_merge(merge, compute_.get());
}

void cuda_backend::silu_mul(tensor_view gate_up, tensor_view out) {
  require_bf16(gate_up, "silu_mul", "gate_up");
  require_bf16(out, "silu_mul", "out");
  require_shape(gate_up, out.rows, 2 * out.cols, "silu_mul", "gate_up");
  silu_mul_params params;
  params.gate_up = gate_up.data;
  params.gate_up_stride = row_stride(gate_up);
  params.out = out.data;
  params.out_stride = row_stride(out);
  params.rows = out.rows;
  params.features = out.cols;
  launch_silu_mul(params, compute_.get());
}

}  // namespace troupe::cuda
