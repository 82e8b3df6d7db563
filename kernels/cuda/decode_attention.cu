// Split-KV decode attention (Flash-Decoding) and the merge of its partial
// softmax states. See attention.hpp for the contract.

#include <cmath>
#include <string>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_utils.cuh"

namespace troupe::cuda {

namespace {

constexpr int decode_threads = 128;
constexpr int decode_warps = decode_threads / 32;
constexpr int merge_threads = 128;

// Key tile and lane grouping for head dims up to MaxD: a group of MaxD / 8
// lanes holds one key row, 8 dims (16 bytes) per lane.
template <int MaxD>
struct decode_shape {
  static constexpr int tile_keys = MaxD > 128 ? 32 : 64;
  static constexpr int lanes_per_key = MaxD / 8;
  static constexpr int keys_per_warp = 32 / lanes_per_key;
  static constexpr int keys_per_pass = decode_warps * keys_per_warp;
  static_assert(tile_keys % keys_per_pass == 0, "a tile is a whole number of passes");
};

// Shared memory, in order: K tile and V tile [tile_keys][MaxD] (cache type),
// q and the output accumulator [group][MaxD] (float), scores/probabilities
// [group][tile_keys], and per-head running max, sum and rescale factor.
template <int MaxD>
std::size_t decode_layout_bytes(int group_size, std::size_t cache_element_bytes) {
  const auto g = static_cast<std::size_t>(group_size);
  const std::size_t tile = static_cast<std::size_t>(decode_shape<MaxD>::tile_keys) * MaxD;
  return 2 * tile * cache_element_bytes + sizeof(float) * (2 * g * MaxD + g * decode_shape<MaxD>::tile_keys + 3 * g);
}

template <class T>
__device__ __forceinline__ void unpack8(const uint4& raw, float* out) {
  const T* values = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = to_float(values[i]);
}

// Shared-memory views of one block and its fixed coordinates.
template <class CacheT, int MaxD>
struct decode_block {
  using shape = decode_shape<MaxD>;
  __device__ decode_block(unsigned char* shared, const decode_attention_params& p)
      : group(p.group_size),
        k_tile(reinterpret_cast<CacheT*>(shared)),
        v_tile(k_tile + shape::tile_keys * MaxD),
        q(reinterpret_cast<float*>(v_tile + shape::tile_keys * MaxD)),
        out(q + group * MaxD),
        probs(out + group * MaxD),
        m(probs + group * shape::tile_keys),
        l(m + group),
        alpha(l + group),
        item(p.items[blockIdx.x]),
        kv_head(static_cast<int>(blockIdx.y)),
        first_head(kv_head * group),
        head_dim(MaxD == max_generic_head_dim ? p.kv.head_dim : MaxD) {}

