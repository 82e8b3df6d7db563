#pragma once
// Attention scores on `vdpbf16ps` (AVX-512 BF16, bf16 cache). A block's K
// tile is transposed once into pairs of dimensions: vector p holds, for 16
// keys, the 32-bit pair (K[key][2p], K[key][2p + 1]) — the instruction's
// operand layout. Each query row, rounded to bf16 as the GEMMs round their
// activations at this level, then scores 16 keys with head_dim / 2
// instructions and no horizontal sum; the transpose is shared by every row
// that reads the tile (a GQA group's heads, a verify step's tokens). The
// other levels and caches score in f32 (attention_impl.hpp). Included only
// by attention_impl.hpp.

#include "kernels/cpu/count_dispatch_impl.hpp"
#include "kernels/cpu/isa_kernels.hpp"
#include "kernels/cpu/simd.hpp"

namespace troupe::cpu::TROUPE_ISA_NS {

#if defined(__AVX512BF16__)

/// Whether this level scores a cache of `type` from key pairs.
inline bool scores_key_pairs(elem type) { return type == elem::bf16; }

/// Transposes 16 rows of 16 dwords (r[i] = key i) so that r[j] holds dword j of every key.
inline void transpose_dwords(__m512i* r) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // u[4 i + c] holds, in each 128-bit chunk j, dword 4 j + c of keys 4 i .. 4 i + 3.
  for (int i = 0; i < 4; ++i) {
    u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i even_low = _mm512_shuffle_i32x4(u[c], u[4 + c], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512i odd_low = _mm512_shuffle_i32x4(u[c], u[4 + c], _MM_SHUFFLE(3, 1, 3, 1));
    const __m512i even_high = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512i odd_high = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(3, 1, 3, 1));
    r[c] = _mm512_shuffle_i32x4(even_low, even_high, _MM_SHUFFLE(2, 0, 2, 0));
    r[8 + c] = _mm512_shuffle_i32x4(even_low, even_high, _MM_SHUFFLE(3, 1, 3, 1));
    r[4 + c] = _mm512_shuffle_i32x4(odd_low, odd_high, _MM_SHUFFLE(2, 0, 2, 0));
    r[12 + c] = _mm512_shuffle_i32x4(odd_low, odd_high, _MM_SHUFFLE(3, 1, 3, 1));
  }
}

/// Dimension pairs of a head (the last one's high half is zero for an odd head_dim).
inline int key_pair_count(int head_dim) { return (head_dim + 1) / 2; }

/// Writes keys [0, count) of a bf16 tile ([.][head_dim]) as pairs: group g
/// of 16 keys, pair p at out + (g * pairs + p) * 16; keys past `count` are 0.
inline void pair_keys(const std::uint16_t* k, int count, int head_dim, std::uint32_t* out) {
  const int pairs = key_pair_count(head_dim);
  for (int first = 0; first < count; first += W) {
    const int keys = count - first < W ? count - first : W;
    for (int p0 = 0; p0 < pairs; p0 += W) {
      const int dims = head_dim - 2 * p0 < 2 * W ? head_dim - 2 * p0 : 2 * W;
      const __mmask32 mask = dims == 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << dims) - 1u);
      __m512i rows[W];
      for (int i = 0; i < W; ++i)
        rows[i] = i < keys
                      ? _mm512_maskz_loadu_epi16(mask, k + static_cast<std::int64_t>(first + i) * head_dim + 2 * p0)
                      : _mm512_setzero_si512();
      transpose_dwords(rows);
      const int span = pairs - p0 < W ? pairs - p0 : W;
      std::uint32_t* group = out + (static_cast<std::int64_t>(first / W) * pairs + p0) * W;
      for (int j = 0; j < span; ++j) _mm512_storeu_si512(group + j * W, rows[j]);
    }
  }
}

/// The same pairs from an f32 tile of bf16 values (a tree query's gathered
/// keys): narrowed exactly, then paired as the cache's own.
inline void pair_keys_from_f32(const float* k, int count, int head_dim, std::uint16_t* narrow, std::uint32_t* out) {
  const std::int64_t n = static_cast<std::int64_t>(count) * head_dim;
  std::int64_t i = 0;
  for (; i + W <= n; i += W) store_bf16(narrow + i, load(k + i));
  if (i < n) store_bf16_tail(narrow + i, load_tail(k + i, static_cast<int>(n - i)), static_cast<int>(n - i));
  pair_keys(narrow, count, head_dim, out);
}

