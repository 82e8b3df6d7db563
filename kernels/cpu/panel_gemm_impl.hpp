#pragma once
// GEMM on bf16 weights in output panels (isa_kernels.hpp, bf16_panel_rows)
// at the AVX-512 levels (AVX2: panel_gemm_avx2_impl.hpp). A tile is up to 6
// activation rows × one panel's 64 output rows: 24 f32 accumulators. Per
// input pair it loads the panel's 4 weight vectors once for all the tile's
// rows. With AVX-512 BF16 each
// activation pair (rounded to bf16, panel_gemm_args::x_bf16) is broadcast
// as one 32-bit word and `vdpbf16ps` multiplies it into the pair layout as
// it lies. Without it the weights are widened twice (even inputs: the low
// halves shifted up; odd inputs: loaded with the low halves masked to zero)
// and each f32 activation is broadcast once for 4 fmas. The dot-product
// GEMV instead reloads every activation vector for each weight row and
// reduces every output across lanes, which kept it at a third of the fma
// throughput from 8 rows up. Included only by the ISA units.

#include "kernels/cpu/count_dispatch_impl.hpp"
#include "kernels/cpu/isa_kernels.hpp"
#include "kernels/cpu/simd.hpp"

namespace troupe::cpu::TROUPE_ISA_NS {

/// Input pairs one pass over a panel covers (a 256 KiB slice of it, held in
/// L2 while every row tile passes over it). A constant, so every output sees
/// the same stores and reloads of its partial sum whatever the call.
constexpr std::int64_t panel_block_pairs = 1024;
/// How far ahead (input pairs, 256 bytes each) the first row tile of a pass
/// prefetches: the hardware prefetcher stops at every 4 KiB page, and the
/// first tile is the one that streams the panel from memory.
constexpr std::int64_t panel_prefetch_pairs = 32;

/// Prefetches the input pair `ahead` (all 4 lines of it) if it is before `stream_end`.
inline void prefetch_panel_pair(const std::uint16_t* ahead, const std::uint16_t* stream_end) {
  for (int line = 0; line < 4; ++line)
    if (ahead + 32 * line < stream_end) prefetch(ahead + 32 * line);
}

/// Walks a call's panels, K blocks of panel_block_pairs and row tiles of
/// up to TileRows rows: tile.template operator()<MR>(panel, first row,
/// pair_begin, pair_end, stream_end), the first tile of a pass given the
/// end of the call's panels to prefetch up to.
template <int TileRows, class Tile>
void walk_panels(const panel_gemm_args& a, Tile&& tile) {
  const std::int64_t k_pairs = (a.k + 1) / 2;
  const std::uint16_t* stream_end = a.panels + a.panel_end * k_pairs * 2 * bf16_panel_rows;
  for (std::int64_t p = a.panel_begin; p < a.panel_end; ++p) {
    for (std::int64_t pair = 0; pair < k_pairs; pair += panel_block_pairs) {
      const std::int64_t pair_end = k_pairs - pair < panel_block_pairs ? k_pairs : pair + panel_block_pairs;
      for (std::int64_t m0 = 0; m0 < a.m_rows; m0 += TileRows) {
        const std::uint16_t* stream = m0 == 0 ? stream_end : nullptr;
        with_count<TileRows>(a.m_rows - m0,
                             [&]<int MR>() { tile.template operator()<MR>(p, m0, pair, pair_end, stream); });
      }
    }
  }
}

#if defined(__AVX512F__)
#define TROUPE_HAVE_PANEL_GEMM 1

constexpr int panel_tile_rows = 6;
constexpr int panel_vectors = static_cast<int>(bf16_panel_rows / 16);

#if defined(__AVX512BF16__)
/// The activations the kernel reads: x rounded to bf16.
using panel_activation = std::uint16_t;

inline const panel_activation* panel_x_row(const panel_gemm_args& a, std::int64_t m) {
  return a.x_bf16 + m * a.x_bf16_stride;
}

/// acc[i][v] += x[i][c + 1] · w(c + 1), then += x[i][c] · w(c), each an
/// fma (vdpbf16ps as the SDM states it), one instruction per (row, vector)
/// for the input pair at `pair` (128 bf16: 4 vectors); with `Odd` false the
/// pair's odd half (zero in the panel) meets a zero input.
template <int MR, bool Odd>
[[gnu::always_inline]] inline void panel_pair_step(__m512 (&acc)[MR][panel_vectors], const std::uint16_t* pair,
                                                   const panel_activation* const (&x)[MR], std::int64_t c) {
  __m512bh w[panel_vectors];
#pragma GCC unroll 4
  for (int v = 0; v < panel_vectors; ++v) w[v] = (__m512bh)_mm512_loadu_si512(pair + 32 * v);
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    const __m512i xv = Odd ? _mm512_broadcastd_epi32(_mm_loadu_si32(x[i] + c)) : _mm512_set1_epi32(x[i][c]);
#pragma GCC unroll 4
    for (int v = 0; v < panel_vectors; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], (__m512bh)xv, w[v]);
  }
}
#else
/// The activations the kernel reads: x as it is.
using panel_activation = float;

inline const panel_activation* panel_x_row(const panel_gemm_args& a, std::int64_t m) { return a.x + m * a.x_stride; }

