#pragma once
// Quantised GEMM for prefill: the GEMV's arithmetic (qgemv_impl.hpp) on
// register tiles of weight rows × activation rows. Included only by the ISA
// units.
//
// The GEMV reads every activation vector once per weight row, so above a few
// rows it is bound by loads rather than by the integer dot products. A tile of
// R weight rows × C activation rows loads R + C vectors for R × C dot
// products. Every output still gets exactly the GEMV's floating-point steps:
// the integer sums of a superblock are exact in any order, then the same
// conversion, scale product and fma per superblock in the same order, and the
// same finish (`finished_dot`, four at once). So a tile gives the GEMV's bits, whatever M
// is, and this path is batch-invariant like the GEMV.

#include "kernels/cpu/qgemv_impl.hpp"

namespace troupe::cpu::TROUPE_ISA_NS {

#if defined(__AVX512VNNI__) || defined(__AVX2__)

#if defined(__AVX512F__)
constexpr int tile_weight_rows = 4;  // 16 + 8 + 1 of the 32 vector registers
#else
constexpr int tile_weight_rows = 2;  // 16 ymm registers
#endif
constexpr int tile_activation_rows = 4;

/// Weight rows [n0, n0 + R) × activation rows [m0, m0 + C) into
/// result[weight row][activation row] (before bias).
template <qformat F>
[[gnu::always_inline]] inline void qgemm_tile(const quantized_matrix& w, const quantized_rows& x, std::int64_t n0,
                                              std::int64_t m0, float (*result)[tile_activation_rows]) {
  constexpr int R = tile_weight_rows, C = tile_activation_rows;
  constexpr bool nibbles = F != qformat::int8;
  constexpr std::int64_t superblock_bytes = superblock_code_bytes(F);
  const std::int64_t groups = w.padded_cols / quant_group, superblocks = w.padded_cols / quant_superblock;
  const std::int64_t row_bytes = superblocks * superblock_bytes;
  qf acc[R][C];
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < C; ++j) acc[i][j] = qzero();
  }
  for (std::int64_t sb = 0; sb < superblocks; ++sb) {
    for (int h = 0; h < halves; ++h) {
      const std::int64_t g0 = sb * groups_per_superblock + h * lanes;
      vi dot[R][C];
#pragma GCC unroll 4
      for (int j = 0; j < C; ++j) {
        const vi initial = initial_dot<F>(x.code_sums + (m0 + j) * groups + g0);
#pragma GCC unroll 4
        for (int i = 0; i < R; ++i) dot[i][j] = initial;
      }
      const std::int64_t x_offset = sb * quant_superblock + h * vector_bytes;
      if constexpr (nibbles) {
        // Packed vector p holds vector p (low nibbles) and p + 4 (high).
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) {
          vi low[R], high[R];
#pragma GCC unroll 4
          for (int i = 0; i < R; ++i) {
            const std::uint8_t* superblock = w.codes + (n0 + i) * row_bytes + sb * superblock_bytes;
            const vi packed = load_codes(superblock + h * vector_bytes + 64 * p);
            low[i] = low_nibbles(packed);
            high[i] = high_nibbles(packed);
            if constexpr (F == qformat::int5_asym) {
              const std::uint8_t* bits = superblock + quant_superblock / 2 + h * (vector_bytes / 8);
              low[i] = with_fifth_bits(low[i], bits + 8 * p);
              high[i] = with_fifth_bits(high[i], bits + 8 * (p + 4));
            }
          }
#pragma GCC unroll 4
          for (int j = 0; j < C; ++j) {
            const std::int8_t* xc = x.codes + (m0 + j) * x.padded_cols + x_offset;
            const vi x_low = load_codes(xc + 64 * p), x_high = load_codes(xc + 64 * (p + 4));
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) dot[i][j] = dot_nibbles(dot_nibbles(dot[i][j], low[i], x_low), high[i], x_high);
          }
        }
      } else {
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r) {
          vi wv[R];
#pragma GCC unroll 4
          for (int i = 0; i < R; ++i)
            wv[i] = load_codes(w.codes + (n0 + i) * row_bytes + sb * superblock_bytes + h * vector_bytes + 64 * r);
#pragma GCC unroll 4
          for (int j = 0; j < C; ++j) {
            const vi xv = load_codes(x.codes + (m0 + j) * x.padded_cols + x_offset + 64 * r);
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) dot[i][j] = dot_int8(dot[i][j], wv[i], xv);
          }
        }
      }
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        const qf scale = nibbles ? load_halfs(w.group_scales + (n0 + i) * groups + g0) : qzero();
#pragma GCC unroll 4
        for (int j = 0; j < C; ++j) {
          const qf x_scale = qload(x.scales + (m0 + j) * groups + g0);
          acc[i][j] = qfma(to_float(dot[i][j]), nibbles ? qmul(x_scale, scale) : x_scale, acc[i][j]);
        }
      }
    }
  }
  // The offset terms (int4_asym, int5_asym) do not depend on the dot products: summed here,
  // in the GEMV's order, so they hold no registers during the integer loop.
  static_assert(C == 4, "the tile finishes through finished_dots4");
  for (int i = 0; i < R; ++i) {
    qf offsets[C];
    for (int j = 0; j < C; ++j) offsets[j] = qzero();
    if constexpr (has_group_offsets(F)) {
      for (std::int64_t g0 = 0; g0 < groups; g0 += lanes) {
        const qf offset = load_halfs(w.group_offsets + (n0 + i) * groups + g0);
        for (int j = 0; j < C; ++j) offsets[j] = qfma(offset, qload(x.sums + (m0 + j) * groups + g0), offsets[j]);
      }
    }
    finished_dots4<F>(w, n0 + i, acc[i], offsets, result[i]);
  }
}

