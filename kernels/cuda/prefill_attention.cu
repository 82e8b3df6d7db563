// FlashAttention-style paged attention for prefill chunks: a tile of query
// rows (tokens × heads of one GQA group) sweeps the sequence's keys in tiles
// through the page table, with tensor-core products (WMMA, fp32
// accumulation) and an online softmax. See attention.hpp for the contract.

#include <mma.h>

#include <cmath>
#include <string>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_utils.cuh"

namespace troupe::cuda {

namespace {

namespace wmma = nvcuda::wmma;

constexpr int prefill_threads = 128;
constexpr int prefill_warps = prefill_threads / 32;

// Tile sizes and shared-memory layout for head dims up to MaxD. Leading
// dimensions are padded (8 halves / 4 floats) against bank conflicts while
// keeping every 16-row fragment 32-byte aligned, as WMMA requires.
template <int MaxD>
struct prefill_shape {
  static constexpr int rows = prefill_tile_rows(MaxD);
  static constexpr int keys = rows;
  static constexpr int ld_qkv = MaxD + 8;
  static constexpr int ld_scores = keys + 4;
  static constexpr int ld_probs = keys + 8;
  static constexpr int ld_out = MaxD + 4;
  static constexpr std::size_t q_bytes = std::size_t{2} * rows * ld_qkv;
  static constexpr std::size_t kv_bytes = std::size_t{2} * keys * ld_qkv;
  static constexpr std::size_t scores_bytes = std::size_t{4} * rows * ld_scores;
  static constexpr std::size_t probs_bytes = std::size_t{2} * rows * ld_probs;
  static constexpr std::size_t out_bytes = std::size_t{4} * rows * ld_out;
  static constexpr std::size_t k_offset = q_bytes;
  static constexpr std::size_t v_offset = k_offset + kv_bytes;
  static constexpr std::size_t scores_offset = v_offset + kv_bytes;
  static constexpr std::size_t probs_offset = scores_offset + scores_bytes;
  static constexpr std::size_t out_offset = probs_offset + probs_bytes;
  static constexpr std::size_t rows_offset = out_offset + out_bytes;
  static constexpr std::size_t total_bytes = rows_offset + std::size_t{3} * 4 * rows;
  static_assert(rows % 16 == 0 && keys % 32 == 0, "whole fragments and warp-strided rows");
  static_assert(q_bytes % 128 == 0 && kv_bytes % 128 == 0 && scores_bytes % 128 == 0 && probs_bytes % 128 == 0 &&
                    out_bytes % 128 == 0,
                "regions stay 128-byte aligned");
};

// Which query token and head a tile row stands for; valid=false for padding.
struct tile_row {
  int token_local;
  int head_in_group;
  bool valid;
};

__device__ __forceinline__ tile_row row_of(int r, const prefill_attention_params& p, const prefill_work_item& item) {
  const int part = static_cast<int>(blockIdx.y) % p.group_parts;
  tile_row row;
  row.token_local = r / p.heads_per_tile;
  row.head_in_group = part * p.heads_per_tile + r % p.heads_per_tile;
  row.valid = row.token_local < item.q_count && row.head_in_group < p.group_size;
  return row;
}

// Shared-memory views of one block and the block's fixed coordinates.
template <class T, int MaxD>
struct prefill_block {
  using shape = prefill_shape<MaxD>;
  __device__ prefill_block(unsigned char* shared, const prefill_attention_params& p)
      : q(reinterpret_cast<T*>(shared)),
        k(reinterpret_cast<T*>(shared + shape::k_offset)),
        v(reinterpret_cast<T*>(shared + shape::v_offset)),
        scores(reinterpret_cast<float*>(shared + shape::scores_offset)),
        probs(reinterpret_cast<T*>(shared + shape::probs_offset)),
        out(reinterpret_cast<float*>(shared + shape::out_offset)),
        row_pos(reinterpret_cast<int*>(shared + shape::rows_offset)),
        row_m(reinterpret_cast<float*>(row_pos + shape::rows)),
        row_l(row_m + shape::rows),
        item(p.items[blockIdx.x]),
        kv_head(static_cast<int>(blockIdx.y) / p.group_parts),
        head_dim(MaxD == max_generic_head_dim ? p.kv.head_dim : MaxD),
        dim16((head_dim + 15) / 16 * 16) {}

