// plan_step: validate the batch, partition attention, compute rotary
// frequencies, and upload every per-step array in one copy.

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/attention_plan.hpp"
#include "kernels/cuda/cuda_backend_impl.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_step_plan.hpp"
#include "kernels/cuda/upload_layout.hpp"
#include "kernels/rope_spec.hpp"
#include "kernels/tree_attention.hpp"

namespace troupe::cuda {

namespace {

void require(bool condition, const std::string& what) {
  if (!condition) throw std::invalid_argument("plan_step: " + what);
}

void check_geometry(const kv_cache_spec& cache, const attention_geometry& g, const device_context& device) {
  require(cache.type == dtype::bf16 || cache.type == dtype::f16, "the KV cache must be bf16 or f16 on cuda");
  require(g.num_kv_heads == cache.num_kv_heads && g.head_dim == cache.head_dim,
          "attention geometry and KV cache disagree on kv heads or head_dim");
  require(g.num_kv_heads > 0 && g.num_q_heads > 0 && g.num_q_heads % g.num_kv_heads == 0,
          "num_q_heads must be a positive multiple of num_kv_heads");
  require(g.head_dim % 8 == 0 && g.head_dim > 0 && g.head_dim <= max_generic_head_dim,
          "head_dim " + std::to_string(g.head_dim) + " unsupported: the cuda kernels take multiples of 8 up to " +
              std::to_string(max_generic_head_dim));
  require(std::isfinite(g.scale) && g.scale > 0.0f, "the softmax scale must be positive");
  const int rotary = g.rope.head_dim > 0 ? g.rope.head_dim : g.head_dim;
  require(rotary % 2 == 0 && rotary <= g.head_dim, "rotary dims must be even and at most head_dim");
  const int group = g.num_q_heads / g.num_kv_heads;
  const std::size_t needed =
      std::max(decode_shared_bytes(g.head_dim, group, cache.type), prefill_shared_bytes(g.head_dim, cache.type));
  require(needed <= device.shared_memory_limit, "attention for this geometry needs " + std::to_string(needed) +
                                                    " bytes of shared memory; " + device.name + " offers " +
                                                    std::to_string(device.shared_memory_limit));
}

// One table for length-independent scalings; one per sequence (and a table
// index per token) for `dynamic`, whose base grows with the sequence.
void rotary_tables(const step_batch& batch, const rope_spec& spec, int rotary_dim, std::vector<float>& inv_freq,
                   std::vector<std::int32_t>& token_table) {
  rope_spec rotary = spec;
  rotary.head_dim = rotary_dim;
  if (!rope_depends_on_length(rotary)) {
    inv_freq = rope_inverse_frequencies(rotary, 0);
    return;
  }
  token_table.assign(batch.token_ids.size(), 0);
  for (std::int64_t s = 0; s < batch.num_sequences(); ++s) {
    const std::vector<float> table = rope_inverse_frequencies(rotary, batch.seq_lens[static_cast<std::size_t>(s)]);
    inv_freq.insert(inv_freq.end(), table.begin(), table.end());
    for (std::int32_t t = batch.query_start[static_cast<std::size_t>(s)];
         t < batch.query_start[static_cast<std::size_t>(s) + 1]; ++t)
      token_table[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(s);
  }
}

}  // namespace

std::unique_ptr<step_plan> cuda_backend::plan_step(const step_batch& batch, const kv_cache_spec& cache,
                                                   const attention_geometry& geometry) {
  if (const std::string problem = validate_step_batch(batch, cache); !problem.empty()) require(false, problem);
  check_geometry(cache, geometry, device_);
  TROUPE_CUDA_CHECK(cudaSetDevice(device_.device));

  auto plan = std::make_unique<cuda_step_plan>();
  plan->batch = &batch;
  plan->cache = cache;
  plan->geometry = geometry;
  plan->rotary_dim = geometry.rope.head_dim > 0 ? geometry.rope.head_dim : geometry.head_dim;
  const attention_work work = partition_attention(batch, geometry, {device_.multiprocessors, options_.decode_splits});
  std::vector<float> inv_freq;
  std::vector<std::int32_t> token_table;
  rotary_tables(batch, geometry.rope, plan->rotary_dim, inv_freq, token_table);

  const tree_key_map tree = map_tree_keys(batch);

  upload_layout layout;
  const std::size_t token_ids = layout.add(batch.token_ids);
  const std::size_t positions = layout.add(batch.positions);
  const std::size_t slots = layout.add(batch.slot_mapping);
  const std::size_t indptr = layout.add(batch.kv_indptr);
  const std::size_t indices = layout.add(batch.kv_indices);
  const std::size_t logits = layout.add(batch.logits_indices);
  const std::size_t tables = layout.add(token_table);
  const std::size_t freqs = layout.add(inv_freq);
  const std::size_t prefill = layout.add(work.prefill);
  const std::size_t decode = layout.add(work.decode);
  const std::size_t merges = layout.add(work.merges);
  const std::size_t tree_start = layout.add(tree.start);
  const std::size_t tree_offset = layout.add(tree.offset);
  const std::size_t tree_keys = layout.add(tree.keys);
  plan->metadata = upload_packed(layout);

  void* base = plan->metadata.data();
  plan->token_ids = at_offset<const std::int32_t>(base, token_ids);
  plan->positions = at_offset<const std::int32_t>(base, positions);
  plan->slot_mapping = at_offset<const std::int64_t>(base, slots);
  plan->kv_indptr = at_offset<const std::int32_t>(base, indptr);
  plan->kv_indices = at_offset<const std::int32_t>(base, indices);
  plan->logits_indices = at_offset<const std::int32_t>(base, logits);
  plan->token_table = token_table.empty() ? nullptr : at_offset<const std::int32_t>(base, tables);
  plan->inv_freq = at_offset<const float>(base, freqs);
  if (!tree.start.empty()) {
    plan->tree_start = at_offset<const std::int32_t>(base, tree_start);
    plan->tree_key_offset = at_offset<const std::int32_t>(base, tree_offset);
    plan->tree_keys = at_offset<const std::int32_t>(base, tree_keys);
  }
  plan->prefill_items = at_offset<const prefill_work_item>(base, prefill);
  plan->num_prefill_items = static_cast<int>(work.prefill.size());
  plan->decode_items = at_offset<const decode_work_item>(base, decode);
  plan->num_decode_items = static_cast<int>(work.decode.size());
  plan->merge_items = at_offset<const decode_merge_item>(base, merges);
  plan->num_merge_items = static_cast<int>(work.merges.size());
  plan->heads_per_tile = work.heads_per_tile;
  plan->group_parts = work.group_parts;
  plan->tokens_per_tile = work.tokens_per_tile;

  if (work.num_partials > 0) {
    const std::size_t outputs = static_cast<std::size_t>(work.num_partials) * geometry.num_q_heads;
    plan->partials = allocate(outputs * (static_cast<std::size_t>(geometry.head_dim) + 1) * sizeof(float));
    plan->partial_out = static_cast<float*>(plan->partials.data());
    plan->partial_lse = plan->partial_out + outputs * static_cast<std::size_t>(geometry.head_dim);
  }
  return plan;
}

const cuda_step_plan& cuda_backend::plan_of(const step_plan& plan) const {
  const auto* ours = dynamic_cast<const cuda_step_plan*>(&plan);
  if (ours == nullptr) throw std::invalid_argument("cuda backend: the step plan was made by another backend");
  return *ours;
}

}  // namespace troupe::cuda