/// Output rows [n_begin, n_end) for the C activation rows from m0, R weight
/// rows at a time; the last n_end - n_begin mod R rows take the GEMV.
template <qformat F>
void qgemm_pass(const qgemv_args& args, std::int64_t m0) {
  constexpr int R = tile_weight_rows, C = tile_activation_rows;
  float result[R][C];
  std::int64_t n = args.n_begin;
  for (; n + R <= args.n_end; n += R) {
    qgemm_tile<F>(*args.weights, *args.x, n, m0, result);
    for (int j = 0; j < C; ++j) {
      for (int i = 0; i < R; ++i)
        args.out[(m0 + j) * args.out_stride + n + i] = result[i][j] + (args.bias != nullptr ? args.bias[n + i] : 0.0f);
    }
  }
  qgemv_pass<F, C>(args, m0, n, args.n_end);
}

#endif

template <qformat F>
inline void qgemv_rows(const qgemv_args& args) {
  // Activation rows outer: a pass's rows of codes stay in L1 while the task's
  // weight rows (sized to stay in L2) stream past them. The row count is a
  // template argument so the accumulators stay in registers.
  std::int64_t m0 = 0;
#if defined(__AVX512VNNI__) || defined(__AVX2__)
  // Above one GEMV pass (prefill), tiles; the weights come from L2 by then.
  if (args.m_rows > max_rows_per_pass) {
    for (; m0 + tile_activation_rows <= args.m_rows; m0 += tile_activation_rows) qgemm_pass<F>(args, m0);
  }
#endif
  using pass = void (*)(const qgemv_args&, std::int64_t, std::int64_t, std::int64_t);
  constexpr pass passes[max_rows_per_pass] = {qgemv_pass<F, 1>, qgemv_pass<F, 2>, qgemv_pass<F, 3>, qgemv_pass<F, 4>,
                                              qgemv_pass<F, 5>, qgemv_pass<F, 6>, qgemv_pass<F, 7>, qgemv_pass<F, 8>};
  for (; m0 < args.m_rows; m0 += max_rows_per_pass) {
    const std::int64_t rows = args.m_rows - m0 < max_rows_per_pass ? args.m_rows - m0 : max_rows_per_pass;
    passes[rows - 1](args, m0, args.n_begin, args.n_end);
  }
}

inline void qgemv(const qgemv_args& args) {
  switch (args.weights->format) {
    case qformat::int8:
      qgemv_rows<qformat::int8>(args);
      break;
    case qformat::int4:
      qgemv_rows<qformat::int4>(args);
      break;
    case qformat::int4_asym:
      qgemv_rows<qformat::int4_asym>(args);
      break;
    case qformat::int5_asym:
      qgemv_rows<qformat::int5_asym>(args);
      break;
  }
}

}  // namespace troupe::cpu::TROUPE_ISA_NS