  T* q;           // [rows][ld_qkv] the tile's queries
  T* k;           // [keys][ld_qkv] current key tile
  T* v;           // [keys][ld_qkv] current value tile
  float* scores;  // [rows][ld_scores] Q Kᵀ of the current tile
  T* probs;       // [rows][ld_probs] softmax numerators of the current tile
  float* out;     // [rows][ld_out] unnormalised output accumulator
  int* row_pos;   // [rows] query position, -1 for padding rows
  float* row_m;   // [rows] running max of scaled scores
  float* row_l;   // [rows] running sum of probabilities
  prefill_work_item item;
  int kv_head;
  int head_dim;
  int dim16;  // columns the products read; zero-filled past head_dim
};

// Row positions, running statistics, the query tile (converted to T) and a
// zero accumulator.
template <class T, int MaxD>
__device__ void load_queries(const prefill_attention_params& p, prefill_block<T, MaxD>& b) {
  using shape = prefill_shape<MaxD>;
  const int tid = static_cast<int>(threadIdx.x);
  for (int r = tid; r < shape::rows; r += prefill_threads) {
    const tile_row row = row_of(r, p, b.item);
    b.row_pos[r] = row.valid ? p.positions[b.item.q_begin + row.token_local] : -1;
    b.row_m[r] = -INFINITY;
    b.row_l[r] = 0.0f;
  }
  const __nv_bfloat16* q = static_cast<const __nv_bfloat16*>(p.q);
  for (int e = tid; e < shape::rows * b.dim16; e += prefill_threads) {
    const int r = e / b.dim16;
    const int d = e % b.dim16;
    const tile_row row = row_of(r, p, b.item);
    float value = 0.0f;
    if (row.valid && d < b.head_dim) {
      const std::int64_t head = static_cast<std::int64_t>(b.kv_head) * p.group_size + row.head_in_group;
      value =
          to_float(q[static_cast<std::int64_t>(b.item.q_begin + row.token_local) * p.q_stride + head * b.head_dim + d]);
    }
    b.q[r * shape::ld_qkv + d] = from_float<T>(value);
  }
  for (int e = tid; e < shape::rows * shape::ld_out; e += prefill_threads) b.out[e] = 0.0f;
}

// K and V rows [tile_start, tile_start + n_valid) through the page table;
// rows past the range and dims past head_dim are zero so the products see
// finite values only.
template <class T, int MaxD>
__device__ void load_key_values(const prefill_attention_params& p, prefill_block<T, MaxD>& b, int tile_start,
                                int n_valid) {
  using shape = prefill_shape<MaxD>;
  const T* pool = static_cast<const T*>(p.kv.pool);
  const std::int32_t* pages = p.kv.kv_indices + p.kv.kv_indptr[b.item.seq];
  const int chunks_per_row = b.dim16 / 8;
  for (int c = static_cast<int>(threadIdx.x); c < shape::keys * chunks_per_row; c += prefill_threads) {
    const int j = c / chunks_per_row;
    const int chunk = c % chunks_per_row;
    uint4 k_raw = make_uint4(0, 0, 0, 0);
    uint4 v_raw = make_uint4(0, 0, 0, 0);
    if (j < n_valid && chunk * 8 < b.head_dim) {
      const int key = tile_start + j;
      const std::int64_t offset =
          p.kv.key_offset(pages[key / p.kv.block_size], b.kv_head, key % p.kv.block_size) + chunk * 8;
      k_raw = *reinterpret_cast<const uint4*>(pool + offset);
      v_raw = *reinterpret_cast<const uint4*>(pool + offset + p.kv.tile_elements);
    }
    *reinterpret_cast<uint4*>(b.k + j * shape::ld_qkv + chunk * 8) = k_raw;
    *reinterpret_cast<uint4*>(b.v + j * shape::ld_qkv + chunk * 8) = v_raw;
  }
}

// scores = Q Kᵀ: K rows stored [key][dim] are Kᵀ in column-major order.
template <class T, int MaxD>
__device__ void score_tile(prefill_block<T, MaxD>& b) {
  using shape = prefill_shape<MaxD>;
  constexpr int key_blocks = shape::keys / 16;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  for (int t = warp; t < (shape::rows / 16) * key_blocks; t += prefill_warps) {
    const int mi = t / key_blocks;
    const int ni = t % key_blocks;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < b.dim16 / 16; ++kk) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> k;
      wmma::load_matrix_sync(a, b.q + mi * 16 * shape::ld_qkv + kk * 16, shape::ld_qkv);
      wmma::load_matrix_sync(k, b.k + ni * 16 * shape::ld_qkv + kk * 16, shape::ld_qkv);
      wmma::mma_sync(acc, a, k, acc);
    }
    wmma::store_matrix_sync(b.scores + mi * 16 * shape::ld_scores + ni * 16, acc, shape::ld_scores,
                            wmma::mem_row_major);
  }
}

