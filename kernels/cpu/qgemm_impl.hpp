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
//
// Unpacking 4- and 5-bit codes costs a few instructions per weight vector,
// next to the four dot products a tile makes of it, and a tile unpacked
// every weight row again for each group of activation rows. So for tiles
// the weight rows are first expanded, a block of rows sized to stay in L2
// at a time, to one byte a code in int8's layout and their group scales
// and offsets to f32 (block factors multiplied out once), and every tile of
// activation rows reads those (the integer sums and the scales, so the
// bits, are the same). An int8 matrix's rows already are those bytes and are read in place.

#include "kernels/cpu/qgemv_impl.hpp"

namespace troupe::cpu::TROUPE_ISA_NS {

#if defined(__AVX512VNNI__) || defined(__AVX2__)

#if defined(__AVX512F__)
constexpr int tile_weight_rows = 4;  // 16 + 8 + 1 of the 32 vector registers
#else
constexpr int tile_weight_rows = 2;  // 16 ymm registers
#endif
constexpr int tile_activation_rows = 4;

/// Weight rows the tiles read expanded, the tile's (or pass's) first row
/// first: `codes` one byte a code [rows][padded_cols] (int8: the matrix's
/// own rows); for 4-, 5- and 6-bit formats `scales` (int6, int4_g16: of
/// the groups' first halves) and, with group offsets, `offsets` (int6,
/// int4_g16: the second halves' scales) in f32 [rows][groups], so that a
/// tile loads each superblock's (a block-factored matrix's products made
/// once per block of rows, not again for every tile of activation rows).
struct expanded_rows {
  const std::uint8_t* codes = nullptr;
  const float* scales = nullptr;
  const float* offsets = nullptr;
};

/// Weight rows [n0, n0 + count) of a 4-, 5- or 6-bit matrix as one byte a
/// code (0..63, or int4_nl's biased levels) in int8's layout: `codes`
/// [count][padded_cols], byte p of a superblock the code of interleaved
/// position p; their group scales (and offsets; int6, int4_g16: the
/// second halves' scales) in f32 into `scales` (`offsets`) [count][groups].
template <qformat F>
void expand_rows(const quantized_matrix& w, std::int64_t n0, std::int64_t count, std::uint8_t* codes, float* scales,
                 float* offsets) {
  const std::int64_t superblocks = w.padded_cols / quant_superblock, groups = w.padded_cols / quant_group;
  for (std::int64_t i = 0; i < count; ++i) {
    const std::uint8_t* row = w.codes + (n0 + i) * superblocks * superblock_code_bytes(F);
    for (std::int64_t sb = 0; sb < superblocks; ++sb)
      expand_superblock_codes<F>(row, sb, codes + i * w.padded_cols + sb * quant_superblock);
    for (std::int64_t g0 = 0; g0 < groups; g0 += lanes) {
      qstore(scales + i * groups + g0, group_scales_at<F>(w, (n0 + i) * groups + g0));
      if constexpr (half_group_scales(F))
        qstore(offsets + i * groups + g0, group_scales_at<F, 1>(w, (n0 + i) * groups + g0));
      if constexpr (has_group_offsets(F))
        qstore(offsets + i * groups + g0, group_offsets_at(w, (n0 + i) * groups + g0));
    }
  }
}

/// Weight rows [n0, n0 + R) × activation rows [m0, m0 + C) into
/// result[weight row][activation row] (before bias). `Expanded`: a 4- or
/// 5-bit matrix's codes, scales and offsets read from `rows` (expand_rows,
/// row n0 first) instead of unpacked here; int8 rows are always read so, in
/// place.
template <qformat F, bool Expanded>
[[gnu::always_inline]] inline void qgemm_tile(const quantized_matrix& w, const quantized_rows& x, std::int64_t n0,
                                              std::int64_t m0, float (*result)[tile_activation_rows],
                                              const expanded_rows& rows) {
  const std::uint8_t* expanded = rows.codes;
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
      // int6, int4_g16: the first halves' sums start at their half_group_start (half_group_dots).
#pragma GCC unroll 4
      for (int j = 0; j < C; ++j) {
        vi initial;
        if constexpr (half_group_scales(F)) {
          initial = half_group_start<F>(x.half_starts + (m0 + j) * 2 * groups + g0);
        } else {
          initial = initial_dot<F>(x.code_sums + (m0 + j) * groups + g0);
        }
#pragma GCC unroll 4
        for (int i = 0; i < R; ++i) dot[i][j] = initial;
      }
      // Folds the tile's integer sums into acc, times each weight row's `scales`.
      const auto fold = [&](const qf* scales) __attribute__((always_inline)) {
#pragma GCC unroll 4
        for (int i = 0; i < R; ++i) {
#pragma GCC unroll 4
          for (int j = 0; j < C; ++j) {
            const qf x_scale = qload(x.scales + (m0 + j) * groups + g0);
            acc[i][j] = qfma(to_float(dot[i][j]), nibbles ? qmul(x_scale, scales[i]) : x_scale, acc[i][j]);
          }
        }
      };
      const std::int64_t x_offset = sb * quant_superblock + h * vector_bytes;
      if constexpr (nibbles && !Expanded) {
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
            if constexpr (F == qformat::int4_nl) {
              low[i] = biased_levels(low[i]);
              high[i] = biased_levels(high[i]);
            }
          }
#pragma GCC unroll 4
          for (int j = 0; j < C; ++j) {
            const std::int8_t* xc = x.codes + (m0 + j) * x.padded_cols + x_offset;
            const vi x_low = load_codes(xc + 64 * p), x_high = load_codes(xc + 64 * (p + 4));
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i) {
              dot[i][j] = biased_byte_codes(F) ? dot_int8(dot_int8(dot[i][j], low[i], x_low), high[i], x_high)
                                               : dot_nibbles(dot_nibbles(dot[i][j], low[i], x_low), high[i], x_high);
            }
          }
        }
      } else {
        static_assert(Expanded, "int8, int6 and int4_g16 tiles read expanded rows");
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r) {
          if constexpr (half_group_scales(F)) {
            if (r == 4) {
              // The first halves done: folded with their scales, and the second halves' sums begun.
              qf low_scales[R];
#pragma GCC unroll 4
              for (int i = 0; i < R; ++i) low_scales[i] = qload(rows.scales + i * groups + g0);
              fold(low_scales);
#pragma GCC unroll 4
              for (int j = 0; j < C; ++j) {
                const vi initial = half_group_start<F>(x.half_starts + (m0 + j) * 2 * groups + groups + g0);
#pragma GCC unroll 4
                for (int i = 0; i < R; ++i) dot[i][j] = initial;
              }
            }
          }
          vi wv[R];
#pragma GCC unroll 4
          for (int i = 0; i < R; ++i) {
            wv[i] = load_codes(expanded + i * w.padded_cols + x_offset + 64 * r);
          }
#pragma GCC unroll 4
          for (int j = 0; j < C; ++j) {
            const vi xv = load_codes(x.codes + (m0 + j) * x.padded_cols + x_offset + 64 * r);
#pragma GCC unroll 4
            for (int i = 0; i < R; ++i)
              dot[i][j] = biased_byte_codes(F) ? dot_int8(dot[i][j], wv[i], xv) : dot_nibbles(dot[i][j], wv[i], xv);
          }
        }
      }
      qf scales[R];
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        scales[i] = qzero();
        if constexpr (half_group_scales(F)) scales[i] = qload(rows.offsets + i * groups + g0);  // second halves'
        if constexpr (nibbles && Expanded && !half_group_scales(F)) scales[i] = qload(rows.scales + i * groups + g0);
        if constexpr (nibbles && !Expanded) scales[i] = group_scales_at<F>(w, (n0 + i) * groups + g0);
      }
      fold(scales);
    }
  }
  static_assert(C == 4, "the tile finishes through finished_dots4 and qsum4");
  if constexpr (!has_group_offsets(F)) {
    const qf no_offsets[C] = {qzero(), qzero(), qzero(), qzero()};
    for (int i = 0; i < R; ++i) finished_dots4<F>(w, n0 + i, acc[i], no_offsets, result[i]);
  } else {
    // The offset terms (int4_asym, int5_asym) do not depend on the dot
    // products: summed after them, in the GEMV's order, for the whole tile at
    // once so that each activation row's sums are loaded once per 16
    // groups; then added to the dot products' sums as finished_dots4 adds them.
    for (int i = 0; i < R; ++i) qsum4(acc[i], result[i]);
    qf offsets[R][C];
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
#pragma GCC unroll 4
      for (int j = 0; j < C; ++j) offsets[i][j] = qzero();
    }
    for (std::int64_t g0 = 0; g0 < groups; g0 += lanes) {
      qf sums[C];
#pragma GCC unroll 4
      for (int j = 0; j < C; ++j) sums[j] = qload(x.sums + (m0 + j) * groups + g0);
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        const qf offset =
            Expanded ? qload(rows.offsets + i * groups + g0) : group_offsets_at(w, (n0 + i) * groups + g0);
#pragma GCC unroll 4
        for (int j = 0; j < C; ++j) offsets[i][j] = qfma(offset, sums[j], offsets[i][j]);
      }
    }
    for (int i = 0; i < R; ++i) {
      float offset_sums[C];
      qsum4(offsets[i], offset_sums);
      for (int j = 0; j < C; ++j) result[i][j] += offset_sums[j];
    }
  }
}