  int group;
  CacheT* k_tile;  // [tile_keys][MaxD]
  CacheT* v_tile;  // [tile_keys][MaxD]
  float* q;        // [group][MaxD]
  float* out;      // [group][MaxD] unnormalised output accumulator
  float* probs;    // [group][tile_keys] scores, then softmax numerators
  float* m;        // [group] running max of scaled scores
  float* l;        // [group] running sum of probabilities
  float* alpha;    // [group] rescale factor of the current tile
  decode_work_item item;
  int kv_head;
  int first_head;
  int head_dim;
};

// The group's query heads (contiguous in the q row) as float, a zero
// accumulator and empty running statistics.
template <class CacheT, int MaxD>
__device__ void load_group_queries(const decode_attention_params& p, decode_block<CacheT, MaxD>& b) {
  const __nv_bfloat16* q = static_cast<const __nv_bfloat16*>(p.q) +
                           static_cast<std::int64_t>(b.item.token) * p.q_stride +
                           static_cast<std::int64_t>(b.first_head) * b.head_dim;
  for (int e = static_cast<int>(threadIdx.x); e < b.group * b.head_dim; e += decode_threads) {
    b.q[(e / b.head_dim) * MaxD + e % b.head_dim] = to_float(q[e]);
    b.out[(e / b.head_dim) * MaxD + e % b.head_dim] = 0.0f;
  }
  for (int g = static_cast<int>(threadIdx.x); g < b.group; g += decode_threads) {
    b.m[g] = -INFINITY;
    b.l[g] = 0.0f;
  }
}

// K and V rows [tile_start, tile_start + n_valid) through the page table,
// 16 bytes per access; rows past the range are zero.
template <class CacheT, int MaxD>
__device__ void load_decode_tile(const decode_attention_params& p, decode_block<CacheT, MaxD>& b, int tile_start,
                                 int n_valid) {
  using shape = decode_shape<MaxD>;
  const CacheT* pool = static_cast<const CacheT*>(p.kv.pool);
  const std::int32_t* pages = p.kv.kv_indices + p.kv.kv_indptr[b.item.seq];
  const int chunks_per_row = b.head_dim / 8;
  for (int c = static_cast<int>(threadIdx.x); c < shape::tile_keys * chunks_per_row; c += decode_threads) {
    const int j = c / chunks_per_row;
    const int chunk = c % chunks_per_row;
    uint4 k_raw = make_uint4(0, 0, 0, 0);
    uint4 v_raw = make_uint4(0, 0, 0, 0);
    if (j < n_valid) {
      int key = tile_start + j;
      if (p.tree_start != nullptr && key >= p.tree_start[b.item.token])
        key = p.tree_keys[p.tree_key_offset[b.item.token] + key - p.tree_start[b.item.token]];
      const std::int64_t offset =
          p.kv.key_offset(pages[key / p.kv.block_size], b.kv_head, key % p.kv.block_size) + chunk * 8;
      k_raw = *reinterpret_cast<const uint4*>(pool + offset);
      v_raw = *reinterpret_cast<const uint4*>(pool + offset + p.kv.tile_elements);
    }
    *reinterpret_cast<uint4*>(b.k_tile + j * MaxD + chunk * 8) = k_raw;
    *reinterpret_cast<uint4*>(b.v_tile + j * MaxD + chunk * 8) = v_raw;
  }
}

// Scores: a group of lanes_per_key lanes holds one key row (8 dims per lane)
// and dots it with every head of the group; lanes past head_dim add zero.
template <class CacheT, int MaxD>
__device__ void score_decode_tile(const decode_attention_params& p, decode_block<CacheT, MaxD>& b, int n_valid) {
  using shape = decode_shape<MaxD>;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int sub = lane % shape::lanes_per_key;
  const bool lane_has_dims = sub * 8 < b.head_dim;
  for (int pass = 0; pass < shape::tile_keys / shape::keys_per_pass; ++pass) {
    const int j = pass * shape::keys_per_pass + warp * shape::keys_per_warp + lane / shape::lanes_per_key;
    float k_values[8];
    if (lane_has_dims) {
      unpack8<CacheT>(*reinterpret_cast<const uint4*>(b.k_tile + j * MaxD + sub * 8), k_values);
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) k_values[i] = 0.0f;
    }
    for (int g = 0; g < b.group; ++g) {
      float dot = 0.0f;
      if (lane_has_dims) {
        const float* qg = b.q + g * MaxD + sub * 8;
#pragma unroll
        for (int i = 0; i < 8; ++i) dot += qg[i] * k_values[i];
      }
      for (int offset = shape::lanes_per_key / 2; offset > 0; offset >>= 1)
        dot += __shfl_xor_sync(full_warp_mask, dot, offset);
      if (sub == 0) b.probs[g * shape::tile_keys + j] = j < n_valid ? dot * p.scale : -INFINITY;
    }
  }
}

// Online softmax: one warp per head; only lane 0 touches the running state.
template <class CacheT, int MaxD>
__device__ void softmax_decode_tile(decode_block<CacheT, MaxD>& b) {
  using shape = decode_shape<MaxD>;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  for (int g = static_cast<int>(threadIdx.x) >> 5; g < b.group; g += decode_warps) {
    float* row = b.probs + g * shape::tile_keys;
    float tile_max = -INFINITY;
    for (int j = lane; j < shape::tile_keys; j += 32) tile_max = fmaxf(tile_max, row[j]);
    tile_max = warp_max(tile_max);
    const float m_old = __shfl_sync(full_warp_mask, lane == 0 ? b.m[g] : 0.0f, 0);
    const float l_old = __shfl_sync(full_warp_mask, lane == 0 ? b.l[g] : 0.0f, 0);
    const float m_new = fmaxf(m_old, tile_max);  // finite: every tile holds a valid key
    const float alpha = expf(m_old - m_new);
    float sum = 0.0f;
    for (int j = lane; j < shape::tile_keys; j += 32) {
      const float prob = expf(row[j] - m_new);
      row[j] = prob;
      sum += prob;
    }
    sum = warp_sum(sum);
    if (lane == 0) {
      b.m[g] = m_new;
      b.l[g] = l_old * alpha + sum;
      b.alpha[g] = alpha;
    }
  }
}

template <class CacheT, int MaxD>
__device__ void accumulate_decode_tile(decode_block<CacheT, MaxD>& b, int n_valid) {
  using shape = decode_shape<MaxD>;
  for (int e = static_cast<int>(threadIdx.x); e < b.group * b.head_dim; e += decode_threads) {
    const int g = e / b.head_dim;
    const int d = e % b.head_dim;
    const float* prob = b.probs + g * shape::tile_keys;
    float acc = b.out[g * MaxD + d] * b.alpha[g];
    for (int j = 0; j < n_valid; ++j) acc += prob[j] * to_float(b.v_tile[j * MaxD + d]);
    b.out[g * MaxD + d] = acc;
  }
}

// The only split writes out; a split among several writes its normalised
// partial output and log-sum-exp for the merge.
template <class CacheT, int MaxD>
__device__ void store_decode_output(const decode_attention_params& p, const decode_block<CacheT, MaxD>& b) {
  const int num_q_heads = p.kv.num_kv_heads * b.group;
  for (int e = static_cast<int>(threadIdx.x); e < b.group * b.head_dim; e += decode_threads) {
    const int g = e / b.head_dim;
    const int d = e % b.head_dim;
    const float value = b.out[g * MaxD + d] / b.l[g];
    const std::int64_t head = b.first_head + g;
    if (b.item.partial < 0) {
      __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + static_cast<std::int64_t>(b.item.token) * p.out_stride;
      out[head * b.head_dim + d] = from_float<__nv_bfloat16>(value);
    } else {
      p.partial_out[(static_cast<std::int64_t>(b.item.partial) * num_q_heads + head) * b.head_dim + d] = value;
    }
  }
  if (b.item.partial >= 0) {
    for (int g = static_cast<int>(threadIdx.x); g < b.group; g += decode_threads)
      p.partial_lse[static_cast<std::int64_t>(b.item.partial) * num_q_heads + b.first_head + g] = b.m[g] + logf(b.l[g]);
  }
}

// Each phase reads what the previous one wrote, so a barrier separates them.
template <class CacheT, int MaxD>
__global__ void __launch_bounds__(decode_threads) decode_attention_kernel(decode_attention_params p) {
  using shape = decode_shape<MaxD>;
  extern __shared__ __align__(16) unsigned char shared[];
  decode_block<CacheT, MaxD> b(shared, p);
  load_group_queries(p, b);
  for (int tile_start = b.item.kv_begin; tile_start < b.item.kv_end; tile_start += shape::tile_keys) {
    const int n_valid = min(shape::tile_keys, b.item.kv_end - tile_start);
    load_decode_tile(p, b, tile_start, n_valid);
    __syncthreads();
    score_decode_tile(p, b, n_valid);
    __syncthreads();
    softmax_decode_tile(b);
    __syncthreads();
    accumulate_decode_tile(b, n_valid);
    __syncthreads();
  }
  store_decode_output(p, b);
}

__global__ void __launch_bounds__(merge_threads) decode_merge_kernel(decode_merge_params p) {
  const decode_merge_item item = p.items[blockIdx.x];
  const std::int64_t head = blockIdx.y;
  const auto lse_of = [&](int i) {
    return p.partial_lse[static_cast<std::int64_t>(item.first_partial + i) * p.num_q_heads + head];
  };
  float max_lse = -INFINITY;
  for (int i = 0; i < item.num_partials; ++i) max_lse = fmaxf(max_lse, lse_of(i));
  float total = 0.0f;
  for (int i = 0; i < item.num_partials; ++i) total += expf(lse_of(i) - max_lse);
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + static_cast<std::int64_t>(item.token) * p.out_stride;
  for (int d = static_cast<int>(threadIdx.x); d < p.head_dim; d += merge_threads) {
    float acc = 0.0f;
    for (int i = 0; i < item.num_partials; ++i) {
      const std::int64_t slot = static_cast<std::int64_t>(item.first_partial + i) * p.num_q_heads + head;
      acc += expf(lse_of(i) - max_lse) * p.partial_out[slot * p.head_dim + d];
    }
    out[head * p.head_dim + d] = from_float<__nv_bfloat16>(acc / total);
  }
}

template <class CacheT, int MaxD>
void launch_decode_for(const decode_attention_params& params, std::size_t shared_limit, cudaStream_t stream) {
  const std::size_t shared = decode_layout_bytes<MaxD>(params.group_size, sizeof(CacheT));
  if (shared > shared_limit)
    throw std::invalid_argument("decode attention: a GQA group of " + std::to_string(params.group_size) +
                                " heads needs " + std::to_string(shared) + " bytes of shared memory; the device has " +
                                std::to_string(shared_limit));
  const auto kernel = decode_attention_kernel<CacheT, MaxD>;
  TROUPE_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
  const dim3 grid(static_cast<unsigned>(params.num_items), static_cast<unsigned>(params.kv.num_kv_heads));
  kernel<<<grid, decode_threads, shared, stream>>>(params);
  TROUPE_CUDA_CHECK_LAUNCH();
}

template <class CacheT>
void launch_decode_typed(const decode_attention_params& params, std::size_t shared_limit, cudaStream_t stream) {
  switch (params.kv.head_dim) {
    case 64:
      return launch_decode_for<CacheT, 64>(params, shared_limit, stream);
    case 128:
      return launch_decode_for<CacheT, 128>(params, shared_limit, stream);
    default:
      return launch_decode_for<CacheT, max_generic_head_dim>(params, shared_limit, stream);
  }
}

}  // namespace

std::size_t decode_shared_bytes(int head_dim, int group_size, dtype cache_type) {
  const std::size_t element = dtype_size(cache_type);
  switch (head_dim) {
    case 64:
      return decode_layout_bytes<64>(group_size, element);
    case 128:
      return decode_layout_bytes<128>(group_size, element);
    default:
      return decode_layout_bytes<max_generic_head_dim>(group_size, element);
  }
}

void launch_decode_attention(const decode_attention_params& params, std::size_t shared_limit, cudaStream_t stream) {
  if (params.num_items == 0) return;
  if (params.cache_type == dtype::f16) {
    launch_decode_typed<__half>(params, shared_limit, stream);
  } else {
    launch_decode_typed<__nv_bfloat16>(params, shared_limit, stream);
  }
}

void launch_decode_merge(const decode_merge_params& params, cudaStream_t stream) {
  if (params.num_items == 0) return;
  const dim3 grid(static_cast<unsigned>(params.num_items), static_cast<unsigned>(params.num_q_heads));
  decode_merge_kernel<<<grid, merge_threads, 0, stream>>>(params);
  TROUPE_CUDA_CHECK_LAUNCH();
}

}  // namespace troupe::cuda