// Online softmax, one warp per row; lane 0 alone reads and writes the row's
// running max and sum. Probabilities are rounded to T before they are
// summed, so numerator and denominator see the same values.
template <class T, int MaxD>
__device__ void softmax_tile(const prefill_attention_params& p, prefill_block<T, MaxD>& b, int tile_start,
                             int n_valid) {
  using shape = prefill_shape<MaxD>;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  for (int r = static_cast<int>(threadIdx.x) >> 5; r < shape::rows; r += prefill_warps) {
    const int position = b.row_pos[r];
    T* probs = b.probs + r * shape::ld_probs;
    if (position < 0) {  // padding row, the same for the whole warp
      for (int j = lane; j < shape::keys; j += 32) probs[j] = from_float<T>(0.0f);
      continue;
    }
    float scores[shape::keys / 32];
    float tile_max = -INFINITY;
#pragma unroll
    for (int c = 0; c < shape::keys / 32; ++c) {
      const int j = lane + 32 * c;
      const bool visible = j < n_valid && tile_start + j <= position;
      scores[c] = visible ? b.scores[r * shape::ld_scores + j] * p.scale : -INFINITY;
      tile_max = fmaxf(tile_max, scores[c]);
    }
    tile_max = warp_max(tile_max);
    const float m_old = __shfl_sync(full_warp_mask, lane == 0 ? b.row_m[r] : 0.0f, 0);
    const float l_old = __shfl_sync(full_warp_mask, lane == 0 ? b.row_l[r] : 0.0f, 0);
    const float m_new = fmaxf(m_old, tile_max);
    const bool any_visible = m_new != -INFINITY;
    const float alpha = any_visible ? expf(m_old - m_new) : 1.0f;
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < shape::keys / 32; ++c) {
      const T prob = from_float<T>(any_visible ? expf(scores[c] - m_new) : 0.0f);
      probs[lane + 32 * c] = prob;
      sum += to_float(prob);
    }
    sum = warp_sum(sum);
    if (lane == 0) {
      b.row_m[r] = m_new;
      b.row_l[r] = l_old * alpha + sum;
    }
    for (int d = lane; d < b.dim16; d += 32) b.out[r * shape::ld_out + d] *= alpha;
  }
}

// out += P V over the key blocks that hold valid keys.
template <class T, int MaxD>
__device__ void accumulate_tile(prefill_block<T, MaxD>& b, int n_valid) {
  using shape = prefill_shape<MaxD>;
  const int dim_blocks = b.dim16 / 16;
  const int value_blocks = (n_valid + 15) / 16;
  for (int t = static_cast<int>(threadIdx.x) >> 5; t < (shape::rows / 16) * dim_blocks; t += prefill_warps) {
    const int mi = t / dim_blocks;
    const int ni = t % dim_blocks;
    float* out_tile = b.out + mi * 16 * shape::ld_out + ni * 16;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(acc, out_tile, shape::ld_out, wmma::mem_row_major);
    for (int kk = 0; kk < value_blocks; ++kk) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> v;
      wmma::load_matrix_sync(a, b.probs + mi * 16 * shape::ld_probs + kk * 16, shape::ld_probs);
      wmma::load_matrix_sync(v, b.v + kk * 16 * shape::ld_qkv + ni * 16, shape::ld_qkv);
      wmma::mma_sync(acc, a, v, acc);
    }
    wmma::store_matrix_sync(out_tile, acc, shape::ld_out, wmma::mem_row_major);
  }
}