/// Output rows [n_begin, n_end) for the C activation rows from m0, R weight
/// rows at a time; the last n_end - n_begin mod R rows take the GEMV.
/// `expanded`: the rows the tiles take (the first (n_end - n_begin) / R · R
/// from n_begin) as expand_rows writes them (for int8 the matrix's own rows
/// from n_begin, always given), or null codes to read 4- or 5-bit codes packed.
template <qformat F>
void qgemm_pass(const qgemv_args& args, std::int64_t m0, std::int64_t n_begin, std::int64_t n_end,
                const expanded_rows& expanded) {
  constexpr int R = tile_weight_rows, C = tile_activation_rows;
  const std::int64_t groups = args.weights->padded_cols / quant_group;
  float result[R][C];
  std::int64_t n = n_begin;
  // int6 and int4_g16 tiles read expanded rows only; without them their rows take the GEMV (the same bits).
  const bool tiles = expanded.codes != nullptr || !half_group_scales(F);
  for (; tiles && n + R <= n_end; n += R) {
    if (expanded.codes != nullptr) {
      const std::int64_t row = n - n_begin;
      const expanded_rows at = {expanded.codes + row * args.weights->padded_cols,
                                expanded.scales != nullptr ? expanded.scales + row * groups : nullptr,
                                expanded.offsets != nullptr ? expanded.offsets + row * groups : nullptr};
      qgemm_tile<F, true>(*args.weights, *args.x, n, m0, result, at);
    } else if constexpr (F != qformat::int8 && !half_group_scales(F)) {
      qgemm_tile<F, false>(*args.weights, *args.x, n, m0, result, expanded);
    }
    for (int j = 0; j < C; ++j) {
      for (int i = 0; i < R; ++i)
        args.out[(m0 + j) * args.out_stride + n + i] = result[i][j] + (args.bias != nullptr ? args.bias[n + i] : 0.0f);
    }
  }
  qgemv_pass<F, C>(args, m0, n, n_end);
}

