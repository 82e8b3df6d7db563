// RoPE + KV write, paged attention with its split-KV merge, and block copies.

#include <algorithm>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/cpu/cpu_backend_impl.hpp"
#include "kernels/cpu/cpu_plan.hpp"

namespace troupe::cpu {

namespace {

const cpu_step_plan& as_cpu_plan(const step_plan& plan, const char* op) {
  const auto* cpu_plan = dynamic_cast<const cpu_step_plan*>(&plan);
  require(cpu_plan != nullptr, op, "the plan was not made by the cpu backend");
  return *cpu_plan;
}

const cpu_kv_cache& as_cpu_cache(const kv_cache& cache, const char* op) {
  const auto* cpu_cache = dynamic_cast<const cpu_kv_cache*>(&cache);
  require(cpu_cache != nullptr, op, "the cache was not made by the cpu backend");
  return *cpu_cache;
}

void check_heads_view(tensor_view view, std::int64_t tokens, std::int64_t cols, const char* op, const char* what) {
  require(view.type == dtype::f32 && view.rows == tokens && view.cols == cols, op, what);
}

}  // namespace

void cpu_backend::rope_and_write_kv(const step_plan& plan_base, tensor_view q, tensor_view k, tensor_view v,
                                    kv_cache& cache_base, int layer) {
  const cpu_step_plan& plan = as_cpu_plan(plan_base, "rope_and_write_kv");
  const cpu_kv_cache& cache = as_cpu_cache(cache_base, "rope_and_write_kv");
  const kv_cache_spec& spec = cache.spec();
  const attention_geometry& geo = plan.geometry;
  const std::int64_t tokens = plan.num_tokens();
  check_heads_view(q, tokens, std::int64_t{geo.num_q_heads} * geo.head_dim, "rope_and_write_kv",
                   "q must be f32 [T, Hq*D]");
  check_heads_view(k, tokens, std::int64_t{geo.num_kv_heads} * geo.head_dim, "rope_and_write_kv",
                   "k must be f32 [T, Hkv*D]");
  check_heads_view(v, tokens, std::int64_t{geo.num_kv_heads} * geo.head_dim, "rope_and_write_kv",
                   "v must be f32 [T, Hkv*D]");
  require(spec.num_kv_heads == geo.num_kv_heads && spec.head_dim == geo.head_dim, "rope_and_write_kv",
          "the cache spec differs from the planned geometry");
  require(layer >= 0 && layer < spec.num_layers, "rope_and_write_kv", "layer outside the cache");
  const int half = plan.rotary_dim / 2;
  const std::size_t element_bytes = dtype_size(spec.type);
  char* pool_base = static_cast<char*>(cache.data());
  const std::int64_t per_task = rows_per_task(tokens, q.cols + k.cols, pool_.size());
  pool_.parallel_for((tokens + per_task - 1) / per_task, [&](std::int64_t task, int) {
    for (std::int64_t t = task * per_task; t < std::min(tokens, (task + 1) * per_task); ++t) {
      const float* cos = plan.rope_cos.data() + t * half;
      const float* sin = plan.rope_sin.data() + t * half;
      float* k_row = k.as<float>() + t * k.row_stride;
      kernels_.rope_row(q.as<float>() + t * q.row_stride, geo.num_q_heads, geo.head_dim, plan.rotary_dim, cos, sin);
      kernels_.rope_row(k_row, geo.num_kv_heads, geo.head_dim, plan.rotary_dim, cos, sin);
      const std::int64_t slot = plan.batch->slot_mapping[static_cast<std::size_t>(t)];
      const std::int64_t block = slot / spec.block_size, offset = slot % spec.block_size;
      const float* v_row = v.as<const float>() + t * v.row_stride;
      for (int h = 0; h < geo.num_kv_heads; ++h) {
        const std::int64_t element = block * spec.block_elements() + spec.layer_offset(layer) +
                                     (std::int64_t{h} * spec.block_size + offset) * spec.head_dim;
        char* k_dst = pool_base + static_cast<std::size_t>(element) * element_bytes;
        char* v_dst = k_dst + static_cast<std::size_t>(spec.tile_elements()) * element_bytes;
        kernels_.from_f32(k_row + h * geo.head_dim, k_dst, static_cast<elem>(spec.type), geo.head_dim);
        kernels_.from_f32(v_row + h * geo.head_dim, v_dst, static_cast<elem>(spec.type), geo.head_dim);
      }
    }
  });
}

void cpu_backend::attention(const step_plan& plan_base, tensor_view q, const kv_cache& cache_base, int layer,
                            tensor_view out) {
  const cpu_step_plan& plan = as_cpu_plan(plan_base, "attention");
  const cpu_kv_cache& cache = as_cpu_cache(cache_base, "attention");
  const kv_cache_spec& spec = cache.spec();
  const attention_geometry& geo = plan.geometry;
  const std::int64_t tokens = plan.num_tokens(), width = std::int64_t{geo.num_q_heads} * geo.head_dim;
  check_heads_view(q, tokens, width, "attention", "q must be f32 [T, Hq*D]");
  check_heads_view(out, tokens, width, "attention", "out must be f32 [T, Hq*D]");
  require(spec.num_kv_heads == geo.num_kv_heads && spec.head_dim == geo.head_dim &&
              spec.block_size == plan.cache.block_size,
          "attention", "the cache spec differs from the planned one");
  require(layer >= 0 && layer < spec.num_layers, "attention", "layer outside the cache");
  const int group = geo.num_q_heads / geo.num_kv_heads;
  scratch_.reserve(attention_scratch_floats(plan.max_item_rows, geo.head_dim, spec.block_size));
  const auto partial_floats = static_cast<std::size_t>(plan.partial_rows * (geo.head_dim + 2));
  if (attention_partials_.size() < partial_floats) attention_partials_.resize(partial_floats);
  float* partial_o = attention_partials_.data();
  float* partial_m = partial_o + plan.partial_rows * geo.head_dim;
  float* partial_l = partial_m + plan.partial_rows;
  const step_batch& batch = *plan.batch;
  pool_.parallel_for(static_cast<std::int64_t>(plan.items.size()), [&](std::int64_t index, int thread) {
    const attention_item& item = plan.items[static_cast<std::size_t>(index)];
    attention_args a;
    a.head_dim = geo.head_dim;
    a.group = group;
    a.block_size = spec.block_size;
    a.scale = geo.scale;
    a.cache_type = static_cast<elem>(spec.type);
    a.cache = cache.data();
    a.block_elements = spec.block_elements();
    a.layer_offset = spec.layer_offset(layer);
    a.tile_elements = spec.tile_elements();
    a.kv_heads = geo.num_kv_heads;
    a.pages = batch.kv_indices.data() + batch.kv_indptr[static_cast<std::size_t>(item.sequence)];
    a.kv_begin = item.kv_begin;
    a.kv_end = item.kv_end;
    a.chunk_tokens = plan.chunk_tokens;
    a.q = q.as<const float>() + item.first_token * q.row_stride;
    a.q_stride = q.row_stride;
    a.positions = batch.positions.data() + item.first_token;
    a.num_queries = item.num_queries;
    if (!plan.tree.start.empty()) {
      a.tree_start = plan.tree.start.data() + item.first_token;
      a.tree_key_offset = plan.tree.offset.data() + item.first_token;
      a.tree_keys = plan.tree.keys.data();
    }
    if (item.partial_row < 0) {
      a.out = out.as<float>() + item.first_token * out.row_stride;
      a.out_stride = out.row_stride;
    } else {
      a.partial_o = partial_o + item.partial_row * geo.head_dim;
      a.partial_m = partial_m + item.partial_row;
      a.partial_l = partial_l + item.partial_row;
    }
    a.scratch = scratch_.get(thread);
    kernels_.attention(a);
  });
  if (!plan.merges.empty()) merge_attention_partials(plan, out);
}

// Combines the chunk states of split rows by the rule in-item chunks use.
void cpu_backend::merge_attention_partials(const cpu_step_plan& plan, tensor_view out) {
  const int head_dim = plan.geometry.head_dim, q_heads = plan.geometry.num_q_heads;
  const float* partial_o = attention_partials_.data();
  const float* partial_m = partial_o + plan.partial_rows * head_dim;
  const float* partial_l = partial_m + plan.partial_rows;
  pool_.parallel_for(static_cast<std::int64_t>(plan.merges.size()), [&](std::int64_t index, int thread) {
    const attention_merge& merge = plan.merges[static_cast<std::size_t>(index)];
    attention_merge_args a;
    a.head_dim = head_dim;
    a.q_heads = q_heads;
    a.chunks = merge.chunks;
    a.rows = std::int64_t{merge.num_queries} * q_heads;
    a.partial_o = partial_o + merge.first_partial_row * head_dim;
    a.partial_m = partial_m + merge.first_partial_row;
    a.partial_l = partial_l + merge.first_partial_row;
    a.out = out.as<float>() + merge.first_token * out.row_stride;
    a.out_stride = out.row_stride;
    a.scratch = scratch_.get(thread);
    kernels_.attention_merge(a);
  });
}

void cpu_backend::copy_blocks(kv_cache& cache_base, host_block_pool* host, std::span<const block_copy> copies) {
  const cpu_kv_cache& cache = as_cpu_cache(cache_base, "copy_blocks");
  const kv_cache_spec& spec = cache.spec();
  const std::size_t bytes = spec.block_bytes();
  auto address = [&](block_location where, std::int32_t index) -> char* {
    if (where == block_location::device) {
      if (index < 0 || index >= spec.num_blocks)
        throw std::invalid_argument("copy_blocks: device block " + std::to_string(index) + " outside the pool of " +
                                    std::to_string(spec.num_blocks));
      return static_cast<char*>(cache.data()) + static_cast<std::size_t>(index) * bytes;
    }
    if (host == nullptr) throw std::invalid_argument("copy_blocks: a copy names the host pool but none was given");
    auto* cpu_host = dynamic_cast<cpu_host_pool*>(host);
    require(cpu_host != nullptr && cpu_host->block_bytes() == bytes, "copy_blocks",
            "the host pool was not made by the cpu backend for this cache");
    if (index < 0 || index >= host->num_blocks())
      throw std::invalid_argument("copy_blocks: host block " + std::to_string(index) + " outside the pool of " +
                                  std::to_string(host->num_blocks()));
    return static_cast<char*>(host->block_data(index));
  };
  std::vector<std::pair<char*, const char*>> moves;
  std::set<const char*> sources, destinations;
  bool independent = true;
  for (const block_copy& copy : copies) {
    const char* src = address(copy.from, copy.src);
    char* dst = address(copy.to, copy.dst);
    moves.emplace_back(dst, src);
    // A copy that reads or writes a block an earlier copy wrote must run after it.
    independent =
        independent && destinations.count(src) == 0 && destinations.count(dst) == 0 && sources.count(dst) == 0;
    sources.insert(src);
    destinations.insert(dst);
  }
  if (independent) {
    pool_.parallel_for(static_cast<std::int64_t>(moves.size()), [&](std::int64_t i, int) {
      std::memcpy(moves[static_cast<std::size_t>(i)].first, moves[static_cast<std::size_t>(i)].second, bytes);
    });
    return;
  }
  for (const auto& [dst, src] : moves) copy_parallel(dst, src, bytes);
}

}  // namespace troupe::cpu