template <class T, int MaxD>
__device__ void store_output(const prefill_attention_params& p, const prefill_block<T, MaxD>& b) {
  using shape = prefill_shape<MaxD>;
  __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out);
  for (int e = static_cast<int>(threadIdx.x); e < shape::rows * b.head_dim; e += prefill_threads) {
    const int r = e / b.head_dim;
    const int d = e % b.head_dim;
    if (b.row_pos[r] < 0) continue;
    const tile_row row = row_of(r, p, b.item);
    const std::int64_t head = static_cast<std::int64_t>(b.kv_head) * p.group_size + row.head_in_group;
    out[static_cast<std::int64_t>(b.item.q_begin + row.token_local) * p.out_stride + head * b.head_dim + d] =
        from_float<__nv_bfloat16>(b.out[r * shape::ld_out + d] / b.row_l[r]);
  }
}

// Each phase reads what the previous one wrote, so a barrier separates them.
template <class T, int MaxD>
__global__ void __launch_bounds__(prefill_threads) prefill_attention_kernel(prefill_attention_params p) {
  using shape = prefill_shape<MaxD>;
  extern __shared__ __align__(128) unsigned char shared[];
  prefill_block<T, MaxD> b(shared, p);
  load_queries(p, b);
  __syncthreads();
  for (int tile_start = 0; tile_start < b.item.kv_end; tile_start += shape::keys) {
    const int n_valid = min(shape::keys, b.item.kv_end - tile_start);
    load_key_values(p, b, tile_start, n_valid);
    __syncthreads();
    score_tile(b);
    __syncthreads();
    softmax_tile(p, b, tile_start, n_valid);
    __syncthreads();
    accumulate_tile(b, n_valid);
    __syncthreads();
  }
  store_output(p, b);
}

template <class T, int MaxD>
void launch_prefill_for(const prefill_attention_params& params, std::size_t shared_limit, cudaStream_t stream) {
  const std::size_t shared = prefill_shape<MaxD>::total_bytes;
  if (shared > shared_limit)
    throw std::invalid_argument("prefill attention: head_dim " + std::to_string(params.kv.head_dim) + " needs " +
                                std::to_string(shared) + " bytes of shared memory; the device has " +
                                std::to_string(shared_limit));
  const auto kernel = prefill_attention_kernel<T, MaxD>;
  TROUPE_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
  const dim3 grid(static_cast<unsigned>(params.num_items),
                  static_cast<unsigned>(params.kv.num_kv_heads * params.group_parts));
  kernel<<<grid, prefill_threads, shared, stream>>>(params);
  TROUPE_CUDA_CHECK_LAUNCH();
}

template <class T>
void launch_prefill_typed(const prefill_attention_params& params, std::size_t shared_limit, cudaStream_t stream) {
  switch (params.kv.head_dim) {
    case 64:
      return launch_prefill_for<T, 64>(params, shared_limit, stream);
    case 128:
      return launch_prefill_for<T, 128>(params, shared_limit, stream);
    default:
      return launch_prefill_for<T, max_generic_head_dim>(params, shared_limit, stream);
  }
}

}  // namespace

std::size_t prefill_shared_bytes(int head_dim, dtype /*cache_type: always 2 bytes*/) {
  switch (head_dim) {
    case 64:
      return prefill_shape<64>::total_bytes;
    case 128:
      return prefill_shape<128>::total_bytes;
    default:
      return prefill_shape<max_generic_head_dim>::total_bytes;
  }
}

void launch_prefill_attention(const prefill_attention_params& params, std::size_t shared_limit, cudaStream_t stream) {
  if (params.num_items == 0) return;
  if (params.cache_type == dtype::f16) {
    launch_prefill_typed<__half>(params, shared_limit, stream);
  } else {
    launch_prefill_typed<__nv_bfloat16>(params, shared_limit, stream);
  }
}

}  // namespace troupe::cuda