/// The tiles over activation rows [0, m_tiled) (a multiple of C): an int8
/// matrix as stored; a 4- or 5-bit one, given scratch, expanded a block of
/// weight rows at a time (quant_code_scratch_bytes of codes, about half a
/// core's L2 on current x86 server parts, then their f32 scales:
/// quant_tile_scratch_bytes in all), each block then read by every tile.
template <qformat F>
void qgemm_passes(const qgemv_args& args, std::int64_t m_tiled) {
  constexpr int R = tile_weight_rows, C = tile_activation_rows;
  if constexpr (F == qformat::int8) {
    // int8 rows are stored as the bytes the tiles read, so the matrix is its
    // own expansion. Read through the expanded path, the tile keeps its
    // weight vectors in registers; addressed from the matrix (row_bytes,
    // superblock offsets) GCC 12 reloaded two of the AVX-512 tile's four for
    // every activation row, and the tiles ran 1.14-1.19x slower (kernels/cpu/README.md).
    const expanded_rows rows = {args.weights->codes + args.n_begin * args.weights->padded_cols};
    for (std::int64_t m0 = 0; m0 < m_tiled; m0 += C) qgemm_pass<F>(args, m0, args.n_begin, args.n_end, rows);
  } else {
    const std::int64_t block = quant_code_scratch_bytes / args.weights->padded_cols / R * R;
    if (args.code_scratch == nullptr || block == 0) {
      for (std::int64_t m0 = 0; m0 < m_tiled; m0 += C) qgemm_pass<F>(args, m0, args.n_begin, args.n_end, {});
      return;
    }
    // The block's codes, then its scales (and offsets) in f32.
    const std::int64_t groups = args.weights->padded_cols / quant_group;
    auto* scales = reinterpret_cast<float*>(args.code_scratch + quant_code_scratch_bytes);
    float* offsets = has_group_offsets(F) || half_group_scales(F) ? scales + block * groups : nullptr;
    const expanded_rows rows = {args.code_scratch, scales, offsets};
    for (std::int64_t first = args.n_begin; first < args.n_end; first += block) {
      const std::int64_t last = args.n_end < first + block ? args.n_end : first + block;
      const std::int64_t tiled_rows = (last - first) / R * R;  // the rest take the GEMV, packed
      expand_rows<F>(*args.weights, first, tiled_rows, args.code_scratch, scales, offsets);
      for (std::int64_t m0 = 0; m0 < m_tiled; m0 += C) qgemm_pass<F>(args, m0, first, last, rows);
    }
  }
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
    m0 = args.m_rows / tile_activation_rows * tile_activation_rows;
    qgemm_passes<F>(args, m0);
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
  with_qformat(args.weights->format, [&]<qformat F>() { qgemv_rows<F>(args); });
}

}  // namespace troupe::cpu::TROUPE_ISA_NS
