#pragma once
// The panel GEMM (panel_gemm_impl.hpp) on AVX2's 16 vector registers. A
// panel's 64 outputs are 8 vectors of 8; a tile is up to 4 activation rows
// × 2 of them (8 accumulators, the 2 vectors widened for the even and the
// odd input, and a broadcast), or 1 row × 4 of them, so the tile walks a
// panel in 4 or 2 column groups, the first streaming the whole panel in.
// Each output sums its inputs in order with one fma each, as at the
// AVX-512 levels without bf16 arithmetic. Included only by
// panel_gemm_impl.hpp, in the AVX2 unit.

#include "kernels/cpu/isa_kernels.hpp"
#include "kernels/cpu/panel_gemm_impl.hpp"
#include "kernels/cpu/simd.hpp"

namespace troupe::cpu::TROUPE_ISA_NS {

#define TROUPE_HAVE_PANEL_GEMM 1

constexpr int panel_tile_rows = 4;

/// acc[i][u] += x[i][c] · w(c), then x[i][c + 1] · w(c + 1) when `Odd`, for
/// the NV vectors of 8 outputs at `pair` (the input pair's row, offset to
/// the tile's first vector).
template <int MR, int NV, bool Odd>
[[gnu::always_inline]] inline void avx2_pair_step(__m256 (&acc)[MR][NV], const std::uint16_t* pair,
                                                  const float* const (&x)[MR], std::int64_t c) {
  const __m256i high_halves = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  if constexpr (MR == 1) {  // one row: each vector widened and used at once, no widened set held
    const __m256 x_even = _mm256_broadcast_ss(x[0] + c), x_odd = Odd ? _mm256_broadcast_ss(x[0] + c + 1) : zero();
#pragma GCC unroll 8
    for (int u = 0; u < NV; ++u) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + 16 * u));
      acc[0][u] = _mm256_fmadd_ps(x_even, _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16)), acc[0][u]);
      if constexpr (Odd)
        acc[0][u] = _mm256_fmadd_ps(x_odd, _mm256_castsi256_ps(_mm256_and_si256(raw, high_halves)), acc[0][u]);
    }
    return;
  }
  __m256 even[NV], odd[NV];
#pragma GCC unroll 4
  for (int u = 0; u < NV; ++u) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + 16 * u));
    even[u] = _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));
    odd[u] = _mm256_castsi256_ps(_mm256_and_si256(raw, high_halves));
  }
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    const __m256 x_even = _mm256_broadcast_ss(x[i] + c);
#pragma GCC unroll 4
    for (int u = 0; u < NV; ++u) acc[i][u] = _mm256_fmadd_ps(x_even, even[u], acc[i][u]);
    if constexpr (Odd) {
      const __m256 x_odd = _mm256_broadcast_ss(x[i] + c + 1);
#pragma GCC unroll 4
      for (int u = 0; u < NV; ++u) acc[i][u] = _mm256_fmadd_ps(x_odd, odd[u], acc[i][u]);
    }
  }
}

/// Rows [m0, m0 + MR) × outputs [8 v0, 8 (v0 + NV)) of panel `p` over input
/// pairs [pair_begin, pair_end), resuming from and parking partial sums in
/// `out` as panel_tile does; a non-null `stream_end` prefetches ahead.
template <int MR, int NV>
void avx2_panel_tile(const panel_gemm_args& a, std::int64_t p, int v0, std::int64_t m0, std::int64_t pair_begin,
                     std::int64_t pair_end, const std::uint16_t* stream_end) {
  const std::int64_t n0 = p * bf16_panel_rows + 8 * v0, k_pairs = (a.k + 1) / 2;
  const std::uint16_t* panel = a.panels + p * k_pairs * 2 * bf16_panel_rows;
  int lanes[NV];
#pragma GCC unroll 4
  for (int u = 0; u < NV; ++u) {
    const std::int64_t left = a.n_rows - n0 - 8 * u;
    lanes[u] = left >= 8 ? 8 : left <= 0 ? 0 : static_cast<int>(left);
  }
  const float* x[MR];
  float* out[MR];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i) {
    x[i] = a.x + (m0 + i) * a.x_stride;
    out[i] = a.out + (m0 + i) * a.out_stride + n0;
  }
  __m256 acc[MR][NV];
#pragma GCC unroll 4
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int u = 0; u < NV; ++u) acc[i][u] = pair_begin == 0 ? zero() : load_tail(out[i] + 8 * u, lanes[u]);
  const std::int64_t whole_pairs = a.k / 2;  // an odd K ends on a lone even input
  const std::int64_t whole_end = pair_end < whole_pairs ? pair_end : whole_pairs;
  for (std::int64_t j = pair_begin; j < whole_end; ++j) {
    const std::uint16_t* pair = panel + j * 2 * bf16_panel_rows;
    if (stream_end != nullptr) prefetch_panel_pair(pair + panel_prefetch_pairs * 2 * bf16_panel_rows, stream_end);
    avx2_pair_step<MR, NV, true>(acc, pair + 16 * v0, x, 2 * j);
  }
  if (pair_end > whole_end)
    avx2_pair_step<MR, NV, false>(acc, panel + whole_end * 2 * bf16_panel_rows + 16 * v0, x, 2 * whole_end);
  const bool last = pair_end == k_pairs;
#pragma GCC unroll 4
  for (int u = 0; u < NV; ++u) {
    const __m256 bias = last && a.bias != nullptr ? load_tail(a.bias + n0 + 8 * u, lanes[u]) : zero();
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) store_tail(out[i] + 8 * u, last ? add(acc[i][u], bias) : acc[i][u], lanes[u]);
  }
}

/// Rows [m0, m0 + MR) against one panel's input pairs, column group by
/// column group (groups wholly past the weight's rows skipped).
template <int MR>
void avx2_panel_rows(const panel_gemm_args& a, std::int64_t p, std::int64_t m0, std::int64_t pair_begin,
                     std::int64_t pair_end, const std::uint16_t* stream_end) {
  constexpr int group = MR == 1 ? 8 : 2;
  for (int v0 = 0; v0 < bf16_panel_rows / 8; v0 += group) {
    if (p * bf16_panel_rows + 8 * v0 >= a.n_rows) break;
    avx2_panel_tile<MR, group>(a, p, v0, m0, pair_begin, pair_end, v0 == 0 ? stream_end : nullptr);
  }
}

inline void bf16_panel_gemm(const panel_gemm_args& a) {
  walk_panels<panel_tile_rows>(a, [&]<int MR>(std::int64_t p, std::int64_t m0, std::int64_t pair_begin,
                                              std::int64_t pair_end, const std::uint16_t* stream_end) {
    avx2_panel_rows<MR>(a, p, m0, pair_begin, pair_end, stream_end);
  });
}

}  // namespace troupe::cpu::TROUPE_ISA_NS