/// Writes a query row (f32 [head_dim]) rounded to bf16 as dimension pairs
/// (paired_query_words(head_dim) words, zero past head_dim), once per work
/// item: every block's scores read them.
inline void pair_query(const float* q, int head_dim, std::uint32_t* out) {
  for (int d = 0; d < 2 * key_pair_count(head_dim); d += 2 * W) {
    const int rest = head_dim - d;
    const vf low = rest >= W ? load(q + d) : load_tail(q + d, rest);
    const vf high = rest >= 2 * W ? load(q + d + W) : rest > W ? load_tail(q + d + W, rest - W) : zero();
    _mm512_storeu_si512(out + d / 2, (__m512i)_mm512_cvtne2ps_pbh(high, low));
  }
}

/// Scores of N rows (q as pairs, pair_query) for keys [0, keys) from key
/// pairs, scaled, into rows of `scores` (stride floats apart, padded with
/// -inf to a multiple of W); the maxima go to `maxima`. Each row sums its
/// pairs in C interleaved chains, so its bits do not depend on N.
template <int N, int C>
void score_rows_paired(const std::uint32_t* const* q_pairs, const std::uint32_t* key_pairs, int keys, int head_dim,
                       float scale, float* scores, int stride, float* maxima) {
  const int pairs = key_pair_count(head_dim);
  const float neg_inf = -__builtin_inff();
  vf max_v[N];
  for (int i = 0; i < N; ++i) max_v[i] = set1(neg_inf);
  for (int first = 0; first < keys; first += W) {
    const std::uint32_t* group = key_pairs + static_cast<std::int64_t>(first / W) * pairs * W;
    vf acc[N][C];
#pragma GCC unroll 8
    for (int i = 0; i < N; ++i)
      for (int c = 0; c < C; ++c) acc[i][c] = zero();
    int p = 0;
    for (; p + C <= pairs; p += C) {
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        const auto k = (__m512bh)_mm512_loadu_si512(group + (p + c) * W);
#pragma GCC unroll 8
        for (int i = 0; i < N; ++i)
          acc[i][c] = _mm512_dpbf16_ps(acc[i][c], k, (__m512bh)_mm512_set1_epi32(static_cast<int>(q_pairs[i][p + c])));
      }
    }
    for (int c = 0; p < pairs; ++p, ++c) {
      const auto k = (__m512bh)_mm512_loadu_si512(group + p * W);
      for (int i = 0; i < N; ++i)
        acc[i][c] = _mm512_dpbf16_ps(acc[i][c], k, (__m512bh)_mm512_set1_epi32(static_cast<int>(q_pairs[i][p])));
    }
    for (int i = 0; i < N; ++i) {
      vf sum = acc[i][0];
      for (int c = 1; c < C; ++c) sum = add(sum, acc[i][c]);
      float* row = scores + i * stride + first;
      store(row, mul(sum, set1(scale)));
      for (int pad = keys - first; pad < W; ++pad) row[pad] = neg_inf;  // keys past the limit weigh 0
      max_v[i] = max(max_v[i], load(row));
    }
  }
  for (int i = 0; i < N; ++i) maxima[i] = reduce_max(max_v[i]);
}

/// score_rows_paired for `count` (1..8) rows: four chains for up to four
/// rows, two beyond (the accumulators must stay in registers).
inline void score_rows_paired(int count, const std::uint32_t* const* q_pairs, const std::uint32_t* key_pairs, int keys,
                              int head_dim, float scale, float* scores, int stride, float* maxima) {
  with_count<8>(count, [&]<int N>() {
    score_rows_paired<N, (N <= 4 ? 4 : 2)>(q_pairs, key_pairs, keys, head_dim, scale, scores, stride, maxima);
  });
}

#else

inline bool scores_key_pairs(elem) { return false; }
inline void pair_query(const float*, int, std::uint32_t*) {}
inline void pair_keys(const std::uint16_t*, int, int, std::uint32_t*) {}
inline void pair_keys_from_f32(const float*, int, int, std::uint16_t*, std::uint32_t*) {}
inline void score_rows_paired(int, const std::uint32_t* const*, const std::uint32_t*, int, int, float, float*, int,
                              float*) {}

#endif

}  // namespace troupe::cpu::TROUPE_ISA_NS