/// acc[i][v] += x[i][c] · w[v] for every tile row i.
template <int MR>
[[gnu::always_inline]] inline void panel_input_step(__m512 (&acc)[MR][panel_vectors], const __m512 (&w)[panel_vectors],
                                                    const panel_activation* const (&x)[MR], std::int64_t c) {
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    const __m512 xv = _mm512_set1_ps(x[i][c]);
#pragma GCC unroll 4
    for (int v = 0; v < panel_vectors; ++v) acc[i][v] = _mm512_fmadd_ps(xv, w[v], acc[i][v]);
  }
}

/// acc[i][v] += x[i][c] · w(c) then x[i][c + 1] · w(c + 1) (the latter only
/// when `Odd`), for the input pair at `pair` (128 bf16: 4 vectors).
template <int MR, bool Odd>
[[gnu::always_inline]] inline void panel_pair_step(__m512 (&acc)[MR][panel_vectors], const std::uint16_t* pair,
                                                   const panel_activation* const (&x)[MR], std::int64_t c) {
  __m512 w[panel_vectors];
#pragma GCC unroll 4
  for (int v = 0; v < panel_vectors; ++v)
    w[v] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_loadu_si512(pair + 32 * v), 16));
  panel_input_step<MR>(acc, w, x, c);
  if constexpr (Odd) {
    // The odd inputs are the high halves: a load that zeroes the low ones
    // (a mask register, where an AND would hold a constant in a vector one).
#pragma GCC unroll 4
    for (int v = 0; v < panel_vectors; ++v)
      w[v] = _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(__mmask32(0xaaaaaaaau), pair + 32 * v));
    panel_input_step<MR>(acc, w, x, c + 1);
  }
}
#endif

/// Rows [m0, m0 + MR) × panel `p` over input pairs [pair_begin, pair_end):
/// starts from zero or from the partial sums parked in `out`, and parks
/// them there again unless the pass reaches the end of K (then adds bias).
/// A non-null `stream_end` (the end of the call's panels) makes it prefetch
/// ahead up to there.
template <int MR>
void panel_tile(const panel_gemm_args& a, std::int64_t p, std::int64_t m0, std::int64_t pair_begin,
                std::int64_t pair_end, const std::uint16_t* stream_end) {
  const std::int64_t n0 = p * bf16_panel_rows, k_pairs = (a.k + 1) / 2;
  const std::uint16_t* panel = a.panels + p * k_pairs * 2 * bf16_panel_rows;
  const std::int64_t valid = a.n_rows - n0 < bf16_panel_rows ? a.n_rows - n0 : bf16_panel_rows;
  __mmask16 mask[panel_vectors];
#pragma GCC unroll 4
  for (int v = 0; v < panel_vectors; ++v) {
    const std::int64_t lanes = valid - 16 * v;
    mask[v] = lanes >= 16 ? __mmask16(0xffff) : lanes <= 0 ? __mmask16(0) : tail_mask(static_cast<int>(lanes));
  }
  const panel_activation* x[MR];
  float* out[MR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    x[i] = panel_x_row(a, m0 + i);
    out[i] = a.out + (m0 + i) * a.out_stride + n0;
  }
  __m512 acc[MR][panel_vectors];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < panel_vectors; ++v)
      acc[i][v] = pair_begin == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask[v], out[i] + 16 * v);
  const std::int64_t whole_pairs = a.k / 2;  // an odd K ends on a lone even input
  const std::int64_t whole_end = pair_end < whole_pairs ? pair_end : whole_pairs;
  for (std::int64_t j = pair_begin; j < whole_end; ++j) {
    const std::uint16_t* pair = panel + j * 2 * bf16_panel_rows;
    if (stream_end != nullptr) prefetch_panel_pair(pair + panel_prefetch_pairs * 2 * bf16_panel_rows, stream_end);
    panel_pair_step<MR, true>(acc, pair, x, 2 * j);
  }
  if (pair_end > whole_end) panel_pair_step<MR, false>(acc, panel + whole_end * 2 * bf16_panel_rows, x, 2 * whole_end);
  const bool last = pair_end == k_pairs;
#pragma GCC unroll 4
  for (int v = 0; v < panel_vectors; ++v) {
    const __m512 bias =
        last && a.bias != nullptr ? _mm512_maskz_loadu_ps(mask[v], a.bias + n0 + 16 * v) : _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i)
      _mm512_mask_storeu_ps(out[i] + 16 * v, mask[v], last ? _mm512_add_ps(acc[i][v], bias) : acc[i][v]);
  }
}

inline void bf16_panel_gemm(const panel_gemm_args& a) {
  walk_panels<panel_tile_rows>(
      a, [&]<int MR>(std::int64_t p, std::int64_t m0, std::int64_t pair_begin, std::int64_t pair_end,
                     const std::uint16_t* stream_end) { panel_tile<MR>(a, p, m0, pair_begin, pair_end, stream_end); });
}
#endif

}  // namespace troupe::cpu::TROUPE_ISA_NS

#if defined(__AVX2__) && !defined(__AVX512F__)
#include "kernels/cpu/panel_gemm_avx2_impl.hpp"  // the same GEMM on 256-bit vectors
#endif
